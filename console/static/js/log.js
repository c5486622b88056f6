// The log, newest first, paged by seq; filters and jumps in the URL; each
// event expands to its payload; ids link to their trace; a live tail over
// the event stream that can be paused. Also the trace view (#/trace?id=).

import { get } from './api.js';
import { badge, bytes, clear, h, idLink, isoTime, jsonPre, params, seqLink, setParams, time } from './dom.js';

const filters = [
  ['type', 'Type prefix', 'pty. or step.completed'],
  ['id', 'Id', 'any id named by the event'],
  ['req', 'Request id', ''],
  ['mandate', 'Mandate', ''],
  ['conv', 'Conversation', ''],
  ['from', 'From time', 'RFC 3339 or ms'],
  ['to', 'To time', 'RFC 3339 or ms'],
];

let es = null;
let paused = false;
let view = 'log';
let rows = [];
let sel = -1;
let knownTypes = [];

export function show(main, name) {
  view = name;
  const p = params();
  if (name === 'trace') return showTrace(main, p);
  paused = p.get('live') !== '1';
  const form = h('form', { id: 'logFilters', class: 'filters', role: 'search' },
    filters.map(([k, label, ph]) => h('label', {}, label, h('input', { name: k, id: 'f-' + k, value: p.get(k) || '', placeholder: ph, autocomplete: 'off' }))),
    h('label', {}, 'Jump to seq', h('input', { name: 'seq', id: 'f-seq', value: p.get('seq') || '', inputmode: 'numeric' })),
    h('label', {}, 'Jump to time', h('input', { name: 'at', id: 'f-at', value: p.get('at') || '', placeholder: '2026-11-28T14:02:00Z' })),
    h('button', { type: 'submit', class: 'primary' }, 'Apply'),
    h('button', { type: 'button', id: 'clearFilters', onclick: () => setParams('log', {}) }, 'Clear'));
  form.addEventListener('submit', (e) => {
    e.preventDefault();
    const q = {};
    for (const [k, v] of new FormData(form)) q[k] = v.trim();
    setParams('log', q);
  });
  const live = h('p', { class: 'livebar' },
    h('button', { type: 'button', id: 'liveToggle', onclick: toggleLive, 'aria-pressed': String(!paused) }, paused ? 'Start live tail' : 'Pause live tail'),
    ' ', h('span', { id: 'liveState', class: 'marker', role: 'status' }, paused ? 'paused' : 'connecting'));
  main.append(h('h1', {}, 'Log'), form, live,
    h('p', { id: 'pageInfo', class: 'muted' }),
    h('table', { id: 'logTable', class: 'dense log' },
      h('thead', {}, h('tr', {}, ['Seq', 'Time', 'Type', 'Stream', 'Request', 'Size', 'Where', 'Checksum'].map((c) => h('th', { scope: 'col' }, c)))),
      h('tbody', { id: 'logRows' })),
    h('p', { class: 'pager' }, h('a', { id: 'newest', href: '#/log?' + keep(p, []) }, 'Newest'), ' ', h('a', { id: 'older', hidden: true }, 'Older →')));
  load(p).then(() => { if (!paused) startLive(); });
}

export function leave() { stopLive(); }

function keep(p, extra) {
  const q = new URLSearchParams();
  for (const [k] of filters) if (p.get(k)) q.set(k, p.get(k));
  for (const [k, v] of extra) q.set(k, v);
  return q.toString();
}

async function load(p) {
  const q = new URLSearchParams();
  for (const k of ['type', 'id', 'req', 'mandate', 'conv', 'from', 'to', 'before', 'seq', 'at']) if (p.get(k)) q.set(k, p.get(k));
  const info = document.getElementById('pageInfo');
  let page;
  try {
    page = await get('/api/console/log?' + q.toString());
  } catch (e) {
    clear(info).append(h('span', { class: 'error', role: 'alert' }, e.message, e.fix ? ' — ' + e.fix : ''));
    return;
  }
  knownTypes = page.types || [];
  const tb = clear(document.getElementById('logRows'));
  rows = [];
  sel = -1;
  for (const ev of page.events) addRow(tb, ev, false);
  clear(info).append(`${page.events.length} events`, page.partial ? ' (stopped at the page\'s time budget: Older goes on)' : '',
    ` · log holds seq ${page.firstSeq}–${page.lastSeq} · ${page.scanned} frames read`);
  const older = document.getElementById('older');
  if (page.next) {
    older.hidden = false;
    older.href = '#/log?' + keep(p, [['before', page.next]]);
  } else older.hidden = true;
}

