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
)

// accepted lists the steps whose outputs differ between the root and
// kube-apiserver 1.37, with what differs. A step listed here must differ
// (the test fails otherwise, so the list stays truthful); every other step
// must be identical. docs/compat.md carries the same table. "Update-path
// managedFields" below means: for Update operations (create, update,
// patch) on built-in kinds, the root records "f:x: {.: {}}" for struct
// fields (spec, strategy, template, template.metadata, template.spec, the
// containers list) and records an empty struct sent by the client
// ("f:spec: {}"), where kube records neither; Apply entries are identical.
var accepted = map[string]string{
	"namespace/create":          "Update-path managedFields: the root records f:spec: {} for the empty spec the client sent",
	"namespace/delete-response": "the root answers 202 with deletionGracePeriodSeconds: 0 on the Terminating namespace; kube answers 200 without deletionGracePeriodSeconds (and Update-path managedFields)",
	"configmap/create-invalid":  "the root reports only the metadata.name error; kube also reports data[bad key!] (all validation errors, two causes)",

	"configmap/list-bad-label-selector": "the root's 400 message repeats its prefix: 'unable to parse requirement: unable to parse requirement: ...'",
	"configmap/list-bad-label-value":    "the root's 400 message repeats its prefix: 'unable to parse requirement: unable to parse requirement: ...'",
	"configmap/list-bad-field-selector": `the root answers "field label not supported: data.a"; kube answers ""data.a" is not a known field selector: only "metadata.name", "metadata.namespace""`,
	"configmap/list-paged":              "the root sets remainingItemCount on a page of a list with a label selector; kube leaves it out whenever a label or field selector is set",
	"configmap/list-bad-continue":       "the root's 400 message lacks kube's 'invalid continue token: ' prefix",
	"configmap/patch-json-test-fails":   "both answer 422 with the generic message; the root adds details {kind: configmaps, name: alpha} and appends ' ( configmaps alpha)' to the message, kube sends details {}",
	"configmap/patch-json-missing-path": "both answer 422 with the generic message; the root adds details {kind: configmaps, name: alpha} and appends ' ( configmaps alpha)' to the message, kube sends details {}",
	"configmap/patch-not-json":          "the root answers 'Invalid JSON Patch', kube 'invalid JSON patch'",

	"deployment/create-defaults":                  "Update-path managedFields (defaults and object identical)",
	"deployment/create-invalid":                   "the root stores a Deployment kube refuses (422: spec.replicas -1, selector not matching the template labels, container without image): apps/v1 Deployment validation is missing",
	"deployment/patch-strategic-add-container":    "Update-path managedFields (merged object identical)",
	"deployment/patch-strategic-delete-directive": "Update-path managedFields (merged object identical)",
	"deployment/patch-merge-replaces-list":        "Update-path managedFields (merged object identical)",
	"deployment/update-status":                    "Update-path managedFields; and kube records the /scale entry without a time (so it sorts first), the root with a time, after the main entry",

	"dry-run/create-exists":                "the root answers a dry-run create of an existing name with the would-be object (201); kube answers 409 AlreadyExists",
	"dry-run/bad-value":                    "dryRun=Bogus: the root answers 400 BadRequest 'Invalid dry run value'; kube 422 Invalid CreateOptions.meta.k8s.io with a FieldValueNotSupported cause on dryRun",
	"delete/precondition-uid":              "the root's 409 has details.kind 'configmaps' and message 'Precondition failed: UID in precondition: X, UID in object meta: Y'; kube's has kind 'ConfigMap' and 'the UID in the precondition (X) does not match the UID in record (Y). The object might have been deleted and then recreated'",
	"delete/precondition-resource-version": "the root's 409 has details.kind 'configmaps' and message 'Precondition failed: ResourceVersion in precondition: ...'; kube's has kind 'ConfigMap' and 'the ResourceVersion in the precondition (X) does not match the ResourceVersion in record (Y). The object might have been modified'",
	"delete/bad-propagation-policy":        "the root answers 400 BadRequest; kube 422 Invalid DeleteOptions.meta.k8s.io with a cause, its supported values also list 'nil'",

	"field-validation/strict-unknown":             `the root's 400 message lacks kube's prefix "ConfigMap in version "v1" cannot be handled as a ConfigMap: "`,
	"field-validation/strict-duplicate-json":      `the root accepts a JSON body with a duplicate field under Strict (201, last value wins); kube answers 400 "strict decoding error: duplicate field "data""`,
	"field-validation/warn-duplicate-json":        `the root sends no warning for a duplicate JSON field; kube warns "duplicate field "data""`,
	"field-validation/strict-duplicate-yaml":      `the root accepts a YAML body with a duplicate key under Strict; kube answers 400 "yaml: unmarshal errors: line 8: key "data" already set in map"`,
	"field-validation/warn-duplicate-yaml":        `the root sends no warning for a duplicate YAML key; kube warns "line 8: key "data" already set in map"`,
	"field-validation/bad-value":                  "fieldValidation=Bogus: the root ignores it (creates, warns as with Warn); kube answers 422 Invalid CreateOptions with a FieldValueNotSupported cause",
	"field-validation/strict-unknown-update":      `the root's 400 message lacks kube's prefix "ConfigMap in version "v1" cannot be handled as a ConfigMap: "`,
	"field-validation/strict-unknown-merge-patch": "the root answers 400 BadRequest 'strict decoding error: unknown field'; kube answers 422 Invalid with a cause on field 'patch' whose message quotes the whole patched object",

	"apply/unknown-field":             "known (compat.md, Server-side apply): kube-apiserver 1.37 answers 500 (kubernetes/kubernetes#139253), the root 400 BadRequest; same message",
	"apply/deployment-scale-conflict": `kube records no managedFields entry for an update of /scale with fieldManager=hpa on an object created by apply, so alice's later apply of spec.replicas succeeds; the root records the hpa entry (subresource scale) and answers 409 "conflict with "hpa" with subresource "scale""`,

	"watch/initial-events-without-bookmarks": "the root refuses sendInitialEvents without allowWatchBookmarks (422); kube 1.37 accepts it and streams the initial ADDED events (without a bookmark)",
	"watch/initial-events-exact":             "both 422 for sendInitialEvents with resourceVersionMatch=Exact; the root has one cause on sendInitialEvents, kube two on resourceVersionMatch (Forbidden, and Unsupported value 'Exact')",
	"watch/bad-resource-version":             `kube answers 500 with an empty reason and a strconv message (a kube quirk); the root 400 BadRequest "invalid resource version "abc""`,

	"crd/create":                     "the root's created CRD already has status NamesAccepted/Established with acceptedNames, and the customresourcecleanup finalizer; kube returns an empty status (acceptedNames kind and plural empty, conditions null) and adds the finalizer only on delete; and Update-path managedFields",
	"crd/get":                        "the root's CRD carries the customresourcecleanup finalizer; kube's carries a managedFields entry of manager kube-apiserver (subresource status) for the conditions, the root does not record its own writes (compat.md); and Update-path managedFields",
	"cr/create-generate-name":        "the root refuses generateName on a custom resource (422 'metadata.name: Required value: name or generateName is required'); kube generates the name",
	"cr/create-unknown-field-strict": `the root's 400 message lacks kube's prefix "Widget in version "v1" cannot be handled as a Widget: "`,
	"cr/patch-strategic-unsupported": "415 message: the root lists accepted media types as a Go slice '[a b c]', kube as 'a, b, c'",
	"cr/delete":                      "the root answers DELETE of a custom resource with the deleted object; kube with a Status (Success, details group/kind/name/uid)",

	"kubectl/get-bad-selector":                "the root's 400 message repeats 'unable to parse requirement: ' (as configmap/list-bad-label-selector)",
	"kubectl/apply-unknown-field-strict":      `the root's 400 message lacks kube's prefix "ConfigMap in version "v1" cannot be handled as a ConfigMap: "`,
	"kubectl/patch-custom-resource-strategic": "415 message: media types as a Go slice (as cr/patch-strategic-unsupported)",
	"kubectl/get-raw":                         "the root serializes JSON with sorted keys and no trailing newline; kube in field order (kind, apiVersion, metadata, ...) with a trailing newline",
	"kubectl/explain-deployment-recursive":    "kubectl explain --recursive of deployment.spec.strategy: the root's OpenAPI v3 schema for apps/v1 lacks the enum of strategy.type, so the line 'enum: Recreate, RollingUpdate' is missing",
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
	bin := kubectlBin(t)

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
