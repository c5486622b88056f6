// Steps and recovery: mandates and their steps, the classifier's verdict
// for each interrupted step and why, the operator's actions (approve,
// fail, reset, cancel) and the recovery plan with apply. Every action asks
// first and carries a request id.

import { get, post } from './api.js';
import { confirmAction } from './confirm.js';
import { badge, clear, h, idLink, params, seqLink, time } from './dom.js';

export function show(main) {
  main.append(h('h1', {}, 'Steps and recovery'), h('div', { id: 'stepsBox', 'aria-busy': 'true' }, 'Loading…'));
  load();
}

const short = (hash) => (hash ? hash.replace(/^sha256-/, '').slice(0, 12) + '…' : '—');

function hashCell(label, hash) {
  return hash ? h('span', { class: 'mono', title: hash }, label + ' ' + short(hash)) : '';
}

async function load() {
  const box = document.getElementById('stepsBox');
  if (!box) return;
  let list, rec;
  try {
    [list, rec] = await Promise.all([get('/api/steps'), get('/api/console/recovery')]);
  } catch (e) {
    clear(box).append(h('p', { class: 'error', role: 'alert' }, e.message, e.fix ? ' — ' + e.fix : ''));
    return;
  }
  box.removeAttribute('aria-busy');
  const verdicts = new Map(rec.plan.steps.map((s) => [s.mandate_id + '/' + s.step_id, s]));
  const focus = params().get('focus');
  clear(box);
  if (!list.mandates.length) box.append(h('p', { class: 'muted' }, 'No mandate recorded yet (cmlab run, cmlab step plan).'));
  for (const m of list.mandates.slice().reverse()) {
    const sec = h('section', { class: 'card mandate', dataset: { mandate: m.mandate_id } },
      h('h2', {}, idLink(m.mandate_id), ' ', m.name ? h('span', { class: 'muted' }, m.name) : '', ' ', badge(m.cancelled ? 'cancelled' : m.status, m.cancelled ? 'failed' : m.status),
        ' ', h('span', { class: 'muted' }, 'last change ', time(m.last_ts))),
      m.cancelled || m.status === 'completed' ? '' : h('button', { type: 'button', class: 'danger', dataset: { act: 'cancel' }, onclick: () => cancelMandate(m) }, 'Cancel mandate…'),
      h('table', { class: 'dense steps' },
        h('thead', {}, h('tr', {}, ['Step', 'Status', 'Verdict', 'Why', 'Process', 'Actions'].map((c) => h('th', { scope: 'col' }, c)))),
        h('tbody', {}, m.steps.map((s) => stepRow(m, s, verdicts.get(m.mandate_id + '/' + s.step_id), focus)))));
    box.append(sec);
  }
  box.append(h('section', { class: 'card' }, h('h2', {}, 'Recovery plan'),
    h('p', { class: 'muted' }, 'What cmlab recover prints, classified now. Apply records the decisions in the action column.'),
    h('pre', { id: 'recoverText', class: 'mono' }, rec.text),
    h('button', { type: 'button', id: 'applyPlan', class: 'primary', onclick: applyPlan }, 'Apply the plan…')));
  const f = focus && box.querySelector(`tr[data-key="${CSS.escape(focus)}"]`);
  if (f) { f.classList.add('focus'); f.focus(); }
}

