// Time travel: the home as it was at a seq or a time (built by the
// daemon with replay --to's machinery, served read-only), two points
// compared, and replay --check's drift verdict for the live views.

import { get, post } from './api.js';
import { clear, h, num, params, seqLink, time } from './dom.js';

let points = []; // the points built in this page's life, oldest first

export function show(main) {
  const p = params();
  const seq = h('input', { id: 'travelSeq', inputmode: 'numeric', placeholder: 'seq', value: p.get('seq') || '', 'aria-label': 'Seq to travel to' });
  const at = h('input', { id: 'travelAt', placeholder: '2026-11-28T14:02:00Z', value: p.get('at') || '', 'aria-label': 'Time to travel to' });
  const msg = h('p', { id: 'travelMsg', role: 'status', class: 'muted' });
  const form = h('form', { id: 'travelForm', class: 'filters' },
    h('label', {}, 'Seq', seq), h('label', {}, 'or time', at),
    h('button', { type: 'submit', class: 'primary', id: 'travelGo' }, 'Show the home then'),
    h('button', { type: 'button', id: 'travelNow' }, 'Now (last seq)'));
  form.addEventListener('submit', (e) => { e.preventDefault(); build({ seq: seq.value.trim(), at: at.value.trim() }, msg); });
  form.querySelector('#travelNow').addEventListener('click', async () => {
    const o = await get('/api/console/overview');
    build({ seq: String(o.log.lastSeq) }, msg);
  });
  main.append(h('h1', {}, 'Time travel'),
    h('p', { class: 'muted' }, 'The daemon replays the log up to the point into a private, read-only home (cmlab replay --to) and shows its view files. It keeps the last three points.'),
    form, msg, h('div', { id: 'points' }), h('div', { id: 'compareOut' }), h('div', { id: 'fileOut' }),
    h('section', { class: 'card' }, h('h2', {}, 'Drift'), h('p', { class: 'muted' }, 'replay --check: re-project the whole log into a shadow home and compare every view.'),
      h('button', { type: 'button', id: 'checkBtn', onclick: check }, 'Check the live views'), h('div', { id: 'checkOut', role: 'status' })));
  renderPoints();
}

async function build(q, msg) {
  const body = {};
  if (q.seq) body.seq = Number(q.seq);
  if (q.at) body.at = q.at;
  const btn = document.getElementById('travelGo');
  btn.disabled = true;
  msg.textContent = 'Replaying…';
  try {
    const pt = await post('/api/console/travel', body);
    points.push(pt);
    if (points.length > 3) points.shift();
    msg.textContent = '';
    renderPoints();
  } catch (e) {
    msg.textContent = e.message + (e.fix ? ' — ' + e.fix : '');
  } finally {
    btn.disabled = false;
  }
}

function renderPoints() {
  const box = document.getElementById('points');
  if (!box) return;
  clear(box);
  if (!points.length) return;
  const sel = h('div', { class: 'filters' });
  const a = h('select', { id: 'cmpA', 'aria-label': 'Earlier point' }, points.map((p) => h('option', { value: p.id }, `seq ${p.lastSeq}`)));
  const b = h('select', { id: 'cmpB', 'aria-label': 'Later point' }, points.map((p, i) => h('option', { value: p.id, selected: i === points.length - 1 }, `seq ${p.lastSeq}`)));
  sel.append(h('label', {}, 'Compare', a), h('label', {}, 'with', b), h('button', { type: 'button', id: 'cmpBtn', onclick: () => compare(a.value, b.value) }, 'Compare'));
  box.append(h('div', { class: 'grid' }, points.map((p) => h('section', { class: 'card point', dataset: { id: p.id, seq: p.lastSeq } },
    h('h2', {}, 'The home at seq ', seqLink(p.lastSeq)),
    h('p', { class: 'muted' }, 'last event ', time(p.lastTs), ` · ${num(p.events, 'events')} replayed`),
    h('table', { class: 'dense' }, h('tbody', {}, p.files.map((f) => h('tr', { dataset: { path: f.path } },
      h('td', {}, h('a', { href: '#', class: 'mono', onclick: (e) => { e.preventDefault(); showFile(p, f.path); } }, f.path)),
      h('td', {}, num(f.lines, 'lines'))))))))), points.length > 1 ? sel : '');
}

async function showFile(p, path) {
  const out = clear(document.getElementById('fileOut'));
  try {
    const r = await get(`/api/console/travel/${encodeURIComponent(p.id)}/file?` + new URLSearchParams({ path }));
    out.append(h('section', { class: 'card' }, h('h2', {}, h('span', { class: 'mono' }, path), ' at seq ', String(p.lastSeq)),
      h('p', { class: 'muted' }, `${r.total} lines${r.total > r.lines.length ? `, the first ${r.lines.length} shown` : ''}`),
      h('pre', { id: 'fileLines', class: 'mono json' }, r.lines.join('\n'))));
  } catch (e) {
    out.append(h('p', { class: 'error' }, e.message));
  }
}

async function compare(a, b) {
  const out = clear(document.getElementById('compareOut'));
  try {
    const r = await get('/api/console/travel/compare?' + new URLSearchParams({ a, b }));
    out.append(h('section', { class: 'card', id: 'compareCard' },
      h('h2', {}, `Seq ${r.a} → ${r.b}`),
      h('p', {}, `${num(r.eventsBetween, 'events')} between: `, h('a', { href: '#/log?before=' + (r.b + 1) }, 'see them in the log')),
      r.files.length ? r.files.map((f) => h('div', { class: 'diff', dataset: { path: f.path } },
        h('h3', { class: 'mono' }, f.path, ` (+${f.countB} −${f.countA})`),
        f.onlyB.length ? h('pre', { class: 'mono json added' }, f.onlyB.map((l) => '+ ' + l).join('\n')) : '',
        f.onlyA.length ? h('pre', { class: 'mono json removed' }, f.onlyA.map((l) => '− ' + l).join('\n')) : ''))
        : h('p', { class: 'muted' }, 'No view line differs.')));
  } catch (e) {
    out.append(h('p', { class: 'error' }, e.message, e.fix ? ' — ' + e.fix : ''));
  }
}

async function check() {
  const out = clear(document.getElementById('checkOut'));
  const btn = document.getElementById('checkBtn');
  btn.disabled = true;
  out.append('Re-projecting…');
  try {
    const r = await post('/api/console/check', {});
    clear(out).append(r.identical
      ? h('p', { id: 'checkVerdict' }, `✓ identical: ${num(r.files, 'view files')} match the log up to seq ${r.lastSeq}.`)
      : h('div', { id: 'checkVerdict' }, h('p', { class: 'error' }, `✗ drift in ${r.divergences.length} file(s); the first at `, h('span', { class: 'mono' }, r.first.file), ` offset ${r.first.offset}`, r.first.seq ? [' (seq ', seqLink(r.first.seq), ')'] : ''),
        h('pre', { class: 'mono json' }, 'live:   ' + r.first.live + '\nshadow: ' + r.first.shadow)));
  } catch (e) {
    clear(out).append(h('p', { class: 'error' }, e.message, e.fix ? ' — ' + e.fix : ''));
  } finally {
    btn.disabled = false;
  }
}
