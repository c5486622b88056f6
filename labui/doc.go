// Package labui is cmlab's own Lab page: the browser client people rate,
// compare and export runs with, embedded in the binary and served at / by
// `cmlab serve` (unless --ui DIR names another client).
//
// The page is hand-written ES modules, one per view (runs.js, review.js,
// experiments.js, compare.js, about.js) over a few shared ones (api.js:
// requests, request ids, the outbox of unacknowledged submits; live.js:
// the event stream; dom.js: elements built with textContent only; keys.js:
// shortcuts), one style sheet and one HTML shell. No build step, no
// third-party code. The shell and the assets are answered with the page
// security headers of package pagesec (a CSP without inline script).
//
// The page at / holds the runs view with its first screenful of rows
// (firstrows.go, firstrows.html: the markup runs.js builds, every string
// escaped by html/template) when package labapi hands it the first page
// of runs (labapi.RunsPage), so its first useful paint needs the document
// and lab.css only; runs.js takes the view over once the browser has
// recorded that paint (prefetch.js, Element Timing). route.js, a classic
// script before the body, hides those rows when the address names another
// view, and starts the page's modules, which such a page holds inert
// (template#modules), once the rows are painted, so nothing but the
// document, lab.css and route.js comes before their first frame.
//
// Assets are served under /ui/<version>/, where version is a digest of
// their bytes: the shell names the current version, so an asset can be
// cached for good and a new binary is never mixed with old modules.
//
// The page talks to the Lab routes only, with the Lab token of
// /api/config; it never sees the operator token.
package labui
