// Package buildinfo says what the running binary was built from: its
// version and git commit, and the Kubernetes API version compiled in.
//
// # What it owns
//
//   - The stamp: the Makefile links every relay it builds (make build,
//     make dist, make image) with
//     -ldflags "-X github.com/canopy-dev/canopy/relay/buildinfo.version=V
//     -X github.com/canopy-dev/canopy/relay/buildinfo.commit=C", V from
//     git describe and C from git rev-parse.
//   - The fallback for a binary built without the stamp (go build, go
//     install): what the Go toolchain recorded (runtime/debug.ReadBuildInfo:
//     the module version, or vcs.revision, vcs.time and vcs.modified).
//
// `relay version` prints Get; the root's kube API serves it at /version.
//
// # What it must not do
//
// It imports nothing of Canopy: any package may ask what it was built from.
package buildinfo
