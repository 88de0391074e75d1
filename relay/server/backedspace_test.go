package server

// Tests of a workload description space backed by a kube-apiserver, from
// the user's side: the kubeconfig of the backing cluster stored as a
// Secret of the root's system space, a Space of backend kube, its Ready
// and Reachable conditions and the root's canopy_space_backend_up; the
// workload written to, and its status read from, the backing cluster.

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"sigs.k8s.io/yaml"

	"github.com/canopy-dev/canopy/relay/backing"
	"github.com/canopy-dev/canopy/relay/layout"
	"github.com/canopy-dev/canopy/relay/pki"
	"github.com/canopy-dev/canopy/test/kubecluster"
	"github.com/canopy-dev/canopy/test/poll"
	edgev1alpha1 "github.com/canopy-dev/canopy/topology/api/v1alpha1"
)

// backedSpaceName is the kube-backed space of these tests, and the name
// of the Secret that holds its backing cluster's kubeconfig.
const backedSpaceName = "wds-kube"

var (
	collectorsGVR = edgev1alpha1.SchemeGroupVersion.WithResource("statuscollectors")
	combinedGVR   = edgev1alpha1.SchemeGroupVersion.WithResource("combinedstatuses")
)

// kubeSpace is the Space of a kube-backed workload description space
// whose backing cluster's kubeconfig is Secret secret of canopy-system.
func kubeSpace(name, secret string) string {
	return fmt.Sprintf("apiVersion: canopy.dev/v1alpha1\nkind: Space\nmetadata: {name: %s}\nspec:\n  kind: wds\n  backend: kube\n  kubeconfigSecret: {name: %s}\n", name, secret)
}

// rootKubectl runs the stock kubectl against root's admin kubeconfig.
func rootKubectl(t testing.TB, root *Root, home, stdin string, args ...string) string {
	t.Helper()
	out, err := kubecluster.RunKubectl(t, home, root.KubeconfigPath(), stdin, nil, args...)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// storeBackingKubeconfig stores a kubeconfig file as Secret name of
// canopy-system in root's system space, as a user does.
func storeBackingKubeconfig(t testing.TB, root *Root, home, name, kubeconfig string) {
	t.Helper()
	rootKubectl(t, root, home, "", "--context=system", "-n", layout.SystemSecretsNamespace,
		"create", "secret", "generic", name, "--from-file=kubeconfig="+kubeconfig)
}

// createKubeSpace stores kubeconfig and creates space name backed by the
// cluster it reaches, with kubectl against root's system space, and waits
// until the space is Ready (kubectl wait) and the admin kubeconfig has its
// context.
func createKubeSpace(t testing.TB, root *Root, home, name, kubeconfig string) {
	t.Helper()
	storeBackingKubeconfig(t, root, home, name, kubeconfig)
	rootKubectl(t, root, home, kubeSpace(name, name), "--context=system", "apply", "-f", "-")
	rootKubectl(t, root, home, "", "--context=system", "wait", "--for=condition="+backing.ConditionReady, "space/"+name, "--timeout=60s")
	poll.Until(t, "the admin kubeconfig to have the context "+name, func() error {
		_, err := pki.ReadKubeconfigForSpace(root.KubeconfigPath(), name)
		return err
	})
}

func dynamicFor(t testing.TB, c *kubecluster.Cluster) dynamic.Interface {
	t.Helper()
	d, err := dynamic.NewForConfig(c.RESTConfig())
	if err != nil {
		t.Fatal(err)
	}
	return d
}

func systemClient(t testing.TB, root *Root) dynamic.Interface {
	t.Helper()
	sys, err := root.spaceClient(layout.SystemSpace)
	if err != nil {
		t.Fatal(err)
	}
	return sys
}

// backedCondition returns condition typ of Space name.
func backedCondition(sys dynamic.Interface, name, typ string) (metav1.Condition, error) {
	u, err := sys.Resource(spacesGVR).Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		return metav1.Condition{}, err
	}
	raw, _, _ := unstructured.NestedSlice(u.Object, "status", "conditions")
	var conds []metav1.Condition
	for _, r := range raw {
		m, ok := r.(map[string]any)
		if !ok {
			return metav1.Condition{}, fmt.Errorf("status.conditions holds %T", r)
		}
		var c metav1.Condition
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(m, &c); err != nil {
			return metav1.Condition{}, fmt.Errorf("a condition of %v: %w", raw, err)
		}
		conds = append(conds, c)
	}
	if c := meta.FindStatusCondition(conds, typ); c != nil {
		return *c, nil
	}
	return metav1.Condition{}, fmt.Errorf("no condition %s in %v", typ, raw)
}

