// prefetch.js: loaded by its own async module script, before the rest of
// the page's modules run: it takes the answers of the config, the health
// and (on the runs view) the first page of runs, which the shell's
// <link rel="preload" as="fetch"> lines asked the daemon for at once with
// the style sheet (a fetch of the same path and mode gets the preloaded
// answer, no second request), so the first useful paint waits for one
// round of requests made by the HTML parser, not for the module graph and
// then three requests. A page whose HTML holds the first runs (labui) asks
// not for those, and starts these lines only once its rows are painted
// (route.js). It also watches for the paint of the first rows
// (firstRowsPainted). It imports nothing.

export const early = new Map();

// elementTiming says whether the browser records when elements are
// painted (Element Timing).
export const elementTiming = Boolean(window.PerformanceObserver && (PerformanceObserver.supportedEntryTypes || []).includes('element'));

// firstRowsPainted resolves with the browser's own record of the paint of
// the page's first rows: the rows built first carry an elementtiming on
// their topic cell (the status line of a list with none),
// "cmlab-first-rows" in the server's HTML (labui), "cmlab-first-rows-page"
// when runs.js built them (source: server or page). It is the first frame
// whose rows reach the window's bottom (a row below it or cut by it), or
// else the one that painted the last of them; rows: how many were painted
// by then. Watched from here, the first module to run, because the
// browser keeps no record of elements that left the page before an
// observer was watching (the server's rows, once runs.js replaced them).
export const firstRowsPainted = new Promise((resolve) => {
  if (!elementTiming) return;
  const seen = [];
  const obs = new PerformanceObserver((list) => {
    for (const e of list.getEntries()) if (e.identifier.startsWith('cmlab-first-rows')) seen.push(e);
    if (!seen.length) return;
    seen.sort((a, b) => a.startTime - b.startTime);
    const rows = seen.filter((e) => e.id !== 'runsStatus');
    const fill = rows.find((e) => e.intersectionRect.height === 0 || e.intersectionRect.bottom >= window.innerHeight - 1);
    const painted = seen.filter((e) => e.element && e.element.isConnected).length;
    if (!fill && painted < document.querySelectorAll('[elementtiming^="cmlab-first-rows"]').length) return; // more to come
    obs.disconnect();
    const last = fill || seen[seen.length - 1];
    resolve({ startTime: last.startTime, rows: rows.filter((e) => e.startTime <= last.startTime).length, filled: Boolean(fill),
      source: last.identifier === 'cmlab-first-rows' ? 'server' : 'page' });
  });
  obs.observe({ type: 'element', buffered: true });
});

// runsPath is the runs page's request for a route's query (runs.js asks
// the same path, and then takes this answer instead of asking again).
export function runsPath(query) {
  const p = new URLSearchParams({ limit: '50', sort: query.get('sort') || 'newest' });
  if (query.get('q')) p.set('q', query.get('q'));
  if (query.get('unrated') === '1') p.set('unrated', '1');
  if (query.get('after')) p.set('after', query.get('after'));
  return `/api/runs?${p}`;
}

// early answers are read to the end here, as soon as they arrive, so the
// view that takes one has its data without waiting for a further task
// (and builds its first rows in the same frame as itself).
function read(path) {
  return fetch(path, { cache: 'no-store', headers: { Accept: 'application/json' } })
    .then(async (res) => ({ ok: res.ok, status: res.status, text: await res.text() }));
}

function start(path) {
  const p = read(path);
  p.catch(() => {}); // the taker sees the error
  early.set(path, p);
}

// served is true when the server put the first page of runs (runsPath of
// no query) into the page itself (labui: main's data-runs, rows and all):
// the page does not ask for it then.
const served = document.documentElement.dataset.served === 'runs';

// serve keeps the answer the server put into the page for the first runs
// view, which takes it (takeServed) instead of asking: app.js calls it
// when that view is the first one drawn, with no query.
let servedText = null;
export function serve(text) {
  servedText = text;
}

// takeServed is the answer serve kept, once, for the request path asks.
export function takeServed(path) {
  if (servedText === null || path !== runsPath(new URLSearchParams())) return null;
  const text = servedText;
  servedText = null;
  return text;
}

start('/api/config');
start('/api/health');
const hash = location.hash || '#/runs';
const [route, qs = ''] = hash.replace(/^#/, '').split('?');
const runsNow = route === '/runs' || route === '' || route === '/';
const preloaded = runsPath(new URLSearchParams());
if (runsNow && !(served && runsPath(new URLSearchParams(qs)) === preloaded)) start(runsPath(new URLSearchParams(qs)));
// The shell without rows preloads the default first page of runs
// (index.html); a page opened on another view or query reads it anyway,
// and drops it, so the preload is never left unused (a console warning)
// nor served later as a stale answer.
if (!served && (!runsNow || runsPath(new URLSearchParams(qs)) !== preloaded)) {
  read(preloaded).catch(() => {});
}
