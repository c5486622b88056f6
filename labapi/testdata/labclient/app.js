// cmlab's own test Lab client. It is not content-machine's client: it makes
// the calls their assets/lab/app.js makes, in the same order, with the same
// headers, and keeps the element ids their UI tests drive (#importForm,
// #importPath, .pick, #compareBtn, #videoReview, .rating .num, #submitBtn,
// #videoA, #videoB, #submitCompare, #submitMsg), so one browser test drives
// either client (cmd/cmlab/browser_test.go).
const state = { config: null, token: '' };
const appEl = document.getElementById('app');

function esc(s) {
  return String(s).replace(/[&<>"']/g, (c) => `&#${c.charCodeAt(0)};`);
}

function apiError(res, data) {
  const e = (data && data.error) || {};
  const fix = e.context && e.context.fix ? `\nFix: ${e.context.fix}` : '';
  return new Error(`${e.code || 'HTTP_ERROR'}: ${e.message || res.statusText}${fix}`);
}

async function apiGet(path) {
  const res = await fetch(path, { headers: { 'Cache-Control': 'no-store' } });
  const text = await res.text();
  const data = text ? JSON.parse(text) : null;
  if (!res.ok) throw apiError(res, data);
  return data;
}

async function apiPost(path, body) {
  const res = await fetch(path, {
    method: 'POST',
    headers: {
      'Content-Type': 'application/json',
      'Cache-Control': 'no-store',
      'X-CM-LAB-TOKEN': state.token,
      'X-CM-LAB-REQUEST-ID': crypto.randomUUID(),
    },
    body: JSON.stringify(body || {}),
  });
  const text = await res.text();
  const data = text ? JSON.parse(text) : null;
  if (!res.ok) throw apiError(res, data);
  return data;
}

function oneShotFor(type) {
  const t = state.config && state.config.task;
  return Boolean(t && t.type === type && state.config.exitAfterSubmit > 0);
}

function ratingGrid() {
  return `<div class="rating-grid">${['overall', 'hook', 'pacing', 'visuals', 'motion', 'captions', 'sync']
    .map((k) => `<div class="rating" data-key="${k}">${k} <input class="num" type="number" min="0" max="100" /></div>`)
    .join('')}</div>`;
}

function readRatings(root) {
  const out = {};
  root.querySelectorAll('.rating').forEach((row) => {
    const v = String(row.querySelector('.num').value || '').trim();
    if (v) out[row.getAttribute('data-key')] = Math.max(0, Math.min(100, Number.parseInt(v, 10)));
  });
  return out;
}

async function renderRuns() {
  const runs = await apiGet('/api/runs');
  const selected = [];
  appEl.innerHTML = `<h1>Runs</h1>
    <form id="importForm"><input id="importPath" /><button type="submit">Import</button></form>
    <ul>${runs.items
      .map((r) => `<li><input type="checkbox" class="pick" data-run="${esc(r.runId)}" /> ${esc(r.topic || r.runId)}</li>`)
      .join('')}</ul>
    <button id="compareBtn" type="button">Compare</button><div id="runsMsg"></div>`;
  document.getElementById('importForm').addEventListener('submit', async (e) => {
    e.preventDefault();
    const p = document.getElementById('importPath').value.trim();
    if (!p) return;
    try {
      const out = await apiPost('/api/runs/import', { path: p });
      location.hash = `#/review/${encodeURIComponent(out.runId)}`;
    } catch (err) {
      document.getElementById('runsMsg').innerHTML = `<div class="error">${esc(err.message)}</div>`;
    }
  });
  document.querySelectorAll('.pick').forEach((el) =>
    el.addEventListener('change', () => {
      const id = el.getAttribute('data-run');
      const i = selected.indexOf(id);
      if (el.checked && i === -1) selected.push(id);
      if (!el.checked && i !== -1) selected.splice(i, 1);
    })
  );
  document.getElementById('compareBtn').addEventListener('click', async () => {
    if (selected.length < 2) return;
    try {
      const out = await apiPost('/api/experiments', {
        name: selected.length === 2 ? 'A/B Compare' : `${selected.length} Video Fleet`,
        baselineRunId: selected[0],
        variants: selected.slice(1).map((runId, i) => ({ label: String.fromCharCode(66 + i), runId })),
      });
      location.hash = `#/compare/${encodeURIComponent(out.experimentId)}`;
    } catch (err) {
      document.getElementById('runsMsg').innerHTML = `<div class="error">${esc(err.message)}</div>`;
    }
  });
}

async function renderReview(runId) {
  const run = await apiGet(`/api/runs/${encodeURIComponent(runId)}`);
  appEl.innerHTML = `<h1>Review</h1><div id="topic">${esc(run.topic || '')}</div>
    <video id="videoReview" controls preload="auto" src="/api/runs/${encodeURIComponent(runId)}/video"></video>
    ${ratingGrid()}<textarea id="notes"></textarea><input id="tags" />
    <button id="submitBtn" type="button">Submit</button><div id="submitMsg"></div>`;
  const msg = document.getElementById('submitMsg');
  document.getElementById('submitBtn').addEventListener('click', async () => {
    const notes = document.getElementById('notes').value.trim();
    const tags = document.getElementById('tags').value.split(',').map((t) => t.trim()).filter(Boolean);
    try {
      await apiPost('/api/feedback', { runId, ratings: readRatings(appEl), notes: notes || undefined, tags: tags.length ? tags : undefined });
      msg.innerHTML = `<div class="success">Submitted. ${oneShotFor('review') ? 'Server will close shortly.' : ''}</div>`;
    } catch (err) {
      msg.innerHTML = `<div class="error">${esc(err.message)}</div>`;
    }
  });
}

async function renderCompare(experimentId) {
  const exp = await apiGet(`/api/experiments/${encodeURIComponent(experimentId)}`);
  const baseline = await apiGet(`/api/runs/${encodeURIComponent(exp.baselineRunId)}`);
  const variants = Array.isArray(exp.variants) ? exp.variants : [];
  const variantRuns = await Promise.all(variants.map((v) => apiGet(`/api/runs/${encodeURIComponent(v.runId)}`)));
  const card = (id, label, run) => `<div class="card"><b>${esc(label)}</b> ${esc(run.topic || '')}
      <video id="${id}" preload="auto" src="/api/runs/${encodeURIComponent(run.runId)}/video"></video></div>`;
  appEl.innerHTML = `<h1>Compare</h1>${card('videoA', 'A (baseline)', baseline)}${variantRuns
    .map((r, i) => card(i === 0 ? 'videoB' : `video${i}`, variants[i].label, r))
    .join('')}<input id="reason" /><button id="submitCompare" type="button">Submit</button><div id="submitMsg"></div>`;
  const msg = document.getElementById('submitMsg');
  document.getElementById('submitCompare').addEventListener('click', async () => {
    const perRun = [{ runId: exp.baselineRunId, variantId: 'baseline', ratings: {} }].concat(
      variants.map((v) => ({ runId: v.runId, variantId: v.variantId, ratings: {} }))
    );
    const winner = variants[0] ? variants[0].variantId : undefined;
    try {
      const out = await apiPost(`/api/experiments/${encodeURIComponent(experimentId)}/submit`, {
        winnerVariantId: winner,
        reason: document.getElementById('reason').value.trim() || undefined,
        answers: undefined,
        perRun,
      });
      msg.innerHTML = `<div class="success">Submitted. feedbackIds: ${esc(out.feedbackIds.join(', '))} ${
        oneShotFor('compare') ? 'Server will close shortly.' : ''
      }</div>`;
    } catch (err) {
      msg.innerHTML = `<div class="error">${esc(err.message)}</div>`;
    }
  });
}

async function renderExperiments() {
  const list = await apiGet('/api/experiments');
  const items = Array.isArray(list.items) ? list.items : [];
  appEl.innerHTML = `<h1>Experiments</h1><table><tbody>${items
    .map(
      (e) => `<tr><td>${esc(e.name)}</td><td>${esc(e.topic || '')}</td><td class="status">${esc(e.status)}</td>
        <td><a href="#/compare/${encodeURIComponent(e.experimentId)}">Open</a></td></tr>`
    )
    .join('')}</tbody></table>`;
}

async function renderRoute() {
  const [page, id] = (location.hash || '#/runs').replace(/^#\/?/, '').split('?')[0].split('/');
  try {
    if (page === 'review' && id) return await renderReview(decodeURIComponent(id));
    if (page === 'compare' && id) return await renderCompare(decodeURIComponent(id));
    if (page === 'experiments') return await renderExperiments();
    return await renderRuns();
  } catch (err) {
    appEl.innerHTML = `<div class="error">${esc(err.message)}</div>`;
  }
}

async function init() {
  try {
    state.config = await apiGet('/api/config');
    state.token = state.config.token;
    document.getElementById('sessionLine').textContent = `session ${state.config.sessionId}`;
    window.addEventListener('hashchange', renderRoute);
    await renderRoute();
  } catch (err) {
    appEl.innerHTML = `<div class="error">${esc(err.message)}</div>`;
  }
}

init();