function stepRow(m, s, v, focus) {
  const key = m.mandate_id + '/' + s.step_id;
  const why = [];
  if (v) {
    why.push(h('div', {}, v.evidence.reason || ''));
    if (v.note) why.push(h('div', { class: 'muted' }, v.note));
  }
  why.push(h('div', {}, hashCell('plan pre', s.pre_hash), ' ', hashCell('expected post', s.expected_post_hash)));
  why.push(h('div', {}, hashCell('observed pre', s.observed_pre_hash), ' ', hashCell('world now', v && v.current_hash), ' ', hashCell('post', s.post_hash), ' ', hashCell('result', s.result_hash)));
  if (s.error_class) why.push(h('div', {}, 'error ', h('span', { class: 'mono' }, s.error_class), ': ', s.error_msg || ''));
  if (s.evidence && s.evidence.reason) why.push(h('div', { class: 'muted' }, 'recorded: ', s.evidence.reason, s.evidence.detail ? ' — ' + s.evidence.detail : ''));
  const actions = [];
  const open = s.status === 'executing' || s.status === 'needs_review';
  if (open && !(v && v.verdict === 'in_flight')) actions.push(h('button', { type: 'button', class: 'primary', dataset: { act: 'approve' }, onclick: () => approve(m, s) }, 'Approve…'));
  if (['pending', 'executing', 'needs_review'].includes(s.status)) actions.push(h('button', { type: 'button', dataset: { act: 'fail' }, onclick: () => fail(m, s) }, 'Fail…'));
  if (['executing', 'failed', 'needs_review'].includes(s.status)) actions.push(h('button', { type: 'button', dataset: { act: 'reset' }, onclick: () => reset(m, s) }, 'Reset…'));
  return h('tr', { dataset: { key, status: s.status }, tabindex: '-1', class: focus === key ? 'focus' : '' },
    h('td', {}, h('a', { class: 'mono', href: '#/trace?id=' + encodeURIComponent(key) }, s.step_id), h('div', { class: 'muted mono' }, s.tool || '')),
    h('td', { class: 'status' }, badge(s.status), ' ', seqLink(s.last_seq)),
    h('td', {}, v ? badge(v.verdict, v.verdict === 'already_done' ? 'completed' : v.verdict === 'in_flight' ? 'running' : v.verdict === 'manual_review' ? 'needs_review' : 'pending') : '—'),
    h('td', { class: 'why' }, why),
    h('td', {}, s.pid ? h('span', { class: 'mono' }, 'pid ' + s.pid + (v && v.verdict === 'in_flight' ? ' (running)' : ' (gone)')) : '—'),
    h('td', { class: 'actions' }, actions));
}

const stepPath = (m, tr) => `/api/steps/${encodeURIComponent(m.mandate_id)}/${tr}`;

async function approve(m, s) {
  const note = h('input', { id: 'approveNote', 'aria-label': 'What you checked (kept in the evidence)', placeholder: 'what you checked', maxlength: '500' });
  const done = await confirmAction({
    title: `Approve ${m.mandate_id}/${s.step_id}`,
    text: 'The side effect happened, as planned. The daemon hashes the world the step\'s plan declares, now, and records the step completed with that hash.',
    extra: h('label', {}, 'Note ', note),
    run: (req) => post(stepPath(m, 'approve'), { step_id: s.step_id, note: note.value }, req),
  });
  if (done) load();
}

async function fail(m, s) {
  const cls = h('select', { id: 'failClass', 'aria-label': 'Reason class' },
    ['operator_failed', 'side_effect_missing', 'side_effect_wrong', 'cancelled', 'external'].map((c) => h('option', { value: c }, c)));
  const msg = h('input', { id: 'failMsg', 'aria-label': 'Message', maxlength: '500', placeholder: 'what went wrong' });
  const done = await confirmAction({
    title: `Fail ${m.mandate_id}/${s.step_id}`,
    text: 'Record that this step failed. cmlab run retries a failed step; reset moves it back to pending.',
    extra: h('div', {}, h('label', {}, 'Reason class ', cls), ' ', h('label', {}, 'Message ', msg)),
    run: (req) => post(stepPath(m, 'failed'), { step_id: s.step_id, error_class: cls.value, error_msg: msg.value }, req),
  });
  if (done) load();
}

async function reset(m, s) {
  const done = await confirmAction({
    title: `Reset ${m.mandate_id}/${s.step_id}`,
    text: 'Move the step back to pending with the same idem_key: the next run executes it again.',
    run: (req) => post(stepPath(m, 'reset'), { step_id: s.step_id, reason: 'operator (console)' }, req),
  });
  if (done) load();
}

async function cancelMandate(m) {
  const reason = h('input', { id: 'cancelReason', 'aria-label': 'Reason', maxlength: '500' });
  const done = await confirmAction({
    title: `Cancel mandate ${m.mandate_id}`,
    text: 'No step of it starts again; start-up auto-resume skips it. What runs may still finish.',
    extra: h('label', {}, 'Reason ', reason),
    run: (req) => post(stepPath(m, 'cancel'), { reason: reason.value }, req),
  });
  if (done) load();
}

async function applyPlan() {
  const done = await confirmAction({
    title: 'Apply the recovery plan',
    text: 'Record every decision of the plan\'s action column (steps of this daemon\'s own runners are left alone).',
    run: (req) => post('/api/recovery/apply', {}, req),
  });
  if (done) load();
}
