package differential

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	clientfeatures "k8s.io/client-go/features"
	clientfeaturestesting "k8s.io/client-go/features/testing"

	"github.com/canopy-dev/canopy/test/kubecluster"
)

// accepted lists the steps whose outputs differ between the root and
// kube-apiserver 1.37, with what differs. A step listed here must differ
// (the test fails otherwise, so the list stays truthful); every other step
// must be identical. docs/compat.md carries the same table.
var accepted = map[string]string{
	"apply/unknown-field": "known (compat.md, Server-side apply): kube-apiserver 1.37 answers 500 (kubernetes/kubernetes#139253), the root 400 BadRequest; same message",

	"watch/bad-resource-version": `kube answers 500 with an empty reason and a strconv message (a kube quirk); the root 400 BadRequest "invalid resource version "abc""`,

	"crd/create": "the root accepts a CRD's names and establishes it while creating it (no controller runs after the write), so the created CRD already has status NamesAccepted/Established with acceptedNames, and the customresourcecleanup finalizer; kube returns an empty status (acceptedNames kind and plural empty, conditions null), which its controllers fill afterwards, and adds the finalizer only on delete",
	"crd/get":    "the root's CRD carries the customresourcecleanup finalizer (added at create); kube's carries a managedFields entry of manager kube-apiserver (subresource status) for the conditions its controllers wrote, the root does not record its own writes (compat.md)",

	"kubectl/get-raw":                      "the root serializes JSON with sorted keys and no trailing newline; kube in field order (kind, apiVersion, metadata, ...) with a trailing newline",
	"kubectl/explain-deployment-recursive": "kubectl explain --recursive of deployment.spec.strategy: the root's OpenAPI v3 schema for apps/v1 lacks the enum of strategy.type, so the line 'enum: Recreate, RollingUpdate' is missing",
}

// TestDifferential runs the scenario against the root relay's default space
// and against a real kube-apiserver, one after the other, and compares the
// normalized outputs step by step.
func TestDifferential(t *testing.T) {
	if testing.Short() {
		t.Skip("starts etcd, kube-apiserver and a root relay; not run with -short")
	}
	began := time.Now()
	// Informers list through watch-list (sendInitialEvents), as client-go
	// does by default since 1.35; set here so the scenario does not depend
	// on the default.
	clientfeaturestesting.SetFeatureDuringTest(t, clientfeatures.WatchListClient, true)
	bin := kubecluster.Kubectl(t)

	root, err := startRoot(t)
	if err != nil {
		t.Fatalf("root: %v", err)
	}
	kube := startKube(t)
	t.Logf("servers up in %v", time.Since(began).Round(time.Millisecond))

	steps := scenario()
	if err := checkScenario(steps); err != nil {
		t.Fatal(err)
	}
	outRoot := runScenario(t, bin, root, steps)
	outKube := runScenario(t, bin, kube, steps)

	identical := 0
	var report strings.Builder
	for i, st := range steps {
		same := outRoot[i] == outKube[i]
		reason, ok := accepted[st.name]
		switch {
		case same && ok:
			t.Errorf("step %d %s: accepted difference no longer occurs (%s); remove it from the accepted list and docs/compat.md", i+1, st.name, reason)
		case same:
		case ok:
			t.Logf("step %d %s: accepted difference: %s", i+1, st.name, reason)
		default:
			t.Errorf("step %d %s: outputs differ\n%s", i+1, st.name, sideBySide(outRoot[i], outKube[i]))
		}
		if same {
			identical++
		} else {
			fmt.Fprintf(&report, "=== step %d %s (accepted=%v)\n--- root\n%s--- kube\n%s", i+1, st.name, ok, outRoot[i], outKube[i])
		}
	}
	for name := range accepted {
		if !stepNamed(steps, name) {
			t.Errorf("accepted difference %q names no step", name)
		}
	}
	if dir := os.Getenv("DIFFERENTIAL_REPORT"); dir != "" {
		// Both outputs of every step, for a human to read.
		writeReport(t, dir, steps, outRoot, outKube, report.String())
	}
	t.Logf("compared %d steps, %d identical (%d accepted differences) in %v", len(steps), identical, len(accepted), time.Since(began).Round(time.Millisecond))
	checkDocs(t, len(steps), identical)
}

// runScenario runs every step against one target, in order, and returns
// the normalized outputs.
func runScenario(t *testing.T, bin string, tg *target, steps []step) []string {
	t.Helper()
	began := time.Now()
	out := make([]string, len(steps))
	for i, st := range steps {
		ctx, cancel := context.WithTimeout(t.Context(), 45*time.Second)
		tg.warn.take()
		var s string
		if st.call != nil {
			s = st.call(ctx, tg)
			if w := tg.warn.take(); len(w) > 0 {
				s += "warnings:\n"
				for _, m := range w {
					s += "  " + m + "\n"
				}
			}
		} else {
			r := tg.kubectl(ctx, bin, st.stdin, st.args...)
			s = fmt.Sprintf("exit: %d\nstdout:\n%s\nstderr:\n%s\n", r.exit, r.stdout, r.stderr)
		}
		cancel()
		out[i] = tg.normalize(s, st.ages)
	}
	t.Logf("%s: %d steps in %v", tg.name, len(steps), time.Since(began).Round(time.Millisecond))
	return out
}

// checkScenario refuses duplicate or empty step names.
func checkScenario(steps []step) error {
	seen := map[string]bool{}
	for _, st := range steps {
		if st.name == "" || seen[st.name] {
			return fmt.Errorf("step name %q empty or used twice", st.name)
		}
		if (st.call == nil) == (st.args == nil) {
			return fmt.Errorf("step %q must be either a kubectl command or a client-go call", st.name)
		}
		seen[st.name] = true
	}
	return nil
}

func stepNamed(steps []step, name string) bool {
	for _, st := range steps {
		if st.name == name {
			return true
		}
	}
	return false
}

// sideBySide shows two outputs line by line, marking the lines that differ.
func sideBySide(a, b string) string {
	al, bl := strings.Split(a, "\n"), strings.Split(b, "\n")
	var sb strings.Builder
	for i := range max(len(al), len(bl)) {
		var x, y string
		if i < len(al) {
			x = al[i]
		}
		if i < len(bl) {
			y = bl[i]
		}
		if x == y {
			fmt.Fprintf(&sb, "   %s\n", x)
			continue
		}
		fmt.Fprintf(&sb, " root| %s\n kube| %s\n", x, y)
	}
	return sb.String()
}

// writeReport writes every step's two outputs under dir, and the
// differences in one file.
func writeReport(t *testing.T, dir string, steps []step, root, kube []string, diffs string) {
	t.Helper()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Errorf("report: %v", err)
		return
	}
	var all strings.Builder
	for i, st := range steps {
		fmt.Fprintf(&all, "=== step %d %s\n--- root\n%s", i+1, st.name, root[i])
		if root[i] != kube[i] {
			fmt.Fprintf(&all, "--- kube\n%s", kube[i])
		}
	}
	for name, body := range map[string]string{"steps.txt": all.String(), "differences.txt": diffs} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644); err != nil {
			t.Errorf("report: %v", err)
		}
	}
}