// waitSpaceCondition waits until condition typ of Space name has status,
// and reason unless empty, and returns it.
func waitSpaceCondition(t testing.TB, sys dynamic.Interface, name, typ string, status metav1.ConditionStatus, reason string) metav1.Condition {
	t.Helper()
	var got metav1.Condition
	poll.Until(t, fmt.Sprintf("space %s: %s %s %s", name, typ, status, reason), func() error {
		c, err := backedCondition(sys, name, typ)
		if err != nil {
			return err
		}
		if c.Status != status || reason != "" && c.Reason != reason {
			return fmt.Errorf("%s %s: %s", c.Status, c.Reason, c.Message)
		}
		got = c
		return nil
	}, poll.For(time.Minute))
	return got
}

// backendUp returns the root's canopy_space_backend_up of space name.
func backendUp(t *testing.T, root *Root, name string) (string, error) {
	t.Helper()
	code, text := get(t, root, "/metrics", true)
	if code != http.StatusOK {
		return "", fmt.Errorf("/metrics: %d %s", code, text)
	}
	series := `canopy_space_backend_up{space="` + name + `"}`
	v, ok := metricValue(text, series)
	if !ok {
		return "", fmt.Errorf("no %s in /metrics", series)
	}
	return v, nil
}

// waitReachable waits until Space name's Reachable condition is status
// and the root's canopy_space_backend_up for it is up.
func waitReachable(t *testing.T, root *Root, sys dynamic.Interface, name string, status metav1.ConditionStatus, up string) {
	t.Helper()
	waitSpaceCondition(t, sys, name, backing.ConditionReachable, status, "")
	poll.Until(t, fmt.Sprintf("canopy_space_backend_up{space=%q} %s", name, up), func() error {
		v, err := backendUp(t, root, name)
		if err != nil {
			return err
		}
		if v != up {
			return fmt.Errorf("%s", v)
		}
		return nil
	}, poll.For(time.Minute))
}

// combinedOf returns the rows of the CombinedStatus of object name under
// placement in namespace shop of c (fmt.Sprint of each row's columns) and
// the object's revision it describes.
func combinedOf(c dynamic.Interface, name, placement string) (rows []string, revision string, err error) {
	l, err := c.Resource(combinedGVR).Namespace("shop").List(context.Background(), metav1.ListOptions{})
	if err != nil {
		return nil, "", err
	}
	var seen []string
	for _, it := range l.Items {
		obj, _, _ := unstructured.NestedString(it.Object, "object", "name")
		pl, _, _ := unstructured.NestedString(it.Object, "placement")
		seen = append(seen, it.GetName())
		if obj != name || pl != placement {
			continue
		}
		results, _, _ := unstructured.NestedSlice(it.Object, "results")
		for _, r := range results {
			rs, _, _ := unstructured.NestedSlice(r.(map[string]any), "rows")
			for _, row := range rs {
				cols, _, _ := unstructured.NestedSlice(row.(map[string]any), "columns")
				rows = append(rows, fmt.Sprint(cols))
			}
		}
		revision, _, _ = unstructured.NestedString(it.Object, "observedRevision")
		return rows, revision, nil
	}
	return nil, "", fmt.Errorf("no CombinedStatus of %s under %s among %v", name, placement, seen)
}

// configMapColor reads data.color of ConfigMap shop/settings in c.
func configMapColor(c dynamic.Interface) (string, error) {
	cm, err := c.Resource(cmGVR).Namespace("shop").Get(context.Background(), "settings", metav1.GetOptions{})
	if err != nil {
		return "", err
	}
	color, _, _ := unstructured.NestedString(cm.Object, "data", "color")
	return color, nil
}

