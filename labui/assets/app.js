// app.js: boots the Lab page: reads /api/config (the Lab token), opens the
// live stream, routes #/runs, #/review/RUN, #/experiments, #/compare/EXP
// and #/about (content-machine's deep links work unchanged), and keeps the
// unreachable banner and the outbox line up to date.
import { h, replace, errorBox } from './dom.js';
import { state, get, loadConfig, on, outbox, flushOutbox } from './api.js';
import { installKeys, bindGlobal, setViewKeys } from './keys.js';
import { startLive } from './live.js';
import { runsPath, serve, elementTiming, firstRowsPainted } from './prefetch.js';

const root = document.getElementById('app');
const banner = document.getElementById('banner');
const outboxEl = document.getElementById('outbox');
const healthEl = document.getElementById('health');
// Each view is a module of its own, imported when it is first shown: the
// runs view (which the shell preloads) does not wait for the others; they
// are loaded once the first view is on the screen (loadRest).
const views = {
  runs: () => import('./runs.js'),
  review: () => import('./review.js'),
  experiments: () => import('./experiments.js'),
  compare: () => import('./compare.js'),
  about: () => import('./about.js'),
};
const loaded = {}; // view name → its module, once imported
function loadView(name) {
  return views[name]().then((m) => (loaded[name] = m));
}
let cleanup = null;
let shown = 0; // renders started: a render whose module arrives after a later one started is dropped

