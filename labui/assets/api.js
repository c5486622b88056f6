// api.js: the page's only door to the daemon. GETs and POSTs to the Lab
// routes with the Lab token of /api/config; every submit carries a request
// id and goes through the outbox, which keeps it in localStorage until the
// daemon acknowledges it: a double click, a retry after a network error, a
// reload or a daemon restart in the middle all record it exactly once
// (the daemon answers a repeated request id with its first answer).
import { early } from './prefetch.js';

export const state = { config: null, token: '', online: true };
const listeners = { online: new Set(), offline: new Set(), config: new Set(), outbox: new Set() };

export function on(kind, fn) {
  listeners[kind].add(fn);
  return () => listeners[kind].delete(fn);
}
function emit(kind, arg) {
  for (const fn of [...listeners[kind]]) {
    try { fn(arg); } catch (e) { console.warn(e); }
  }
}

export class ApiError extends Error {
  constructor(status, body) {
    const e = (body && body.error) || {};
    super(e.message || `HTTP ${status}`);
    this.status = status;
    this.code = e.code || 'HTTP_ERROR';
    this.context = e.context || {};
    this.fix = this.context.fix || '';
  }
}

export class NetworkError extends Error {
  constructor() {
    super('The daemon is unreachable');
    this.code = 'UNREACHABLE';
    this.fix = 'Start it again (cmlab serve); this page reconnects by itself.';
  }
}

async function send(path, opts) {
  let res;
  try {
    // A GET prefetch.js started at load is taken once, already read.
    const pre = (!opts.method || opts.method === 'GET') && early.get(path);
    if (pre) early.delete(path);
    res = await (pre || fetch(path, { cache: 'no-store', ...opts })
      .then(async (r) => ({ ok: r.ok, status: r.status, text: await r.text() })));
  } catch {
    goOffline();
    throw new NetworkError();
  }
  let body = null;
  try { body = res.text ? JSON.parse(res.text) : null; } catch { body = null; }
  if (!res.ok) throw new ApiError(res.status, body);
  return body;
}

export function get(path) {
  return send(path, { headers: { Accept: 'application/json' } });
}

export async function loadConfig() {
  const c = await get('/api/config');
  state.config = c;
  state.token = c.token;
  emit('config', c);
  return c;
}

// post sends a write; a 401 (the daemon restarted and drew a new Lab
// token) fetches the config again and retries once with the same request id.
export async function post(path, body, requestId) {
  const attempt = () => send(path, {
    method: 'POST',
    headers: { 'Content-Type': 'application/json', 'X-CM-LAB-TOKEN': state.token,
      ...(requestId ? { 'X-CM-LAB-REQUEST-ID': requestId } : {}) },
    body: JSON.stringify(body || {}),
  });
  try {
    return await attempt();
  } catch (e) {
    if (e instanceof ApiError && e.status === 401) {
      await loadConfig();
      return attempt();
    }
    throw e;
  }
}

export function newRequestId() {
  return (crypto.randomUUID ? crypto.randomUUID() : String(Date.now()) + Math.random().toString(16).slice(2));
}

// --- reachability ---

let probing = null;

function goOffline() {
  if (!state.online) return;
  state.online = false;
  emit('offline');
  probe();
}

// probe polls /api/health (1 s, then up to 5 s apart) until the daemon
// answers, then reads the config again (a restarted daemon has a new
// token and session) and announces it is back.
function probe() {
  if (probing) return;
  probing = (async () => {
    let delay = 1000;
    for (;;) {
      await new Promise((r) => setTimeout(r, delay));
      delay = Math.min(5000, delay + 500);
      try {
        const res = await fetch('/api/health', { cache: 'no-store' });
        if (!res.ok) continue;
        await res.text();
        await loadConfig();
        break;
      } catch {
        // still down
      }
    }
    probing = null;
    state.online = true;
    emit('online');
    flushOutbox();
  })();
}

// --- outbox ---

const OUTBOX = 'cmlab.outbox';

export function outbox() {
  try { return JSON.parse(localStorage.getItem(OUTBOX) || '[]'); } catch { return []; }
}
function saveOutbox(items) {
  localStorage.setItem(OUTBOX, JSON.stringify(items));
  emit('outbox', items);
}

const inflight = new Map(); // requestId → promise

// submit records a write durably in the outbox, then sends it. It
// resolves with the daemon's answer; it rejects with the API's error (the
// entry is dropped: resending would fail the same way) or, when the
// daemon is unreachable, with NetworkError (the entry stays and is sent
// again, with the same request id, once the daemon is back).
export function submit(entry) {
  const e = { at: new Date().toISOString(), ...entry };
  if (!outbox().some((x) => x.requestId === e.requestId)) saveOutbox([...outbox(), e]);
  return deliver(e);
}

function deliver(e) {
  if (inflight.has(e.requestId)) return inflight.get(e.requestId);
  const p = (async () => {
    try {
      const out = await post(e.path, e.body, e.requestId);
      drop(e.requestId, out);
      return out;
    } catch (err) {
      if (err instanceof NetworkError || (err instanceof ApiError && (err.status === 503 || err.code === 'BUSY'))) {
        if (err instanceof ApiError) setTimeout(flushOutbox, 2000);
        throw err;
      }
      drop(e.requestId, null, err);
      throw err;
    } finally {
      inflight.delete(e.requestId);
    }
  })();
  inflight.set(e.requestId, p);
  return p;
}

const acked = new Set();
const ackListeners = new Set();
export function onAck(fn) {
  ackListeners.add(fn);
  return () => ackListeners.delete(fn);
}

function drop(requestId, answer, err) {
  saveOutbox(outbox().filter((x) => x.requestId !== requestId));
  acked.add(requestId);
  for (const fn of [...ackListeners]) {
    try { fn(requestId, answer, err); } catch (e) { console.warn(e); }
  }
}

export function pending(requestId) {
  return inflight.has(requestId) || outbox().some((x) => x.requestId === requestId);
}

// flushOutbox sends every entry a previous page (or a failed attempt) left.
export function flushOutbox() {
  for (const e of outbox()) deliver(e).catch(() => {});
}
