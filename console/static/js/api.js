// The console's calls: same origin, the session cookie, the API's error
// envelope turned into an Error with its message and fix.

export class APIError extends Error {
  constructor(status, code, message, fix) {
    super(message);
    this.status = status;
    this.code = code;
    this.fix = fix || '';
  }
}

let onUnauthorized = () => {};
export function setUnauthorized(f) { onUnauthorized = f; }

async function call(method, path, body, reqId) {
  const headers = { Accept: 'application/json' };
  if (body !== undefined) headers['Content-Type'] = 'application/json';
  if (reqId) headers['X-CM-LAB-REQUEST-ID'] = reqId;
  let res;
  try {
    res = await fetch(path, { method, headers, body: body === undefined ? undefined : JSON.stringify(body), credentials: 'same-origin', cache: 'no-store' });
  } catch (e) {
    throw new APIError(0, 'NETWORK', 'the daemon did not answer: ' + e.message, 'Check that the daemon runs (cmlab status); retrying is safe.');
  }
  const text = await res.text();
  let data = null;
  try { data = text ? JSON.parse(text) : null; } catch { data = null; }
  if (!res.ok) {
    const e = (data && data.error) || {};
    if (res.status === 401) onUnauthorized();
    throw new APIError(res.status, e.code || 'HTTP_' + res.status, e.message || text || res.statusText, (e.context && e.context.fix) || '');
  }
  return data;
}

export const get = (path) => call('GET', path);
export const post = (path, body, reqId) => call('POST', path, body || {}, reqId);

export function requestId() {
  return 'console-' + crypto.randomUUID();
}
