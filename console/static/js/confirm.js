// confirmAction asks before an action, shows the request id it will carry,
// runs it, and shows the API's message and fix inline when it fails. The
// request id is drawn once per dialog, so a retry after a network error
// is the same request.

import { requestId } from './api.js';
import { clear, h } from './dom.js';

export function confirmAction({ title, text, extra, run }) {
  const dlg = document.getElementById('confirm');
  const ok = document.getElementById('confirmOk');
  const err = document.getElementById('confirmError');
  document.getElementById('confirmTitle').textContent = title;
  document.getElementById('confirmText').textContent = text;
  const ex = clear(document.getElementById('confirmExtra'));
  if (extra) ex.append(extra);
  const req = requestId();
  document.getElementById('confirmReq').textContent = 'request id ' + req;
  err.hidden = true;
  ok.disabled = false;
  return new Promise((resolve) => {
    const onOk = async (e) => {
      e.preventDefault();
      ok.disabled = true;
      err.hidden = true;
      try {
        const out = await run(req);
        cleanup();
        dlg.close();
        resolve(out);
      } catch (e2) {
        clear(err);
        err.append(h('strong', {}, e2.code || 'ERROR'), ': ', e2.message, e2.fix ? h('span', { class: 'fix' }, ' — ', e2.fix) : '');
        err.hidden = false;
        ok.disabled = false;
      }
    };
    const onClose = () => { cleanup(); resolve(null); };
    function cleanup() {
      ok.removeEventListener('click', onOk);
      dlg.removeEventListener('close', onClose);
    }
    ok.addEventListener('click', onOk);
    dlg.addEventListener('close', onClose);
    dlg.showModal();
  });
}