// vclusterClient is a client of edge e's virtual cluster.
func vclusterClient(t testing.TB, e *Child) dynamic.Interface {
	t.Helper()
	c, err := dynamic.NewForConfig(e.cluster.RESTConfig())
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// backedWorkload writes into c (a backing cluster) Namespace shop,
// ConfigMap shop/settings (color), the one-replica Deployment shop/web, a
// StatusCollector state (one row per color: destinations, ready
// replicas) and last the EdgePlacement web, which places the ConfigMaps
// and Deployments of shop on every destination labelled app=yes (the
// Location all of inventory, which it also writes).
func backedWorkload(t *testing.T, pt *placementTree, c dynamic.Interface, color string) {
	t.Helper()
	pt.apply(t, pt.inv, edgev1alpha1.LocationsGVR, map[string]any{"apiVersion": "edge.canopy.dev/v1alpha1", "kind": "Location",
		"metadata": map[string]any{"name": "all", "labels": map[string]any{"app": "yes"}},
		"spec":     map[string]any{"instanceSelector": map[string]any{"matchLabels": map[string]any{"app": "yes"}}}})
	pt.apply(t, c, nsGVR, map[string]any{"apiVersion": "v1", "kind": "Namespace", "metadata": map[string]any{"name": "shop"}})
	pt.apply(t, c, cmGVR, map[string]any{"apiVersion": "v1", "kind": "ConfigMap",
		"metadata": map[string]any{"name": "settings", "namespace": "shop"}, "data": map[string]any{"color": color}})
	pt.apply(t, c, deployGVR, webDeployment(1, nil))
	pt.apply(t, c, collectorsGVR, map[string]any{
		"apiVersion": "edge.canopy.dev/v1alpha1", "kind": "StatusCollector", "metadata": map[string]any{"name": "state"},
		"spec": map[string]any{
			"groupBy": []any{map[string]any{"name": "color", "def": `obj.?data.?color.orValue("")`}},
			"combinedFields": []any{
				map[string]any{"name": "destinations", "type": "COUNT"},
				map[string]any{"name": "ready", "type": "SUM", "subject": "obj.?status.?readyReplicas.orValue(0)"}}}})
	pt.apply(t, c, edgev1alpha1.EdgePlacementsGVR, map[string]any{"apiVersion": "edge.canopy.dev/v1alpha1", "kind": "EdgePlacement",
		"metadata": map[string]any{"name": "web"},
		"spec": map[string]any{"locationSelectors": []any{map[string]any{"matchLabels": map[string]any{"app": "yes"}}},
			"downsync": []any{
				map[string]any{"apiGroup": "", "resources": []any{"configmaps"}, "namespaces": []any{"shop"}},
				map[string]any{"apiGroup": "apps", "resources": []any{"deployments"}, "namespaces": []any{"shop"}}},
			"statusCollectors": []any{"state"}}})
}

// backedPlaced is what backedWorkload places on each destination.
var backedPlaced = []string{"configmaps/shop/settings", "deployments/shop/web", "namespaces//shop"}

// A kube-backed space outlives its backing API server going away: the
// Space's Reachable turns False and canopy_space_backend_up 0, and the
// edges keep what the space placed; once the server is back, Reachable
// and the metric return, a change in the backing cluster reaches every
// edge, and the CombinedStatus in the backing cluster follows it.
func TestKubeBackedSpaceSurvivesBackingRestart(t *testing.T) {
	waitBacking := startClustersInBackground(t, kubecluster.Options{Minimal: true})
	pt := startPlacementTree(t, map[string]map[string]string{"e1": {"app": "yes"}, "e2": {"app": "yes"}})
	backend := waitBacking()[0]
	sys := systemClient(t, pt.root)
	createKubeSpace(t, pt.root, t.TempDir(), backedSpaceName, backend.Kubeconfig)
	waitReachable(t, pt.root, sys, backedSpaceName, metav1.ConditionTrue, "1")
	bk := dynamicFor(t, backend)
	ctx := context.Background()

	backedWorkload(t, pt, bk, "blue")
	pt.waitInboxes(t, "both edges to hold what the space places", map[string][]string{"e1": backedPlaced, "e2": backedPlaced})
	edges := map[string]dynamic.Interface{}
	for name, e := range pt.edges {
		edges[name] = vclusterClient(t, e)
	}
	colors := func(want string) func() error {
		return func() error {
			for name, c := range edges {
				if got, err := configMapColor(c); err != nil || got != want {
					return fmt.Errorf("%s: color %q (%v)", name, got, err)
				}
				if _, err := c.Resource(deployGVR).Namespace("shop").Get(ctx, "web", metav1.GetOptions{}); err != nil {
					return fmt.Errorf("%s: %w", name, err)
				}
			}
			return nil
		}
	}
	poll.Until(t, "both virtual clusters to hold settings (blue) and web", colors("blue"))
	combined := func(name string, want []string, revision string) func() error {
		return func() error {
			rows, rev, err := combinedOf(bk, name, "web")
			if err != nil {
				return err
			}
			if !slices.Equal(rows, want) || revision != "" && rev != revision {
				return fmt.Errorf("rows %v at revision %s, want %v at %s", rows, rev, want, revision)
			}
			return nil
		}
	}
	poll.Until(t, "the CombinedStatus of web in the backing cluster: 2 destinations, 2 ready", combined("web", []string{"[ 2 2]"}, ""))
	poll.Until(t, "the CombinedStatus of settings in the backing cluster: blue at 2 destinations", combined("settings", []string{"[blue 2 0]"}, ""))

	// The backing API server goes away.
	stopped := time.Now()
	backend.StopAPIServer()
	waitReachable(t, pt.root, sys, backedSpaceName, metav1.ConditionFalse, "0")
	t.Logf("Reachable False and the metric 0 %v after the stop", time.Since(stopped).Round(time.Millisecond))
	// Nothing is withdrawn, and the space stays Ready (Unreachable is a
	// reason only before the first success): a withdrawal, once the space
	// is known unreachable, would leave the downsync space within a flush
	// and the edges within a pass, well within 5 s.
	poll.Holds(t, "everything placed while the backing cluster is away", 5*time.Second, func() error {
		if c, err := backedCondition(sys, backedSpaceName, backing.ConditionReady); err != nil || c.Status != metav1.ConditionTrue {
			return fmt.Errorf("Ready %s %s: %s (%v)", c.Status, c.Reason, c.Message, err)
		}
		if got := downsyncNames(t, pt.root, "shop"); !slices.Equal(got, []string{"configmaps/settings", "deployments/web", "namespaces/shop"}) {
			return fmt.Errorf("downsync holds %v of the space's", got)
		}
		for name, e := range pt.edges {
			if got := inbox(e); !slices.Equal(got, backedPlaced) {
				return fmt.Errorf("%s holds %v", name, got)
			}
		}
		return colors("blue")()
	})

	// It comes back; a change made there flows again.
	start, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	if err := backend.StartAPIServer(start); err != nil {
		t.Fatal(err)
	}
	started := time.Now()
	waitReachable(t, pt.root, sys, backedSpaceName, metav1.ConditionTrue, "1")
	t.Logf("Reachable True and the metric 1 %v after /readyz", time.Since(started).Round(time.Millisecond))
	pt.apply(t, bk, cmGVR, map[string]any{"apiVersion": "v1", "kind": "ConfigMap",
		"metadata": map[string]any{"name": "settings", "namespace": "shop"}, "data": map[string]any{"color": "green"}})
	green, err := bk.Resource(cmGVR).Namespace("shop").Get(ctx, "settings", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	changed := time.Now()
	poll.Until(t, "both virtual clusters to hold settings green", colors("green"))
	t.Logf("the change at both edges %v after its write", time.Since(changed).Round(time.Millisecond))
	poll.Until(t, "the CombinedStatus of settings in the backing cluster: green at 2 destinations", combined("settings", []string{"[green 2 0]"}, ""))
	t.Logf("its CombinedStatus in the backing cluster %v after its write", time.Since(changed).Round(time.Millisecond))
	poll.Until(t, "the CombinedStatus of web in the backing cluster still 2 ready", combined("web", []string{"[ 2 2]"}, ""))
	// Its observedRevision is the revision of the object where the user
	// reads both, as in an embedded space: the backing cluster's
	// resourceVersion of settings.
	if _, rev, err := combinedOf(bk, "settings", "web"); err != nil || rev != green.GetResourceVersion() {
		t.Errorf("the CombinedStatus of settings in the backing cluster observed revision %q (%v); settings is at resourceVersion %s there",
			rev, err, green.GetResourceVersion())
	}
	if c, err := backedCondition(sys, backedSpaceName, backing.ConditionReady); err != nil || c.Status != metav1.ConditionTrue {
		t.Errorf("Ready after the backing cluster returned: %+v (%v)", c, err)
	}
}

// backendRole is docs/examples/backend-rbac.yaml, the ClusterRole a
// backend's credential needs; without listDeployments, its rule on
// deployments.apps lacks list and watch.
func backendRole(t *testing.T, listDeployments bool) map[string]any {
	t.Helper()
	b, err := os.ReadFile("../../docs/examples/backend-rbac.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var role map[string]any
	if err := yaml.Unmarshal(b, &role); err != nil {
		t.Fatal(err)
	}
	rules, _, _ := unstructured.NestedSlice(role, "rules")
	found := false
	for _, r := range rules {
		r := r.(map[string]any)
		if fmt.Sprint(r["apiGroups"], r["resources"]) != "[apps] [deployments]" {
			continue
		}
		verbs, _ := r["verbs"].([]any)
		if !slices.Contains(verbs, any("list")) || !slices.Contains(verbs, any("watch")) {
			t.Fatalf("backend-rbac.yaml: deployments.apps without list and watch: %v", verbs)
		}
		if !listDeployments {
			verbs = slices.DeleteFunc(slices.Clone(verbs), func(v any) bool { return v == "list" || v == "watch" })
		}
		r["verbs"], found = verbs, true
	}
	if !found {
		t.Fatal("backend-rbac.yaml has no rule for deployments.apps alone")
	}
	role["rules"] = rules
	return role
}

// installWorkloadCRDs applies the edge.canopy.dev workload CRDs in c, as
// a user moving a space there does before its Space points at it, and
// waits until c serves EdgePlacements.
func installWorkloadCRDs(t *testing.T, pt *placementTree, c dynamic.Interface) {
	t.Helper()
	manifests, err := edgev1alpha1.WorkloadCRDs()
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range manifests {
		var obj map[string]any
		if err := yaml.Unmarshal(m, &obj); err != nil {
			t.Fatal(err)
		}
		pt.apply(t, c, crdGVR, obj)
	}
	poll.Until(t, "EdgePlacements served by the backing cluster", func() error {
		_, err := c.Resource(edgev1alpha1.EdgePlacementsGVR).List(context.Background(), metav1.ListOptions{})
		return err
	})
}

// The life of a kube-backed space: bad Spaces are refused (422 naming the
// field) and make nothing; Secrets that reach no cluster (an address where
// nothing listens, not a kubeconfig, a kubeconfig that refers to a file)
// make Spaces not Ready (Unreachable, BadKubeconfig) nor Reachable; a
// Space whose Secret is missing is not Ready (SecretNotFound); credentials (the documented role) that may not list
// what a placement names make it not Ready (Forbidden, naming the
// resource), and nothing of the space is placed, until the backing
// cluster's RBAC allows it; then its objects reach the edges, and deleting
// the Space withdraws them while the backing cluster keeps its own.
func TestKubeBackedSpaceLifecycle(t *testing.T) {
	waitBacking := startClustersInBackground(t, kubecluster.Options{Minimal: true})
	pt := startPlacementTree(t, map[string]map[string]string{"e1": {"app": "yes"}, "e2": {"app": "yes"}})
	backend := waitBacking()[0]
	sys := systemClient(t, pt.root)
	home := t.TempDir()
	ctx := context.Background()

	for _, tc := range []struct {
		name  string
		spec  map[string]any
		field string
	}{
		{"bad-backend", map[string]any{"kind": "wds", "backend": "helm"}, "spec.backend"},
		{"no-secret", map[string]any{"kind": "wds", "backend": "kube"}, "spec.kubeconfigSecret.name"},
		{"no-secret-name", map[string]any{"kind": "wds", "backend": "kube", "kubeconfigSecret": map[string]any{"namespace": layout.SystemSecretsNamespace}}, "spec.kubeconfigSecret.name"},
	} {
		_, err := sys.Resource(spacesGVR).Create(ctx, &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": "canopy.dev/v1alpha1", "kind": "Space", "metadata": map[string]any{"name": tc.name}, "spec": tc.spec}}, metav1.CreateOptions{})
		var st apierrors.APIStatus
		if !errors.As(err, &st) || st.Status().Code != http.StatusUnprocessableEntity || !strings.Contains(err.Error(), tc.field) {
			t.Errorf("Space %s (%v): %v; want 422 naming %s", tc.name, tc.spec, err, tc.field)
		}
		if _, err := sys.Resource(spacesGVR).Get(ctx, tc.name, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
			t.Errorf("Space %s after its refused create: %v, want NotFound", tc.name, err)
		}
	}

	// Secrets that reach no cluster: the Space says why, and its backend
	// is down.
	kc, err := clientcmd.LoadFromFile(backend.Kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	writeKubeconfig := func(edit func(*clientcmdapi.Cluster)) string {
		t.Helper()
		c := kc.DeepCopy()
		for _, cl := range c.Clusters {
			edit(cl)
		}
		path := filepath.Join(t.TempDir(), "kubeconfig")
		if err := clientcmd.WriteToFile(*c, path); err != nil {
			t.Fatal(err)
		}
		return path
	}
	caFile := filepath.Join(t.TempDir(), "ca.crt")
	for _, cl := range kc.Clusters {
		if err := os.WriteFile(caFile, cl.CertificateAuthorityData, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	garbage := filepath.Join(t.TempDir(), "kubeconfig")
	if err := os.WriteFile(garbage, []byte("not: [a kubeconfig"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name, kubeconfig, reason string
	}{
		{"wds-gone", writeKubeconfig(func(c *clientcmdapi.Cluster) { c.Server = "https://" + freeTCPPort(t) }), backing.ReasonUnreachable},
		{"wds-garbage", garbage, backing.ReasonBadKubeconfig},
		// The root reads no files for a backend.
		{"wds-files", writeKubeconfig(func(c *clientcmdapi.Cluster) { c.CertificateAuthorityData, c.CertificateAuthority = nil, caFile }), backing.ReasonBadKubeconfig},
	} {
		storeBackingKubeconfig(t, pt.root, home, tc.name, tc.kubeconfig)
		rootKubectl(t, pt.root, home, kubeSpace(tc.name, tc.name), "--context=system", "apply", "-f", "-")
		c := waitSpaceCondition(t, sys, tc.name, backing.ConditionReady, metav1.ConditionFalse, tc.reason)
		t.Logf("%s: %s %s: %s", tc.name, c.Status, c.Reason, c.Message)
		if v, err := backendUp(t, pt.root, tc.name); v != "0" {
			t.Errorf("%s: canopy_space_backend_up %q (%v), want 0", tc.name, v, err)
		}
		// Reachable is a condition of every backed Space, True or False.
		if r, err := backedCondition(sys, tc.name, backing.ConditionReachable); err != nil || r.Status != metav1.ConditionFalse {
			t.Errorf("%s: Reachable %s %s (%v), want False", tc.name, r.Status, r.Reason, err)
		}
		rootKubectl(t, pt.root, home, "", "--context=system", "delete", "space", tc.name)
	}

	// The backing cluster: Canopy's credential (user canopy) with the
	// documented role less list and watch on deployments, the workload
	// CRDs and a placement that names deployments.
	bk := dynamicFor(t, backend)
	pt.apply(t, bk, gvrClusterRoles, backendRole(t, false))
	pt.apply(t, bk, gvrCRBindings, map[string]any{"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
		"metadata": map[string]any{"name": "canopy-backend"},
		"roleRef":  map[string]any{"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "canopy-backend"},
		"subjects": []any{map[string]any{"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": "canopy"}}})
	installWorkloadCRDs(t, pt, bk)
	backedWorkload(t, pt, bk, "blue")

	// The Secret the Space names does not exist yet.
	rootKubectl(t, pt.root, home, kubeSpace(backedSpaceName, backedSpaceName), "--context=system", "apply", "-f", "-")
	c := waitSpaceCondition(t, sys, backedSpaceName, backing.ConditionReady, metav1.ConditionFalse, backing.ReasonSecretNotFound)
	t.Logf("without its Secret: %s %s: %s", c.Status, c.Reason, c.Message)

	// With it, the credential may not list deployments.
	storeBackingKubeconfig(t, pt.root, home, backedSpaceName, backend.UserKubeconfig(t, "canopy"))
	c = waitSpaceCondition(t, sys, backedSpaceName, backing.ConditionReady, metav1.ConditionFalse, backing.ReasonForbidden)
	t.Logf("without list on deployments: %s %s: %s", c.Status, c.Reason, c.Message)
	if !strings.Contains(c.Message, "list") || !strings.Contains(c.Message, "deployments") {
		t.Errorf("the Forbidden message does not name the verb list and deployments: %q", c.Message)
	}
	// Nothing is placed from a space that is not ready: three placement
	// flushes would have written it into the downsync space.
	poll.Holds(t, "nothing of the space placed while it is Forbidden", 3*time.Second, func() error {
		if got := downsyncNames(t, pt.root, "shop"); len(got) != 0 {
			return fmt.Errorf("downsync holds %v", got)
		}
		return nil
	})

	// The backing cluster's RBAC is fixed: the documented role.
	pt.apply(t, bk, gvrClusterRoles, backendRole(t, true))
	waitSpaceCondition(t, sys, backedSpaceName, backing.ConditionReady, metav1.ConditionTrue, "")
	pt.waitInboxes(t, "both edges to hold what the space places", map[string][]string{"e1": backedPlaced, "e2": backedPlaced})
	for name, e := range pt.edges {
		c := vclusterClient(t, e)
		poll.Until(t, name+"'s virtual cluster to hold settings", func() error {
			_, err := configMapColor(c)
			return err
		})
	}
	poll.Until(t, "the CombinedStatus of web in the backing cluster, written with the documented role", func() error {
		rows, _, err := combinedOf(bk, "web", "web")
		if err != nil {
			return err
		}
		if !slices.Equal(rows, []string{"[ 2 2]"}) {
			return fmt.Errorf("rows %v", rows)
		}
		return nil
	})

	// The root's context of the space is the backing cluster, reached as
	// the root's admin through the role's impersonation.
	poll.Until(t, "the admin kubeconfig to have the context "+backedSpaceName, func() error {
		_, err := pki.ReadKubeconfigForSpace(pt.root.KubeconfigPath(), backedSpaceName)
		return err
	})
	if out := rootKubectl(t, pt.root, home, "", "--context="+backedSpaceName, "get", "deployments", "-n", "shop", "-o", "name"); strings.TrimSpace(out) != "deployment.apps/web" {
		t.Errorf("kubectl --context=%s get deployments -n shop: %q", backedSpaceName, out)
	}

	// The Space goes: what it placed leaves the edges; the backing
	// cluster keeps its objects.
	rootKubectl(t, pt.root, home, "", "--context=system", "delete", "space", backedSpaceName)
	pt.waitInboxes(t, "both edges to lose what the space placed", map[string][]string{})
	for name, e := range pt.edges {
		c := vclusterClient(t, e)
		poll.Until(t, "settings pruned from "+name+"'s virtual cluster", func() error {
			if _, err := configMapColor(c); !apierrors.IsNotFound(err) {
				return fmt.Errorf("settings: %v", err)
			}
			return nil
		})
	}
	if got := downsyncNames(t, pt.root, "shop"); len(got) != 0 {
		t.Errorf("downsync holds %v after the space's deletion", got)
	}
	if _, err := sys.Resource(spacesGVR).Get(ctx, backedSpaceName, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("the deleted Space: %v, want NotFound", err)
	}
	for _, o := range []struct {
		gvr      schema.GroupVersionResource
		ns, name string
	}{{nsGVR, "", "shop"}, {cmGVR, "shop", "settings"}, {deployGVR, "shop", "web"}, {edgev1alpha1.EdgePlacementsGVR, "", "web"}, {collectorsGVR, "", "state"}} {
		if _, err := bk.Resource(o.gvr).Namespace(o.ns).Get(ctx, o.name, metav1.GetOptions{}); err != nil {
			t.Errorf("the backing cluster after the space's deletion: %s %s: %v", o.gvr.Resource, o.name, err)
		}
	}
}
