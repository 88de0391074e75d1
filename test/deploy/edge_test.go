package deploy

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/utils/ptr"

	"github.com/canopy-dev/canopy/syncer"
	"github.com/canopy-dev/canopy/test/kubecluster"
	"github.com/canopy-dev/canopy/test/poll"
	"github.com/canopy-dev/canopy/test/procs"
	"github.com/canopy-dev/canopy/test/relaybin"
)

// The files of the in-cluster configuration (client-go's
// rest.InClusterConfig) as Kubernetes mounts them in a pod.
const serviceAccountDir = "/var/run/secrets/kubernetes.io/serviceaccount"

// inPod is a shell script that gives the command it runs ("$@") the
// filesystem view of a pod's ServiceAccount: in a mount namespace of its
// own (unshare --mount, private propagation: the host sees nothing), a
// tmpfs on /run (/var/run) holds the mount point of $SA_DIR at
// serviceAccountDir.
const inPod = `set -e
run=$(readlink -f /var/run)
mount -t tmpfs -o mode=0755 tmpfs "$run"
mkdir -p ` + serviceAccountDir + `
mount --bind "$SA_DIR" ` + serviceAccountDir + `
exec "$@"`

// TestEdgeWithChartRBAC runs an edge relay as the chart runs it, with
// exactly the chart's ServiceAccount, ClusterRole and ClusterRoleBinding
// applied to a real kube-apiserver, a token of that ServiceAccount
// (TokenRequest) and the in-cluster environment, and the chart's flags.
// It joins a root relay with --join-token-file and applies what an
// EdgePlacement places; a kind the ClusterRole does not allow fails with
// the cluster's 403 in the placement's status at the root and in the
// edge's log.
func TestEdgeWithChartRBAC(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Fatal("the edge runs in a mount namespace of its own (unshare --mount): run the tests as root")
	}
	unshare, err := exec.LookPath("unshare")
	if err != nil {
		t.Fatalf("unshare (util-linux) runs the edge in a mount namespace of its own: %v", err)
	}
	c := kubecluster.Start(t, kubecluster.Options{Minimal: true})
	root := startRoot(t)
	ctx := t.Context()
	cs := c.Clientset(t)
	if _, err := cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: namespace}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}

	// The chart's edge, with the default RBAC.
	manifest, err := renderChart(t, fmt.Sprintf(`
root: {enabled: false}
edge:
  enabled: true
  name: edge-1
  parent: [%q]
  labels: {env: test}
  joinToken: {secretName: canopy-join-token, key: token}
`, root.link))
	if err != nil {
		t.Fatal(err)
	}
	objs := objects(t, manifest)
	var rbac []*unstructured.Unstructured
	for _, o := range objs {
		switch o.GetKind() {
		case "ServiceAccount", "ClusterRole", "ClusterRoleBinding", "Role", "RoleBinding":
			rbac = append(rbac, o)
		}
	}
	dyn, mapper := dynamicClient(t, c)
	applyAll(t, ctx, dyn, mapper, rbac, false)
	if t.Failed() {
		t.FailNow()
	}
	t.Logf("applied the chart's %s", names(rbac))

	// What Kubernetes mounts in the edge's pod: a token of its
	// ServiceAccount, the cluster's CA and the namespace.
	saDir := t.TempDir()
	tr, err := cs.CoreV1().ServiceAccounts(namespace).CreateToken(ctx, "canopy-edge",
		&authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: ptr.To[int64](3600)}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("TokenRequest for ServiceAccount canopy-edge: %v", err)
	}
	for name, content := range map[string]string{"token": tr.Status.Token, "ca.crt": string(c.RESTConfig().CAData), "namespace": namespace} {
		if err := os.WriteFile(filepath.Join(saDir, name), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	// The join token, as the Secret is mounted.
	tokenDir := t.TempDir()
	if err := os.WriteFile(filepath.Join(tokenDir, "token"), []byte(root.token(t)), 0o600); err != nil {
		t.Fatal(err)
	}

	// The chart's flags, with the pod's paths made the test's.
	status := procs.FreeAddr(t)
	dataDir := filepath.Join(t.TempDir(), "edge-1")
	var args []string
	for _, a := range containerArgs(t, find(t, objs, "Deployment", "canopy-edge"), "relay") {
		switch {
		case strings.HasPrefix(a, "--data-dir="):
			a = "--data-dir=" + dataDir
		case strings.HasPrefix(a, "--join-token-file=/etc/canopy/join-token/"):
			a = "--join-token-file=" + filepath.Join(tokenDir, strings.TrimPrefix(a, "--join-token-file=/etc/canopy/join-token/"))
		case strings.HasPrefix(a, "--status-addr="):
			a = "--status-addr=" + status
		}
		args = append(args, a)
	}
	apiURL, err := url.Parse(c.Host)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(unshare, append([]string{"--mount", "--propagation", "private", "sh", "-c", inPod, "sh", relaybin.For(t)}, args...)...)
	cmd.Env = append(slices.DeleteFunc(os.Environ(), func(kv string) bool { return strings.HasPrefix(kv, "KUBERNETES_") }),
		"SA_DIR="+saDir, "KUBERNETES_SERVICE_HOST="+apiURL.Hostname(), "KUBERNETES_SERVICE_PORT="+apiURL.Port())
	edge := procs.Start(t, "edge", cmd)
	t.Logf("edge: relay %s", strings.Join(args, " "))

	edgeJoined(t, edge, status, root)

	t.Run("a placement reaches the cluster", func(t *testing.T) {
		placeSynced(t, root, placedConfigMap, "shop")
		poll.Until(t, "the ConfigMap in the real cluster", func() error {
			cm, err := cs.CoreV1().ConfigMaps("shop").Get(ctx, "settings", metav1.GetOptions{})
			if err != nil {
				return err
			}
			if cm.Data["color"] != "blue" || cm.Labels[syncer.ManagedLabel] != "true" {
				return fmt.Errorf("ConfigMap %v %v", cm.Labels, cm.Data)
			}
			return nil
		}, poll.For(60*time.Second))
	})

	t.Run("a kind the RBAC does not allow fails clearly", func(t *testing.T) {
		if _, err := root.kubectl(t, placedSecret, "apply", "-f", "-"); err != nil {
			t.Fatal(err)
		}
		var cond condition
		poll.Until(t, "the placement failing at the root", func() error {
			c, err := synced(t, root, "vault")
			if err != nil {
				return err
			}
			cond = c
			if c.Status != "False" || c.Reason != "Failed" {
				return fmt.Errorf("Synced %s: %s: %s", c.Status, c.Reason, c.Message)
			}
			return nil
		}, poll.For(60*time.Second))
		t.Logf("Synced: %s %s: %s", cond.Status, cond.Reason, cond.Message)
		// The message names the destination, the object and the
		// cluster's answer: the ServiceAccount may not patch secrets.
		for _, want := range []string{"1 of 1 destinations failed to apply", "edge-1", "secrets", "forbidden", "system:serviceaccount:canopy:canopy-edge"} {
			if !strings.Contains(cond.Message, want) {
				t.Errorf("Synced condition %q does not say %q", cond.Message, want)
			}
		}
		poll.Until(t, "the edge's log", func() error {
			for line := range strings.Lines(edge.Output()) {
				if strings.Contains(line, `"object not applied"`) && strings.Contains(line, "forbidden") && strings.Contains(line, "secrets") {
					t.Logf("edge: %s", strings.TrimSpace(line))
					return nil
				}
			}
			return errors.New("no WARN object not applied ... forbidden in the edge's log")
		}, poll.For(10*time.Second))
		if _, err := cs.CoreV1().Secrets("shop").Get(ctx, "password", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
			t.Errorf("the Secret in the cluster: %v; want none", err)
		}
	})
}

// condition is a metav1.Condition as kubectl prints it.
type condition struct {
	Type, Status, Reason, Message string
}

// synced is the Synced condition of EdgePlacement name at the root.
func synced(t testing.TB, root *rootRelay, name string) (condition, error) {
	t.Helper()
	out, err := root.kubectl(t, "", "get", "edgeplacement", name, "-o", "json")
	if err != nil {
		return condition{}, err
	}
	var p struct {
		Status struct{ Conditions []condition } `json:"status"`
	}
	if err := json.Unmarshal([]byte(out), &p); err != nil {
		return condition{}, err
	}
	for _, c := range p.Status.Conditions {
		if c.Type == "Synced" {
			return c, nil
		}
	}
	return condition{}, errors.New("no Synced condition yet")
}

// edgeJoined waits until the edge process, whose status endpoint is
// status, has joined, and makes the root's Location select it
// (--labels=env=test).
func edgeJoined(t *testing.T, edge *procs.Process, status string, root *rootRelay) {
	t.Helper()
	edge.Until(t, "the edge joined", func() error {
		return httpOK("http://" + status + "/readyz")
	}, poll.For(60*time.Second))
	if _, err := root.kubectl(t, locations, "--context=inventory", "apply", "-f", "-"); err != nil {
		t.Fatal(err)
	}
}

// placeSynced applies manifest at the root and waits until its
// EdgePlacement name is Synced.
func placeSynced(t *testing.T, root *rootRelay, manifest, name string) {
	t.Helper()
	poll.Until(t, "applying "+name, func() error {
		_, err := root.kubectl(t, manifest, "apply", "-f", "-")
		return err
	}, poll.For(30*time.Second))
	poll.Until(t, name+" Synced", func() error {
		c, err := synced(t, root, name)
		if err == nil && c.Status != "True" {
			err = fmt.Errorf("Synced %s: %s: %s", c.Status, c.Reason, c.Message)
		}
		return err
	}, poll.For(60*time.Second))
}

// locations select the edge (--labels=env=test) at the root.
const locations = `apiVersion: edge.canopy.dev/v1alpha1
kind: Location
metadata: {name: test, labels: {env: test}}
spec:
  instanceSelector: {matchLabels: {env: test}}
`

// placedConfigMap: a namespace and a ConfigMap, kinds the chart's default
// RBAC allows.
const placedConfigMap = `apiVersion: v1
kind: Namespace
metadata: {name: shop}
---
apiVersion: v1
kind: ConfigMap
metadata: {name: settings, namespace: shop}
data: {color: blue}
---
apiVersion: edge.canopy.dev/v1alpha1
kind: EdgePlacement
metadata: {name: shop}
spec:
  locationSelectors:
  - matchLabels: {env: test}
  downsync:
  - apiGroup: ""
    resources: [namespaces]
    objectNames: [shop]
  - apiGroup: ""
    resources: [configmaps]
    namespaces: [shop]
`

// placedSecret: a Secret, which the chart's default RBAC does not allow.
const placedSecret = `apiVersion: v1
kind: Secret
metadata: {name: password, namespace: shop}
stringData: {password: hunter2}
---
apiVersion: edge.canopy.dev/v1alpha1
kind: EdgePlacement
metadata: {name: vault}
spec:
  locationSelectors:
  - matchLabels: {env: test}
  downsync:
  - apiGroup: ""
    resources: [secrets]
    namespaces: [shop]
`
