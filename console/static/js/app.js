// The console's shell: the top bar's health, the hash router (state in the
// URL), keyboard shortcuts, and the login notice.

import { get, setUnauthorized } from './api.js';
import { clear } from './dom.js';
import * as overview from './overview.js';
import * as log from './log.js';
import * as steps from './steps.js';
import * as terminal from './terminal.js';
import * as travel from './travel.js';

const views = { overview, log, trace: log, steps, terminal, travel };
let current = null;

const main = document.getElementById('view');
const loginPanel = document.getElementById('login');

setUnauthorized(() => {
  loginPanel.hidden = false;
  main.hidden = true;
});

function route() {
  const name = (location.hash.replace(/^#\/?/, '').split('?')[0] || 'overview');
  const view = views[name] ? name : 'overview';
  if (current && current.leave) current.leave();
  for (const a of document.querySelectorAll('nav a')) {
    if (a.dataset.view === (view === 'trace' ? 'log' : view)) a.setAttribute('aria-current', 'page');
    else a.removeAttribute('aria-current');
  }
  current = views[view];
  clear(main);
  current.show(main, view);
}

async function health() {
  try {
    const o = await get('/api/console/overview?brief=1');
    const el = document.getElementById('health');
    const ok = o.health.status === 'ok' && !o.health.views;
    el.className = 'health ' + (ok ? 'h-ok' : 'h-bad');
    el.querySelector('.label').textContent = ok ? 'healthy' : (o.health.status === 'ok' ? 'views behind' : 'degraded');
    el.title = o.health.cause || o.health.viewsCause || 'the log makes every write durable';
    document.getElementById('version').textContent = 'v' + o.version;
    document.getElementById('home').textContent = o.home;
  } catch {
    const el = document.getElementById('health');
    el.className = 'health h-unknown';
    el.querySelector('.label').textContent = 'unreachable';
  }
}

window.addEventListener('hashchange', route);

let pendingG = false;
document.addEventListener('keydown', (e) => {
  const t = e.target;
  if (e.ctrlKey || e.metaKey || e.altKey) return;
  if (t && (t.tagName === 'INPUT' || t.tagName === 'TEXTAREA' || t.tagName === 'SELECT' || t.isContentEditable)) return;
  if (document.querySelector('dialog[open]')) return;
  if (pendingG) {
    pendingG = false;
    const to = { o: 'overview', l: 'log', s: 'steps', t: 'terminal', r: 'travel' }[e.key];
    if (to) { location.hash = '#/' + to; e.preventDefault(); }
    return;
  }
  if (e.key === 'g') { pendingG = true; return; }
  if (e.key === '?') { document.getElementById('help').showModal(); e.preventDefault(); return; }
  if (e.key === '/') {
    const f = main.querySelector('input, select');
    if (f) { f.focus(); e.preventDefault(); }
    return;
  }
  if (current && current.key && current.key(e)) e.preventDefault();
});

route();
health();
setInterval(health, 5000);
