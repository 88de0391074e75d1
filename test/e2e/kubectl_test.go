package e2e

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/yaml"

	"github.com/canopy-dev/canopy/test/kubecluster"
	"github.com/canopy-dev/canopy/test/poll"
	edgev1alpha1 "github.com/canopy-dev/canopy/topology/api/v1alpha1"
)

// TestKubectl drives the real kubectl binary against one in-process root.
// Subtests are independent (each has its own namespaces) and run in
// parallel.
func TestKubectl(t *testing.T) {
	t.Parallel()
	r := startRoot(t)
	kubecluster.Kubectl(t) // resolve once, on the test goroutine

	runRootTests(t, r, []rootTest{
		{"api-resources", testKubectlAPIResources},
		{"create-apply", testKubectlCreateApply},
		{"get", testKubectlGet},
		{"get-watch", testKubectlGetWatch},
		{"describe", testKubectlDescribe},
		{"edit", testKubectlEdit},
		{"patch", testKubectlPatch},
		{"label-annotate", testKubectlLabelAnnotate},
		{"scale", testKubectlScale},
		{"delete-finalizer", testKubectlDeleteFinalizer},
		{"wait", testKubectlWait},
		{"auth", testKubectlAuth},
		{"crd", testKubectlCRD},
		{"namespace-delete", testKubectlNamespaceDelete},
		{"spaces", testKubectlSpaces},
		{"system-spaces", testKubectlSystemSpaces},
		{"endpoints", testKubectlEndpoints},
	})
}

// mustKubectlIn is kubectlIn that fails the test on error.
func (r *root) mustKubectlIn(t testing.TB, stdin string, args ...string) string {
	t.Helper()
	out, err := r.kubectlIn(t, stdin, nil, args...)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// wantContains fails the test unless out contains every one of subs.
func wantContains(t testing.TB, what, out string, subs ...string) {
	t.Helper()
	for _, s := range subs {
		if !strings.Contains(out, s) {
			t.Errorf("%s: want %q in output:\n%s", what, s, out)
		}
	}
}

// wantMatch fails the test unless out matches every one of the regular
// expressions (multi-line mode).
func wantMatch(t testing.TB, what, out string, res ...string) {
	t.Helper()
	for _, re := range res {
		if !regexp.MustCompile("(?m)" + re).MatchString(out) {
			t.Errorf("%s: want a match for /%s/ in output:\n%s", what, re, out)
		}
	}
}

// lines splits kubectl output into non-empty lines.
func lines(out string) []string {
	var ls []string
	for l := range strings.SplitSeq(strings.TrimSpace(out), "\n") {
		if l = strings.TrimSpace(l); l != "" {
			ls = append(ls, l)
		}
	}
	return ls
}

func deployment(ns, name string, replicas int32, containers ...corev1.Container) *appsv1.Deployment {
	if len(containers) == 0 {
		containers = []corev1.Container{{Name: "app", Image: "nginx:1.25"}}
	}
	labels := map[string]string{"app": name}
	return &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: map[string]string{"app": name}},
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To(replicas),
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec:       corev1.PodSpec{Containers: containers},
			},
		},
	}
}

func configMap(ns, name string, labels, data map[string]string) *corev1.ConfigMap {
	return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: labels}, Data: data}
}

func testKubectlAPIResources(t *testing.T, r *root, _ *kubernetes.Clientset) {
	out := r.mustKubectl(t, "api-resources")
	header := lines(out)[0]
	for _, col := range []string{"NAME", "SHORTNAMES", "APIVERSION", "NAMESPACED", "KIND"} {
		if !strings.Contains(header, col) {
			t.Errorf("api-resources header %q lacks %s", header, col)
		}
	}
	want := []struct{ name, short, apiVersion, namespaced, kind string }{
		{"pods", "po", "v1", "true", "Pod"},
		{"configmaps", "cm", "v1", "true", "ConfigMap"},
		{"namespaces", "ns", "v1", "false", "Namespace"},
		{"deployments", "deploy", "apps/v1", "true", "Deployment"},
		{"replicasets", "rs", "apps/v1", "true", "ReplicaSet"},
		{"customresourcedefinitions", "crd,crds", "apiextensions.k8s.io/v1", "false", "CustomResourceDefinition"},
		{"clusterroles", "", "rbac.authorization.k8s.io/v1", "false", "ClusterRole"},
		{"roles", "", "rbac.authorization.k8s.io/v1", "true", "Role"},
	}
	for _, w := range want {
		var got []string
		for _, l := range lines(out)[1:] {
			f := strings.Fields(l)
			if len(f) == 4 { // no short names
				f = []string{f[0], "", f[1], f[2], f[3]}
			}
			if len(f) == 5 && f[0] == w.name && f[2] == w.apiVersion {
				got = f
			}
		}
		if exp := []string{w.name, w.short, w.apiVersion, w.namespaced, w.kind}; !slices.Equal(got, exp) {
			t.Errorf("api-resources row for %s (%s): got %q, want %q", w.name, w.apiVersion, got, exp)
		}
	}

	names := lines(r.mustKubectl(t, "api-resources", "-o", "name"))
	for _, n := range []string{"pods", "deployments.apps", "customresourcedefinitions.apiextensions.k8s.io", "statefulsets.apps"} {
		if !slices.Contains(names, n) {
			t.Errorf("api-resources -o name lacks %s", n)
		}
	}
	clusterScoped := lines(r.mustKubectl(t, "api-resources", "--namespaced=false", "-o", "name"))
	if !slices.Contains(clusterScoped, "namespaces") || slices.Contains(clusterScoped, "pods") {
		t.Errorf("api-resources --namespaced=false: want namespaces and not pods, got %q", clusterScoped)
	}
	apps := lines(r.mustKubectl(t, "api-resources", "--api-group=apps", "-o", "name"))
	if !slices.Contains(apps, "deployments.apps") || slices.Contains(apps, "pods") {
		t.Errorf("api-resources --api-group=apps: want deployments.apps and not pods, got %q", apps)
	}
	// The "all" category.
	all := lines(r.mustKubectl(t, "api-resources", "--categories=all", "-o", "name"))
	for _, n := range []string{"pods", "services", "deployments.apps", "replicasets.apps"} {
		if !slices.Contains(all, n) {
			t.Errorf("api-resources --categories=all lacks %s: %q", n, all)
		}
	}
	if slices.Contains(all, "configmaps") {
		t.Errorf("configmaps are not in category all: %q", all)
	}
}

