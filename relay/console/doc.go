// Package console serves Canopy's console: a browser application, built
// from web/ (Vite, Preact, TypeScript; `make console`) into dist/ and
// embedded here at build time, that the root serves at Prefix (/console/).
//
// # What it owns
//
//   - The console's assets (Handler): index.html and the hashed script and
//     stylesheet, with a Content-Security-Policy that lets the page load
//     and call only its own origin (no CDN, no external fonts, nothing
//     inline) and keeps it out of frames.
//   - The application (web/src): a sign-in page that takes a bearer token
//     (or the browser's client certificate), and pages for the relay tree,
//     the placements, CombinedStatuses, a destination (with its pods and
//     logs through the root's destination proxy) and a live feed of
//     changes.
//
// # What it must not do
//
// It reads and decides nothing on the server: the assets are code, the
// same for everyone, and serve without credentials. Every piece of data the
// page shows is a request of the browser to the root's kube API
// (/spaces/<space>/...) or destination proxy (/destinations/<name>/...),
// carrying the user's credentials, so the root authenticates and
// authorizes it as it would kubectl's: what a user sees follows their RBAC
// in each space. The page lists and then watches (no polling). It
// imports nothing of Canopy.
package console
