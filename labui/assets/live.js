// live.js: the Lab part of the daemon's event stream (GET /api/events
// with the Lab token). Each event is handed on once, in seq order: the
// stream starts after the seq the page loaded its data at; after a
// dropped connection the browser resumes with Last-Event-ID, and after a
// daemon restart (a new token: the old stream is refused) a new stream
// starts after the last seq seen. No gap, no duplicate.
import { state, on, get } from './api.js';

const TYPES = ['run.imported', 'feedback.submitted', 'feedback.ingested', 'experiment.created',
  'experiment.submitted', 'experiment.updated', 'lab.session.started'];

const handlers = new Set();
let es = null;
let last = 0;
let statusEl = null;
let opened = false;

export function onLive(fn) {
  handlers.add(fn);
  return () => handlers.delete(fn);
}

export function lastSeq() {
  return last;
}

function setStatus(s) {
  if (!statusEl) return;
  const txt = { live: '● live', reconnecting: '◌ reconnecting', paused: '○ paused' }[s] || s;
  statusEl.textContent = txt;
  statusEl.dataset.state = s;
}

function open() {
  if (es) es.close();
  es = new EventSource(`/api/events?token=${encodeURIComponent(state.token)}&since=${last}`);
  es.onopen = () => {
    setStatus('live');
    if (!opened) {
      opened = true;
      // Data the views read before the stream's start seq was known:
      // read it again once, now that nothing after it can be missed.
      for (const fn of [...handlers]) {
        try { fn({ type: 'resync', seq: last }); } catch (e) { console.warn(e); }
      }
    }
  };
  es.onerror = () => {
    if (es.readyState === EventSource.CLOSED) {
      // Refused (a restarted daemon's new token): wait for the API's
      // reachability probe to read the new config, then start again.
      setStatus('reconnecting');
      es.close();
      es = null;
      retry();
    } else {
      setStatus('reconnecting'); // the browser reconnects with Last-Event-ID
    }
  };
  for (const t of TYPES) es.addEventListener(t, deliver);
}

let retryTimer = null;
function retry() {
  if (retryTimer) return;
  retryTimer = setTimeout(async () => {
    retryTimer = null;
    if (es) return; // the API's reachability probe reopened it first
    try {
      const c = await get('/api/config');
      state.token = c.token;
      state.config = c;
      if (!es) open();
    } catch {
      retry();
    }
  }, 1000);
}

function deliver(msg) {
  let ev;
  try { ev = JSON.parse(msg.data); } catch { return; }
  if (!ev || typeof ev.seq !== 'number' || ev.seq <= last) return;
  last = ev.seq;
  for (const fn of [...handlers]) {
    try { fn(ev); } catch (e) { console.warn(e); }
  }
}

// startLive begins after seq (the walIndex the page's first data was read at).
export function startLive(seq, el) {
  statusEl = el;
  last = seq;
  open();
  on('online', () => { if (!es) open(); });
}
