package buildinfo

import (
	"fmt"
	"runtime/debug"
	"testing"

	utilversion "k8s.io/apimachinery/pkg/util/version"
)

func TestResolve(t *testing.T) {
	deps := []*debug.Module{{Path: "k8s.io/api", Version: "v0.37.2"}}
	vcs := func(modified string) []debug.BuildSetting {
		return []debug.BuildSetting{
			{Key: "vcs", Value: "git"},
			{Key: "vcs.revision", Value: "ac36842474f9a8b96cdd55f0e899591a27bb2687"},
			{Key: "vcs.time", Value: "2026-11-27T15:09:14Z"},
			{Key: "vcs.modified", Value: modified},
		}
	}
	for _, tc := range []struct {
		name                      string
		stampVersion, stampCommit string
		bi                        *debug.BuildInfo
		want                      Info
	}{
		{"stamped", "v1.2.0-3-gac36842-dirty", "ac36842474f9a8b96cdd55f0e899591a27bb2687-dirty",
			&debug.BuildInfo{Main: debug.Module{Version: "(devel)"}, Deps: deps},
			Info{"v1.2.0-3-gac36842-dirty", "ac36842474f9a8b96cdd55f0e899591a27bb2687-dirty", "v0.37.2"}},
		{"stamp over vcs", "v1.2.0", "abc", &debug.BuildInfo{Main: debug.Module{Version: "(devel)"}, Settings: vcs("false"), Deps: deps},
			Info{"v1.2.0", "abc", "v0.37.2"}},
		{"go install of a release", "", "", &debug.BuildInfo{Main: debug.Module{Version: "v1.2.0"}, Deps: deps},
			Info{"v1.2.0", Unknown, "v0.37.2"}},
		{"go build in a clean checkout", "", "", &debug.BuildInfo{Main: debug.Module{Version: "(devel)"}, Settings: vcs("false"), Deps: deps},
			Info{"v0.0.0-20261127150914-ac36842474f9", "ac36842474f9a8b96cdd55f0e899591a27bb2687", "v0.37.2"}},
		{"go build with changes", "", "", &debug.BuildInfo{Main: debug.Module{Version: "(devel)"}, Settings: vcs("true"), Deps: deps},
			Info{"v0.0.0-20261127150914-ac36842474f9+dirty", "ac36842474f9a8b96cdd55f0e899591a27bb2687-dirty", "v0.37.2"}},
		{"go's own pseudo-version", "", "", &debug.BuildInfo{Main: debug.Module{Version: "v0.0.0-20261127150914-ac36842474f9+dirty"}, Settings: vcs("true"), Deps: deps},
			Info{"v0.0.0-20261127150914-ac36842474f9+dirty", "ac36842474f9a8b96cdd55f0e899591a27bb2687-dirty", "v0.37.2"}},
		{"replaced k8s.io/api", "", "", &debug.BuildInfo{Deps: []*debug.Module{{Path: "k8s.io/api", Version: "v0.37.2", Replace: &debug.Module{Path: "../api", Version: "v0.37.3"}}}},
			Info{Unknown, Unknown, "v0.37.3"}},
		{"nothing known", "", "", &debug.BuildInfo{Main: debug.Module{Version: "(devel)"}}, Info{Unknown, Unknown, Unknown}},
		{"no build info", "", "", nil, Info{Unknown, Unknown, Unknown}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := resolve(tc.stampVersion, tc.stampCommit, tc.bi); got != tc.want {
				t.Errorf("resolve = %+v, want %+v", got, tc.want)
			}
		})
	}
}

// The GitVersion served at /version is a Kubernetes release to clients
// that parse it (kubectl's skew warning uses ParseSemantic), whatever the
// relay's version looks like, and still names the relay's version.
func TestKubeGitVersion(t *testing.T) {
	for _, tc := range []struct {
		in   Info
		want string
	}{
		{Info{"v1.2.0", "abc", "v0.37.2"}, "v1.37.2+canopy-v1.2.0"},
		{Info{"v1.2.0-3-gac36842-dirty", "abc", "v0.38.1"}, "v1.38.1+canopy-v1.2.0-3-gac36842-dirty"},
		{Info{"v0.0.0-20261127150914-ac36842474f9+dirty", "abc", "v0.37.2"}, "v1.37.2+canopy-v0.0.0-20261127150914-ac36842474f9-dirty"},
		{Info{"release/2026_11", "abc", "v0.37.2"}, "v1.37.2+canopy-release-2026-11"},
		{Info{Unknown, Unknown, Unknown}, "v1.37.0+canopy"},
	} {
		got := tc.in.KubeGitVersion()
		if got != tc.want {
			t.Errorf("%+v: KubeGitVersion = %q, want %q", tc.in, got, tc.want)
		}
		v, err := utilversion.ParseSemantic(got)
		if err != nil {
			t.Errorf("%+v: ParseSemantic(%q): %v", tc.in, got, err)
			continue
		}
		if minor, _ := tc.in.Kube(); v.Major() != 1 || fmt.Sprint(v.Minor()) != minor {
			t.Errorf("%q parses as %d.%d, want 1.%s", got, v.Major(), v.Minor(), minor)
		}
	}
}
