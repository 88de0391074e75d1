// Package destproxy serves the kube API of every destination at the root:
// `/destinations/<name>/<kube API path>` goes, through every tier, to
// that destination's cluster, and comes back as that cluster answered
// (watches, logs, exec, attach and port-forward included: upgraded
// connections pass through as bytes).
//
// # What it owns
//
//   - [Root], the root's handler of `/destinations/`: it authenticates the
//     user as the root's API does, authorizes the request with RBAC in the
//     inventory space on the `synctargets/proxy` subresource of the
//     destination's SyncTarget (the verb is the HTTP method's, as for
//     kube's proxy subresources), refuses what is not a kube API path or
//     too large a body, writes every request to an audit log (user,
//     destination, verb, path, status, duration), and carries the request
//     over a proxy stream (relay/transport/proxy) with the user's
//     identity. Refusals on the way become kube Statuses: 404 for an
//     unknown destination, 503 for a disconnected one (with when it was
//     last seen), 429 for a link that carries too many streams.
//   - [Edge], an edge's server of the proxy streams that reach it: it
//     serves HTTP on them and passes each request to its cluster
//     (a reverse proxy with the edge's credentials, [ClusterHandler], or a
//     virtual cluster's handler) as the root's user, impersonated with a
//     configurable prefix and groups, so that the cluster's RBAC decides
//     too. The edge's credentials are never lent: every credential or
//     impersonation header a request carries is removed first.
//
// # What it must not do
//
// It does not choose a route or count streams (session.Downlink does, as
// a proxy.Opener) and it stores nothing. It never forwards the root's own
// credentials or a user's token below the root.
package destproxy
