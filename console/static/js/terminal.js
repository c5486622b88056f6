// Terminal: conversations and their blocks; a running block streamed live
// (long polls of its rendered screen); a finished block, or a whole
// conversation, played back with a time scrubber: the daemon renders each
// frame and streams them at their times; typing and Ctrl+C through
// the terminal API's send and interrupt routes. The screen's HTML is
// rendered on the server (terminal-to-html, a VT emulator for full-screen
// programs), which escapes every character of the output.

import { get, post, requestId } from './api.js';
import { badge, bytes, clear, h, params, setParams, time } from './dom.js';

let gen = 0; // bumped on leave: loops of an older view stop

export function show(main) {
  gen++;
  const p = params();
  const conv = p.get('conv') || '';
  const block = p.get('block') || '';
  main.append(h('h1', {}, 'Terminal'),
    h('div', { class: 'cols' },
      h('nav', { id: 'convList', class: 'list', 'aria-label': 'Conversations' }, 'Loading…'),
      h('div', {}, h('div', { id: 'blocksBox' }), h('div', { id: 'screenBox' }))));
  loadConvs(conv);
  if (conv) loadBlocks(conv, block);
  if (conv && block) showBlock(conv, block, gen);
  else if (conv) showConversation(conv, gen);
}

export function leave() { gen++; }

async function loadConvs(sel) {
  const box = document.getElementById('convList');
  let r;
  try { r = await get('/api/console/pty'); } catch (e) { clear(box).append(h('p', { class: 'error' }, e.message)); return; }
  clear(box).append(h('h2', {}, 'Conversations'),
    r.conversations.length ? h('ul', {}, r.conversations.map((c) => h('li', {},
      h('a', { class: 'mono' + (c.id === sel ? ' sel' : ''), href: '#/terminal?conv=' + encodeURIComponent(c.id), 'aria-current': c.id === sel ? 'page' : false }, c.id),
      c.running ? [' ', badge('shell', 'running')] : ''))) : h('p', { class: 'muted' }, 'None yet.'));
}

async function loadBlocks(conv, sel) {
  const box = document.getElementById('blocksBox');
  let r;
  try { r = await get(`/api/pty/${encodeURIComponent(conv)}/blocks?since=0`); } catch (e) { clear(box).append(h('p', { class: 'error' }, e.message, e.fix ? ' — ' + e.fix : '')); return; }
  const input = h('input', { id: 'ptyInput', 'aria-label': 'Type into ' + conv, placeholder: 'type a line, Enter sends it', autocomplete: 'off' });
  const status = h('span', { id: 'ptyStatus', role: 'status', class: 'muted' });
  const send = async (data) => {
    try {
      await post(`/api/pty/${encodeURIComponent(conv)}/send`, { data }, requestId());
      status.textContent = 'sent';
    } catch (e) { status.textContent = e.message + (e.fix ? ' — ' + e.fix : ''); }
  };
  input.addEventListener('keydown', (e) => { if (e.key === 'Enter') { e.preventDefault(); send(input.value + '\n'); input.value = ''; } });
  clear(box).append(h('h2', {}, 'Blocks of ', h('span', { class: 'mono' }, conv)),
    h('p', { class: 'typebar' }, input, ' ',
      h('button', { type: 'button', id: 'ptyInterrupt', onclick: async () => {
        try { await post(`/api/pty/${encodeURIComponent(conv)}/interrupt`, {}, requestId()); status.textContent = 'Ctrl+C sent'; } catch (e) { status.textContent = e.message; }
      } }, 'Ctrl+C'), ' ', status),
    h('table', { id: 'blocksTable', class: 'dense' },
      h('thead', {}, h('tr', {}, ['#', 'Command', 'Status', 'Exit', 'Began', 'Duration', 'Output', 'Truncated'].map((c) => h('th', { scope: 'col' }, c)))),
      h('tbody', {}, r.blocks.slice().reverse().map((b) => h('tr', { dataset: { block: b.block_id, status: b.status }, class: b.block_id === sel ? 'focus' : '' },
        h('td', {}, h('a', { href: '#/terminal?' + new URLSearchParams({ conv, block: b.block_id }) }, String(b.seq))),
        h('td', { class: 'mono' }, b.cmd),
        h('td', {}, badge(b.status, b.status === 'completed' ? 'completed' : b.status === 'running' || b.status === 'interactive' ? 'running' : 'failed'), b.reason ? h('span', { class: 'muted' }, ' ' + b.reason) : ''),
        h('td', { class: 'mono' }, b.exit_code === null || b.exit_code === undefined ? '—' : String(b.exit_code)),
        h('td', {}, time(b.ts_begin)),
        h('td', {}, b.ts_end ? ((b.ts_end - b.ts_begin) / 1000).toFixed(1) + ' s' : 'running'),
        h('td', {}, b.spool_end ? bytes(b.spool_end - b.spool_begin) : '—'),
        h('td', {}, b.dropped_bytes ? bytes(b.dropped_bytes) + ' dropped' : 'no'))))));
}

const screenURL = (conv, block, q) => `/api/console/pty/${encodeURIComponent(conv)}/blocks/${encodeURIComponent(block)}/screen?` + new URLSearchParams(q);