function route() {
  const raw = location.hash || '#/runs';
  const [path, qs = ''] = raw.replace(/^#/, '').split('?');
  const parts = path.split('/').filter(Boolean).map((p) => { try { return decodeURIComponent(p); } catch { return p; } });
  return { parts, query: new URLSearchParams(qs) };
}

function navigate(hash) {
  if (location.hash === hash) render();
  else location.hash = hash;
}

async function render() {
  const mine = ++shown;
  if (cleanup) { try { cleanup(); } catch (e) { console.warn(e); } }
  cleanup = null;
  setViewKeys([]);
  const r = route();
  const name = r.parts[0] || 'runs';
  const known = Object.hasOwn(views, name);
  for (const a of document.querySelectorAll('[data-nav]')) {
    if (a.dataset.nav === name || (name === 'review' && a.dataset.nav === 'runs') || (name === 'compare' && a.dataset.nav === 'experiments')) a.setAttribute('aria-current', 'page');
    else a.removeAttribute('aria-current');
  }
  if (!known || ((name === 'review' || name === 'compare') && !r.parts[1])) {
    navigate('#/runs');
    return;
  }
  // A view already imported renders at once, in the hashchange itself:
  // the view left never takes a key meant for the next one.
  let view = loaded[name];
  if (!view) {
    try {
      view = await loadView(name);
    } catch (err) {
      // The daemon went away between the shell and this view's module.
      if (mine === shown) replace(root, h('h1', null, 'cmlab Lab'), errorBox({ code: 'UNREACHABLE', message: `The ${name} view could not be loaded: ${err.message}`, fix: 'Reload the page once the daemon is back.' }));
      return;
    }
    if (mine !== shown) return;
  }
  // The server's rows stay until the browser has recorded their paint
  // (prefetch.js firstRowsPainted), at most a second: rows replaced before
  // the frame that shows them is presented would cost that frame and the
  // record of the first paint. A hidden page paints nothing, and waits not.
  if (root.dataset.runs !== undefined && name === 'runs' && elementTiming && document.visibilityState === 'visible') {
    await Promise.race([firstRowsPainted, new Promise((resolve) => setTimeout(resolve, 1000))]);
    if (mine !== shown) return;
  }
  document.title = `cmlab Lab · ${name}`;
  const restore = takeOver(name, r);
  cleanup = view.render({ root, route: r, navigate }) || null;
  if (restore) restore();
}

// takeOver clears the runs view the server put into the page (labui:
// main's data-runs, the first rows of a bare /) for the first view drawn,
// which fills main again in the same task, so no frame shows neither: the
// runs view with no query takes the server's answer (prefetch.js serve)
// and draws the same rows. What the person did to the server's view
// before is done again to the new one (restore, called once the view is
// drawn; route.js kept the keys and submits): the text typed into a field,
// the runs picked, the focus, a form sent, the shortcut keys pressed.
function takeOver(name, r) {
  const text = root.dataset.runs;
  if (text === undefined) return null;
  delete root.dataset.runs;
  document.documentElement.classList.remove('elsewhere');
  if (name === 'runs' && runsPath(r.query) === runsPath(new URLSearchParams())) serve(text);
  const focused = root.contains(document.activeElement) ? document.activeElement.id : '';
  const typed = [...root.querySelectorAll('input[type=text], input[type=search]')].filter((i) => i.id && i.value).map((i) => [i.id, i.value]);
  const picked = [...root.querySelectorAll('.pick:checked')].map((c) => c.dataset.run);
  const early = window.cmlabEarly || { keys: [], submits: [] };
  root.replaceChildren();
  // Once the view is drawn (the runs view draws the server's answer
  // before its render returns), in the same task: no key comes between.
  return () => {
    for (const [id, value] of typed) {
      const el = document.getElementById(id);
      if (el && !el.value) {
        el.value = value;
        el.dispatchEvent(new Event('input'));
      }
    }
    for (const run of picked) {
      const box = [...root.querySelectorAll('.pick')].find((c) => c.dataset.run === run);
      if (box && !box.checked) box.click();
    }
    const el = focused && document.getElementById(focused);
    if (el) el.focus();
    for (const id of early.submits.splice(0)) {
      const form = document.getElementById(id);
      if (form && form.requestSubmit) form.requestSubmit();
    }
    for (const k of early.keys.splice(0)) document.dispatchEvent(new KeyboardEvent('keydown', { ...k, bubbles: true, cancelable: true }));
  };
}

// loadRest imports the views not shown yet, after the first one is on the
// screen, so going to them later waits for nothing.
function loadRest() {
  const idle = window.requestIdleCallback || ((fn) => setTimeout(fn, 200));
  idle(() => { for (const name of Object.keys(views)) if (!loaded[name]) loadView(name).catch(() => {}); });
}

function showOutbox(items) {
  items = items || outbox();
  outboxEl.hidden = items.length === 0;
  outboxEl.textContent = items.length ? `${items.length} submit${items.length === 1 ? '' : 's'} waiting for the daemon (kept on this device, sent once it answers): ${items.map((i) => i.label || i.path).join('; ')}` : '';
}

function setHealth(text, st) {
  healthEl.textContent = text;
  healthEl.dataset.state = st;
}

async function boot() {
  // The health answer waits for the daemon's view lock (a checkpoint can
  // hold it for a while): the page does not wait for it to paint.
  const healthP = get('/api/health');
  healthP.catch(() => {});
  try {
    await loadConfig();
  } catch (err) {
    replace(root, h('h1', null, 'cmlab Lab'), errorBox(err));
    banner.hidden = false;
    banner.textContent = 'The daemon is unreachable — reconnecting by itself…';
    on('online', () => location.reload());
    return;
  }
  const ver = document.getElementById('version');
  ver.textContent = `v${state.config.version}`;
  ver.title = `session ${state.config.sessionId}`;

  on('offline', () => {
    banner.hidden = false;
    banner.textContent = 'The daemon is unreachable — reconnecting by itself. Submits wait on this device and are sent once it is back.';
    setHealth('✗ unreachable', 'down');
  });
  on('online', () => {
    banner.hidden = true;
    banner.textContent = '';
    setHealth('✓ healthy', 'ok');
  });
  on('outbox', showOutbox);
  showOutbox();

  const dialog = document.getElementById('keysDialog');
  const show = installKeys(dialog, document.getElementById('keysBody'));
  document.getElementById('helpBtn').addEventListener('click', show);
  let g = false;
  bindGlobal('g', 'Then r / e / a: go to Runs, Experiments, About', () => { g = true; setTimeout(() => { g = false; }, 1200); });
  bindGlobal('r', '', () => navigate('#/runs'), { when: () => g, help: false });
  bindGlobal('e', '', () => navigate('#/experiments'), { when: () => g });
  bindGlobal('a', '', () => navigate('#/about'), { when: () => g });

  // A one-shot task opens straight into its review or comparison.
  const task = state.config.task;
  if (task && (!location.hash || location.hash === '#' || location.hash === '#/')) {
    location.replace(task.type === 'compare' ? `#/compare/${encodeURIComponent(task.experimentId)}` : `#/review/${encodeURIComponent(task.runId)}`);
  }
  window.addEventListener('hashchange', render);
  // The runs view as the first: the others wait for its first rows.
  render().then(() => loaded.runs && loaded.runs.firstRows).then(loadRest);
  flushOutbox();
  // The stream starts after the seq the health answer names; the views
  // read their data again once it is open (live.js 'resync'), so nothing
  // that happened between their first read and that seq is missed.
  const live = (health) => {
    setHealth(health.status === 'ok' ? '✓ healthy' : `⚠ ${health.status}`, health.status);
    if (health.status !== 'ok') {
      banner.hidden = false;
      replace(banner, `The daemon is ${health.status}: ${health.cause || ''} `, health.fix ? h('span', null, 'Fix: ', health.fix) : null);
    }
    startLive(health.walIndex || 0, document.getElementById('live'));
  };
  // Never from seq 0 (a long log would all be streamed): without a health
  // answer, wait until the daemon is back and ask again.
  healthP.then(live, () => {
    const off = on('online', () => { off(); get('/api/health').then(live, () => {}); });
  });
}

boot();
