package docs

import (
	"os/exec"
	"slices"
	"strings"
	"testing"
)

// importRule is what a package's documentation promises about what it
// links: no package of the module in or below any folder of avoid ("."
// is the whole module), except pkg itself and those of but.
type importRule struct {
	pkg   string   // the package, by its directory in the module
	avoid []string // folders of the module
	but   []string // packages that may be linked all the same
	why   string
}

// importRules are every import promise that a test holds the module to.
var importRules = []importRule{
	{pkg: "syncer", avoid: []string{"topology/placement", "relay/apiserver", "relay/transport", "relay/server"},
		why: "the edge syncer reaches the root's packages only through what tiers share (relay/layout, relay/store, topology's API and helpers)"},
	{pkg: "relay/server", avoid: []string{"simulations"},
		why: "a production relay does not link the simulator: only cmd/relay (relay simulate) imports simulations/"},
	{pkg: "topology/placement", avoid: []string{"relay/apiserver", "relay/transport"},
		why: "topology/placement/doc.go: it imports neither the kube API server nor the tree transport"},
	{pkg: "topology/inventory", avoid: []string{"relay/apiserver", "relay/transport"},
		why: "topology/inventory/doc.go: it imports neither the kube API server nor the tree transport"},
	{pkg: "topology/summary", avoid: []string{"relay/apiserver", "relay/transport"},
		why: "topology/summary/doc.go: it imports neither the kube API server nor the tree transport"},
	{pkg: "relay/backing", avoid: []string{"relay/apiserver", "relay/transport"},
		why: "relay/backing/doc.go: it imports neither the kube API server nor the tree transport"},
	{pkg: "relay/atomicfile", avoid: []string{"."},
		why: "relay/atomicfile/doc.go: it owns no format and imports nothing of Canopy"},
	{pkg: "relay/console", avoid: []string{"."},
		why: "relay/console/doc.go: it serves assets and decides nothing; the page's data comes from the kube API"},
	{pkg: "test/browser", avoid: []string{"."},
		why: "test/browser/doc.go: any package's tests may drive a browser"},
	{pkg: "test/poll", avoid: []string{"."},
		why: "test/poll/doc.go: every package's tests use it"},
	{pkg: "test/procs", avoid: []string{"."}, but: []string{"test/poll"},
		why: "test/procs/doc.go: the modules under test/ use it without the relay's dependencies"},
}

// TestImportRules checks importRules against what `go list` says each
// package links.
func TestImportRules(t *testing.T) {
	pkgs := make([]string, len(importRules))
	for i, r := range importRules {
		pkgs[i] = r.pkg
	}
	deps := moduleDeps(t, pkgs...)
	for _, r := range importRules {
		for _, d := range r.violations(deps[r.pkg]) {
			t.Errorf("%s links %s (%s)", r.pkg, d, r.why)
		}
	}
}

// TestImportRuleCatches checks that a rule finds a link that exists:
// cmd/relay imports simulations/ for relay simulate.
func TestImportRuleCatches(t *testing.T) {
	r := importRule{pkg: "cmd/relay", avoid: []string{"simulations"}}
	if v := r.violations(moduleDeps(t, r.pkg)[r.pkg]); len(v) == 0 {
		t.Fatal("a rule that cmd/relay avoid simulations/ found nothing")
	}
	whole := importRule{pkg: "test/procs", avoid: []string{"."}}
	if v := whole.violations(moduleDeps(t, whole.pkg)[whole.pkg]); !slices.Equal(v, []string{"test/poll"}) {
		t.Fatalf(`test/procs avoiding the whole module: %q, want [test/poll]`, v)
	}
}

// violations are the packages of deps (module-relative) that r forbids.
func (r importRule) violations(deps []string) []string {
	var bad []string
	for _, d := range deps {
		if d == r.pkg || slices.Contains(r.but, d) {
			continue
		}
		for _, a := range r.avoid {
			if a == "." || d == a || strings.HasPrefix(d, a+"/") {
				bad = append(bad, d)
				break
			}
		}
	}
	return bad
}

// moduleDeps returns, for each of pkgs (directories of the module), the
// packages of the module it links, transitively, by directory.
func moduleDeps(t *testing.T, pkgs ...string) map[string][]string {
	t.Helper()
	args := []string{"list", "-f", `{{.ImportPath}}{{range .Deps}} {{.}}{{end}}`}
	for _, p := range pkgs {
		args = append(args, modulePath+"/"+p)
	}
	cmd := exec.Command("go", args...)
	cmd.Dir = findRoot(t)
	out, err := cmd.Output()
	if err != nil {
		var stderr []byte
		if ee, ok := err.(*exec.ExitError); ok {
			stderr = ee.Stderr
		}
		t.Fatalf("go %s: %v: %s", strings.Join(args, " "), err, stderr)
	}
	deps := map[string][]string{}
	for line := range strings.Lines(string(out)) {
		f := strings.Fields(line)
		if len(f) == 0 {
			continue
		}
		var own []string
		for _, d := range f[1:] {
			if rel, ok := strings.CutPrefix(d, modulePath+"/"); ok {
				own = append(own, rel)
			}
		}
		deps[strings.TrimPrefix(f[0], modulePath+"/")] = own
	}
	return deps
}
