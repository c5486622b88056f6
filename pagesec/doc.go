// Package pagesec holds the security headers every page cmlab embeds (the
// Lab at / and the operator console) is served with, in one place so the
// pages cannot drift apart:
//
//   - Content-Security-Policy: scripts, styles, media and connections from
//     the daemon's own origin only; no inline script or style, no eval, no
//     plugin, no framing (frame-ancestors 'none'), no <base> rewrite, forms
//     post to the daemon only.
//   - X-Content-Type-Options: nosniff, so a run's file served as JSON or
//     video is never run as script.
//   - X-Frame-Options: DENY (for browsers that predate frame-ancestors),
//     Referrer-Policy: no-referrer (a page URL carries run and experiment
//     ids) and Cross-Origin-Opener-Policy: same-origin (no other site's
//     window keeps a handle on the page).
//
// ContentType is the one table of the pages' file types, and NotFound the
// one answer of a path outside /api/ that serves nothing,
// so the Lab page, content-machine's client and the daemon's other
// non-API paths answer a miss byte for byte alike.
//
// It depends on nothing of ours.
package pagesec
