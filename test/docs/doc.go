// Package docs checks that Canopy's reference documents name code that
// exists. It has no code of its own: its tests read docs/architecture.md
// (and the layout table of README.md) and resolve every Go identifier and
// package path written there in backticks against this module's source,
// parsed with go/parser, so a name that moved or was renamed fails the test
// instead of misleading a reader.
//
// What a test takes for a name, in a Markdown code span outside fenced
// blocks:
//
//   - `pkg.Name` or `pkg.Type.Member`, where pkg is the name of one of this
//     module's packages (as in its package clause): Name must be a
//     top-level func, type, var or const of such a package, and Member a
//     method (of Type or *Type), a struct field or an interface method of
//     Type. A trailing "()" is allowed. A leading path
//     (`relay/transport/tree.Sender`) picks the package by its directory.
//   - a path whose first element is one of the module's top-level Go
//     folders (`relay/transport/tree`, `relay/server/summarize.go`): the
//     directory or file must exist.
//
// An unknown package name fails too: it is how a package that was renamed
// or split shows.
//
// It also holds the promises package docs make about what a package links
// ("it imports neither the kube API server nor the tree transport"): one
// table, importRules, checked against `go list`, one row a package.
package docs
