package buildinfo

import (
	"runtime/debug"
	"strings"
	"time"
)

// version and commit are set by the linker (-ldflags -X; see the package
// doc). Empty in a binary built without them.
var (
	version string
	commit  string
)

// Unknown is what Info shows for what neither the stamp nor the build
// info says.
const Unknown = "unknown"

// Info is what a binary was built from.
type Info struct {
	// Version is the relay's version: the stamp (git describe, e.g.
	// v1.2.0 or v1.2.0-3-gabc1234-dirty), else the module version Go
	// recorded (go install ...@v1.2.0), else a pseudo-version made of the
	// commit time and hash (v0.0.0-20260102150405-abcdef123456, +dirty
	// when the tree had changes), else Unknown.
	Version string
	// Commit is the full git commit hash, with -dirty when the tree had
	// uncommitted changes, or Unknown.
	Commit string
	// KubeAPI is the version of k8s.io/api compiled in (v0.37.2 for
	// Kubernetes 1.37.2), or Unknown.
	KubeAPI string
}

// Get returns what this binary was built from.
func Get() Info {
	bi, _ := debug.ReadBuildInfo()
	return resolve(version, commit, bi)
}

// resolve is Get for a given stamp and build info (nil: none).
func resolve(stampVersion, stampCommit string, bi *debug.BuildInfo) Info {
	in := Info{Version: Unknown, Commit: Unknown, KubeAPI: Unknown}
	if bi != nil {
		var rev, at string
		var modified bool
		for _, s := range bi.Settings {
			switch s.Key {
			case "vcs.revision":
				rev = s.Value
			case "vcs.time":
				at = s.Value
			case "vcs.modified":
				modified = s.Value == "true"
			}
		}
		if rev != "" {
			in.Commit = rev
			if modified {
				in.Commit += "-dirty"
			}
		}
		switch {
		case bi.Main.Version != "" && bi.Main.Version != "(devel)":
			in.Version = bi.Main.Version
		case rev != "":
			in.Version = pseudoVersion(rev, at, modified)
		}
		for _, dep := range bi.Deps {
			if dep.Path == "k8s.io/api" {
				if dep.Replace != nil {
					dep = dep.Replace
				}
				in.KubeAPI = dep.Version
			}
		}
	}
	if stampVersion != "" {
		in.Version = stampVersion
	}
	if stampCommit != "" {
		in.Commit = stampCommit
	}
	return in
}

// pseudoVersion is the version Go gives an untagged commit: v0.0.0, the
// commit time in UTC and the first 12 digits of its hash.
func pseudoVersion(rev, at string, modified bool) string {
	stamp := "00010101000000"
	if t, err := time.Parse(time.RFC3339, at); err == nil {
		stamp = t.UTC().Format("20060102150405")
	}
	v := "v0.0.0-" + stamp + "-" + rev[:min(12, len(rev))]
	if modified {
		v += "+dirty"
	}
	return v
}

// Kube is the Kubernetes release whose API types are compiled in:
// k8s.io/api v0.X.Y ships with Kubernetes 1.X.Y. Without build info it is
// the release this module pins (1.37.0).
func (in Info) Kube() (minor, patch string) {
	parts := strings.Split(strings.TrimPrefix(in.KubeAPI, "v0."), ".")
	if in.KubeAPI == Unknown || len(parts) < 2 {
		return "37", "0"
	}
	return parts[0], strings.SplitN(parts[1], "-", 2)[0]
}

// KubeGitVersion is the GitVersion that a kube API in this binary reports
// at /version: the Kubernetes release of its API types, so that clients
// comparing versions (kubectl's skew warning, Helm's kubeVersion) see a
// Kubernetes release, with the relay's version as semver build metadata
// (v1.37.2+canopy-v1.2.0). Characters that semver does not allow there
// become '-'.
func (in Info) KubeGitVersion() string {
	minor, patch := in.Kube()
	v := "v1." + minor + "." + patch + "+canopy"
	if in.Version != Unknown {
		v += "-" + strings.Map(func(r rune) rune {
			if r == '.' || r == '-' || r >= '0' && r <= '9' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' {
				return r
			}
			return '-'
		}, in.Version)
	}
	return v
}
