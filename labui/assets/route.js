// route.js: a classic script, run before the body is parsed, of a page
// whose HTML holds the first rows of runs (the runs view of a bare /,
// rendered by the server, labui). The server never sees the part of the
// address after #: one naming another view or other runs (#/review/RUN,
// #/runs?sort=topic) hides those rows before the first paint (lab.css,
// .elsewhere), so they never show until app.js draws the view asked for.
// Until app.js takes the server's view over (app.js takeOver), what a
// person does to it is kept for then (window.cmlabEarly): the keys pressed
// outside a field (the shortcuts: j, x, c, …) and a form's submit, which
// would otherwise send the page away.
//
// It also starts the page's modules, which such a page holds inert
// (template#modules: the preloads, prefetch.js, the first view's modules
// and app.js, as the page without rows names them in its head): once the
// browser has presented the first rows (Element Timing), so their first
// frame does not share the two cores with a dozen requests and the
// modules' evaluation; at once when no such paint is to come (another
// view, a hidden page, a browser without Element Timing), and after a
// second at the latest; never before the document is parsed.
{
  const hash = location.hash;
  if (hash && hash !== '#' && hash !== '#/' && hash !== '#/runs') document.documentElement.classList.add('elsewhere');
  const early = { keys: [], submits: [] };
  window.cmlabEarly = early;
  const served = () => {
    const app = document.getElementById('app');
    return Boolean(app) && app.dataset.runs !== undefined;
  };
  const field = (el) => Boolean(el) && (el.tagName === 'TEXTAREA' || el.tagName === 'SELECT' ||
    (el.tagName === 'INPUT' && !['checkbox', 'radio', 'button', 'submit'].includes(el.type)));
  document.addEventListener('keydown', (e) => {
    if (!served() || field(e.target)) return;
    early.keys.push({ key: e.key, code: e.code, ctrlKey: e.ctrlKey, metaKey: e.metaKey, altKey: e.altKey, shiftKey: e.shiftKey });
  }, true);
  document.addEventListener('submit', (e) => {
    if (!served()) return;
    e.preventDefault();
    if (e.target.id) early.submits.push(e.target.id);
  }, true);
}
{
  const modules = document.getElementById('modules');
  let started = false;
  // Not before the document is parsed: the modules, run as soon as they
  // arrive once inserted, expect the whole page.
  const start = () => {
    if (started || !modules) return;
    started = true;
    const insert = () => document.head.append(modules.content.cloneNode(true));
    if (document.readyState === 'loading') document.addEventListener('DOMContentLoaded', insert, { once: true });
    else insert();
  };
  const timed = window.PerformanceObserver && (PerformanceObserver.supportedEntryTypes || []).includes('element');
  if (!timed || document.visibilityState !== 'visible' || document.documentElement.classList.contains('elsewhere')) {
    start();
  } else {
    const painted = new PerformanceObserver((list) => {
      if (!list.getEntries().some((e) => e.identifier === 'cmlab-first-rows')) return;
      painted.disconnect();
      start();
    });
    painted.observe({ type: 'element', buffered: true });
    setTimeout(() => {
      painted.disconnect();
      start();
    }, 1000);
  }
}
