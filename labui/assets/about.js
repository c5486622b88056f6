// about.js: what this daemon is (the page the daemon used to answer at /),
// this session's facts, and the export.
import { h, replace, errorBox } from './dom.js';
import { state, get, submit, newRequestId } from './api.js';
import { setViewKeys } from './keys.js';

// exportButton writes this session's export (POST /api/export) and offers
// the file for download (GET /api/exports/{name}).
export function exportButton() {
  const btn = h('button', { type: 'button', class: 'btn', id: 'exportBtn' }, 'Export session');
  const out = h('span', { id: 'exportMsg', 'aria-live': 'polite' });
  btn.addEventListener('click', async () => {
    btn.disabled = true;
    replace(out, ' Exporting…');
    try {
      const res = await submit({ requestId: newRequestId(), path: '/api/export', label: 'export',
        body: { sessionId: state.config.sessionId } });
      const name = String(res.path).split('/').pop();
      replace(out, ' ', h('a', { href: `/api/exports/${encodeURIComponent(name)}`, download: name, id: 'exportLink' },
        `Download ${name}`), ` (${res.count} feedback entr${res.count === 1 ? 'y' : 'ies'})`);
    } catch (err) {
      replace(out, errorBox(err));
    } finally {
      btn.disabled = false;
    }
  });
  return h('span', { class: 'export' }, btn, out);
}

export function render(ctx) {
  const c = state.config || {};
  const health = h('dd', { id: 'aboutHealth' }, '…');
  replace(ctx.root,
    h('h1', null, 'About this Lab'),
    h('section', { class: 'about' },
      h('p', null, 'This is the Lab of a ', h('strong', null, 'cmlab'), ' daemon: a crash-safe experiment lab and agent terminal over one write-ahead log. ',
        'Every rating you submit is made durable before the page says so; if the daemon is away, your submit waits on this device and is sent, once, when it is back.'),
      h('dl', { class: 'facts' },
        h('dt', null, 'Version'), h('dd', null, c.version || ''),
        h('dt', null, 'Session'), h('dd', { class: 'mono', id: 'aboutSession' }, c.sessionId || ''),
        h('dt', null, 'Mode'), h('dd', null, c.readOnly ? 'read-only (a replayed home: writes are refused)' : 'read-write'),
        h('dt', null, 'Task'), h('dd', null, c.task ? `${c.task.type} ${c.task.runId || c.task.experimentId}` + (c.exitAfterSubmit ? `, the daemon stops after ${c.exitAfterSubmit} submit(s)` : '') : 'none'),
        h('dt', null, 'Import roots'), h('dd', null, (c.allowedRoots || []).map((r) => h('div', { class: 'mono' }, r))),
        h('dt', null, 'Health'), health),
      h('h2', null, 'Export'),
      h('p', null, 'Writes this session’s runs, experiments and feedback to lab/exports/ in the home and offers the file here.'),
      exportButton(),
      h('h2', null, 'The API'),
      h('ul', null,
        h('li', null, h('a', { href: '/api/health' }, '/api/health'), ' — is the log healthy?'),
        h('li', null, h('a', { href: '/api/config' }, '/api/config'), ' — session, version, import roots'),
        h('li', null, h('code', null, '/api/…'), ': the Lab API, wire-compatible with content-machine’s Experiment Lab (their client runs unchanged with ', h('code', null, 'cmlab serve --ui DIR'), ').'),
        h('li', null, 'The terminal, steps, recovery, ', h('code', null, '/metrics'), ' and MCP need the operator token of the home (', h('code', null, 'state/token'), '); the ', h('code', null, 'cmlab'), ' CLI finds the daemon and the token itself.')),
      h('p', null, 'Stop the daemon with ', h('code', null, 'cmlab stop'), '; read its log with ', h('code', null, 'cmlab logs -f'), '. Docs: ',
        h('code', null, 'docs/lab.md'), ', ', h('code', null, 'docs/debugging.md'), ', ', h('code', null, 'docs/metrics.md'), '.')));
  get('/api/health').then((hl) => {
    health.textContent = hl.status === 'ok' ? `ok, log at seq ${hl.walIndex}` : `${hl.status}: ${hl.cause || ''} — ${hl.fix || ''}`;
  }).catch((err) => replace(health, errorBox(err)));
  setViewKeys([]);
  return () => {};
}