func testKubectlCreateApply(t *testing.T, r *root, cs *kubernetes.Clientset) {
	ctx := t.Context()
	ns := "kc-apply"
	wantContains(t, "create namespace", r.mustKubectl(t, "create", "namespace", ns), "namespace/"+ns+" created")

	created := fmt.Sprintf(`apiVersion: v1
kind: ConfigMap
metadata:
  name: created
  namespace: %s
  labels: {app: demo}
data:
  color: blue
`, ns)
	wantContains(t, "create -f -", r.mustKubectlIn(t, created, "create", "-f", "-"), "configmap/created created")
	cm, err := cs.CoreV1().ConfigMaps(ns).Get(ctx, "created", metav1.GetOptions{})
	if err != nil {
		t.Fatalf("get created configmap: %v", err)
	}
	if cm.Data["color"] != "blue" || cm.Labels["app"] != "demo" || cm.UID == "" || cm.ResourceVersion == "" || cm.CreationTimestamp.IsZero() {
		t.Errorf("created configmap: %+v", cm)
	}
	if _, err := r.kubectlIn(t, created, nil, "create", "-f", "-"); err == nil || !strings.Contains(err.Error(), "already exists") {
		t.Errorf("second create: want AlreadyExists, got %v", err)
	}

	manifest := func(data, image string) string {
		return fmt.Sprintf(`apiVersion: v1
kind: ConfigMap
metadata:
  name: applied
  namespace: %[1]s
data:
%[2]s---
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
`, ns, data, image)
	}
	v1 := manifest("  a: \"1\"\n  b: \"2\"\n", "nginx:1.25")
	out := r.mustKubectlIn(t, v1, "apply", "-f", "-")
	wantContains(t, "first apply", out, "configmap/applied created", "deployment.apps/web created")
	out = r.mustKubectlIn(t, v1, "apply", "-f", "-")
	wantContains(t, "identical re-apply", out, "configmap/applied unchanged", "deployment.apps/web unchanged")

	// Someone else adds a label between applies: a three-way merge keeps it.
	if _, err := cs.CoreV1().ConfigMaps(ns).Patch(ctx, "applied", types.MergePatchType, []byte(`{"metadata":{"labels":{"owner":"other"}}}`), metav1.PatchOptions{}); err != nil {
		t.Fatalf("add label: %v", err)
	}
	v2 := manifest("  a: \"1\"\n  c: \"3\"\n", "nginx:1.27")
	out = r.mustKubectlIn(t, v2, "apply", "-f", "-")
	wantContains(t, "changed re-apply", out, "configmap/applied configured", "deployment.apps/web configured")
	cm, err = cs.CoreV1().ConfigMaps(ns).Get(ctx, "applied", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if want := map[string]string{"a": "1", "c": "3"}; !mapsEqual(cm.Data, want) {
		t.Errorf("after re-apply: data %v, want %v (b removed by the three-way merge)", cm.Data, want)
	}
	if cm.Labels["owner"] != "other" {
		t.Errorf("after re-apply: label owner=other set by another writer was lost: %v", cm.Labels)
	}
	if last := cm.Annotations["kubectl.kubernetes.io/last-applied-configuration"]; !strings.Contains(last, `"c":"3"`) {
		t.Errorf("last-applied-configuration not updated: %q", last)
	}
	d, err := cs.AppsV1().Deployments(ns).Get(ctx, "web", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if img := d.Spec.Template.Spec.Containers[0].Image; img != "nginx:1.27" {
		t.Errorf("deployment image after re-apply: %s", img)
	}
	if d.Generation != 2 {
		t.Errorf("deployment generation after one spec change: %d, want 2", d.Generation)
	}

	// Server-side dry run stores nothing.
	dry := strings.ReplaceAll(created, "name: created", "name: dry")
	wantContains(t, "apply --dry-run=server", r.mustKubectlIn(t, dry, "apply", "--dry-run=server", "-f", "-"), "configmap/dry created (server dry run)")
	if _, err := cs.CoreV1().ConfigMaps(ns).Get(ctx, "dry", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("server dry run stored the object: %v", err)
	}
	r.mustKubectl(t, "delete", "configmap", "created", "-n", ns, "--dry-run=server")
	if _, err := cs.CoreV1().ConfigMaps(ns).Get(ctx, "created", metav1.GetOptions{}); err != nil {
		t.Errorf("server dry-run delete deleted the object: %v", err)
	}

	// Generators.
	wantContains(t, "create deployment", r.mustKubectl(t, "create", "deployment", "hello", "-n", ns, "--image=nginx:1.25", "--replicas=2"), "deployment.apps/hello created")
	wantContains(t, "create configmap", r.mustKubectl(t, "create", "configmap", "lit", "-n", ns, "--from-literal=k=v"), "configmap/lit created")
	wantContains(t, "create secret", r.mustKubectl(t, "create", "secret", "generic", "sec", "-n", ns, "--from-literal=p=s3cret"), "secret/sec created")
	sec, err := cs.CoreV1().Secrets(ns).Get(ctx, "sec", metav1.GetOptions{})
	if err != nil || string(sec.Data["p"]) != "s3cret" || sec.Type != corev1.SecretTypeOpaque {
		t.Errorf("created secret: %+v %v", sec, err)
	}
	if out := r.mustKubectl(t, "get", "deploy", "hello", "-n", ns, "-o", "jsonpath={.spec.replicas} {.spec.template.spec.containers[0].image}"); out != "2 nginx:1.25" {
		t.Errorf("created deployment: %q", out)
	}

	// delete -f - deletes what the manifest names.
	out = r.mustKubectlIn(t, v2, "delete", "-f", "-")
	wantContains(t, "delete -f -", out, `configmap "applied" deleted`, `deployment.apps "web" deleted`)
	if _, err := cs.AppsV1().Deployments(ns).Get(ctx, "web", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("after delete -f: %v", err)
	}
}

func mapsEqual(a, b map[string]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if bv, ok := b[k]; !ok || bv != v {
			return false
		}
	}
	return true
}

func testKubectlGet(t *testing.T, r *root, cs *kubernetes.Clientset) {
	ctx := t.Context()
	ns, ns2 := "kc-get", "kc-get2"
	createNamespace(t, cs, ns)
	createNamespace(t, cs, ns2)
	for _, cm := range []*corev1.ConfigMap{
		configMap(ns, "alpha", map[string]string{"tier": "front"}, map[string]string{"k": "v1", "k2": "x"}),
		configMap(ns, "beta", map[string]string{"tier": "back"}, map[string]string{"k": "v2"}),
		configMap(ns2, "gamma", map[string]string{"tier": "front"}, map[string]string{"k": "v3"}),
	} {
		if _, err := cs.CoreV1().ConfigMaps(cm.Namespace).Create(ctx, cm, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := cs.AppsV1().Deployments(ns).Create(ctx, deployment(ns, "web", 2), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}

	t.Run("plain", func(t *testing.T) {
		out := r.mustKubectl(t, "get", "configmaps", "-n", ns)
		wantMatch(t, "get cm", out, `^NAME\s+DATA\s+AGE$`, `^alpha\s+2\s+\S+$`, `^beta\s+1\s+\S+$`)
		out = r.mustKubectl(t, "get", "cm", "-n", ns, "-o", "wide")
		wantMatch(t, "get cm -o wide", out, `^NAME\s+DATA\s+AGE`, `^alpha\s+2\s`)
		out = r.mustKubectl(t, "get", "deploy", "web", "-n", ns, "-o", "wide")
		wantMatch(t, "get deploy -o wide", out,
			`^NAME\s+READY\s+UP-TO-DATE\s+AVAILABLE\s+AGE\s+CONTAINERS\s+IMAGES\s+SELECTOR$`,
			`^web\s+0/2\s+0\s+0\s+\S+\s+app\s+nginx:1.25\s+app=web$`)
		out = r.mustKubectl(t, "get", "ns", ns)
		wantMatch(t, "get ns", out, `^NAME\s+STATUS\s+AGE$`, `^`+ns+`\s+Active\s`)
		out = r.mustKubectl(t, "get", "all", "-n", ns, "-o", "name")
		wantContains(t, "get all", out, "deployment.apps/web")
		if strings.Contains(out, "configmap/") {
			t.Errorf("get all lists configmaps:\n%s", out)
		}
	})
	t.Run("tables", func(t *testing.T) {
		pod := &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "pod1"},
			Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "a", Image: "nginx"}, {Name: "b", Image: "busybox"}}},
		}
		if _, err := cs.CoreV1().Pods(ns).Create(ctx, pod, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		svc := &corev1.Service{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "svc1"},
			Spec: corev1.ServiceSpec{ClusterIP: corev1.ClusterIPNone, Selector: map[string]string{"app": "web"},
				Ports: []corev1.ServicePort{{Name: "http", Port: 80, Protocol: corev1.ProtocolTCP}}},
		}
		if _, err := cs.CoreV1().Services(ns).Create(ctx, svc, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		ev := &corev1.Event{
			ObjectMeta:     metav1.ObjectMeta{Namespace: ns, Name: "ev1"},
			InvolvedObject: corev1.ObjectReference{Kind: "Pod", Namespace: ns, Name: "pod1", APIVersion: "v1"},
			Reason:         "Tested", Message: "an e2e event", Type: corev1.EventTypeNormal,
			FirstTimestamp: metav1.Now(), LastTimestamp: metav1.Now(), Count: 1,
		}
		if _, err := cs.CoreV1().Events(ns).Create(ctx, ev, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		wantMatch(t, "get pods", r.mustKubectl(t, "get", "pods", "-n", ns),
			`^NAME\s+READY\s+STATUS\s+RESTARTS\s+AGE$`, `^pod1\s+0/2\s+Pending\s+0\s+\S+$`)
		wantMatch(t, "get pods -o wide", r.mustKubectl(t, "get", "pods", "-n", ns, "-o", "wide"),
			`^NAME\s+READY\s+STATUS\s+RESTARTS\s+AGE\s+IP\s+NODE\s+NOMINATED NODE\s+READINESS GATES$`)
		wantMatch(t, "get svc", r.mustKubectl(t, "get", "svc", "-n", ns, "-o", "wide"),
			`^NAME\s+TYPE\s+CLUSTER-IP\s+EXTERNAL-IP\s+PORT\(S\)\s+AGE\s+SELECTOR$`, `^svc1\s+ClusterIP\s+None\s+<none>\s+80/TCP\s+\S+\s+app=web$`)
		wantMatch(t, "get events", r.mustKubectl(t, "get", "events", "-n", ns),
			`^LAST SEEN\s+TYPE\s+REASON\s+OBJECT\s+MESSAGE$`, `\s+Normal\s+Tested\s+pod/pod1\s+an e2e event$`)
		wantMatch(t, "get crd", r.mustKubectl(t, "get", "namespaces", "-l", "kubernetes.io/metadata.name="+ns),
			`^`+ns+`\s+Active\s`)
	})
	t.Run("yaml-json", func(t *testing.T) {
		var cm corev1.ConfigMap
		if err := yaml.Unmarshal([]byte(r.mustKubectl(t, "get", "cm", "alpha", "-n", ns, "-o", "yaml")), &cm); err != nil {
			t.Fatalf("-o yaml: %v", err)
		}
		if cm.Kind != "ConfigMap" || cm.APIVersion != "v1" || cm.Name != "alpha" || cm.Namespace != ns ||
			cm.Data["k"] != "v1" || cm.UID == "" || cm.ResourceVersion == "" || cm.CreationTimestamp.IsZero() {
			t.Errorf("-o yaml: %+v", cm)
		}
		var list corev1.ConfigMapList
		if err := json.Unmarshal([]byte(r.mustKubectl(t, "get", "cm", "-n", ns, "-o", "json")), &list); err != nil {
			t.Fatalf("-o json: %v", err)
		}
		var names []string
		for _, it := range list.Items {
			names = append(names, it.Name)
			if it.Namespace != ns {
				t.Errorf("-o json: item %s in namespace %q", it.Name, it.Namespace)
			}
		}
		if list.Kind != "List" || !slices.Contains(names, "alpha") || !slices.Contains(names, "beta") || slices.Contains(names, "gamma") {
			t.Errorf("-o json: kind %q names %v", list.Kind, names)
		}
		out := r.mustKubectl(t, "get", "cm", "alpha", "-n", ns, "-o", "jsonpath={.data.k}")
		if out != "v1" {
			t.Errorf("-o jsonpath: %q", out)
		}
		out = r.mustKubectl(t, "get", "cm", "-n", ns, "-l", "tier", "-o", "custom-columns=NAME:.metadata.name,TIER:.metadata.labels.tier")
		wantMatch(t, "-o custom-columns", out, `^NAME\s+TIER$`, `^alpha\s+front$`, `^beta\s+back$`)
	})
	t.Run("selectors", func(t *testing.T) {
		cases := []struct {
			args []string
			want []string
		}{
			{[]string{"-n", ns, "-l", "tier=front"}, []string{"configmap/alpha"}},
			{[]string{"-n", ns, "-l", "tier in (front,back)"}, []string{"configmap/alpha", "configmap/beta"}},
			{[]string{"-n", ns, "-l", "tier,tier!=front"}, []string{"configmap/beta"}},
			{[]string{"-n", ns, "-l", "tier=nothing"}, nil},
			{[]string{"-n", ns, "--field-selector", "metadata.name=beta"}, []string{"configmap/beta"}},
			{[]string{"-n", ns, "--field-selector", "metadata.name!=beta", "-l", "tier"}, []string{"configmap/alpha"}},
			{[]string{"-A", "--field-selector", "metadata.namespace=" + ns2}, []string{"configmap/gamma"}},
			{[]string{"-A", "-l", "tier=front"}, []string{"configmap/alpha", "configmap/gamma"}},
		}
		for _, c := range cases {
			args := append([]string{"get", "cm", "-o", "name"}, c.args...)
			got := lines(r.mustKubectl(t, args...))
			if !slices.Equal(got, c.want) {
				t.Errorf("kubectl %s: got %q, want %q", strings.Join(args, " "), got, c.want)
			}
		}
		out := r.mustKubectl(t, "get", "cm", "-A", "-l", "tier=front")
		wantMatch(t, "get -A", out, `^NAMESPACE\s+NAME\s+DATA\s+AGE$`, `^`+ns+`\s+alpha\s+2\s`, `^`+ns2+`\s+gamma\s+1\s`)
		if _, err := r.kubectl(t, "get", "cm", "-n", ns, "--field-selector", "data.k=v1"); err == nil {
			t.Errorf("a field selector on an unsupported field must fail")
		}
	})
	t.Run("not-found", func(t *testing.T) {
		_, err := r.kubectl(t, "get", "cm", "nosuch", "-n", ns)
		if err == nil || !strings.Contains(err.Error(), `configmaps "nosuch" not found`) {
			t.Errorf("get of a missing object: %v", err)
		}
	})
}

