// rating.js: the rating form shared by review and compare: every rating
// dimension of the Lab contract as a 0–100 slider (unset until touched),
// notes and tags. Keyboard: j/k (or Tab) move between dimensions, the
// arrows and PageUp/PageDown change the focused one, 1–9 set 10–90, 0
// sets 100, x clears it.
import { h } from './dom.js';

export const DIMENSIONS = [
  ['overall', 'Overall'], ['hook', 'Hook'], ['pacing', 'Pacing'], ['script', 'Script'],
  ['visuals', 'Visuals'], ['motion', 'Motion'], ['captions', 'Captions'], ['sync', 'Sync'],
];

// ratingForm(prefix, initial, onChange) → {el, read(), focusFirst(), disable(b)}
export function ratingForm(prefix, initial, onChange) {
  const init = initial || {};
  const rows = new Map();
  const grid = h('fieldset', { class: 'dims' }, h('legend', null, 'Ratings (0–100; unset dimensions are not sent)'));
  for (const [key, label] of DIMENSIONS) {
    const id = `${prefix}-${key}`;
    const range = h('input', { type: 'range', id, min: '0', max: '100', step: '1', class: 'dim-range',
      'data-key': key, 'aria-describedby': `${id}-out` });
    const out = h('output', { id: `${id}-out`, for: id, class: 'dim-out' }, '–');
    const clear = h('button', { type: 'button', class: 'btn btn-small dim-clear', 'aria-label': `Clear ${label}` }, '×');
    const row = h('div', { class: 'dim unset', 'data-key': key },
      h('label', { for: id }, label), range, out, clear);
    const set = (v) => {
      if (v === null || v === undefined || v === '') {
        row.classList.add('unset');
        range.value = 50;
        out.textContent = '–';
        range.setAttribute('aria-valuetext', 'unset');
      } else {
        const n = Math.max(0, Math.min(100, Math.round(Number(v))));
        row.classList.remove('unset');
        range.value = n;
        out.textContent = String(n);
        range.setAttribute('aria-valuetext', String(n));
      }
    };
    set(init[key]);
    range.addEventListener('input', () => { set(range.value); onChange && onChange(); });
    clear.addEventListener('click', () => { set(null); onChange && onChange(); range.focus(); });
    range.addEventListener('keydown', (e) => {
      if (e.ctrlKey || e.metaKey || e.altKey) return;
      if (/^[0-9]$/.test(e.key)) {
        e.preventDefault();
        e.stopPropagation();
        set(e.key === '0' ? 100 : Number(e.key) * 10);
        onChange && onChange();
      } else if (e.key === 'x' || e.key === 'Backspace' || e.key === 'Delete') {
        e.preventDefault();
        e.stopPropagation();
        set(null);
        onChange && onChange();
      } else if ((e.key === 'j' || e.key === 'k') && !e.shiftKey) {
        e.preventDefault();
        e.stopPropagation();
        const ks = DIMENSIONS.map((d) => d[0]);
        const i = ks.indexOf(key) + (e.key === 'j' ? 1 : -1);
        if (i >= 0 && i < ks.length) rows.get(ks[i]).range.focus();
      }
    });
    // A value set by the arrow keys on an unset slider counts as set.
    range.addEventListener('change', () => { set(range.value); onChange && onChange(); });
    rows.set(key, { row, range, set, clear });
    grid.appendChild(row);
  }
  return {
    el: grid,
    read() {
      const out = {};
      for (const [key, r] of rows) if (!r.row.classList.contains('unset')) out[key] = Number(r.range.value);
      return out;
    },
    set(values) { for (const [key, r] of rows) r.set(values ? values[key] : null); },
    focusFirst() { rows.get('overall').range.focus(); },
    disable(b) { for (const r of rows.values()) { r.range.disabled = b; r.clear.disabled = b; } },
  };
}

export function parseTags(s) {
  return String(s || '').split(',').map((t) => t.trim()).filter(Boolean);
}
