package e2e

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	corev1ac "k8s.io/client-go/applyconfigurations/core/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/canopy-dev/canopy/test/kubecluster"
)

// TestServerSideApply drives `kubectl apply --server-side` against one
// in-process root: create, unchanged re-apply, change, a second manager's
// conflict and --force-conflicts, the migration from client-side apply,
// and a custom resource whose CRD declares a keyed list.
func TestServerSideApply(t *testing.T) {
	t.Parallel()
	r := startRoot(t)
	kubecluster.Kubectl(t)

	runRootTests(t, r, []rootTest{
		{"built-in", testSSABuiltin},
		{"migration", testSSAMigration},
		{"custom-resource", testSSACustomResource},
		{"client-go", testSSAClientGo},
	})
}

// managerEntries lists "manager/operation" of an object's managedFields.
func managerEntries(obj metav1.Object) []string {
	var out []string
	for _, e := range obj.GetManagedFields() {
		out = append(out, e.Manager+"/"+string(e.Operation))
	}
	slices.Sort(out)
	return out
}

func testSSABuiltin(t *testing.T, r *root, cs *kubernetes.Clientset) {
	ctx := t.Context()
	ns := "ssa-builtin"
	createNamespace(t, cs, ns)
	manifest := func(a, image string) string {
		return fmt.Sprintf(`apiVersion: v1
kind: ConfigMap
metadata:
  name: settings
  namespace: %[1]s
data:
  a: %[2]q
  b: "2"
---
apiVersion: apps/v1
kind: Deployment
metadata:
  name: web
  namespace: %[1]s
spec:
  replicas: 1
  selector:
    matchLabels: {app: web}
  template:
    metadata:
      labels: {app: web}
    spec:
      containers:
      - name: app
        image: %[3]s
`, ns, a, image)
	}
	rvs := func() (string, string) {
		cm, err := cs.CoreV1().ConfigMaps(ns).Get(ctx, "settings", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		d, err := cs.AppsV1().Deployments(ns).Get(ctx, "web", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return cm.ResourceVersion, d.ResourceVersion
	}

	out := r.mustKubectlIn(t, manifest("1", "nginx:1.25"), "apply", "--server-side", "-f", "-")
	wantContains(t, "first server-side apply", out, "configmap/settings serverside-applied", "deployment.apps/web serverside-applied")
	cmRV, dRV := rvs()

	// Unchanged: nothing is written.
	r.mustKubectlIn(t, manifest("1", "nginx:1.25"), "apply", "--server-side", "-f", "-")
	if cmRV2, dRV2 := rvs(); cmRV2 != cmRV || dRV2 != dRV {
		t.Errorf("unchanged re-apply wrote: configmap %s -> %s, deployment %s -> %s", cmRV, cmRV2, dRV, dRV2)
	}

	// A change.
	r.mustKubectlIn(t, manifest("2", "nginx:1.27"), "apply", "--server-side", "-f", "-")
	if out := r.mustKubectl(t, "get", "cm", "settings", "-n", ns, "-o", "jsonpath={.data.a}"); out != "2" {
		t.Errorf("after a changed apply: data.a = %q", out)
	}
	if out := r.mustKubectl(t, "get", "deploy", "web", "-n", ns, "-o", "jsonpath={.spec.template.spec.containers[0].image} {.metadata.generation}"); out != "nginx:1.27 2" {
		t.Errorf("after a changed apply: image and generation %q", out)
	}

	// managedFields show with --show-managed-fields only.
	yamlOut := r.mustKubectl(t, "get", "cm", "settings", "-n", ns, "-o", "yaml", "--show-managed-fields")
	wantContains(t, "get --show-managed-fields", yamlOut, "managedFields:", "manager: kubectl", "operation: Apply", "f:a: {}")
	if out := r.mustKubectl(t, "get", "cm", "settings", "-n", ns, "-o", "yaml"); strings.Contains(out, "managedFields") {
		t.Errorf("get -o yaml shows managedFields without --show-managed-fields:\n%s", out)
	}

	// Another manager changing a field kubectl applied conflicts.
	other := fmt.Sprintf("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: settings\n  namespace: %s\ndata:\n  a: \"9\"\n", ns)
	_, err := r.kubectlIn(t, other, nil, "apply", "--server-side", "--field-manager=tuner", "-f", "-")
	if err == nil {
		t.Fatalf("conflicting apply by a second manager succeeded")
	}
	wantContains(t, "conflict", err.Error(), `Apply failed with 1 conflict: conflict with "kubectl": .data.a`, "--force-conflicts")

	out = r.mustKubectlIn(t, other, "apply", "--server-side", "--field-manager=tuner", "--force-conflicts", "-f", "-")
	wantContains(t, "--force-conflicts", out, "configmap/settings serverside-applied")
	cm, err := cs.CoreV1().ConfigMaps(ns).Get(ctx, "settings", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if cm.Data["a"] != "9" || cm.Data["b"] != "2" {
		t.Errorf("after the forced apply: data %v", cm.Data)
	}
	if got := managerEntries(cm); !slices.Equal(got, []string{"kubectl/Apply", "tuner/Apply"}) {
		t.Errorf("managers after the forced apply: %v", got)
	}

	// Server-side dry run.
	dry := strings.ReplaceAll(other, "name: settings", "name: dry")
	wantContains(t, "apply --server-side --dry-run=server", r.mustKubectlIn(t, dry, "apply", "--server-side", "--dry-run=server", "-f", "-"),
		"configmap/dry serverside-applied (server dry run)")
	if _, err := cs.CoreV1().ConfigMaps(ns).Get(ctx, "dry", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("server dry run stored the object: %v", err)
	}
}

// A client-side `kubectl apply`, then `kubectl apply --server-side`:
// kubectl moves the client-side manager's fields to its server-side one,
// so fields dropped from the manifest go, and values the client-side apply
// set change without conflicts.
func testSSAMigration(t *testing.T, r *root, cs *kubernetes.Clientset) {
	ctx := t.Context()
	ns := "ssa-migration"
	createNamespace(t, cs, ns)
	cm := func(data string) string {
		return fmt.Sprintf("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: legacy\n  namespace: %s\ndata:\n%s", ns, data)
	}
	wantContains(t, "client-side apply", r.mustKubectlIn(t, cm("  a: \"1\"\n  b: \"2\"\n"), "apply", "-f", "-"), "configmap/legacy created")
	before, err := cs.CoreV1().ConfigMaps(ns).Get(ctx, "legacy", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got := managerEntries(before); !slices.Equal(got, []string{"kubectl-client-side-apply/Update"}) {
		t.Errorf("managers after a client-side apply: %v", got)
	}

	wantContains(t, "server-side apply after client-side", r.mustKubectlIn(t, cm("  a: \"9\"\n  c: \"3\"\n"), "apply", "--server-side", "-f", "-"),
		"configmap/legacy serverside-applied")
	after, err := cs.CoreV1().ConfigMaps(ns).Get(ctx, "legacy", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if want := map[string]string{"a": "9", "c": "3"}; !mapsEqual(after.Data, want) {
		t.Errorf("after migrating to server-side apply: data %v, want %v", after.Data, want)
	}
	// kubectl keeps the annotation under its own apply manager, and moves
	// the client-side manager's fields to its server-side one.
	if got := managerEntries(after); !slices.Equal(got, []string{"kubectl-last-applied/Apply", "kubectl/Apply"}) {
		t.Errorf("managers after migrating: %v, want [kubectl-last-applied/Apply kubectl/Apply]", got)
	}
	if last := after.Annotations["kubectl.kubernetes.io/last-applied-configuration"]; !strings.Contains(last, `"c":"3"`) {
		t.Errorf("last-applied-configuration not kept up to date by the server-side apply: %q", last)
	}
	// And back: a client-side apply still works on the migrated object.
	wantContains(t, "client-side apply after server-side", r.mustKubectlIn(t, cm("  a: \"9\"\n  c: \"4\"\n"), "apply", "-f", "-"), "configmap/legacy configured")
}

const gearCRD = `apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: gears.ssa.e2e.canopy.dev
spec:
  group: ssa.e2e.canopy.dev
  scope: Namespaced
  names: {plural: gears, singular: gear, kind: Gear, listKind: GearList}
  versions:
  - name: v1
    served: true
    storage: true
    subresources:
      status: {}
    schema:
      openAPIV3Schema:
        type: object
        properties:
          spec:
            type: object
            properties:
              teeth: {type: integer, minimum: 1}
              ports:
                type: array
                x-kubernetes-list-type: map
                x-kubernetes-list-map-keys: [name]
                items:
                  type: object
                  required: [name]
                  properties:
                    name: {type: string}
                    port: {type: integer}
          status:
            type: object
            properties:
              phase: {type: string}
`

func gear(ns, manifestSpec string) string {
	return fmt.Sprintf("apiVersion: ssa.e2e.canopy.dev/v1\nkind: Gear\nmetadata:\n  name: g1\n  namespace: %s\nspec:\n%s", ns, manifestSpec)
}

func testSSACustomResource(t *testing.T, r *root, cs *kubernetes.Clientset) {
	ctx := t.Context()
	ns := "ssa-crd"
	createNamespace(t, cs, ns)
	wantContains(t, "apply CRD", r.mustKubectlIn(t, gearCRD, "apply", "--server-side", "-f", "-"),
		"customresourcedefinition.apiextensions.k8s.io/gears.ssa.e2e.canopy.dev serverside-applied")
	r.mustKubectl(t, "wait", "--for=condition=established", "crd/gears.ssa.e2e.canopy.dev", "--timeout=30s")

	first := gear(ns, "  teeth: 12\n  ports:\n  - {name: http, port: 80}\n")
	wantContains(t, "apply gear", r.mustKubectlIn(t, first, "apply", "--server-side", "-f", "-"), "gear.ssa.e2e.canopy.dev/g1 serverside-applied")
	dc := r.dynamicClient(t, "default")
	gvr := schema.GroupVersionResource{Group: "ssa.e2e.canopy.dev", Version: "v1", Resource: "gears"}
	g, err := dc.Resource(gvr).Namespace(ns).Get(ctx, "g1", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	rv := g.GetResourceVersion()
	r.mustKubectlIn(t, first, "apply", "--server-side", "-f", "-")
	if g, err = dc.Resource(gvr).Namespace(ns).Get(ctx, "g1", metav1.GetOptions{}); err != nil || g.GetResourceVersion() != rv {
		t.Errorf("unchanged re-apply of a custom resource wrote: %v %s -> %s", err, rv, g.GetResourceVersion())
	}

	// A second manager adds a port: the keyed list merges.
	r.mustKubectlIn(t, gear(ns, "  ports:\n  - {name: metrics, port: 9090}\n"), "apply", "--server-side", "--field-manager=monitoring", "-f", "-")
	if out := r.mustKubectl(t, "get", "gear", "g1", "-n", ns, "-o", "jsonpath={.spec.ports[*].name}"); out != "http metrics" {
		t.Errorf("ports after a second manager's apply: %q", out)
	}
	_, err = r.kubectlIn(t, gear(ns, "  ports:\n  - {name: http, port: 8080}\n"), nil, "apply", "--server-side", "--field-manager=monitoring", "-f", "-")
	if err == nil {
		t.Fatalf("conflicting apply on a custom resource succeeded")
	}
	wantContains(t, "custom resource conflict", err.Error(), `conflict with "kubectl": .spec.ports[name="http"].port`)
	r.mustKubectlIn(t, gear(ns, "  ports:\n  - {name: http, port: 8080}\n"), "apply", "--server-side", "--field-manager=monitoring", "--force-conflicts", "-f", "-")
	if out := r.mustKubectl(t, "get", "gear", "g1", "-n", ns, "-o", "jsonpath={.spec.teeth} {.spec.ports[?(@.name==\"http\")].port}"); out != "12 8080" {
		t.Errorf("after the forced apply: %q", out)
	}

	// Status through the status subresource.
	status := fmt.Sprintf("apiVersion: ssa.e2e.canopy.dev/v1\nkind: Gear\nmetadata:\n  name: g1\n  namespace: %s\nstatus:\n  phase: Turning\n", ns)
	r.mustKubectlIn(t, status, "apply", "--server-side", "--subresource=status", "--field-manager=gear-controller", "-f", "-")
	if out := r.mustKubectl(t, "get", "gear", "g1", "-n", ns, "-o", "jsonpath={.status.phase}"); out != "Turning" {
		t.Errorf("status after a status apply: %q", out)
	}
	wantContains(t, "status manager", r.mustKubectl(t, "get", "gear", "g1", "-n", ns, "-o", "yaml", "--show-managed-fields"),
		"manager: gear-controller", "subresource: status")
}

// client-go's typed ApplyConfigurations against the real relay.
func testSSAClientGo(t *testing.T, r *root, cs *kubernetes.Clientset) {
	ctx := t.Context()
	ns := "ssa-client-go"
	createNamespace(t, cs, ns)
	cm, err := cs.CoreV1().ConfigMaps(ns).Apply(ctx, corev1ac.ConfigMap("typed", ns).WithData(map[string]string{"k": "v"}), metav1.ApplyOptions{FieldManager: "e2e"})
	if err != nil {
		t.Fatalf("typed apply: %v", err)
	}
	if cm.Data["k"] != "v" || !slices.Equal(managerEntries(cm), []string{"e2e/Apply"}) {
		t.Errorf("typed apply: data %v managers %v", cm.Data, managerEntries(cm))
	}
	u := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "v1", "kind": "ConfigMap",
		"metadata": map[string]any{"name": "typed", "namespace": ns}, "data": map[string]any{"k": "w"}}}
	_, err = r.dynamicClient(t, "default").Resource(schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}).Namespace(ns).
		Apply(ctx, "typed", u, metav1.ApplyOptions{FieldManager: "other"})
	if !apierrors.IsConflict(err) {
		t.Errorf("dynamic apply over another manager's field: want 409, got %v", err)
	}
}
