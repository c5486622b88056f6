// Overview: healthy / stuck / degraded in one look.

import { get } from './api.js';
import { badge, bytes, clear, h, idLink, num, seqLink, sparkline, time } from './dom.js';

let timer = null;

export function show(main) {
  main.append(h('h1', {}, 'Overview'), h('div', { id: 'ov', class: 'grid', 'aria-busy': 'true' }, 'Loading…'));
  load();
  timer = setInterval(load, 5000);
}

export function leave() { clearInterval(timer); }

function card(title, ...body) {
  return h('section', { class: 'card' }, h('h2', {}, title), ...body);
}

function kv(rows) {
  return h('dl', { class: 'kv' }, rows.map(([k, v]) => [h('dt', {}, k), h('dd', {}, v)]));
}

async function load() {
  const box = document.getElementById('ov');
  if (!box) return;
  let o;
  try {
    o = await get('/api/console/overview');
  } catch (e) {
    clear(box).append(h('p', { class: 'error', role: 'alert' }, e.message, e.fix ? ' — ' + e.fix : ''));
    return;
  }
  box.removeAttribute('aria-busy');
  const degraded = o.health.status !== 'ok';
  const stuck = o.awaitingReview.length + o.crashLeftBlocks.length;
  const health = card('Health',
    h('p', { class: 'big', id: 'healthWord' }, degraded ? badge('degraded', 'degraded') : (o.health.views ? badge('views behind', 'warn') : badge('healthy', 'ok')),
      stuck ? h('span', { class: 'stuck' }, ' · ', badge(`${stuck} need attention`, 'needs_review')) : ''),
    degraded ? h('p', {}, h('strong', {}, 'Cause: '), o.health.cause) : '',
    o.health.fix ? h('p', {}, h('strong', {}, 'Fix: '), o.health.fix) : '',
    o.health.views ? h('p', {}, h('strong', {}, 'Views: '), o.health.viewsCause) : '',
    o.readOnly ? h('p', {}, 'Read-only daemon (a replayed home).') : '');
  const lg = o.log;
  const logCard = card('Log', kv([
    ['Size', `${bytes(lg.bytes)} in ${num(lg.segments)} segments`],
    ['Last seq', seqLink(lg.lastSeq)],
    ['First retained seq', seqLink(lg.firstSeq)],
    ['Checkpoint', lg.checkpointError ? h('span', { class: 'error' }, lg.checkpointError) : `seq ${num(lg.checkpointSeq)} (${num(lg.checkpointLag, 'events behind')})`],
    ['Views lag', num(lg.viewsLag, 'events')],
  ]));
  const r = o.rates;
  const rates = card('Throughput',
    h('p', { class: 'big' }, num(r.eventsPerSec, 'events/s'), ' ', sparkline(r.series, 'events per second, last minutes')),
    kv([
      ['Window', r.windowSeconds ? `${num(r.windowSeconds, 's')}` : 'sampling (every 10 s)'],
      ['p99 ack latency', r.ackP99Ms >= 0 ? `≤ ${num(r.ackP99Ms, 'ms')} over ${num(r.acks, 'requests')}` : (r.ackP99Ms === -2 ? 'over the largest bucket' : 'no API writes in the window')],
    ]));
  const review = card('Steps awaiting review',
    o.awaitingReview.length ? h('ul', { id: 'reviewList' }, o.awaitingReview.map((s) => h('li', {}, h('a', { class: 'mono', href: '#/steps?focus=' + encodeURIComponent(s) }, s))))
      : h('p', { class: 'muted' }, 'None.'));
  const crashed = card('Blocks a crash left open',
    o.crashLeftBlocks.length ? h('table', { id: 'crashBlocks', class: 'dense' },
      h('thead', {}, h('tr', {}, h('th', {}, 'Conversation'), h('th', {}, 'Block'), h('th', {}, 'Command'), h('th', {}, 'Began'), h('th', {}, 'Closed at seq'))),
      h('tbody', {}, o.crashLeftBlocks.map((b) => h('tr', {},
        h('td', {}, h('a', { class: 'mono', href: '#/terminal?conv=' + encodeURIComponent(b.conversation_id) }, b.conversation_id)),
        h('td', {}, h('a', { class: 'mono', href: '#/terminal?conv=' + encodeURIComponent(b.conversation_id) + '&block=' + encodeURIComponent(b.block.block_id) }, b.block.block_id)),
        h('td', { class: 'mono' }, b.block.cmd), h('td', {}, time(b.block.ts_begin)), h('td', {}, seqLink(b.seq))))))
      : h('p', { class: 'muted' }, 'None: this daemon\'s start closed no block.'),
    o.openBlocks.length ? [h('h3', {}, 'Running now'), h('ul', {}, o.openBlocks.map((b) => h('li', {},
      h('a', { class: 'mono', href: '#/terminal?conv=' + encodeURIComponent(b.conversation_id) + '&block=' + encodeURIComponent(b.block.block_id) }, b.conversation_id + ' · ' + b.block.block_id), ' ', h('span', { class: 'mono' }, b.block.cmd))))] : '');
  const snaps = card('Snapshots',
    o.snapshots.length ? h('table', { class: 'dense' }, h('tbody', {}, o.snapshots.map((s) => h('tr', {}, h('td', { class: 'mono' }, s.name), h('td', {}, bytes(s.bytes)), h('td', {}, time(Date.parse(s.modTime)))))))
      : h('p', { class: 'muted' }, 'None yet.'));
  const comp = o.compaction;
  const compCard = card('Compaction', comp ? kv([
    ['Last', time(comp.compacted_at)],
    ['Log starts at', seqLink(comp.first_seq)],
    ['Removed ranges', num((comp.removed || []).length)],
  ]) : h('p', { class: 'muted' }, 'Never compacted.'));
  const ship = card('Shipping', o.ship ? kv([
    ['Shipped to seq', num(o.ship.shipped_seq)],
    ['Stream', o.ship.stream || '—'],
    ['Last error', o.ship.last_error || 'none'],
    ['Lag', num(o.ship.lag, 'events')],
  ]) : h('p', { class: 'muted' }, 'Not shipping (serve --ship).'));
  const lines = card('Recent warnings and errors',
    o.logLines.length ? h('pre', { class: 'mono loglines' }, o.logLines.join('\n')) : h('p', { class: 'muted' }, 'None in the daemon log\'s tail.'));
  clear(box).append(health, review, crashed, logCard, rates, snaps, compCard, ship, lines);
}
