// runs.js: the home view. One page of runs at a time (the paging
// extension of GET /api/runs: limit, after, q, sort, unrated), so a home
// of 10,000 runs opens as fast as an empty one; import by path with the
// allowed roots shown and the error's fix inline; pick runs to compare.
import { h, replace, relTime, metricBadges, errorBox, field, shortId } from './dom.js';
import { state, get, submit, newRequestId } from './api.js';
import { setViewKeys } from './keys.js';
import { onLive } from './live.js';
import { exportButton } from './about.js';
import { runsPath, takeServed, elementTiming, firstRowsPainted } from './prefetch.js';

let picked = []; // run ids picked for compare, kept across pages
let firstRowsMarked = false;
let firstRowsDone;
// firstRows resolves once the first rows of the page's first runs view
// are painted (or their answer failed): app.js loads the other views
// after it, so they never compete with the first screenful.
export const firstRows = new Promise((resolve) => { firstRowsDone = resolve; });

// screenRows is how many rows a page of runs builds before its first
// paint: as many as the window's height can show (a row is 45 px high,
// lab.css), so the first screenful is laid out and painted without the
// rows below it, which are added in the task after that paint. Read once,
// here, before the view writes to the page: reading a size later could
// make the browser lay out a half-built page.
const screenRows = Math.max(10, Math.ceil(window.innerHeight / 40));

// afterPaint runs fn in the task after the next frame, that is once what
// the DOM holds now has been painted.
function afterPaint(fn) {
  requestAnimationFrame(() => {
    const ch = new MessageChannel();
    ch.port1.onmessage = fn;
    ch.port2.postMessage(0);
  });
}

// markFirstRows sets the page's first useful paint, the performance mark
// cmlab-first-rows, at the time the browser itself recorded for the paint
// of the first rows (prefetch.js firstRowsPainted: Element Timing). Without
// Element Timing, or for a first answer of no rows drawn by this view
// (timed false: its status line may have been painted before), the mark
// is taken in the task after the next frame.
function markFirstRows(tbody, timed) {
  if (elementTiming && timed) {
    firstRowsPainted.then((p) => {
      performance.mark('cmlab-first-rows', { startTime: p.startTime, detail: { rows: p.rows, filled: p.filled, by: 'element-timing', source: p.source } });
      firstRowsDone();
    });
    return;
  }
  afterPaint(() => {
    const last = tbody.lastElementChild;
    performance.mark('cmlab-first-rows', { detail: { rows: tbody.childElementCount,
      filled: Boolean(last) && last.getBoundingClientRect().bottom >= window.innerHeight } });
    firstRowsDone();
  });
}