function paint(el, html) {
  // Server-rendered HTML (terminal-to-html): every character of the
  // output escaped there; only its spans, links and images remain.
  el.innerHTML = html;
}

async function showBlock(conv, block, my) {
  const box = document.getElementById('screenBox');
  const term = h('div', { id: 'screen', class: 'term', role: 'log', 'aria-label': 'block output' });
  const marker = h('span', { id: 'screenState', class: 'marker', role: 'status' }, 'loading');
  clear(box).append(h('h2', {}, 'Block ', h('span', { class: 'mono' }, block), ' ', marker), term);
  let s;
  try { s = await get(screenURL(conv, block, {})); } catch (e) { marker.textContent = e.message; return; }
  paint(term, s.html);
  if (!s.complete) {
    marker.textContent = 'live';
    let after = s.size;
    while (my === gen) {
      try {
        s = await get(screenURL(conv, block, { after, wait_ms: 10000 }));
      } catch (e) {
        marker.textContent = 'reconnecting';
        await new Promise((r) => setTimeout(r, 1000));
        continue;
      }
      if (my !== gen) return;
      paint(term, s.html);
      term.scrollTop = term.scrollHeight;
      after = s.size;
      if (s.complete) break;
    }
    if (my !== gen) return;
  }
  marker.textContent = 'finished';
  player(conv, block, box, term, my);
}

// showConversation plays the whole conversation back.
function showConversation(conv, my) {
  const box = document.getElementById('screenBox');
  const term = h('div', { id: 'screen', class: 'term', role: 'log', 'aria-label': 'conversation output' });
  clear(box).append(h('h2', {}, 'Playback of ', h('span', { class: 'mono' }, conv)), term);
  player(conv, '', box, term, my);
}

// player plays a recording — a finished block, or the whole conversation
// when block is '' — rendered on the server: the scrubber is the
// recording's time (ms); moving it shows the terminal then; Play opens an
// event stream on which the daemon sends each frame at its time.
async function player(conv, block, box, term, my) {
  const base = `/api/console/pty/${encodeURIComponent(conv)}/`;
  const q = (extra) => new URLSearchParams(Object.assign(block ? { block } : {}, extra));
  let rec;
  try { rec = await get(base + 'recording?' + q({})); } catch (e) { box.append(h('p', { class: 'error' }, e.message, e.fix ? ' — ' + e.fix : '')); return; }
  if (my !== gen) return;
  paint(term, rec.html);
  const secs = (ms) => (ms / 1000).toFixed(2) + ' s';
  const range = h('input', { type: 'range', id: 'scrub', min: '0', max: String(rec.duration), step: '1', value: String(rec.duration), 'aria-label': 'Playback time (ms)' });
  const at = h('span', { id: 'scrubAt', class: 'mono' });
  const play = h('button', { type: 'button', id: 'play' }, 'Play');
  const speed = h('select', { id: 'speed', 'aria-label': 'Playback speed' },
    ['0.5', '1', '2', '4', '8'].map((v) => h('option', { value: v, selected: v === '1' }, v + '×')));
  const state = h('span', { id: 'playState', class: 'marker', role: 'status' }, 'paused');
  const label = (t) => { at.textContent = `${secs(t)} / ${secs(rec.duration)}`; };
  let es = null;
  let seq = 0;
  const stop = (why) => {
    if (es) { es.close(); es = null; }
    play.textContent = 'Play';
    state.textContent = why;
  };
  const seek = async (t) => {
    const mine = ++seq;
    label(t);
    try {
      const r = await get(base + 'recording?' + q({ t }));
      if (mine === seq && my === gen) paint(term, r.html);
    } catch (e) { state.textContent = e.message; }
  };
  range.addEventListener('input', () => { stop('paused'); seek(Number(range.value)); });
  play.addEventListener('click', () => {
    if (es) { stop('paused'); return; }
    const from = Number(range.value) >= rec.duration ? 0 : Number(range.value);
    seq++; // a seek still under way does not paint over the stream
    es = new EventSource(base + 'playback?' + q({ from, speed: speed.value }));
    play.textContent = 'Pause';
    state.textContent = 'playing';
    es.addEventListener('frame', (ev) => {
      if (my !== gen) { stop('paused'); return; }
      const f = JSON.parse(ev.data);
      paint(term, f.html);
      term.scrollTop = term.scrollHeight;
      range.value = String(f.t);
      label(f.t);
    });
    es.addEventListener('end', () => { stop('ended'); range.value = String(rec.duration); label(rec.duration); });
    es.addEventListener('error', () => { if (es) stop('stopped: the stream broke'); });
  });
  label(rec.duration);
  box.append(h('div', { class: 'scrub' }, play, range, at, speed, state),
    h('p', { id: 'playInfo', class: 'muted' }, `${block ? 'Block' : 'Whole conversation'}: ${rec.frames.length} frames over ${secs(rec.duration)}, ${rec.cols}×${rec.rows} terminal, ${rec.events} events of the log` +
      (rec.partial ? '; its start was not read (the log was read in part)' : '')));
}
