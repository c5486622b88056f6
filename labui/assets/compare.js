// compare.js: an experiment's runs side by side, played in step (play,
// pause and seek on one drive the others), rated per run, the questions
// answered, a winner named, submitted once.
import { h, replace, relTime, metricBadges, errorBox, field } from './dom.js';
import { state, get, submit, pending, onAck, newRequestId } from './api.js';
import { loadDraft, saveDraft, clearDraft } from './drafts.js';
import { ratingForm, parseTags } from './rating.js';
import { setViewKeys } from './keys.js';
import { onLive } from './live.js';

export function render(ctx) {
  const expId = ctx.route.parts[1] || '';
  const key = `compare.${expId}`;
  replace(ctx.root, h('h1', null, 'Compare'), h('p', { class: 'muted' }, 'Loading experiment…'));
  let cleanup = [];
  (async () => {
    let exp, runs;
    try {
      exp = await get(`/api/experiments/${encodeURIComponent(expId)}`);
      const entries = [{ runId: exp.baselineRunId, variantId: 'baseline', label: 'A' },
        ...exp.variants.map((v) => ({ runId: v.runId, variantId: v.variantId, label: v.label }))];
      runs = await Promise.all(entries.map(async (e) => ({ ...e, run: await get(`/api/runs/${encodeURIComponent(e.runId)}`) })));
    } catch (err) {
      replace(ctx.root, h('h1', null, 'Compare'), errorBox(err));
      return;
    }
    if (!ctx.root.isConnected) return;
    cleanup = build(ctx, exp, runs, key);
  })();
  return () => cleanup.forEach((f) => f());
}

