// Package resources is the catalogue of built-in Kubernetes resources that
// the root relay serves, and how each one looks to a client: its name, kind,
// scope, verbs, short names, categories, subresources, the Go type behind it,
// the fields a field selector may use, and the table kubectl prints for it.
//
// The catalogue follows a default kube-apiserver of release 1.37: every
// resource of every GA group version (client-go's scheme, k8s.io/api
// v0.37.2), plus CustomResourceDefinitions (apiextensions.k8s.io/v1) and
// APIServices (apiregistration.k8s.io/v1). No beta version is served, because
// kube-apiserver serves none by default since 1.32 (KEP-3136). Each
// group/resource is served at one version, its preferred one
// (autoscaling/v2 for HorizontalPodAutoscalers).
//
// What the package owns:
//
//   - [Info] and [Builtins]/[Lookup]: the static description that discovery,
//     routing, patching and RBAC need.
//   - [TableConvertor]: server-side printing (the Table a kubectl get asks for),
//     computed from the stored JSON the way kube's printers compute it from
//     typed objects. Cells are always the wide set, as kube-apiserver always
//     generates them; kubectl hides the Priority 1 columns unless -o wide.
//   - Field-selector field sets ([Info].Fields) and the scale subresource view
//     ([ScaleFromObject], [ApplyScale]).
//   - [Scheme]: the Go types behind every served kind.
//
// What it must not do: store, watch or validate objects, serve HTTP, or know
// about spaces, links or mailboxes. Everything here is a pure function of its
// arguments or of package-level data that never changes after init, so every
// function and value is safe for concurrent use. Values returned by
// [Builtins], [Lookup] and [Scheme] are shared and must not be modified.
//
// Objects are read as kube-apiserver stores them, that is after defaulting:
// a field that kube always defaults (spec.replicas, a Service's type) prints
// as its zero value if a writer skipped defaulting, exactly as kube's printer
// would print the zero value of its internal type.
package resources
