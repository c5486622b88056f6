// dom.js: building elements without HTML strings. Text always goes in as
// text nodes, attributes through setAttribute: a run's topic such as
// <img src=x onerror=alert(1)> is shown, never parsed.

// h builds an element: h('a', {href: '#/runs', class: 'x', onclick: fn}, 'text', child…).
export function h(tag, attrs, ...kids) {
  const el = document.createElement(tag);
  if (attrs) {
    for (const [k, v] of Object.entries(attrs)) {
      if (v === undefined || v === null || v === false) continue;
      if (k.startsWith('on') && typeof v === 'function') el.addEventListener(k.slice(2), v);
      else if (k === 'dataset') Object.assign(el.dataset, v);
      else if (k === 'value') el.value = v;
      else if (k === 'checked' || k === 'disabled' || k === 'hidden') el[k] = Boolean(v);
      else el.setAttribute(k, v === true ? '' : String(v));
    }
  }
  append(el, kids);
  return el;
}

function append(el, kids) {
  for (const k of kids) {
    if (k === undefined || k === null || k === false) continue;
    if (Array.isArray(k)) append(el, k);
    else if (k instanceof Node) el.appendChild(k);
    else el.appendChild(document.createTextNode(String(k)));
  }
}

// replace empties el and fills it with kids.
export function replace(el, ...kids) {
  el.replaceChildren();
  append(el, kids);
  return el;
}

export function shortId(id) {
  const s = String(id || '');
  return s.length <= 16 ? s : s.slice(0, 10) + '…' + s.slice(-4);
}

// relTime: "3 min ago"; the element's title is the absolute ISO time.
export function relTime(iso) {
  const t = Date.parse(iso);
  if (Number.isNaN(t)) return h('span', null, String(iso || '—'));
  const s = Math.round((Date.now() - t) / 1000);
  let txt;
  if (s < 45) txt = 'just now';
  else if (s < 3600) txt = `${Math.round(s / 60)} min ago`;
  else if (s < 86400) txt = `${Math.round(s / 3600)} h ago`;
  else if (s < 86400 * 30) txt = `${Math.round(s / 86400)} d ago`;
  else txt = new Date(t).toISOString().slice(0, 10);
  return h('time', { datetime: iso, title: iso }, txt);
}

// badge: a metric 0–100 with its label; the level is said in text, not by colour alone.
export function badge(label, value, unit = '/100') {
  if (value === null || value === undefined || !Number.isFinite(Number(value))) {
    return h('span', { class: 'badge' }, `${label} n/a`);
  }
  const n = Math.round(Number(value));
  if (unit !== '/100') return h('span', { class: 'badge' }, `${label} ${n}${unit}`);
  const level = n >= 80 ? 'ok' : n >= 60 ? 'warn' : 'bad';
  const mark = level === 'ok' ? '✓' : level === 'warn' ? '~' : '✗';
  return h('span', { class: `badge badge-${level}`, title: `${label} ${n} of 100` }, `${mark} ${label} ${n}${unit}`);
}

export function metricBadges(m) {
  m = m || {};
  return h('span', { class: 'badges' },
    badge(m.syncLabel ? `sync (${m.syncLabel})` : 'sync', m.syncRating),
    badge('caption', m.captionOverall),
    m.meanDriftMs !== undefined && m.meanDriftMs !== null ? badge('drift', m.meanDriftMs, ' ms') : null,
    badge('score', m.proxyScoreOverall));
}

// errorBox shows an API error's message and fix.
export function errorBox(err) {
  const msg = err && err.message ? err.message : String(err);
  return h('div', { class: 'error', role: 'alert' },
    h('strong', null, err && err.code ? `${err.code}: ` : 'Error: '), msg,
    err && err.fix ? h('div', { class: 'fix' }, 'Fix: ', err.fix) : null);
}

export function field(labelText, control, hint) {
  const id = control.id || `f-${Math.random().toString(36).slice(2)}`;
  control.id = id;
  return h('div', { class: 'field' }, h('label', { for: id }, labelText), control, hint ? h('div', { class: 'hint' }, hint) : null);
}
