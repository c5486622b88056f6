// DOM helpers: every string reaches the page as text (textContent or an
// attribute), never as HTML.

export function h(tag, attrs, ...children) {
  const el = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === undefined || v === null || v === false) continue;
    if (k.startsWith('on') && typeof v === 'function') el.addEventListener(k.slice(2), v);
    else if (k === 'class') el.className = v;
    else if (k === 'dataset') Object.assign(el.dataset, v);
    else el.setAttribute(k, v === true ? '' : String(v));
  }
  append(el, children);
  return el;
}

export function append(el, children) {
  for (const c of children.flat(Infinity)) {
    if (c === undefined || c === null || c === false) continue;
    el.append(c instanceof Node ? c : document.createTextNode(String(c)));
  }
  return el;
}

export function clear(el) {
  while (el.firstChild) el.removeChild(el.firstChild);
  return el;
}

const units = [['d', 86400e3], ['h', 3600e3], ['min', 60e3], ['s', 1e3]];

// relTime is "3 min ago" for a ms timestamp.
export function relTime(ms) {
  if (!ms) return '—';
  const d = Date.now() - ms;
  const a = Math.abs(d);
  for (const [u, n] of units) {
    if (a >= n) return `${Math.floor(a / n)} ${u} ${d >= 0 ? 'ago' : 'from now'}`;
  }
  return 'just now';
}

export function isoTime(ms) {
  return ms ? new Date(ms).toISOString() : '';
}

// time is a relative time with the absolute ISO time on hover.
export function time(ms) {
  return h('time', { datetime: isoTime(ms), title: isoTime(ms) }, relTime(ms));
}

export function bytes(n) {
  if (n === undefined || n === null) return '—';
  const u = ['B', 'KiB', 'MiB', 'GiB', 'TiB'];
  let i = 0;
  let v = Number(n);
  while (v >= 1024 && i < u.length - 1) { v /= 1024; i++; }
  return `${i ? v.toFixed(1) : v} ${u[i]}`;
}

export function num(n, unit) {
  if (n === undefined || n === null) return '—';
  return `${Number(n).toLocaleString('en')}${unit ? ' ' + unit : ''}`;
}

// idLink links an id to its trace.
export function idLink(id) {
  if (!id) return '—';
  return h('a', { class: 'mono id', href: '#/trace?id=' + encodeURIComponent(id), title: 'trace ' + id }, id);
}

// seqLink links a seq to the log page starting there.
export function seqLink(seq) {
  return h('a', { class: 'mono', href: '#/log?seq=' + seq }, String(seq));
}

// badge is a status word with an icon, so it never depends on colour.
const icons = { ok: '●', completed: '✓', failed: '✗', executing: '▶', needs_review: '⚑', pending: '○', degraded: '▲', running: '▶', warn: '▲', error: '✗' };
export function badge(word, kind) {
  const k = kind || word;
  return h('span', { class: 'badge b-' + String(k).replace(/[^a-z_]/g, '') }, h('span', { 'aria-hidden': 'true' }, icons[k] || '•'), ' ', word);
}

// sparkline draws values as an SVG polyline (no inline style).
export function sparkline(values, label) {
  const ns = 'http://www.w3.org/2000/svg';
  const w = 120, hgt = 24;
  const svg = document.createElementNS(ns, 'svg');
  svg.setAttribute('viewBox', `0 0 ${w} ${hgt}`);
  svg.setAttribute('class', 'spark');
  svg.setAttribute('role', 'img');
  svg.setAttribute('aria-label', label);
  if (values && values.length > 1) {
    const max = Math.max(...values, 1);
    const pts = values.map((v, i) => `${(i / (values.length - 1)) * w},${hgt - 2 - (v / max) * (hgt - 4)}`).join(' ');
    const pl = document.createElementNS(ns, 'polyline');
    pl.setAttribute('points', pts);
    svg.append(pl);
  }
  return svg;
}

// pre shows JSON, indented, as text.
export function jsonPre(v) {
  let s;
  try { s = JSON.stringify(v, null, 2); } catch { s = String(v); }
  return h('pre', { class: 'mono json' }, s);
}

// params reads the query of the hash route (#/log?type=pty.).
export function params() {
  const q = location.hash.split('?')[1] || '';
  return new URLSearchParams(q);
}

export function setParams(view, p) {
  const q = new URLSearchParams();
  for (const [k, v] of Object.entries(p)) if (v !== undefined && v !== null && v !== '') q.set(k, v);
  const s = q.toString();
  const target = '#/' + view + (s ? '?' + s : '');
  if (location.hash !== target) location.hash = target;
}