func testKubectlGetWatch(t *testing.T, r *root, cs *kubernetes.Clientset) {
	ctx := t.Context()
	ns := "kc-watch"
	createNamespace(t, cs, ns)
	if _, err := cs.CoreV1().ConfigMaps(ns).Create(ctx, configMap(ns, "w1", nil, map[string]string{"a": "1"}), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	cmd, out, errb := r.kubectlBackground(t, "get", "cm", "-n", ns, "-w", "--output-watch-events")
	// The initial list is printed first; everything after it comes from the
	// watch started at the list's resourceVersion.
	poll.Until(t, "the initial ADDED w1", func() error {
		if cmd.ProcessState != nil {
			return fmt.Errorf("kubectl exited: %s", errb.String())
		}
		if !regexp.MustCompile(`(?m)^ADDED\s+w1\s`).MatchString(out.String()) {
			return fmt.Errorf("no initial ADDED w1 yet: %q %q", out.String(), errb.String())
		}
		return nil
	})
	cm, err := cs.CoreV1().ConfigMaps(ns).Get(ctx, "w1", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	cm.Data["b"] = "2"
	if _, err := cs.CoreV1().ConfigMaps(ns).Update(ctx, cm, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := cs.CoreV1().ConfigMaps(ns).Create(ctx, configMap(ns, "w2", nil, nil), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := cs.CoreV1().ConfigMaps(ns).Delete(ctx, "w1", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	want := []string{`^MODIFIED\s+w1\s+2\s`, `^ADDED\s+w2\s+0\s`, `^DELETED\s+w1\s`}
	poll.Until(t, "the watch events in order", func() error {
		o := out.String()
		pos := 0
		for _, w := range want {
			loc := regexp.MustCompile("(?m)" + w).FindStringIndex(o[pos:])
			if loc == nil {
				return fmt.Errorf("watch output lacks /%s/ (in order) in:\n%s", w, o)
			}
			pos += loc[1]
		}
		return nil
	})
	if err := cmd.Process.Kill(); err != nil {
		t.Errorf("kill kubectl get -w: %v", err)
	}
}

func testKubectlDescribe(t *testing.T, r *root, cs *kubernetes.Clientset) {
	ctx := t.Context()
	ns := "kc-describe"
	createNamespace(t, cs, ns)
	if _, err := cs.CoreV1().ConfigMaps(ns).Create(ctx, configMap(ns, "d1", map[string]string{"team": "blue"}, map[string]string{"greeting": "hello"}), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := cs.AppsV1().Deployments(ns).Create(ctx, deployment(ns, "web", 2), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	out := r.mustKubectl(t, "describe", "configmap", "d1", "-n", ns)
	wantMatch(t, "describe cm", out, `^Name:\s+d1$`, `^Namespace:\s+`+ns+`$`, `^Labels:\s+team=blue$`, `^greeting:$`, `^hello$`)
	out = r.mustKubectl(t, "describe", "deployment", "web", "-n", ns)
	wantMatch(t, "describe deployment", out,
		`^Name:\s+web$`, `^Namespace:\s+`+ns+`$`, `^Selector:\s+app=web$`,
		`^Replicas:\s+2 desired`, `^StrategyType:\s+RollingUpdate$`, `Image:\s+nginx:1.25`, `^Pod Template:`)
	// describe on a whole kind describes every object.
	out = r.mustKubectl(t, "describe", "cm", "-n", ns)
	wantMatch(t, "describe cm (all)", out, `^Name:\s+d1$`)
}

func testKubectlEdit(t *testing.T, r *root, cs *kubernetes.Clientset) {
	ctx := t.Context()
	ns := "kc-edit"
	createNamespace(t, cs, ns)
	if _, err := cs.CoreV1().ConfigMaps(ns).Create(ctx, configMap(ns, "e1", nil, map[string]string{"color": "blue", "size": "m"}), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := cs.AppsV1().Deployments(ns).Create(ctx, deployment(ns, "web", 1), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	editor := filepath.Join(t.TempDir(), "editor.sh")
	script := "#!/bin/sh\nsed -i -e 's/color: blue/color: green/' -e 's/image: nginx:1.25/image: nginx:1.26/' \"$1\"\n"
	if err := os.WriteFile(editor, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	env := []string{"EDITOR=" + editor, "KUBE_EDITOR=" + editor}

	out, err := r.kubectlIn(t, "", env, "edit", "configmap", "e1", "-n", ns)
	if err != nil {
		t.Fatal(err)
	}
	wantContains(t, "edit cm", out, "configmap/e1 edited")
	cm, err := cs.CoreV1().ConfigMaps(ns).Get(ctx, "e1", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if cm.Data["color"] != "green" || cm.Data["size"] != "m" {
		t.Errorf("after edit: data %v, want color=green size=m", cm.Data)
	}

	out, err = r.kubectlIn(t, "", env, "edit", "deployment", "web", "-n", ns)
	if err != nil {
		t.Fatal(err)
	}
	wantContains(t, "edit deployment", out, "deployment.apps/web edited")
	d, err := cs.AppsV1().Deployments(ns).Get(ctx, "web", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if img := d.Spec.Template.Spec.Containers[0].Image; img != "nginx:1.26" || d.Generation != 2 {
		t.Errorf("after edit: image %s generation %d, want nginx:1.26 and 2", img, d.Generation)
	}

	// An edit that changes nothing writes nothing.
	rv := cm.ResourceVersion
	out, err = r.kubectlIn(t, "", env, "edit", "configmap", "e1", "-n", ns)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(out, "edited") {
		t.Errorf("no-op edit reported an edit: %q", out)
	}
	if cm, err = cs.CoreV1().ConfigMaps(ns).Get(ctx, "e1", metav1.GetOptions{}); err != nil || cm.ResourceVersion != rv {
		t.Errorf("no-op edit changed the object: rv %s -> %s (%v)", rv, cm.ResourceVersion, err)
	}
}

func testKubectlPatch(t *testing.T, r *root, cs *kubernetes.Clientset) {
	ctx := t.Context()
	ns := "kc-patch"
	createNamespace(t, cs, ns)
	dep := deployment(ns, "p1", 1,
		corev1.Container{Name: "app", Image: "nginx:1.25"},
		corev1.Container{Name: "sidecar", Image: "busybox:1.36"})
	if _, err := cs.AppsV1().Deployments(ns).Create(ctx, dep, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	get := func() *appsv1.Deployment {
		t.Helper()
		d, err := cs.AppsV1().Deployments(ns).Get(ctx, "p1", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return d
	}

	out := r.mustKubectl(t, "patch", "deployment", "p1", "-n", ns, "--type=json", "-p", `[{"op":"replace","path":"/spec/replicas","value":2}]`)
	wantContains(t, "json patch", out, "deployment.apps/p1 patched")
	if d := get(); *d.Spec.Replicas != 2 {
		t.Errorf("json patch: replicas %d", *d.Spec.Replicas)
	}

	out = r.mustKubectl(t, "patch", "deployment", "p1", "-n", ns, "--type=merge", "-p", `{"metadata":{"labels":{"tier":"web"}}}`)
	wantContains(t, "merge patch", out, "deployment.apps/p1 patched")
	if d := get(); d.Labels["tier"] != "web" || d.Labels["app"] != "p1" {
		t.Errorf("merge patch: labels %v", d.Labels)
	}

	out = r.mustKubectl(t, "patch", "deployment", "p1", "-n", ns, "--type=strategic", "-p",
		`{"spec":{"template":{"spec":{"containers":[{"name":"app","image":"nginx:1.27"}]}}}}`)
	wantContains(t, "strategic patch", out, "deployment.apps/p1 patched")
	d := get()
	cs2 := d.Spec.Template.Spec.Containers
	if len(cs2) != 2 || cs2[0].Name != "app" || cs2[0].Image != "nginx:1.27" || cs2[1].Name != "sidecar" || cs2[1].Image != "busybox:1.36" {
		t.Errorf("strategic patch must merge containers by name: %+v", cs2)
	}
	// Default patch type for kubectl patch is strategic.
	r.mustKubectl(t, "patch", "deployment", "p1", "-n", ns, "-p", `{"spec":{"template":{"spec":{"containers":[{"name":"sidecar","image":"busybox:1.37"}]}}}}`)
	d = get()
	if cs2 := d.Spec.Template.Spec.Containers; len(cs2) != 2 || cs2[0].Image != "nginx:1.27" || cs2[1].Image != "busybox:1.37" {
		t.Errorf("default (strategic) patch: %+v", cs2)
	}
	if d.Generation != 4 {
		t.Errorf("generation after three spec patches and a label patch: %d, want 4", d.Generation)
	}

	// A patch that changes nothing is not a write.
	rv := d.ResourceVersion
	out = r.mustKubectl(t, "patch", "deployment", "p1", "-n", ns, "--type=merge", "-p", `{"metadata":{"labels":{"tier":"web"}}}`)
	wantContains(t, "no-op patch", out, "deployment.apps/p1 patched (no change)")
	if d := get(); d.ResourceVersion != rv {
		t.Errorf("no-op patch bumped resourceVersion %s -> %s", rv, d.ResourceVersion)
	}

	// A JSON patch whose test fails changes nothing.
	if _, err := r.kubectl(t, "patch", "deployment", "p1", "-n", ns, "--type=json", "-p",
		`[{"op":"test","path":"/spec/replicas","value":7},{"op":"replace","path":"/spec/replicas","value":9}]`); err == nil {
		t.Errorf("json patch with a failing test op succeeded")
	}
	if d := get(); *d.Spec.Replicas != 2 {
		t.Errorf("failed json patch changed replicas to %d", *d.Spec.Replicas)
	}
}

func testKubectlLabelAnnotate(t *testing.T, r *root, cs *kubernetes.Clientset) {
	ctx := t.Context()
	ns := "kc-label"
	createNamespace(t, cs, ns)
	for _, n := range []string{"l1", "l2"} {
		if _, err := cs.CoreV1().ConfigMaps(ns).Create(ctx, configMap(ns, n, nil, nil), metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	get := func() *corev1.ConfigMap {
		t.Helper()
		cm, err := cs.CoreV1().ConfigMaps(ns).Get(ctx, "l1", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return cm
	}

	wantContains(t, "label", r.mustKubectl(t, "label", "cm", "l1", "-n", ns, "env=prod"), "configmap/l1 labeled")
	if _, err := r.kubectl(t, "label", "cm", "l1", "-n", ns, "env=dev"); err == nil || !strings.Contains(err.Error(), "already has a value (prod)") {
		t.Errorf("label without --overwrite: %v", err)
	}
	if v := get().Labels["env"]; v != "prod" {
		t.Errorf("label env=%q, want prod", v)
	}
	r.mustKubectl(t, "label", "cm", "l1", "-n", ns, "env=dev", "--overwrite")
	if v := get().Labels["env"]; v != "dev" {
		t.Errorf("label --overwrite: env=%q, want dev", v)
	}
	wantContains(t, "unlabel", r.mustKubectl(t, "label", "cm", "l1", "-n", ns, "env-"), "configmap/l1 unlabeled")
	if _, ok := get().Labels["env"]; ok {
		t.Errorf("label env- did not remove the label")
	}
	r.mustKubectl(t, "label", "cm", "--all", "-n", ns, "batch=1")
	if got := lines(r.mustKubectl(t, "get", "cm", "-n", ns, "-l", "batch=1", "-o", "name")); !slices.Equal(got, []string{"configmap/l1", "configmap/l2"}) {
		t.Errorf("label --all: %q", got)
	}

	wantContains(t, "annotate", r.mustKubectl(t, "annotate", "cm", "l1", "-n", ns, "note=first"), "configmap/l1 annotated")
	if _, err := r.kubectl(t, "annotate", "cm", "l1", "-n", ns, "note=second"); err == nil || !strings.Contains(err.Error(), "already has a value (first)") {
		t.Errorf("annotate without --overwrite: %v", err)
	}
	r.mustKubectl(t, "annotate", "cm", "l1", "-n", ns, "note=second", "--overwrite")
	if v := get().Annotations["note"]; v != "second" {
		t.Errorf("annotate --overwrite: note=%q, want second", v)
	}
	r.mustKubectl(t, "annotate", "cm", "l1", "-n", ns, "note-")
	if _, ok := get().Annotations["note"]; ok {
		t.Errorf("annotate note- did not remove the annotation")
	}
}

func testKubectlScale(t *testing.T, r *root, cs *kubernetes.Clientset) {
	ctx := t.Context()
	ns := "kc-scale"
	createNamespace(t, cs, ns)
	if _, err := cs.AppsV1().Deployments(ns).Create(ctx, deployment(ns, "s1", 1), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	wantContains(t, "scale", r.mustKubectl(t, "scale", "deployment", "s1", "-n", ns, "--replicas=3"), "deployment.apps/s1 scaled")
	replicas := func() int32 {
		d, err := cs.AppsV1().Deployments(ns).Get(ctx, "s1", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return *d.Spec.Replicas
	}
	if n := replicas(); n != 3 {
		t.Errorf("after scale: spec.replicas %d, want 3", n)
	}
	if _, err := r.kubectl(t, "scale", "deployment", "s1", "-n", ns, "--current-replicas=2", "--replicas=5"); err == nil {
		t.Errorf("scale with a wrong --current-replicas succeeded")
	}
	if n := replicas(); n != 3 {
		t.Errorf("after refused scale: spec.replicas %d, want 3", n)
	}
	r.mustKubectl(t, "scale", "deployment/s1", "-n", ns, "--current-replicas=3", "--replicas=0")
	if n := replicas(); n != 0 {
		t.Errorf("after scale to 0: spec.replicas %d", n)
	}
}

func testKubectlDeleteFinalizer(t *testing.T, r *root, cs *kubernetes.Clientset) {
	ctx := t.Context()
	ns := "kc-finalizer"
	createNamespace(t, cs, ns)
	cm := configMap(ns, "held", nil, map[string]string{"a": "1"})
	cm.Finalizers = []string{"e2e.canopy.dev/hold"}
	if _, err := cs.CoreV1().ConfigMaps(ns).Create(ctx, cm, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	released := make(chan error, 1)
	var releasedAt time.Time
	go func() {
		// Wait until kubectl's delete marked the object, hold it a second
		// longer, then drop the finalizer.
		err := poll.Wait(ctx, func() error {
			cm, err := cs.CoreV1().ConfigMaps(ns).Get(ctx, "held", metav1.GetOptions{})
			if err != nil {
				return err
			}
			if cm.DeletionTimestamp == nil {
				return fmt.Errorf("no deletionTimestamp yet")
			}
			return nil
		})
		if err == nil {
			<-time.After(time.Second)
			releasedAt = time.Now()
			_, err = cs.CoreV1().ConfigMaps(ns).Patch(ctx, "held", types.JSONPatchType, []byte(`[{"op":"remove","path":"/metadata/finalizers"}]`), metav1.PatchOptions{})
		}
		released <- err
	}()
	out, err := r.kubectl(t, "delete", "configmap", "held", "-n", ns, "--wait=true", "--timeout=30s")
	returned := time.Now()
	if err != nil {
		t.Fatalf("kubectl delete: %v", err)
	}
	wantContains(t, "delete", out, `configmap "held" deleted`)
	// The releasing goroutine reports after its PATCH returns, which may
	// be after kubectl saw the deletion: wait for it, then compare times.
	select {
	case err := <-released:
		if err != nil {
			t.Fatalf("releasing the finalizer: %v", err)
		}
		if returned.Before(releasedAt) {
			t.Errorf("kubectl delete returned %v before the finalizer was removed", releasedAt.Sub(returned))
		}
	case <-time.After(30 * time.Second):
		t.Fatalf("kubectl delete --wait returned, and the finalizer was never released")
	}
	if _, err := cs.CoreV1().ConfigMaps(ns).Get(ctx, "held", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("after delete: want NotFound, got %v", err)
	}
}

func testKubectlWait(t *testing.T, r *root, cs *kubernetes.Clientset) {
	ctx := t.Context()
	ns := "kc-wait"
	createNamespace(t, cs, ns)
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "waiter"},
		Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "nginx:1.25"}}},
	}
	if _, err := cs.CoreV1().Pods(ns).Create(ctx, pod, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}

	// Not ready: a short wait times out.
	if _, err := r.kubectl(t, "wait", "--for=condition=Ready", "pod/waiter", "-n", ns, "--timeout=1s"); err == nil || !strings.Contains(err.Error(), "timed out") {
		t.Errorf("wait on a pod that is not ready: want a timeout, got %v", err)
	}

	type result struct {
		out string
		err error
	}
	ready := make(chan result, 1)
	go func() {
		out, err := r.kubectl(t, "wait", "--for=condition=Ready", "pod/waiter", "-n", ns, "--timeout=30s")
		ready <- result{out, err}
	}()
	p, err := cs.CoreV1().Pods(ns).Get(ctx, "waiter", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	p.Status.Phase = corev1.PodRunning
	p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue, LastTransitionTime: metav1.Now()}}
	if _, err := cs.CoreV1().Pods(ns).UpdateStatus(ctx, p, metav1.UpdateOptions{}); err != nil {
		t.Fatalf("update pod status: %v", err)
	}
	res := <-ready
	if res.err != nil {
		t.Fatalf("wait --for=condition=Ready: %v", res.err)
	}
	wantContains(t, "wait condition", res.out, "pod/waiter condition met")
	out := r.mustKubectl(t, "wait", "--for=jsonpath={.status.phase}=Running", "pod/waiter", "-n", ns, "--timeout=10s")
	wantContains(t, "wait jsonpath", out, "pod/waiter condition met")

	// --for=delete on an object held by a finalizer: it waits until the
	// finalizer goes.
	cm := configMap(ns, "doomed", nil, nil)
	cm.Finalizers = []string{"e2e.canopy.dev/hold"}
	if _, err := cs.CoreV1().ConfigMaps(ns).Create(ctx, cm, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := cs.CoreV1().ConfigMaps(ns).Delete(ctx, "doomed", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := r.kubectl(t, "wait", "--for=delete", "configmap/doomed", "-n", ns, "--timeout=1s"); err == nil {
		t.Errorf("wait --for=delete returned success while a finalizer holds the object")
	}
	deleted := make(chan result, 1)
	go func() {
		out, err := r.kubectl(t, "wait", "--for=delete", "configmap/doomed", "-n", ns, "--timeout=30s")
		deleted <- result{out, err}
	}()
	if _, err := cs.CoreV1().ConfigMaps(ns).Patch(ctx, "doomed", types.MergePatchType, []byte(`{"metadata":{"finalizers":null}}`), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	if res := <-deleted; res.err != nil {
		t.Fatalf("wait --for=delete: %v", res.err)
	}
	if _, err := cs.CoreV1().ConfigMaps(ns).Get(ctx, "doomed", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("after finalizer removal: want NotFound, got %v", err)
	}
}

func testKubectlAuth(t *testing.T, r *root, cs *kubernetes.Clientset) {
	ns := "kc-auth"
	r.mustKubectl(t, "create", "namespace", ns)
	r.mustKubectl(t, "create", "namespace", ns+"-other")

	// Admin.
	for _, args := range [][]string{
		{"auth", "can-i", "*", "*"},
		{"auth", "can-i", "create", "deployments", "-n", ns},
		{"auth", "can-i", "delete", "namespaces"},
	} {
		if out, err := r.kubectl(t, args...); err != nil || strings.TrimSpace(out) != "yes" {
			t.Errorf("admin: kubectl %s: %q %v, want yes", strings.Join(args, " "), out, err)
		}
	}

	// A ServiceAccount bound to a Role that reads configmaps.
	wantContains(t, "create sa", r.mustKubectl(t, "create", "serviceaccount", "robot", "-n", ns), "serviceaccount/robot created")
	r.mustKubectl(t, "create", "role", "cm-reader", "--verb=get,list,watch", "--resource=configmaps", "-n", ns)
	r.mustKubectl(t, "create", "rolebinding", "robot-reads", "--role=cm-reader", "--serviceaccount="+ns+":robot", "-n", ns)
	r.mustKubectl(t, "create", "rolebinding", "group-reads", "--role=cm-reader", "--group=e2e-readers", "-n", ns)
	// RBAC objects of a workload description space are workload (inert
	// here) unless labelled as the space's own.
	r.mustKubectl(t, "label", "-n", ns, "role/cm-reader", "rolebinding/robot-reads", "rolebinding/group-reads", edgev1alpha1.SpaceRBACLabel+"=true")
	if _, err := cs.CoreV1().ConfigMaps(ns).Create(t.Context(), configMap(ns, "visible", nil, nil), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	token := strings.TrimSpace(r.mustKubectl(t, "create", "token", "robot", "-n", ns))
	if strings.Count(token, ".") != 2 {
		t.Fatalf("create token: not a JWT: %q", token)
	}
	bare := r.bareKubeconfig(t, "default")
	robot := func(args ...string) (string, error) {
		return r.kubectlWith(t, bare, append([]string{"--token=" + token}, args...)...)
	}
	user := "system:serviceaccount:" + ns + ":robot"

	canI := []struct {
		args []string
		want string
	}{
		{[]string{"list", "configmaps", "-n", ns}, "yes"},
		{[]string{"get", "configmaps/visible", "-n", ns}, "yes"},
		{[]string{"delete", "configmaps", "-n", ns}, "no"},
		{[]string{"delete", "pods", "-n", ns}, "no"},
		{[]string{"list", "configmaps", "-n", ns + "-other"}, "no"},
		{[]string{"list", "namespaces"}, "no"},
	}
	for _, c := range canI {
		out, err := robot(append([]string{"auth", "can-i"}, c.args...)...)
		// auth can-i exits 1 when the answer is no.
		if got := strings.TrimSpace(out); got != c.want || (err == nil) != (c.want == "yes") {
			t.Errorf("robot: auth can-i %s: %q (%v), want %s", strings.Join(c.args, " "), got, err, c.want)
		}
	}
	if out, err := robot("auth", "can-i", "--list", "-n", ns); err != nil || !regexp.MustCompile(`(?m)^configmaps\s+\[\]\s+\[\]\s+\[get list watch\]`).MatchString(out) {
		t.Errorf("robot: auth can-i --list: %v\n%s", err, out)
	}
	if out, err := robot("get", "configmaps", "-n", ns, "-o", "name"); err != nil || !strings.Contains(out, "configmap/visible") {
		t.Errorf("robot: get configmaps: %q %v", out, err)
	}
	if _, err := robot("get", "pods", "-n", ns); err == nil || !strings.Contains(err.Error(), "forbidden") || !strings.Contains(err.Error(), user) {
		t.Errorf("robot: get pods: want forbidden for %s, got %v", user, err)
	}
	if _, err := robot("delete", "configmap", "visible", "-n", ns); err == nil || !strings.Contains(err.Error(), "forbidden") {
		t.Errorf("robot: delete configmap: want forbidden, got %v", err)
	}
	if _, err := cs.CoreV1().ConfigMaps(ns).Get(t.Context(), "visible", metav1.GetOptions{}); err != nil {
		t.Errorf("the configmap the robot could not delete: %v", err)
	}

	// A bad token: 401. (Without any credentials kubectl prompts for a
	// user name on stdin instead; badinput_test checks that 401 raw.)
	if _, err := r.kubectlWith(t, bare, "--token=not-a-token", "get", "configmaps", "-n", ns); err == nil || !strings.Contains(err.Error(), "Unauthorized") {
		t.Errorf("bad token: want Unauthorized, got %v", err)
	}

	// Impersonation by the admin.
	if _, err := r.kubectl(t, "--as=someone", "get", "configmaps", "-n", ns); err == nil || !strings.Contains(err.Error(), `User "someone" cannot list resource "configmaps"`) {
		t.Errorf("admin --as=someone: want forbidden for someone, got %v", err)
	}
	if out, err := r.kubectl(t, "--as=someone", "--as-group=e2e-readers", "get", "configmaps", "-n", ns, "-o", "name"); err != nil || !strings.Contains(out, "configmap/visible") {
		t.Errorf("admin --as=someone --as-group=e2e-readers: %q %v", out, err)
	}
	if out, err := r.kubectl(t, "--as="+user, "get", "configmaps", "-n", ns, "-o", "name"); err != nil || !strings.Contains(out, "configmap/visible") {
		t.Errorf("admin --as=%s get configmaps: %q %v", user, out, err)
	}
	if _, err := r.kubectl(t, "--as="+user, "get", "pods", "-n", ns); err == nil || !strings.Contains(err.Error(), "forbidden") {
		t.Errorf("admin --as=%s get pods: want forbidden, got %v", user, err)
	}
	if out, err := r.kubectl(t, "--as="+user, "auth", "can-i", "list", "configmaps", "-n", ns); err != nil || strings.TrimSpace(out) != "yes" {
		t.Errorf("admin --as=%s auth can-i list configmaps: %q %v", user, out, err)
	}
	// ... and denied to the robot.
	if _, err := robot("--as=someone", "get", "configmaps", "-n", ns); err == nil || !strings.Contains(err.Error(), "impersonate") {
		t.Errorf("robot --as=someone: want forbidden to impersonate, got %v", err)
	}
}

const widgetCRD = `apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: widgets.e2e.canopy.dev
spec:
  group: e2e.canopy.dev
  scope: Namespaced
  names:
    plural: widgets
    singular: widget
    kind: Widget
    listKind: WidgetList
    shortNames: [wg]
  versions:
  - name: v1
    served: true
    storage: true
    subresources:
      status: {}
    additionalPrinterColumns:
    - {name: Size, type: integer, jsonPath: .spec.size}
    - {name: Color, type: string, jsonPath: .spec.color}
    - {name: Ready, type: string, jsonPath: '.status.conditions[?(@.type=="Ready")].status'}
    - {name: Age, type: date, jsonPath: .metadata.creationTimestamp}
    schema:
      openAPIV3Schema:
        type: object
        properties:
          spec:
            type: object
            required: [size]
            properties:
              size: {type: integer, minimum: 1}
              color: {type: string}
          status:
            type: object
            properties:
              conditions:
                type: array
                items:
                  type: object
                  properties:
                    type: {type: string}
                    status: {type: string}
`

func widget(ns, name string, size int, color string) string {
	return fmt.Sprintf("apiVersion: e2e.canopy.dev/v1\nkind: Widget\nmetadata:\n  name: %s\n  namespace: %s\nspec:\n  size: %d\n  color: %s\n", name, ns, size, color)
}

func testKubectlCRD(t *testing.T, r *root, cs *kubernetes.Clientset) {
	ctx := t.Context()
	ns := "kc-crd"
	createNamespace(t, cs, ns)
	wantContains(t, "apply crd", r.mustKubectlIn(t, widgetCRD, "apply", "-f", "-"),
		"customresourcedefinition.apiextensions.k8s.io/widgets.e2e.canopy.dev created")
	wantContains(t, "wait established",
		r.mustKubectl(t, "wait", "--for=condition=established", "crd/widgets.e2e.canopy.dev", "--timeout=30s"),
		"customresourcedefinition.apiextensions.k8s.io/widgets.e2e.canopy.dev condition met")

	out := r.mustKubectlIn(t, widget(ns, "w1", 3, "red")+"---\n"+widget(ns, "w2", 5, "blue"), "apply", "-f", "-")
	wantContains(t, "apply widgets", out, "widget.e2e.canopy.dev/w1 created", "widget.e2e.canopy.dev/w2 created")
	wantContains(t, "re-apply widget", r.mustKubectlIn(t, widget(ns, "w2", 5, "blue"), "apply", "-f", "-"), "widget.e2e.canopy.dev/w2 unchanged")
	wantContains(t, "apply changed widget", r.mustKubectlIn(t, widget(ns, "w2", 6, "blue"), "apply", "-f", "-"), "widget.e2e.canopy.dev/w2 configured")
	out = r.mustKubectl(t, "get", "widgets", "-n", ns)
	wantMatch(t, "get widgets", out, `^NAME\s+SIZE\s+COLOR\s+READY\s+AGE$`, `^w1\s+3\s+red\s`, `^w2\s+6\s+blue\s`)
	if got := lines(r.mustKubectl(t, "get", "wg", "-n", ns, "-o", "name")); !slices.Equal(got, []string{"widget.e2e.canopy.dev/w1", "widget.e2e.canopy.dev/w2"}) {
		t.Errorf("get by short name: %q", got)
	}
	if _, err := r.kubectl(t, "--context=inventory", "get", "widgets", "-A"); err == nil {
		t.Errorf("a CRD of the default space is served in the inventory space")
	}

	// Schema validation.
	if _, err := r.kubectlIn(t, widget(ns, "w3", 0, "green"), nil, "apply", "-f", "-"); err == nil || !strings.Contains(err.Error(), "spec.size") {
		t.Errorf("widget with size 0: want Invalid on spec.size, got %v", err)
	}
	if _, err := r.kubectl(t, "get", "widget", "w3", "-n", ns); err == nil {
		t.Errorf("the invalid widget was stored")
	}

	// Status through the status subresource, then wait and the Ready column.
	dc := r.dynamicClient(t, "default")
	gvr := schema.GroupVersionResource{Group: "e2e.canopy.dev", Version: "v1", Resource: "widgets"}
	w1, err := dc.Resource(gvr).Namespace(ns).Get(ctx, "w1", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	_ = unstructured.SetNestedSlice(w1.Object, []any{map[string]any{"type": "Ready", "status": "True"}}, "status", "conditions")
	if _, err := dc.Resource(gvr).Namespace(ns).UpdateStatus(ctx, w1, metav1.UpdateOptions{}); err != nil {
		t.Fatalf("update widget status: %v", err)
	}
	wantContains(t, "wait widget", r.mustKubectl(t, "wait", "--for=condition=Ready", "widget/w1", "-n", ns, "--timeout=10s"),
		"widget.e2e.canopy.dev/w1 condition met")
	wantMatch(t, "get widgets (ready)", r.mustKubectl(t, "get", "widgets", "-n", ns), `^w1\s+3\s+red\s+True\s`)

	// Patches: merge works, strategic is refused for custom resources.
	r.mustKubectl(t, "patch", "widget", "w1", "-n", ns, "--type=merge", "-p", `{"spec":{"size":4}}`)
	if _, err := r.kubectl(t, "patch", "widget", "w1", "-n", ns, "--type=strategic", "-p", `{"spec":{"size":6}}`); err == nil {
		t.Errorf("strategic merge patch of a custom resource succeeded")
	}
	wantMatch(t, "get widgets (patched)", r.mustKubectl(t, "get", "widgets", "-n", ns), `^w1\s+4\s+red\s+True\s`)

	// Deleting the CRD stops serving it and deletes its objects.
	wantContains(t, "delete crd", r.mustKubectl(t, "delete", "crd", "widgets.e2e.canopy.dev", "--timeout=30s"),
		`customresourcedefinition.apiextensions.k8s.io "widgets.e2e.canopy.dev" deleted`)
	poll.Until(t, "widgets no longer served", func() error {
		_, err := r.kubectl(t, "get", "widgets", "-n", ns)
		if err == nil {
			return fmt.Errorf("widgets still served")
		}
		// kubectl says so from discovery, or from a 404 when its discovery
		// cache still had widgets.
		if !strings.Contains(err.Error(), `the server doesn't have a resource type "widgets"`) &&
			!strings.Contains(err.Error(), "(NotFound)") {
			return err
		}
		return nil
	})
	if _, err := dc.Resource(gvr).Namespace(ns).List(ctx, metav1.ListOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("list widgets after CRD deletion: want 404, got %v", err)
	}
	// Re-creating the CRD brings back no objects.
	r.mustKubectlIn(t, widgetCRD, "apply", "-f", "-")
	r.mustKubectl(t, "wait", "--for=condition=established", "crd/widgets.e2e.canopy.dev", "--timeout=30s")
	poll.Until(t, "widgets served again, empty", func() error {
		l, err := dc.Resource(gvr).Namespace(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return err
		}
		if len(l.Items) != 0 {
			t.Fatalf("widgets survived the deletion of their CRD: %d", len(l.Items))
		}
		return nil
	})
	r.mustKubectl(t, "delete", "crd", "widgets.e2e.canopy.dev")
}

func testKubectlNamespaceDelete(t *testing.T, r *root, cs *kubernetes.Clientset) {
	ctx := t.Context()
	ns := "kc-doomed"
	r.mustKubectl(t, "create", "namespace", ns)
	r.mustKubectlIn(t, fmt.Sprintf(`apiVersion: v1
kind: ConfigMap
metadata: {name: c1, namespace: %[1]s}
data: {a: "1"}
---
apiVersion: v1
kind: Secret
metadata: {name: s1, namespace: %[1]s}
stringData: {p: secret}
---
apiVersion: v1
kind: ServiceAccount
metadata: {name: sa1, namespace: %[1]s}
`, ns), "apply", "-f", "-")
	if _, err := cs.AppsV1().Deployments(ns).Create(ctx, deployment(ns, "web", 1), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	// An object with a finalizer keeps the namespace terminating.
	held := configMap(ns, "held", nil, nil)
	held.Finalizers = []string{"e2e.canopy.dev/hold"}
	if _, err := cs.CoreV1().ConfigMaps(ns).Create(ctx, held, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}

	r.mustKubectl(t, "delete", "namespace", ns, "--wait=false")
	poll.Until(t, "the namespace Terminating", func() error {
		phase, err := r.kubectl(t, "get", "namespace", ns, "-o", "jsonpath={.status.phase}")
		if err != nil {
			return err
		}
		if phase != "Terminating" {
			return fmt.Errorf("phase %q", phase)
		}
		// Everything but the held object goes.
		if out := r.mustKubectl(t, "get", "configmaps,secrets,deployments", "-n", ns, "-o", "name"); strings.TrimSpace(out) != "configmap/held" {
			return fmt.Errorf("namespace still holds:\n%s", out)
		}
		return nil
	})
	// No new content in a terminating namespace.
	_, err := cs.CoreV1().ConfigMaps(ns).Create(ctx, configMap(ns, "late", nil, nil), metav1.CreateOptions{})
	if !apierrors.IsForbidden(err) {
		t.Errorf("create in a terminating namespace: want Forbidden, got %v", err)
	}
	if _, err := cs.CoreV1().ConfigMaps(ns).Patch(ctx, "held", types.MergePatchType, []byte(`{"metadata":{"finalizers":null}}`), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	poll.Until(t, "the namespace gone", func() error {
		_, err := cs.CoreV1().Namespaces().Get(ctx, ns, metav1.GetOptions{})
		if !apierrors.IsNotFound(err) {
			return fmt.Errorf("namespace still there (%v)", err)
		}
		return nil
	})

	// kubectl delete namespace waits by default; the contents are gone.
	ns2 := "kc-doomed2"
	r.mustKubectl(t, "create", "namespace", ns2)
	r.mustKubectl(t, "create", "configmap", "c1", "-n", ns2, "--from-literal=a=1")
	wantContains(t, "delete namespace", r.mustKubectl(t, "delete", "namespace", ns2, "--timeout=30s"), `namespace "`+ns2+`" deleted`)
	if _, err := cs.CoreV1().Namespaces().Get(ctx, ns2, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("after kubectl delete namespace: want NotFound, got %v", err)
	}
	r.mustKubectl(t, "create", "namespace", ns2)
	if l, err := cs.CoreV1().ConfigMaps(ns2).List(ctx, metav1.ListOptions{FieldSelector: "metadata.name=c1"}); err != nil || len(l.Items) != 0 {
		t.Errorf("a re-created namespace holds objects of the deleted one: %v %v", l, err)
	}
}

func testKubectlSpaces(t *testing.T, r *root, cs *kubernetes.Clientset) {
	ctx := t.Context()
	inv := r.clients(t, "inventory")
	ns := "kc-spaces"
	// Same namespace name in both spaces, different contents.
	r.mustKubectl(t, "create", "namespace", ns)
	r.mustKubectl(t, "--context=inventory", "create", "namespace", ns)
	r.mustKubectl(t, "--context=inventory", "create", "namespace", ns+"-inv")
	r.mustKubectl(t, "create", "configmap", "in-default", "-n", ns, "--from-literal=space=default")
	r.mustKubectl(t, "--context=inventory", "create", "configmap", "in-inventory", "-n", ns, "--from-literal=space=inventory")

	invNS := lines(r.mustKubectl(t, "--context=inventory", "get", "namespaces", "-o", "name"))
	defNS := lines(r.mustKubectl(t, "get", "namespaces", "-o", "name"))
	if !slices.Contains(invNS, "namespace/"+ns+"-inv") || slices.Contains(defNS, "namespace/"+ns+"-inv") {
		t.Errorf("namespace %s-inv: inventory %q, default %q", ns, invNS, defNS)
	}
	if got := lines(r.mustKubectl(t, "--context=inventory", "get", "configmaps", "-n", ns, "-o", "name")); !slices.Equal(got, []string{"configmap/in-inventory"}) {
		t.Errorf("inventory sees %q, want only its own configmap", got)
	}
	if got := lines(r.mustKubectl(t, "get", "configmaps", "-n", ns, "-o", "name")); !slices.Equal(got, []string{"configmap/in-default"}) {
		t.Errorf("default sees %q, want only its own configmap", got)
	}
	if _, err := r.kubectl(t, "--context=inventory", "get", "configmap", "in-default", "-n", ns); err == nil || !strings.Contains(err.Error(), "not found") {
		t.Errorf("inventory get of a default object: %v", err)
	}
	if all := r.mustKubectl(t, "--context=inventory", "get", "configmaps", "-A", "-o", "name"); strings.Contains(all, "in-default") {
		t.Errorf("inventory -A lists a default object:\n%s", all)
	}
	// client-go agrees, and uids differ.
	a, err := cs.CoreV1().Namespaces().Get(ctx, ns, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	b, err := inv.CoreV1().Namespaces().Get(ctx, ns, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if a.UID == b.UID {
		t.Errorf("namespace %s has the same uid in both spaces", ns)
	}
	// Deleting in one space leaves the other alone.
	r.mustKubectl(t, "--context=inventory", "delete", "configmap", "in-inventory", "-n", ns)
	if _, err := cs.CoreV1().ConfigMaps(ns).Get(ctx, "in-default", metav1.GetOptions{}); err != nil {
		t.Errorf("default object after a delete in inventory: %v", err)
	}
}

// spaceYAML is a Space manifest; spec is its spec's YAML, if any.
func spaceYAML(name, spec string) string {
	m := "apiVersion: canopy.dev/v1alpha1\nkind: Space\nmetadata:\n  name: " + name + "\n"
	if spec != "" {
		m += "spec: " + spec + "\n"
	}
	return m
}

// The system context: kubectl creates, lists and deletes spaces; a new
// space serves (with the workload CRDs) under its own context; bad input
// and users without a rule are refused.
func testKubectlSystemSpaces(t *testing.T, r *root, _ *kubernetes.Clientset) {
	sys := "--context=system"
	out := r.mustKubectlIn(t, spaceYAML("kc-team", ""), sys, "create", "-f", "-")
	wantContains(t, "create", out, "space.canopy.dev/kc-team created")
	out = r.mustKubectl(t, sys, "get", "spaces")
	wantMatch(t, "get spaces", out, `^NAME\s+KIND\s+BACKEND\s+READY\s+AGE$`, `^kc-team\s+wds\s+\S+$`, `^default\s+wds\s`, `^inventory\s+inventory\s`, `^system\s+system\s`)

	// The admin kubeconfig gets the new space's context; it serves, with
	// the workload CRDs.
	poll.Until(t, "the kc-team context", func() error {
		_, err := r.kubectl(t, "--context=kc-team", "get", "edgeplacements")
		return err
	})
	r.mustKubectl(t, "--context=kc-team", "create", "configmap", "settings", "-n", "default", "--from-literal=a=b")
	if got := lines(r.mustKubectl(t, "--context=kc-team", "get", "configmaps", "-n", "default", "-o", "name")); !slices.Equal(got, []string{"configmap/settings"}) {
		t.Errorf("kc-team holds %q", got)
	}
	if got := r.mustKubectl(t, "get", "configmaps", "-n", "default", "-o", "name"); strings.Contains(got, "settings") {
		t.Errorf("the default space sees kc-team's configmap:\n%s", got)
	}

	// Bad input: nothing is created.
	for _, c := range []struct{ manifest, want string }{
		{spaceYAML("kc-bad", "{kind: mailbox}"), `spec.kind: Unsupported value: "mailbox"`},
		{spaceYAML("kc-bad", "{backend: helm}"), `spec.backend: Unsupported value: "helm"`},
		{spaceYAML("kc-bad", "{backend: kube}"), `spec.kubeconfigSecret.name: Required value`},
		{spaceYAML("kc_bad", ""), `metadata.name: Invalid value: "kc_bad"`},
		{spaceYAML("mailbox-kc", ""), `metadata.name: Invalid value: "mailbox-kc": is reserved`},
		{spaceYAML("inventory", ""), `spaces.canopy.dev "inventory" already exists`},
	} {
		if _, err := r.kubectlIn(t, c.manifest, nil, sys, "create", "-f", "-"); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("create %q: %v, want %q", c.manifest, err, c.want)
		}
	}
	if _, err := r.kubectl(t, sys, "delete", "space", "default"); err == nil || !strings.Contains(err.Error(), "Forbidden") || !strings.Contains(err.Error(), "built in") {
		t.Errorf("delete space default: %v, want Forbidden: built in", err)
	}

	// RBAC: alice may create spaces once a ClusterRole of the system
	// space says so.
	if _, err := r.kubectlIn(t, spaceYAML("kc-alice", ""), nil, sys, "--as=alice", "create", "-f", "-"); err == nil || !strings.Contains(err.Error(), "forbidden") {
		t.Errorf("alice creates a space without a rule: %v, want forbidden", err)
	}
	r.mustKubectl(t, sys, "create", "clusterrole", "kc-space-creator", "--verb=create,get,list", "--resource=spaces.canopy.dev")
	r.mustKubectl(t, sys, "create", "clusterrolebinding", "kc-alice-spaces", "--clusterrole=kc-space-creator", "--user=alice")
	poll.Until(t, "alice to create a space", func() error {
		_, err := r.kubectlIn(t, spaceYAML("kc-alice", ""), nil, sys, "--as=alice", "create", "-f", "-")
		return err
	})
	if out, _ := r.kubectl(t, sys, "auth", "can-i", "delete", "spaces", "--as=alice"); strings.TrimSpace(out) != "no" {
		t.Errorf("can alice delete spaces: %q, want no", out)
	}
	if out, _ := r.kubectl(t, sys, "auth", "can-i", "create", "spaces", "--as=alice"); strings.TrimSpace(out) != "yes" {
		t.Errorf("can alice create spaces: %q, want yes", out)
	}

	// Delete: the spaces and their objects go.
	out = r.mustKubectl(t, sys, "delete", "spaces", "kc-team", "kc-alice")
	wantContains(t, "delete", out, `space.canopy.dev "kc-team" deleted`, `space.canopy.dev "kc-alice" deleted`)
	if out := r.mustKubectl(t, sys, "get", "spaces", "-o", "name"); strings.Contains(out, "kc-") {
		t.Errorf("spaces after the delete:\n%s", out)
	}
	if _, err := r.kubectl(t, "--server="+r.Server()+"/spaces/kc-team", "get", "configmaps", "-n", "default"); err == nil {
		t.Error("the deleted space still serves")
	}
}

func testKubectlEndpoints(t *testing.T, r *root, _ *kubernetes.Clientset) {
	for _, path := range []string{"/healthz", "/livez", "/readyz"} {
		if out := r.mustKubectl(t, "get", "--raw="+path); strings.TrimSpace(out) != "ok" {
			t.Errorf("%s: %q", path, out)
		}
	}
	var v struct{ Major, Minor, GitVersion string }
	if err := json.Unmarshal([]byte(r.mustKubectl(t, "get", "--raw=/version")), &v); err != nil || v.Major != "1" || v.GitVersion == "" {
		t.Errorf("/version: %+v %v", v, err)
	}
	r.mustKubectl(t, "get", "configmaps", "-n", "default")
	metrics := r.mustKubectl(t, "get", "--raw=/metrics")
	wantMatch(t, "/metrics", metrics,
		`^apiserver_request_total\{.*verb="LIST".*\} \d+`,
		`^apiserver_request_duration_seconds_bucket\{`,
		`^canopy_store_objects \d+`,
		`^canopy_api_watches \d+`)
}
