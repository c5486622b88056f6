// review.js: watch one run and rate it. The form is a draft in
// localStorage until the daemon acknowledged its submit; the submit's
// request id is the draft's, so a double click or a retry records once.
import { h, replace, relTime, metricBadges, errorBox, field } from './dom.js';
import { state, get, submit, pending, onAck, newRequestId } from './api.js';
import { loadDraft, saveDraft, clearDraft } from './drafts.js';
import { ratingForm, parseTags, DIMENSIONS } from './rating.js';
import { setViewKeys } from './keys.js';
import { onLive } from './live.js';

const ARTIFACTS = [['script', 'script.json'], ['timestamps', 'timestamps.json'], ['visuals', 'visuals.json'], ['score', 'score.json']];

export function render(ctx) {
  const runId = ctx.route.parts[1] || '';
  const key = `review.${runId}`;
  const task = state.config && state.config.task;
  const oneShot = Boolean(task && task.type === 'review' && task.runId === runId && state.config.exitAfterSubmit > 0);
  let draft = loadDraft(key) || { ratings: {}, notes: '', tags: '', requestId: newRequestId() };
  const persist = () => {
    draft = { ...draft, ratings: form.read(), notes: notes.value, tags: tags.value };
    saveDraft(key, draft);
  };

  const form = ratingForm('r', draft.ratings, persist);
  const notes = h('textarea', { id: 'notes', rows: '3', placeholder: 'What stood out? What would you change?' });
  notes.value = draft.notes || '';
  notes.addEventListener('input', persist);
  const tags = h('input', { id: 'tags', type: 'text', placeholder: 'hook-weak, captions-dense', value: draft.tags || '' });
  tags.addEventListener('input', persist);
  const submitBtn = h('button', { id: 'submitBtn', class: 'btn btn-primary', type: 'submit' }, 'Submit rating');
  const msg = h('div', { id: 'submitMsg', 'aria-live': 'polite' });
  const nextBtn = h('button', { id: 'nextUnrated', class: 'btn', type: 'button' }, 'Next unrated run (u)');
  const formEl = h('form', { id: 'reviewForm', class: 'rate' },
    h('h2', null, 'Your rating'), form.el,
    field('Notes', notes), field('Tags (comma-separated)', tags),
    h('div', { class: 'actions' }, submitBtn, nextBtn), msg);

  // The video element gets its source once the run is known to have one.
  const video = h('video', { id: 'videoReview', class: 'video', controls: true, playsinline: true, preload: 'metadata' });
  const videoStatus = h('div', { class: 'muted', id: 'videoStatus' });
  video.addEventListener('error', () => { if (video.getAttribute('src')) videoStatus.textContent = 'The video could not be played.'; });
  const info = h('div', { class: 'run-info' }, h('p', { class: 'muted' }, 'Loading run…'));
  const earlier = h('section', { id: 'earlier', class: 'earlier', 'aria-labelledby': 'earlierTitle' },
    h('h2', { id: 'earlierTitle' }, 'Earlier feedback'), h('p', { class: 'muted' }, 'Loading…'));

  replace(ctx.root,
    h('div', { class: 'head' }, h('h1', { id: 'reviewTitle' }, 'Review'),
      oneShot ? h('span', { class: 'badge badge-warn' }, 'one-shot task: the daemon stops after your submit') : null),
    h('div', { class: 'review' },
      h('div', { class: 'review-media' }, video, videoStatus, info, earlier),
      formEl));

  let run = null;
  (async () => {
    try {
      run = await get(`/api/runs/${encodeURIComponent(runId)}`);
    } catch (err) {
      replace(info, errorBox(err));
      return;
    }
    if (!ctx.root.isConnected) return;
    document.getElementById('reviewTitle').textContent = `Review: ${run.topic || '(no topic)'}`;
    if (run.videoPath) video.src = `/api/runs/${encodeURIComponent(runId)}/video`;
    else { video.hidden = true; videoStatus.textContent = 'This run has no video.'; }
    const a = run.artifacts || {};
    const links = ARTIFACTS.filter(([k]) => a[k]).map(([, n]) => n);
    if (a.reports && a.reports.sync) links.push('sync-report.json');
    if (a.reports && a.reports.caption) links.push('caption-report.json');
    replace(info,
      h('dl', { class: 'facts' },
        h('dt', null, 'Topic'), h('dd', { id: 'runTopic' }, run.topic || '(no topic)'),
        h('dt', null, 'Run'), h('dd', { class: 'mono' }, run.runId),
        h('dt', null, 'Created'), h('dd', null, relTime(run.createdAt)),
        h('dt', null, 'Folder'), h('dd', { class: 'mono' }, run.artifactsDir),
        h('dt', null, 'Auto metrics'), h('dd', null, metricBadges(run.autoMetricsSummary)),
        h('dt', null, 'Artifacts'), h('dd', null, links.length ? links.map((n) => [h('a', {
          href: `/api/runs/${encodeURIComponent(runId)}/artifact/${n}`, target: '_blank', rel: 'noreferrer', class: 'mono' }, n), ' ']) : 'none')));
  })();

  const loadEarlier = async () => {
    let page;
    try {
      page = await get(`/api/runs/${encodeURIComponent(runId)}/feedback`);
    } catch (err) {
      replace(earlier, h('h2', { id: 'earlierTitle' }, 'Earlier feedback'), errorBox(err));
      return;
    }
    if (!ctx.root.isConnected) return;
    const items = page.items.map((e) => h('li', { class: 'fb' },
      h('div', { class: 'fb-head' }, relTime(e.createdAt), e.experimentId ? h('span', { class: 'muted' }, ' · in an experiment') : null),
      h('div', { class: 'fb-ratings' }, DIMENSIONS.filter(([k]) => e.ratings && e.ratings[k] !== undefined)
        .map(([k, l]) => h('span', { class: 'badge' }, `${l} ${e.ratings[k]}`))),
      e.notes ? h('p', { class: 'fb-notes' }, e.notes) : null,
      e.tags && e.tags.length ? h('p', { class: 'muted' }, 'Tags: ', e.tags.join(', ')) : null));
    replace(earlier, h('h2', { id: 'earlierTitle' }, `Earlier feedback (${page.total})`),
      items.length ? h('ol', { class: 'fb-list', id: 'earlierList' }, items) : h('p', { class: 'muted' }, 'None yet: yours will be the first.'),
      page.total > items.length ? h('p', { class: 'muted' }, `Showing the latest ${items.length}.`) : null);
  };
  loadEarlier();

  const busy = (b) => {
    submitBtn.disabled = b;
    form.disable(b);
  };
  const showQueued = () => {
    busy(true);
    replace(msg, h('div', { class: 'notice' }, 'Saved on this device; it is sent when the daemon is back (it will be recorded once).'));
  };
  if (pending(draft.requestId)) showQueued();

  const offAck = onAck((rid, answer, err) => {
    if (rid !== draft.requestId || !ctx.root.isConnected) return;
    if (err) {
      busy(false);
      replace(msg, errorBox(err));
      return;
    }
    clearDraft(key);
    draft = { ratings: {}, notes: '', tags: '', requestId: newRequestId() };
    form.set(null);
    notes.value = '';
    tags.value = '';
    busy(false);
    replace(msg, h('div', { class: 'success', role: 'status' },
      `Submitted (${answer && answer.feedbackId ? answer.feedbackId : 'recorded'}). `,
      oneShot ? 'Server will close shortly.' : 'Press u for the next unrated run.'));
    if (!oneShot) nextBtn.focus();
    loadEarlier();
  });

  const send = async () => {
    if (submitBtn.disabled) return;
    persist();
    const ratings = form.read();
    if (!Object.keys(ratings).length && !notes.value.trim()) {
      replace(msg, errorBox({ message: 'Rate at least one dimension or write a note.' }));
      form.focusFirst();
      return;
    }
    const t = parseTags(tags.value);
    const body = { runId, ratings, notes: notes.value.trim() || undefined, tags: t.length ? t : undefined };
    busy(true);
    replace(msg, h('span', { class: 'muted' }, 'Submitting…'));
    try {
      await submit({ requestId: draft.requestId, path: '/api/feedback', body, label: `rating of ${run ? run.topic || runId : runId}` });
    } catch (err) {
      if (err.code === 'UNREACHABLE' || err.status === 503) showQueued();
      // an API error is shown by the ack listener
    }
  };
  formEl.addEventListener('submit', (e) => { e.preventDefault(); send(); });

  const nextUnrated = async () => {
    try {
      const p = new URLSearchParams({ limit: '2', unrated: '1' });
      const page = await get(`/api/runs?${p}`);
      const next = page.items.find((r) => r.runId !== runId);
      if (next) ctx.navigate(`#/review/${encodeURIComponent(next.runId)}`);
      else replace(msg, h('div', { class: 'notice' }, 'Every run has feedback: nothing left to rate.'));
    } catch (err) {
      replace(msg, errorBox(err));
    }
  };
  nextBtn.addEventListener('click', nextUnrated);

  const offLive = onLive((ev) => {
    if (['feedback.submitted', 'feedback.ingested', 'experiment.submitted', 'resync'].includes(ev.type)) loadEarlier();
  });

  setViewKeys([
    { key: 'r', desc: 'Rate: focus the first dimension', fn: () => form.focusFirst() },
    { key: ['j', 'k'], desc: 'On a dimension: next / previous dimension', fn: () => form.focusFirst() },
    { key: '1–9, 0', desc: 'On a dimension: set 10–90, 0 sets 100 (arrows: ±1, PageUp/PageDown: ±10)', help: true },
    { key: 'x', desc: 'On a dimension: clear it', help: true },
    { key: 'n', desc: 'Write notes', fn: () => notes.focus() },
    { key: 't', desc: 'Edit tags', fn: () => tags.focus() },
    { key: ['s', 'Ctrl+Enter'], desc: 'Submit the rating', fn: send, inFields: true, when: (e) => e.key !== 's' || !isTyping() },
    { key: 'u', desc: 'Next unrated run', fn: nextUnrated },
    { key: 'p', desc: 'Play / pause the video', fn: () => (video.paused ? video.play().catch(() => {}) : video.pause()) },
    { key: 'Escape', desc: 'Leave a text field', fn: () => document.activeElement.blur(), inFields: true },
  ]);

  return () => { offAck(); offLive(); video.pause(); video.removeAttribute('src'); video.load(); };
}

function isTyping() {
  const el = document.activeElement;
  return el && (el.tagName === 'TEXTAREA' || (el.tagName === 'INPUT' && el.type === 'text'));
}