export function render(ctx) {
  const q = ctx.route.query;
  const search = q.get('q') || '';
  const sort = q.get('sort') || 'newest';
  const unrated = q.get('unrated') === '1';
  const after = q.get('after') || '';
  const setQuery = (changes) => {
    const p = new URLSearchParams(q);
    for (const [k, v] of Object.entries(changes)) {
      if (v === '' || v === null || v === false) p.delete(k); else p.set(k, v === true ? '1' : v);
    }
    ctx.navigate(`#/runs${p.toString() ? '?' + p : ''}`);
  };

  // --- import ---
  const importPath = h('input', { id: 'importPath', type: 'text', autocomplete: 'off', spellcheck: 'false',
    placeholder: '/abs/path/to/run-dir or /abs/path/to/video.mp4' });
  const importMsg = h('div', { id: 'importMsg', 'aria-live': 'polite' });
  const importBtn = h('button', { class: 'btn btn-primary', type: 'submit' }, 'Import');
  const roots = (state.config && state.config.allowedRoots) || [];
  const importForm = h('form', { id: 'importForm', class: 'import' },
    field('Import a run (its artifacts directory or its .mp4)', importPath),
    importBtn,
    h('div', { class: 'hint', id: 'allowedRoots' }, 'Allowed roots: ',
      roots.length ? roots.map((r, i) => [i ? ', ' : '', h('code', null, r)]) : 'none',
      ' — start the daemon with ', h('code', null, '--allow-root DIR'), ' to add one.'),
    importMsg);
  importForm.addEventListener('submit', async (e) => {
    e.preventDefault();
    const path = importPath.value.trim();
    if (!path) {
      replace(importMsg, errorBox({ message: 'Enter a path to import.' }));
      importPath.focus();
      return;
    }
    importBtn.disabled = true;
    replace(importMsg, h('span', { class: 'muted' }, 'Importing…'));
    try {
      const out = await submit({ requestId: newRequestId(), path: '/api/runs/import', body: { path }, label: `import ${path}` });
      ctx.navigate(`#/review/${encodeURIComponent(out.runId)}`);
    } catch (err) {
      replace(importMsg, errorBox(err));
      importBtn.disabled = false;
    }
  });

  // --- toolbar ---
  const searchIn = h('input', { id: 'runSearch', type: 'search', value: search, placeholder: 'topic, run id or folder' });
  let searchTimer = null;
  searchIn.addEventListener('input', () => {
    clearTimeout(searchTimer);
    searchTimer = setTimeout(() => setQuery({ q: searchIn.value.trim(), after: '' }), 250);
  });
  const sortSel = h('select', { id: 'runSort' },
    [['newest', 'Newest first'], ['oldest', 'Oldest first'], ['topic', 'Topic A–Z'], ['sync', 'Sync rating'],
      ['caption', 'Caption score'], ['score', 'Overall score']].map(([v, t]) => h('option', { value: v, selected: v === sort }, t)));
  sortSel.addEventListener('change', () => setQuery({ sort: sortSel.value === 'newest' ? '' : sortSel.value, after: '' }));
  const unratedBox = h('input', { id: 'runUnrated', type: 'checkbox', checked: unrated });
  unratedBox.addEventListener('change', () => setQuery({ unrated: unratedBox.checked, after: '' }));
  const toolbar = h('div', { class: 'toolbar' },
    field('Search', searchIn), field('Sort', sortSel),
    h('div', { class: 'field field-inline' }, unratedBox, h('label', { for: 'runUnrated' }, 'Unrated only')));

  // --- compare selection ---
  const compareBtn = h('button', { id: 'compareBtn', class: 'btn btn-primary', type: 'button' }, 'Compare selected');
  const pickedLine = h('span', { id: 'pickedLine', class: 'muted' });
  const createSlot = h('div', { id: 'createSlot' });
  const updatePicked = () => {
    pickedLine.textContent = picked.length ? `Selected for compare: ${picked.map(shortId).join(', ')}` : 'Select two or more runs to compare them.';
    compareBtn.disabled = picked.length < 2;
  };
  compareBtn.addEventListener('click', async () => {
    if (picked.length < 2) return;
    // experiments.js is not needed for the first rows: imported on use.
    const { createExperimentForm } = await import('./experiments.js');
    if (!ctx.root.contains(createSlot)) return;
    replace(createSlot, createExperimentForm(picked, ctx, () => { picked = []; }));
    const first = createSlot.querySelector('input');
    if (first) first.focus();
  });
  updatePicked();

  // --- table ---
  const tbody = h('tbody', { id: 'runRows' });
  const status = h('p', { id: 'runsStatus', class: 'muted', 'aria-live': 'polite' }, 'Loading runs…');
  const pager = h('nav', { class: 'pager', 'aria-label': 'Pages of runs' });
  const table = h('table', { class: 'table runs' },
    h('caption', { class: 'sr-only' }, 'Runs'),
    h('thead', null, h('tr', null,
      h('th', { scope: 'col' }, h('span', { class: 'sr-only' }, 'Pick')),
      h('th', { scope: 'col' }, 'Video'),
      h('th', { scope: 'col' }, 'Topic'),
      h('th', { scope: 'col' }, 'Created'),
      h('th', { scope: 'col' }, 'Auto metrics'),
      h('th', { scope: 'col' }, 'Feedback'),
      h('th', { scope: 'col' }, 'Run'))),
    tbody);

  replace(ctx.root,
    h('div', { class: 'head' }, h('h1', null, 'Runs'), h('span', { class: 'head-actions' }, exportButton())),
    importForm, toolbar,
    h('div', { class: 'selbar' }, pickedLine, compareBtn), createSlot,
    h('div', { class: 'table-wrap' }, table), status, pager);

  let items = [];
  let cursor = 0; // keyboard row
  const observer = 'IntersectionObserver' in window ? new IntersectionObserver((entries) => {
    for (const en of entries) {
      if (!en.isIntersecting) continue;
      const cell = en.target;
      observer.unobserve(cell);
      const v = h('video', { class: 'thumb', muted: true, preload: 'metadata', 'aria-hidden': 'true', tabindex: '-1',
        src: `/api/runs/${encodeURIComponent(cell.dataset.run)}/video#t=0.5` });
      v.muted = true;
      cell.replaceChildren(v);
    }
  }) : null;

  const row = (r, i, timed) => {
    const pick = h('input', { type: 'checkbox', class: 'pick', 'data-run': r.runId, checked: picked.includes(r.runId),
      'aria-label': `Pick ${r.topic || r.runId} for compare` });
    pick.addEventListener('change', () => {
      picked = pick.checked ? [...picked.filter((x) => x !== r.runId), r.runId] : picked.filter((x) => x !== r.runId);
      updatePicked();
    });
    const thumb = h('td', { class: 'thumb-cell', 'data-run': r.runId }, r.videoPath ? '' : h('span', { class: 'muted' }, 'no video'));
    if (r.videoPath && observer) observer.observe(thumb);
    const link = h('a', { href: `#/review/${encodeURIComponent(r.runId)}`, class: 'run-link' }, r.topic || '(no topic)');
    const tr = h('tr', { 'data-run': r.runId, 'data-index': i },
      h('td', null, pick), thumb,
      h('td', { class: 'topic', elementtiming: timed ? 'cmlab-first-rows-page' : null }, link),
      h('td', null, relTime(r.createdAt)),
      h('td', null, metricBadges(r.autoMetricsSummary)),
      h('td', null, r.feedbackCount ? `rated ${r.feedbackCount}×` : h('span', { class: 'unrated' }, 'unrated')),
      h('td', { class: 'mono', title: r.runId }, shortId(r.runId)));
    return tr;
  };

  const focusRow = (i) => {
    if (!items.length) return;
    cursor = Math.max(0, Math.min(items.length - 1, i));
    const link = tbody.querySelectorAll('a.run-link')[cursor];
    if (link) link.focus();
  };

  let loading = null;
  let shown = ''; // the answer the rows and the pager show now
  function load() {
    // The answer the server put into the page (labui), taken once by the
    // page's first runs view: no request, and every row is drawn at once,
    // over the server's (app.js takeOver), before render returns.
    const text = takeServed(runsPath(q));
    if (text !== null) {
      loading = null;
      apply(JSON.parse(text), true);
      return;
    }
    const mine = (loading = get(runsPath(q)));
    mine.then((page) => { if (loading === mine) apply(page, false); },
      (err) => { if (loading === mine) { shown = ''; replace(status, errorBox(err)); firstRowsDone(); } });
  }

  function apply(page, served) {
    if (!ctx.root.isConnected) { firstRowsDone(); return; }
    // A reload that brings the same answer (the live stream's resync once
    // it opens, an event about a run on another page) leaves the rows and
    // the pager alone: the link under the user's pointer stays the same
    // element, and the keyboard focus stays put.
    const same = JSON.stringify([page.total, page.nextCursor || '', page.items]);
    // The page's first rows are watched for their paint before they are
    // built (markFirstRows).
    let timed = false;
    if (!firstRowsMarked) {
      firstRowsMarked = true;
      timed = true;
      markFirstRows(tbody, served || page.items.length > 0);
    }
    if (same !== shown) {
      shown = same;
      show(page, served, timed);
    }
    // Each answer applied, changed or not, once all its rows are in (the
    // tests await it).
    if (rest) rest.then(() => performance.mark('cmlab-runs-applied'));
    else performance.mark('cmlab-runs-applied');
  }

  let drawn = 0; // pages of rows drawn: rows still to add to an older one are dropped
  let rest = null; // resolves once the rows after the first screenful are in
  // show draws a page of runs; served: the server's answer, drawn at once
  // over the server's rows; timed: the page's first rows, watched for
  // their paint (markFirstRows).
  function show(page, served, timed) {
    const hadFocus = tbody.contains(document.activeElement);
    items = page.items;
    const mine = ++drawn;
    // Only a view's first rows come in two steps: a redraw of rows on the
    // screen (a live update, a resync) builds them all at once, so the
    // table never shrinks for a frame under a reader scrolled down or a
    // row with keyboard focus; nor do the rows replacing the server's.
    const now = served || hadFocus || tbody.firstChild ? items.length : Math.min(items.length, screenRows);
    const tagged = timed ? Math.min(now, screenRows) : 0;
    replace(tbody, items.slice(0, now).map((r, i) => row(r, i, i < tagged)));
    if (timed && served && !items.length) status.setAttribute('elementtiming', 'cmlab-first-rows-page');
    const all = items;
    // The status line and the pager, below the rows, come with the last row.
    const done = () => {
      const first = after ? 'more ' : '';
      status.textContent = page.total === 0
        ? (search || unrated ? 'No run matches.' : 'No runs yet: import one above, or let an agent import them.')
        : `Showing ${all.length} ${first}of ${page.total} run${page.total === 1 ? '' : 's'}.`;
      const kids = [];
      if (after) kids.push(h('a', { class: 'btn', href: `#/runs?${new URLSearchParams([...q].filter(([k]) => k !== 'after'))}` }, '⇤ First page'));
      if (page.nextCursor) {
        const np = new URLSearchParams(q);
        np.set('after', page.nextCursor);
        kids.push(h('a', { class: 'btn', id: 'nextPage', href: `#/runs?${np}` }, 'Next page →'));
      }
      replace(pager, kids);
    };
    rest = null;
    if (now < all.length) {
      rest = new Promise((resolve) => afterPaint(() => {
        if (mine === drawn && ctx.root.isConnected) {
          tbody.append(...all.slice(now).map((r, j) => row(r, now + j)));
          done();
        }
        resolve();
      }));
    } else {
      done();
    }
    if (hadFocus) focusRow(cursor);
  }
  load();

  let reloadTimer = null;
  const off = onLive((ev) => {
    if (ev.type === 'lab.session.started') return;
    clearTimeout(reloadTimer);
    reloadTimer = setTimeout(load, 150);
  });

  setViewKeys([
    { key: ['j', 'ArrowDown'], desc: 'Next run', fn: () => focusRow(tbody.contains(document.activeElement) ? cursor + 1 : 0) },
    { key: ['k', 'ArrowUp'], desc: 'Previous run', fn: () => focusRow(cursor - 1) },
    { key: 'x', desc: 'Pick the focused run for compare', fn: () => {
      const cb = tbody.querySelectorAll('.pick')[cursor];
      if (cb) { cb.click(); focusRow(cursor); }
    } },
    { key: 'c', desc: 'Compare the picked runs', fn: () => compareBtn.click() },
    { key: '/', desc: 'Search', fn: () => searchIn.focus() },
    { key: 'i', desc: 'Import a run', fn: () => importPath.focus() },
    { key: 'n', desc: 'Next page', fn: () => { const a = document.getElementById('nextPage'); if (a) a.click(); } },
  ]);

  return () => { off(); clearTimeout(reloadTimer); if (observer) observer.disconnect(); };
}
