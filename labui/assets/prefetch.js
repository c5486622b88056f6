// prefetch.js: loaded by its own async module script, before the rest of
// the page's modules run: it takes the answers of the config, the health
// and (on the runs view) the first page of runs, which the shell's
// <link rel="preload" as="fetch"> lines asked the daemon for at once with
// the style sheet (a fetch of the same path and mode gets the preloaded
// answer, no second request), so the first useful paint waits for one
// round of requests made by the HTML parser, not for the module graph and
// then three requests. It imports nothing.

export const early = new Map();

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

start('/api/config');
start('/api/health');
const hash = location.hash || '#/runs';
const [route, qs = ''] = hash.replace(/^#/, '').split('?');
const runsNow = route === '/runs' || route === '' || route === '/';
if (runsNow) start(runsPath(new URLSearchParams(qs)));
// The shell preloads the default first page of runs (index.html); a page
// opened on another view or query reads it anyway, and drops it, so the
// preload is never left unused (a console warning) nor served later as
// a stale answer.
const preloaded = runsPath(new URLSearchParams());
if (!runsNow || runsPath(new URLSearchParams(qs)) !== preloaded) {
  read(preloaded).catch(() => {});
}
