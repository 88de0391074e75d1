// Package kubeapi serves the Kubernetes-compatible API of a root relay.
//
// It owns the HTTP surface that kubectl and client-go talk to: routing of
// /spaces/<space>/ prefixes (the default space also at /), authentication,
// impersonation and authorization hooks, discovery (aggregated and legacy),
// OpenAPI v2 and v3 documents per space (openapi.go), the verbs (get, list,
// watch, create, update, patch, delete, deletecollection) with kube's
// semantics for uid, generation, finalizers, deletionTimestamp,
// subresources (status, scale, token), validation of the built-in kinds
// written most (validation.go), strict field validation, Table output,
// metav1.Status errors and metrics. Objects are answered in JSON, or in
// protobuf for the kinds of client-go's scheme when the client prefers it
// (protobuf.go, with a cache of encodings by store key and revision). It
// also runs the small controllers that make those semantics whole:
// namespace deletion, garbage collection through ownerReferences and custom
// resource cleanup.
//
// The system space (layout.SystemSpace) is the administrative context:
// it serves the space records as the kind Space (spacesapi.go), whose
// create makes a space (EnsureSpace's contents) and whose delete removes
// one with its objects, and the RBAC that says who may do either.
//
// The views of a workload description space (Config.Views, views.go) are
// served at /spaces/<space>/views/<view>/ and, for one partition, at
// .../views/<view>/partitions/<value>/: each is a read-only API of one
// resource (its discovery, get, list and watch; writes are 405) over the
// objects the view gathers, those of other partitions left out, watches
// included. They are authorized in the space's RBAC as reads of views of
// group edge.canopy.dev: get, list or watch of views named <view> for the
// whole view and every partition, or of views/partitions named
// <view>/<value> for that partition alone; the user's rights on the
// resource itself do not count.
//
// The connect subresources (pods/log, exec, attach, portforward, proxy and
// services/proxy), which kube-apiserver hands on to kubelets, it only
// authorizes and checks as kube-apiserver does (connect.go) before handing
// them to Config.Connect; without one they are not served.
//
// It must not keep state of its own beyond caches: a request reaches the
// objects of its space through a store.Space, the one Config.Space returns
// or by default the embedded store's (Config.Store), and every write goes
// through the Space's Txn so that the log (and Raft) sees it. The space
// records, CustomResourceDefinitions and the controllers work on
// Config.Store. It knows nothing about placement or the relay tree: what
// the tree keeps in a space (a child's mailbox, its reports) reaches it
// only as the Space that Config.Space returns.
//
// Request flow: ServeHTTP → space prefix → authenticate → space lookup →
// impersonate → request info → authorize → handler. Writes of RBAC
// objects also go through the Authorizer's escalation check when it has
// one (EscalationChecker). Handlers read from the Space and write
// with optimistic concurrency, retrying read-modify-write cycles on conflict
// unless the client pinned a resourceVersion.
package kubeapi
