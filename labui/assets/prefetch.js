// prefetch.js: loaded by its own async module script, before the rest of
// the page's modules are fetched and run: it asks the daemon for the
// config, the health and (on the runs view) the first page of runs at
// once, so the first useful paint waits for one round of requests, not
// for the module graph and then three requests. It imports nothing.

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

function start(path) {
  early.set(path, fetch(path, { cache: 'no-store', headers: { Accept: 'application/json' } }));
}

start('/api/config');
start('/api/health');
const hash = location.hash || '#/runs';
const [route, qs = ''] = hash.replace(/^#/, '').split('?');
if (route === '/runs' || route === '' || route === '/') start(runsPath(new URLSearchParams(qs)));
