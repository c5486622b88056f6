// experiments.js: the experiments list (paged like the runs) and the form
// that creates an experiment from picked runs, with a hypothesis and
// questions.
import { h, replace, relTime, errorBox, field, shortId } from './dom.js';
import { get, submit, newRequestId } from './api.js';
import { setViewKeys } from './keys.js';
import { onLive } from './live.js';
import { exportButton } from './about.js';

export function render(ctx) {
  const q = ctx.route.query;
  const search = q.get('q') || '';
  const after = q.get('after') || '';
  const searchIn = h('input', { id: 'expSearch', type: 'search', value: search, placeholder: 'name, topic or id' });
  let t = null;
  searchIn.addEventListener('input', () => {
    clearTimeout(t);
    t = setTimeout(() => ctx.navigate(`#/experiments${searchIn.value.trim() ? '?q=' + encodeURIComponent(searchIn.value.trim()) : ''}`), 250);
  });
  const tbody = h('tbody', { id: 'expRows' });
  const status = h('p', { class: 'muted', 'aria-live': 'polite' }, 'Loading experiments…');
  const pager = h('nav', { class: 'pager', 'aria-label': 'Pages of experiments' });
  replace(ctx.root,
    h('div', { class: 'head' }, h('h1', null, 'Experiments'), h('span', { class: 'head-actions' }, exportButton())),
    h('p', { class: 'muted' }, 'To start one, pick two or more runs on the Runs page and press Compare selected.'),
    h('div', { class: 'toolbar' }, field('Search', searchIn)),
    h('div', { class: 'table-wrap' }, h('table', { class: 'table' },
      h('caption', { class: 'sr-only' }, 'Experiments'),
      h('thead', null, h('tr', null, ['Name', 'Topic', 'Runs', 'Created', 'Status', 'Experiment'].map((c) => h('th', { scope: 'col' }, c)))),
      tbody)),
    status, pager);

  async function load() {
    const p = new URLSearchParams({ limit: '50' });
    if (search) p.set('q', search);
    if (after) p.set('after', after);
    let page;
    try {
      page = await get(`/api/experiments?${p}`);
    } catch (err) {
      replace(status, errorBox(err));
      return;
    }
    if (!ctx.root.isConnected) return;
    replace(tbody, page.items.map((e) => h('tr', null,
      h('td', null, h('a', { href: `#/compare/${encodeURIComponent(e.experimentId)}`, class: 'exp-link' }, e.name || '(unnamed)')),
      h('td', null, e.topic || ''),
      h('td', null, String(e.runCount)),
      h('td', null, relTime(e.createdAt)),
      h('td', null, e.status === 'done' ? '✓ done' : e.status),
      h('td', { class: 'mono', title: e.experimentId }, shortId(e.experimentId)))));
    status.textContent = page.total ? `Showing ${page.items.length} of ${page.total} experiment${page.total === 1 ? '' : 's'}.` : 'No experiments yet.';
    const kids = [];
    if (after) kids.push(h('a', { class: 'btn', href: '#/experiments' + (search ? `?q=${encodeURIComponent(search)}` : '') }, '⇤ First page'));
    if (page.nextCursor) {
      const np = new URLSearchParams(q);
      np.set('after', page.nextCursor);
      kids.push(h('a', { class: 'btn', href: `#/experiments?${np}` }, 'Next page →'));
    }
    replace(pager, kids);
  }
  load();
  let timer = null;
  const off = onLive((ev) => {
    if (ev.type.startsWith('experiment.') || ev.type === 'resync') { clearTimeout(timer); timer = setTimeout(load, 150); }
  });
  setViewKeys([{ key: '/', desc: 'Search', fn: () => searchIn.focus() }]);
  return () => { off(); clearTimeout(timer); };
}

// createExperimentForm: the first picked run is the baseline (A), the
// others its variants (B, C, …).
export function createExperimentForm(runIds, ctx, onCreated) {
  const name = h('input', { id: 'expName', type: 'text', value: runIds.length === 2 ? 'A/B Compare' : `${runIds.length} Video Fleet` });
  const hyp = h('input', { id: 'expHypothesis', type: 'text', placeholder: 'B hooks faster than A' });
  const qList = h('div', { class: 'qlist', id: 'expQuestions' });
  const addQ = (prompt = '', type = 'yes_no_unsure') => {
    const n = qList.children.length + 1;
    const p = h('input', { type: 'text', class: 'q-prompt-in', id: `expQ${n}`, value: prompt, placeholder: 'Is the hook clearer?' });
    const tsel = h('select', { class: 'q-type', id: `expQ${n}type` },
      h('option', { value: 'yes_no_unsure', selected: type === 'yes_no_unsure' }, 'yes / no / unsure'),
      h('option', { value: 'text', selected: type === 'text' }, 'free text'));
    const rm = h('button', { type: 'button', class: 'btn btn-small', 'aria-label': `Remove question ${n}` }, '×');
    const row = h('div', { class: 'qrow' }, field(`Question ${n}`, p), field(`Answer type of question ${n}`, tsel), rm);
    rm.addEventListener('click', () => row.remove());
    qList.appendChild(row);
    p.focus();
  };
  const addBtn = h('button', { type: 'button', class: 'btn', id: 'addQuestion' }, '+ Add question');
  addBtn.addEventListener('click', () => addQ());
  const msg = h('div', { id: 'createMsg', 'aria-live': 'polite' });
  const go = h('button', { type: 'submit', class: 'btn btn-primary', id: 'createExperiment' }, 'Create and compare');
  const requestId = newRequestId();
  const form = h('form', { class: 'create', id: 'createForm' },
    h('h2', null, `New experiment from ${runIds.length} runs`),
    h('p', { class: 'muted' }, `Baseline A: ${shortId(runIds[0])}; variants: ${runIds.slice(1).map(shortId).join(', ')}.`),
    field('Name', name), field('Hypothesis', hyp), qList, addBtn, h('div', { class: 'actions' }, go), msg);
  form.addEventListener('submit', async (e) => {
    e.preventDefault();
    const questions = [...qList.querySelectorAll('.qrow')].map((row, i) => ({
      id: `q${i + 1}`, prompt: row.querySelector('.q-prompt-in').value.trim(), type: row.querySelector('.q-type').value,
    })).filter((x) => x.prompt);
    go.disabled = true;
    try {
      const out = await submit({ requestId, path: '/api/experiments', label: 'new experiment', body: {
        name: name.value.trim(), hypothesis: hyp.value.trim() || undefined, baselineRunId: runIds[0],
        variants: runIds.slice(1).map((runId, i) => ({ label: String.fromCharCode(66 + i), runId })),
        questions: questions.length ? questions : undefined,
      } });
      onCreated && onCreated();
      ctx.navigate(`#/compare/${encodeURIComponent(out.experimentId)}`);
    } catch (err) {
      replace(msg, errorBox(err));
      go.disabled = false;
    }
  });
  return form;
}
