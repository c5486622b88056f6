// keys.js: keyboard shortcuts. A view binds its keys when it renders
// (setViewKeys); the global ones stay. '?' lists what is bound now.
import { h, replace } from './dom.js';

const globalKeys = [];
let viewKeys = [];

// key: 'j', 'Enter', 'Ctrl+Enter', '?'. opts.inFields: also while typing.
export function bindGlobal(key, desc, fn, opts = {}) {
  globalKeys.push({ key, desc, fn, ...opts });
}

export function setViewKeys(list) {
  viewKeys = list || [];
}

function typing(el) {
  if (!el) return false;
  const t = el.tagName;
  if (t === 'TEXTAREA' || t === 'SELECT') return true;
  if (t === 'INPUT') return !['range', 'checkbox', 'radio', 'button', 'submit'].includes(el.type);
  return el.isContentEditable;
}

function name(e) {
  let k = e.key;
  if (k === ' ') k = 'Space';
  return (e.ctrlKey || e.metaKey ? 'Ctrl+' : '') + (e.altKey ? 'Alt+' : '') + k;
}

export function installKeys(dialog, body) {
  document.addEventListener('keydown', (e) => {
    if (dialog.open) return;
    const k = name(e);
    const inField = typing(document.activeElement);
    for (const b of [...viewKeys, ...globalKeys]) {
      const keys = Array.isArray(b.key) ? b.key : [b.key];
      if (!keys.includes(k)) continue;
      if (b.help || (inField && !b.inFields)) continue;
      if (b.when && !b.when(e)) continue;
      e.preventDefault();
      b.fn(e);
      return;
    }
  });
  const show = () => {
    const rows = [...viewKeys, ...globalKeys].filter((b) => b.desc).map((b) => h('tr', null,
      h('th', { scope: 'row' }, (Array.isArray(b.key) ? b.key : [b.key]).map((k) => h('kbd', null, k))),
      h('td', null, b.desc)));
    replace(body, rows);
    dialog.showModal();
  };
  bindGlobal('?', 'List these shortcuts', show);
  return show;
}