function addRow(tb, ev, top) {
  const tr = h('tr', { class: 'ev', tabindex: '0', dataset: { seq: ev.seq, type: ev.type || '' } },
    h('td', {}, seqLink(ev.seq)),
    h('td', {}, ev.ts ? time(ev.ts) : '—'),
    h('td', { class: 'mono' }, ev.type || '—'),
    h('td', {}, ev.stream ? idLink(ev.stream) : '—'),
    h('td', {}, ev.req ? idLink(ev.req) : '—'),
    h('td', {}, ev.size ? bytes(ev.size) : '—'),
    h('td', { class: 'mono muted' }, ev.segment ? `${ev.segment.replace(/^0+/, '')}@${ev.offset}` : 'live'),
    h('td', {}, ev.checksum ? (ev.checksum === 'ok' ? badge('ok', 'ok') : badge(ev.checksum, 'error')) : '—'));
  const detail = h('tr', { class: 'detail', hidden: true }, h('td', { colspan: '8' },
    h('p', {}, 'id ', idLink(ev.id), ' · ', isoTime(ev.ts), ' · v', String(ev.v || '')),
    ev.decodeError ? h('p', { class: 'error' }, ev.decodeError) : '',
    jsonPre(ev.data), ev.resp ? [h('p', { class: 'muted' }, 'Response snapshot'), jsonPre(ev.resp)] : ''));
  const toggle = (e) => {
    if (e.target.closest('a')) return;
    detail.hidden = !detail.hidden;
  };
  tr.addEventListener('click', toggle);
  tr.addEventListener('keydown', (e) => { if (e.key === 'Enter') toggle(e); });
  if (top) {
    tb.prepend(detail);
    tb.prepend(tr);
    rows.unshift(tr);
  } else {
    tb.append(tr, detail);
    rows.push(tr);
  }
}

export function key(e) {
  if (e.key === 'p' && view === 'log') { toggleLive(); return true; }
  if (e.key === 'j' || e.key === 'k') {
    if (!rows.length) return false;
    sel = Math.max(0, Math.min(rows.length - 1, sel + (e.key === 'j' ? 1 : -1)));
    rows[sel].focus();
    return true;
  }
  return false;
}

function setLiveState(s) {
  const el = document.getElementById('liveState');
  if (el) el.textContent = s;
}

function toggleLive() {
  paused = !paused;
  const b = document.getElementById('liveToggle');
  if (b) {
    b.textContent = paused ? 'Start live tail' : 'Pause live tail';
    b.setAttribute('aria-pressed', String(!paused));
  }
  const p = params();
  const q = Object.fromEntries(p.entries());
  if (paused) { stopLive(); setLiveState('paused'); delete q.live; } else { q.live = '1'; startLive(); }
  history.replaceState(null, '', '#/log' + (Object.keys(q).length ? '?' + new URLSearchParams(q) : ''));
}

function matches(ev, p) {
  const t = p.get('type');
  if (t && !ev.type.startsWith(t)) return false;
  if (p.get('req') && ev.req !== p.get('req')) return false;
  if (p.get('mandate') && ev.stream !== p.get('mandate')) return false;
  if (p.get('conv') && ev.stream !== p.get('conv')) return false;
  const id = p.get('id');
  if (id && ev.id !== id && ev.stream !== id && ev.req !== id && !JSON.stringify(ev.data).includes(JSON.stringify(id))) return false;
  return true;
}

function startLive() {
  stopLive();
  const p = params();
  const first = rows.length ? Number(rows[0].dataset.seq) : 0;
  // The live tail starts after the newest event shown; EventSource resumes
  // with Last-Event-ID by itself after a reconnect.
  es = new EventSource('/api/events?since=' + first);
  setLiveState('connecting');
  es.onopen = () => setLiveState('live');
  es.onerror = () => setLiveState(es && es.readyState === EventSource.CLOSED ? 'disconnected' : 'reconnecting');
  es.onmessage = (m) => onEvent(m, p);
  // Each event arrives under its type as the SSE event name.
  for (const t of knownTypes) es.addEventListener(t, (m) => onEvent(m, p));
}

function onEvent(m, p) {
  if (paused) return;
  let ev;
  try { ev = JSON.parse(m.data); } catch { return; }
  if (rows.length && Number(rows[0].dataset.seq) >= ev.seq) return;
  if (!matches(ev, p)) return;
  addRow(document.getElementById('logRows'), ev, true);
}

function stopLive() {
  if (es) { es.close(); es = null; }
}

async function showTrace(main, p) {
  const id = p.get('id') || '';
  main.append(h('h1', {}, 'Trace ', h('span', { class: 'mono' }, id)),
    h('p', { class: 'muted' }, 'Every event that names this id — as its request id, its stream, or in its payload — newest first, and for a request id the ids its response handed out (what cmlab trace lists).'),
    h('div', { id: 'traceBox', 'aria-busy': 'true' }, 'Loading…'));
  const box = document.getElementById('traceBox');
  let t;
  try {
    const q = new URLSearchParams({ id });
    if (p.get('before')) q.set('before', p.get('before'));
    t = await get('/api/console/trace?' + q);
  } catch (e) {
    clear(box).append(h('p', { class: 'error', role: 'alert' }, e.message, e.fix ? ' — ' + e.fix : ''));
    return;
  }
  box.removeAttribute('aria-busy');
  clear(box);
  if (t.related.length) box.append(h('p', {}, 'Also following ', t.related.map((r, i) => [i ? ', ' : '', idLink(r)])));
  const ol = h('ol', { id: 'traceList', class: 'trace' }, t.events.map((ev) => h('li', {},
    h('p', {}, seqLink(ev.seq), ' ', h('span', { class: 'mono' }, ev.type), ' ', time(ev.ts), ' stream ', idLink(ev.stream), ev.req ? [' req ', idLink(ev.req)] : ''),
    h('details', {}, h('summary', {}, 'payload'), jsonPre(ev.data)))));
  box.append(ol, t.events.length ? '' : h('p', {}, t.partial ? 'Nothing in this stretch yet.' : 'No event names this id.'));
  if (t.next) box.append(h('p', {}, h('a', { id: 'traceOlder', href: '#/trace?' + new URLSearchParams({ id, before: t.next }) }, 'Older →')));
}