function build(ctx, exp, runs, key) {
  const task = state.config && state.config.task;
  const oneShot = Boolean(task && task.type === 'compare' && task.experimentId === exp.experimentId && state.config.exitAfterSubmit > 0);
  const done = exp.status === 'done';
  let draft = loadDraft(key) || { perRun: {}, winner: '', reason: '', answers: {}, requestId: newRequestId() };
  const forms = [];
  const persist = () => {
    draft.perRun = {};
    for (const f of forms) draft.perRun[f.runId] = { ratings: f.form.read(), notes: f.notes.value, tags: f.tags.value };
    const w = document.querySelector('input[name="winner"]:checked');
    draft.winner = w ? w.value : '';
    draft.reason = reason.value;
    draft.answers = readAnswers();
    saveDraft(key, draft);
  };

  // --- synchronised players ---
  const videos = [];
  const cards = runs.map((e, i) => {
    const letter = String.fromCharCode(65 + i);
    const d = draft.perRun[e.runId] || {};
    const video = h('video', { id: `video${letter}`, class: 'video', controls: true, playsinline: true, preload: 'auto',
      src: `/api/runs/${encodeURIComponent(e.runId)}/video`, 'aria-label': `Video ${letter}` });
    videos.push(video);
    const form = ratingForm(`c${letter}`, d.ratings, persist);
    const notes = h('textarea', { id: `notes${letter}`, rows: '2' });
    notes.value = d.notes || '';
    notes.addEventListener('input', persist);
    const tags = h('input', { id: `tags${letter}`, type: 'text', value: d.tags || '' });
    tags.addEventListener('input', persist);
    forms.push({ runId: e.runId, variantId: e.variantId, form, notes, tags });
    return h('section', { class: 'card', 'aria-labelledby': `card${letter}` },
      h('h2', { id: `card${letter}` }, `${letter}${e.variantId === 'baseline' ? ' (baseline)' : ` (${e.label})`}: `, e.run.topic || '(no topic)'),
      video, h('div', null, metricBadges(e.run.autoMetricsSummary)),
      h('p', { class: 'muted mono', title: e.runId }, e.runId, ' · ', relTime(e.run.createdAt)),
      form.el, field(`Notes on ${letter}`, notes), field(`Tags on ${letter} (comma-separated)`, tags));
  });

  const linked = h('input', { id: 'linkPlayback', type: 'checkbox', checked: true });
  const playAll = h('button', { id: 'playAll', class: 'btn', type: 'button' }, '▶ Play all');
  const seekAll = h('input', { id: 'seekAll', type: 'range', min: '0', max: '1000', step: '1', value: '0' });
  // An event a video fires because this code drove it (expected) is not
  // passed on again: one play, pause or seek moves every video once.
  const expected = new Map(videos.map((v) => [v, { play: 0, pause: 0, seeking: 0 }]));
  const others = (v) => videos.filter((x) => x !== v);
  const play = (o) => {
    if (!o.paused) return;
    expected.get(o).play++;
    o.play().catch(() => { const e = expected.get(o); if (o.paused && e.play > 0) e.play--; });
  };
  const pause = (o) => { if (!o.paused) { expected.get(o).pause++; o.pause(); } };
  const seek = (o, t) => {
    const to = Math.min(t, o.duration || t);
    if (Math.abs(o.currentTime - to) > 0.01 && o.readyState >= 1) { expected.get(o).seeking++; o.currentTime = to; }
  };
  const mine = (v, type) => {
    const e = expected.get(v);
    if (e[type] > 0) { e[type]--; return true; }
    return false;
  };
  for (const v of videos) {
    v.addEventListener('play', () => { if (!mine(v, 'play') && linked.checked) others(v).forEach(play); updatePlay(); });
    v.addEventListener('pause', () => { if (!mine(v, 'pause') && linked.checked) others(v).forEach(pause); updatePlay(); });
    v.addEventListener('seeking', () => { if (!mine(v, 'seeking') && linked.checked) others(v).forEach((o) => seek(o, v.currentTime)); });
    v.addEventListener('timeupdate', () => {
      const max = Math.max(...videos.map((x) => x.duration || 0));
      if (max > 0 && document.activeElement !== seekAll) seekAll.value = String(Math.round((videos[0].currentTime / max) * 1000));
    });
  }
  const updatePlay = () => { playAll.textContent = videos.some((v) => !v.paused) ? '❚❚ Pause all' : '▶ Play all'; };
  playAll.addEventListener('click', () => {
    const anyPlaying = videos.some((v) => !v.paused);
    videos.forEach(anyPlaying ? pause : play);
    setTimeout(updatePlay, 50);
  });
  seekAll.addEventListener('input', () => {
    const max = Math.max(...videos.map((x) => x.duration || 0));
    if (!max) return;
    const t = (Number(seekAll.value) / 1000) * max;
    videos.forEach((v) => seek(v, t));
  });

  // --- questions, winner ---
  const qs = exp.questions || [];
  const answersEl = h('fieldset', { class: 'questions' }, h('legend', null, 'Questions'),
    qs.length ? qs.map((q, qi) => {
      const prev = draft.answers[q.id];
      if (q.type === 'text') {
        const inp = h('input', { type: 'text', id: `q${qi}`, 'data-q': q.id, value: prev || '' });
        inp.addEventListener('input', persist);
        return field(q.prompt, inp);
      }
      return h('div', { class: 'radio-row', role: 'radiogroup', 'aria-labelledby': `q${qi}l` },
        h('span', { id: `q${qi}l`, class: 'q-prompt' }, q.prompt),
        ['yes', 'no', 'unsure'].map((a) => {
          const r = h('input', { type: 'radio', name: `q_${q.id}`, id: `q${qi}-${a}`, value: a, 'data-q': q.id, checked: prev === a });
          r.addEventListener('change', persist);
          return h('span', { class: 'radio' }, r, h('label', { for: `q${qi}-${a}` }, a));
        }));
    }) : h('p', { class: 'muted' }, 'This experiment asks no questions.'));
  const readAnswers = () => {
    const out = {};
    answersEl.querySelectorAll('input[data-q]').forEach((el) => {
      if (el.type === 'radio') { if (el.checked) out[el.dataset.q] = el.value; } else if (el.value.trim()) out[el.dataset.q] = el.value.trim();
    });
    return out;
  };
  const winners = [['', 'No winner / tie'], ['baseline', 'A (baseline)'],
    ...exp.variants.map((v, i) => [v.variantId, `${String.fromCharCode(66 + i)} (${v.label})`])];
  const winnerEl = h('fieldset', { class: 'winner' }, h('legend', null, 'Which is better?'),
    winners.map(([val, label], i) => {
      const r = h('input', { type: 'radio', name: 'winner', id: `winner${i}`, value: val, checked: (draft.winner || '') === val });
      r.addEventListener('change', persist);
      return h('span', { class: 'radio' }, r, h('label', { for: `winner${i}` }, label));
    }));
  const reason = h('textarea', { id: 'reason', rows: '2', placeholder: 'Why?' });
  reason.value = draft.reason || '';
  reason.addEventListener('input', persist);
  const submitBtn = h('button', { id: 'submitCompare', class: 'btn btn-primary', type: 'submit' }, 'Submit comparison');
  const msg = h('div', { id: 'submitMsg', 'aria-live': 'polite' });
  const formEl = h('form', { id: 'compareForm', class: 'compare-submit' }, answersEl, winnerEl, field('Reason', reason),
    h('div', { class: 'actions' }, submitBtn), msg);

  replace(ctx.root,
    h('div', { class: 'head' }, h('h1', null, `Compare: ${exp.name}`),
      h('span', { class: `badge ${done ? 'badge-ok' : ''}`, id: 'expStatus' }, done ? '✓ submitted' : exp.status),
      oneShot ? h('span', { class: 'badge badge-warn' }, 'one-shot task: the daemon stops after your submit') : null),
    exp.hypothesis ? h('p', { class: 'hypothesis' }, 'Hypothesis: ', exp.hypothesis) : null,
    h('div', { class: 'sync-bar', role: 'group', 'aria-label': 'Linked playback' },
      h('span', { class: 'field-inline' }, linked, h('label', { for: 'linkPlayback' }, 'Play, pause and seek together')),
      playAll, field('Position (all videos)', seekAll)),
    h('div', { class: `cards cards-${Math.min(cards.length, 3)}` }, cards),
    formEl);

  const setDone = (winner) => {
    submitBtn.disabled = true;
    forms.forEach((f) => { f.form.disable(true); f.notes.disabled = true; f.tags.disabled = true; });
    const st = document.getElementById('expStatus');
    if (st) { st.textContent = '✓ submitted'; st.className = 'badge badge-ok'; }
    if (winner !== undefined) replace(msg, h('div', { class: 'notice' }, 'This experiment was submitted', winner ? ` (winner: ${winner})` : '', '.'));
  };
  if (done) setDone(exp.winner ? exp.winner.variantId : '');
  const showQueued = () => {
    submitBtn.disabled = true;
    replace(msg, h('div', { class: 'notice' }, 'Saved on this device; it is sent when the daemon is back (it will be recorded once).'));
  };
  if (!done && pending(draft.requestId)) showQueued();

  const offAck = onAck((rid, answer, err) => {
    if (rid !== draft.requestId) return;
    if (err) {
      submitBtn.disabled = false;
      replace(msg, errorBox(err));
      return;
    }
    clearDraft(key);
    setDone();
    replace(msg, h('div', { class: 'success', role: 'status' },
      `Submitted. feedbackIds: ${(answer.feedbackIds || []).join(', ')} `, oneShot ? 'Server will close shortly.' : ''));
  });

  const send = async () => {
    if (submitBtn.disabled) return;
    persist();
    const answers = readAnswers();
    const body = {
      winnerVariantId: draft.winner || undefined,
      reason: reason.value.trim() || undefined,
      answers: Object.keys(answers).length ? answers : undefined,
      perRun: forms.map((f) => {
        const t = parseTags(f.tags.value);
        return { runId: f.runId, variantId: f.variantId, ratings: f.form.read(), notes: f.notes.value.trim() || undefined, tags: t.length ? t : undefined };
      }),
    };
    submitBtn.disabled = true;
    replace(msg, h('span', { class: 'muted' }, 'Submitting…'));
    try {
      await submit({ requestId: draft.requestId, path: `/api/experiments/${encodeURIComponent(exp.experimentId)}/submit`, body, label: `comparison ${exp.name}` });
    } catch (err) {
      if (err.code === 'UNREACHABLE' || err.status === 503) showQueued();
    }
  };
  formEl.addEventListener('submit', (e) => { e.preventDefault(); send(); });

  const offLive = onLive((ev) => {
    const e = ev.data && ev.data.experiment;
    if ((ev.type === 'experiment.submitted' || ev.type === 'experiment.updated') && e && e.experimentId === exp.experimentId && e.status === 'done') {
      if (!submitBtn.disabled || !msg.querySelector('.success')) setDone(e.winner ? e.winner.variantId : '');
    }
  });

  setViewKeys([
    { key: 'Space', desc: 'Play / pause all', fn: () => playAll.click() },
    { key: 'r', desc: 'Rate A: focus its first dimension', fn: () => forms[0].form.focusFirst() },
    { key: 'b', desc: 'Rate B: focus its first dimension', fn: () => forms[1] && forms[1].form.focusFirst() },
    { key: ['s', 'Ctrl+Enter'], desc: 'Submit the comparison', fn: send, inFields: true, when: (e) => e.key !== 's' || !['TEXTAREA', 'INPUT'].includes(document.activeElement.tagName) || document.activeElement.type === 'range' },
    { key: 'Escape', desc: 'Leave a text field', fn: () => document.activeElement.blur(), inFields: true },
  ]);

  return [offAck, offLive, () => videos.forEach((v) => { v.pause(); v.removeAttribute('src'); v.load(); })];
}
