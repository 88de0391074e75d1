package server

// End-to-end tests and benchmarks of the edge syncer against real
// Kubernetes clusters (test/kubecluster: etcd, kube-apiserver,
// kube-controller-manager, kube-scheduler and kwok), driven with the stock
// kubectl against the root's admin kubeconfig. See docs/testing.md and
// docs/benchmarks.md ("Edge syncer on real clusters").

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"reflect"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/util/retry"

	"github.com/canopy-dev/canopy/relay/layout"
	"github.com/canopy-dev/canopy/relay/pki"
	"github.com/canopy-dev/canopy/relay/store"
	"github.com/canopy-dev/canopy/syncer"
	"github.com/canopy-dev/canopy/test/kubecluster"
	"github.com/canopy-dev/canopy/test/poll"
	edgev1alpha1 "github.com/canopy-dev/canopy/topology/api/v1alpha1"
)

// goroutineTB lets kubecluster.Start run on another goroutine than the
// test's: a fatal error is recorded and ends that goroutine only; the
// caller reports it from the test's goroutine.
type goroutineTB struct {
	testing.TB
	mu  sync.Mutex
	msg string
}

func (g *goroutineTB) record(s string) {
	g.mu.Lock()
	g.msg = s
	g.mu.Unlock()
	runtime.Goexit()
}
func (g *goroutineTB) Fatal(args ...any)                 { g.record(fmt.Sprint(args...)) }
func (g *goroutineTB) Fatalf(format string, args ...any) { g.record(fmt.Sprintf(format, args...)) }
func (g *goroutineTB) FailNow()                          { g.record("FailNow") }

// startClusters starts one real cluster per options, in parallel.
func startClusters(t testing.TB, opts ...kubecluster.Options) []*kubecluster.Cluster {
	t.Helper()
	began := time.Now()
	out := make([]*kubecluster.Cluster, len(opts))
	tbs := make([]*goroutineTB, len(opts))
	var wg sync.WaitGroup
	for i, o := range opts {
		tbs[i] = &goroutineTB{TB: t}
		wg.Add(1)
		go func() {
			defer wg.Done()
			out[i] = kubecluster.Start(tbs[i], o)
		}()
	}
	wg.Wait()
	for i, g := range tbs {
		if g.msg != "" || out[i] == nil {
			t.Fatalf("cluster %d: %s", i, g.msg)
		}
	}
	t.Logf("%d real clusters up in %v", len(opts), time.Since(began).Round(time.Millisecond))
	return out
}

// startClustersInBackground runs startClusters on another goroutine, while
// the caller starts relays; what it returns waits for the clusters, on the
// test's goroutine.
func startClustersInBackground(t testing.TB, opts ...kubecluster.Options) (wait func() []*kubecluster.Cluster) {
	t.Helper()
	var clusters []*kubecluster.Cluster
	done := make(chan struct{})
	ctb := &goroutineTB{TB: t}
	go func() {
		defer close(done)
		clusters = startClusters(ctb, opts...)
	}()
	return func() []*kubecluster.Cluster {
		t.Helper()
		<-done
		if ctb.msg != "" || clusters == nil {
			t.Fatal(ctb.msg)
		}
		return clusters
	}
}

// realTree is a root, one region (on disk, on a fixed port, so it can be
// restarted) and edges, each on its own real cluster; with
// realTreeOptions.backing, also a Minimal cluster to back a space.
type realTree struct {
	root      *Root
	token     string
	regionCfg ChildConfig
	region    *Child
	stopReg   func()
	edges     map[string]*Child
	edgeCfg   map[string]ChildConfig
	stops     map[string]func()
	clusters  map[string]*kubecluster.Cluster
	dyn       map[string]dynamic.Interface
	wds, inv  dynamic.Interface
	home      string
	backing   *kubecluster.Cluster // realTreeOptions.backing
}

// realTreeOptions adds to what startRealTreeWith starts.
type realTreeOptions struct {
	// backing starts a Minimal cluster (realTree.backing) beside the
	// edges' clusters, for a workload description space to be backed by.
	backing bool
	// minimal puts the edges on Minimal clusters (API only: nothing runs
	// Pods), which start faster.
	minimal bool
}

func startRealTree(t testing.TB, edges map[string]map[string]string) *realTree {
	t.Helper()
	return startRealTreeWith(t, edges, realTreeOptions{})
}

func startRealTreeWith(t testing.TB, edges map[string]map[string]string, opts realTreeOptions) *realTree {
	t.Helper()
	names := make([]string, 0, len(edges))
	for n := range edges {
		names = append(names, n)
	}
	slices.Sort(names)
	// The clusters take longest: start them while the relays come up.
	copts := slices.Repeat([]kubecluster.Options{{Nodes: 1, Minimal: opts.minimal}}, len(names))
	if opts.backing {
		copts = append(copts, kubecluster.Options{Minimal: true})
	}
	waitClusters := startClustersInBackground(t, copts...)
	root := startTestRoot(t)
	rt := &realTree{root: root, token: joinToken(t, root), edges: map[string]*Child{}, edgeCfg: map[string]ChildConfig{},
		stops: map[string]func(){}, clusters: map[string]*kubecluster.Cluster{}, dyn: map[string]dynamic.Interface{}, home: t.TempDir()}
	rt.regionCfg = ChildConfig{Role: pki.RoleRegion, Name: "r1", DataDir: t.TempDir(),
		Parents: []string{root.LinkAddr()}, JoinToken: rt.token, LinkAddr: freeTCPPort(t)}
	rt.startRegion(t)
	poll.True(t, "region serving", func() bool { return rt.region.Uplink().Connected() && rt.region.LinkAddr() != "" })
	poll.True(t, "the workload CRDs", func() bool { return root.crds.ready() == nil })
	var err error
	if rt.wds, err = root.spaceClient(layout.DefaultSpace); err != nil {
		t.Fatal(err)
	}
	if rt.inv, err = root.spaceClient(layout.InventorySpace); err != nil {
		t.Fatal(err)
	}
	clusters := waitClusters()
	if opts.backing {
		rt.backing = clusters[len(names)]
	}
	for i, name := range names {
		c := clusters[i]
		rt.clusters[name] = c
		if rt.dyn[name], err = dynamic.NewForConfig(c.RESTConfig()); err != nil {
			t.Fatal(err)
		}
		rt.edgeCfg[name] = ChildConfig{Role: pki.RoleEdge, Name: name, DataDir: t.TempDir(),
			Parents: []string{rt.regionCfg.LinkAddr}, JoinToken: rt.token, Kubeconfig: c.Kubeconfig, Labels: edges[name]}
		rt.startEdge(t, name)
	}
	poll.True(t, "every edge announced", func() bool {
		dests, _ := root.down.Subtree()
		return len(dests) == len(edges)
	})
	poll.True(t, "SyncTargets for every edge", func() bool {
		l, err := rt.inv.Resource(edgev1alpha1.SyncTargetsGVR).List(context.Background(), metav1.ListOptions{})
		return err == nil && len(l.Items) == len(edges)
	})
	return rt
}

func (rt *realTree) startRegion(t testing.TB) {
	t.Helper()
	c, err := OpenChild(rt.regionCfg, quiet)
	if err != nil {
		t.Fatal(err)
	}
	rt.region, rt.stopReg = c, serveInBackground(t, "r1", c.Serve)
	rt.regionCfg.JoinToken = "" // joined: restarts use the identity on disk
}

func (rt *realTree) startEdge(t testing.TB, name string) {
	t.Helper()
	c, err := OpenChild(rt.edgeCfg[name], quiet)
	if err != nil {
		t.Fatal(err)
	}
	rt.edges[name], rt.stops[name] = c, serveInBackground(t, name, c.Serve)
	cfg := rt.edgeCfg[name]
	cfg.JoinToken = ""
	rt.edgeCfg[name] = cfg
}

// kubectl runs the stock kubectl ($KUBECTL, else on PATH) against the
// root's admin kubeconfig.
func (rt *realTree) kubectl(t testing.TB, stdin string, args ...string) (string, error) {
	t.Helper()
	return kubecluster.RunKubectl(t, rt.home, rt.root.KubeconfigPath(), stdin, nil, args...)
}

func (rt *realTree) mustKubectl(t testing.TB, stdin string, args ...string) string {
	t.Helper()
	out, err := rt.kubectl(t, stdin, args...)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

var (
	widgetGVR = schema.GroupVersionResource{Group: "example.com", Version: "v1", Resource: "widgets"}
)

const realWorkload = `apiVersion: v1
kind: Namespace
metadata: {name: shop}
---
apiVersion: v1
kind: ConfigMap
metadata: {name: settings, namespace: shop}
data: {color: blue}
---
apiVersion: v1
kind: ConfigMap
metadata: {name: extra, namespace: shop}
data: {keep: "no"}
---
apiVersion: apps/v1
kind: Deployment
metadata: {name: web, namespace: shop}
spec:
  replicas: 2
  selector: {matchLabels: {app: web}}
  template:
    metadata: {labels: {app: web}}
    spec: {containers: [{name: web, image: "web:1"}]}
---
apiVersion: apps/v1
kind: Deployment
metadata: {name: solo, namespace: shop}
spec:
  replicas: 1
  selector: {matchLabels: {app: solo}}
  template:
    metadata: {labels: {app: solo}}
    spec: {containers: [{name: solo, image: "solo:1"}]}
---
apiVersion: edge.canopy.dev/v1alpha1
kind: StatusCollector
metadata: {name: ready}
spec:
  combinedFields:
  - {name: destinations, type: COUNT}
  - {name: ready, type: SUM, subject: "obj.status.?readyReplicas.orValue(0)"}
---
apiVersion: edge.canopy.dev/v1alpha1
kind: EdgePlacement
metadata: {name: fleet}
spec:
  locationSelectors:
  - matchLabels: {fleet: "yes"}
  downsync:
  - apiGroup: apiextensions.k8s.io
    resources: [customresourcedefinitions]
    objectNames: [widgets.example.com]
  - apiGroup: example.com
    resources: [widgets]
    namespaces: [shop]
  - apiGroup: ""
    resources: [configmaps]
    namespaces: [shop]
  - apiGroup: apps
    resources: [deployments]
    namespaces: [shop]
    objectNames: [web]
  upsync:
  - apiGroup: ""
    resources: [configmaps]
    namespaces: [shop]
    names: [report-1]
  statusCollectors: [ready]
---
apiVersion: edge.canopy.dev/v1alpha1
kind: EdgePlacement
metadata: {name: solo}
spec:
  locationSelectors:
  - matchLabels: {site: a}
  downsync:
  - apiGroup: apps
    resources: [deployments]
    namespaces: [shop]
    objectNames: [solo]
  wantSingletonReportedState: true
`

const realCRD = `apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata: {name: widgets.example.com}
spec:
  group: example.com
  scope: Namespaced
  names: {plural: widgets, singular: widget, kind: Widget, listKind: WidgetList}
  versions:
  - name: v1
    served: true
    storage: true
    schema:
      openAPIV3Schema:
        type: object
        properties:
          spec:
            type: object
            properties:
              size: {type: integer}
`

const realLocations = `apiVersion: edge.canopy.dev/v1alpha1
kind: Location
metadata: {name: fleet, labels: {fleet: "yes"}}
spec:
  instanceSelector: {matchLabels: {fleet: "yes"}}
---
apiVersion: edge.canopy.dev/v1alpha1
kind: Location
metadata: {name: site-a, labels: {site: a}}
spec:
  instanceSelector: {matchLabels: {site: a}}
`

// realSpace is where the user of the real-cluster suite writes the
// workload and reads its status: the root's space for an embedded one,
// the backing cluster for a kube-backed one.
type realSpace struct {
	// name is the space's name at the root, and its context in the
	// root's admin kubeconfig.
	name string
	// kubeconfig is what the user's kubectl runs with (its current
	// context).
	kubeconfig string
	// withdraw ends every placement of the space.
	withdraw func(t *testing.T)
}

// kubectl runs the stock kubectl where the user of s writes and reads.
func (s realSpace) kubectl(t testing.TB, rt *realTree, stdin string, args ...string) (string, error) {
	t.Helper()
	return kubecluster.RunKubectl(t, rt.home, s.kubeconfig, stdin, nil, args...)
}

func (s realSpace) mustKubectl(t testing.TB, rt *realTree, stdin string, args ...string) string {
	t.Helper()
	out, err := s.kubectl(t, rt, stdin, args...)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// TestRealClustersEndToEnd runs the real-cluster suite (realSuite) twice
// on one tree, two edges each on its own real cluster: in the root's
// default space (embedded), then in a space backed by a third, Minimal
// cluster (kube), where the user writes the workload and reads its status
// with kubectl against that cluster. Each run ends by withdrawing its
// placements (the embedded one deletes them, the kube one deletes its
// Space), which clears the edges for the next.
func TestRealClustersEndToEnd(t *testing.T) {
	began := time.Now()
	rt := startRealTreeWith(t, map[string]map[string]string{
		"e1": {"fleet": "yes", "site": "a"},
		"e2": {"fleet": "yes", "site": "b"},
	}, realTreeOptions{backing: true})
	t.Logf("tree and clusters up: %v", time.Since(began).Round(time.Millisecond))
	rt.mustKubectl(t, realLocations, "--context=inventory", "apply", "-f", "-")

	embedded := realSpace{name: layout.DefaultSpace, kubeconfig: rt.root.KubeconfigPath(), withdraw: func(t *testing.T) {
		rt.mustKubectl(t, "", "delete", "edgeplacements", "fleet", "solo")
	}}
	if !t.Run("embedded", func(t *testing.T) { realSuite(t, rt, embedded) }) {
		t.Fatal("the embedded run failed: the edges may hold its objects, which the kube run would meet")
	}

	kube := realSpace{name: backedSpaceName, kubeconfig: rt.backing.Kubeconfig, withdraw: func(t *testing.T) {
		rt.mustKubectl(t, "", "--context=system", "delete", "space", backedSpaceName)
	}}
	t.Run("kube", func(t *testing.T) {
		createKubeSpace(t, rt.root, rt.home, backedSpaceName, rt.backing.Kubeconfig)
		realSuite(t, rt, kube)
		// The backing cluster's own objects are left as they are.
		out := kube.mustKubectl(t, rt, "", "get", "namespace/shop", "configmap/settings", "deployments/web", "deployments/solo",
			"widgets/w1", "edgeplacements/fleet", "-n", "shop", "-o", "name")
		t.Logf("the backing cluster after the space's deletion:\n%s", out)
	})
	t.Logf("total %v", time.Since(began).Round(time.Millisecond))
}

// realSuite: kubectl where the user of space s looks places a namespace,
// a CRD and its custom resource, two ConfigMaps and a Deployment on two
// edges, each on its own real cluster, and a second Deployment on one of
// them with singleton reported state. It checks, in the real clusters:
// the CRD Established before its CR, every object managed, the
// Deployments Available; where the user looks: the CombinedStatus (2
// destinations, 4 ready replicas), the placement Synced (kubectl wait),
// the singleton status; at the root, the space's objects through its
// context; then prune, drift correction, upsync (into the root's reports
// store and the space), and the withdrawal of every placement: nothing of
// the space is left at the edges or in the root's downsync space.
func realSuite(t *testing.T, rt *realTree, s realSpace) {
	began := time.Now()
	ctx := context.Background()

	s.mustKubectl(t, rt, realCRD, "apply", "-f", "-")
	poll.Until(t, "the space to serve widgets", func() error {
		_, err := s.kubectl(t, rt, "", "get", "widgets", "-A")
		return err
	})
	s.mustKubectl(t, rt, realWorkload, "apply", "-f", "-")
	s.mustKubectl(t, rt, "apiVersion: example.com/v1\nkind: Widget\nmetadata: {name: w1, namespace: shop}\nspec: {size: 3}\n", "apply", "-f", "-")

	managed := func(u *unstructured.Unstructured) bool { return u.GetLabels()[syncer.ManagedLabel] == "true" }
	poll.Until(t, "both clusters to hold everything, Deployments Available", func() error {
		for name, c := range rt.dyn {
			crd, err := c.Resource(crdGVR).Get(ctx, "widgets.example.com", metav1.GetOptions{})
			if err != nil {
				return fmt.Errorf("%s: crd: %v", name, err)
			}
			var established time.Time
			conds, _, _ := unstructured.NestedSlice(crd.Object, "status", "conditions")
			for _, co := range conds {
				m := co.(map[string]any)
				if m["type"] == "Established" && m["status"] == "True" {
					established, _ = time.Parse(time.RFC3339, m["lastTransitionTime"].(string))
				}
			}
			if established.IsZero() || !managed(crd) {
				return fmt.Errorf("%s: crd not established or not managed", name)
			}
			w, err := c.Resource(widgetGVR).Namespace("shop").Get(ctx, "w1", metav1.GetOptions{})
			if err != nil {
				return fmt.Errorf("%s: widget: %v", name, err)
			}
			// Order: the CR was created once its CRD was Established
			// (second resolution on both timestamps).
			if w.GetCreationTimestamp().Time.Before(established) || !managed(w) {
				return fmt.Errorf("%s: widget created %v, crd established %v, labels %v", name, w.GetCreationTimestamp(), established, w.GetLabels())
			}
			for _, o := range []struct {
				gvr      schema.GroupVersionResource
				ns, name string
			}{{nsGVR, "", "shop"}, {cmGVR, "shop", "settings"}, {cmGVR, "shop", "extra"}, {deployGVR, "shop", "web"}} {
				u, err := c.Resource(o.gvr).Namespace(o.ns).Get(ctx, o.name, metav1.GetOptions{})
				if err != nil || !managed(u) {
					return fmt.Errorf("%s: %s %s: %v", name, o.gvr.Resource, o.name, err)
				}
			}
			d, _ := c.Resource(deployGVR).Namespace("shop").Get(ctx, "web", metav1.GetOptions{})
			ready, _, _ := unstructured.NestedInt64(d.Object, "status", "readyReplicas")
			if !deploymentAvailable(d) || ready != 2 {
				return fmt.Errorf("%s: deployment web not available (ready %d)", name, ready)
			}
		}
		return nil
	}, poll.For(60*time.Second))
	// The single placement put solo on e1 only.
	if _, err := rt.dyn["e2"].Resource(deployGVR).Namespace("shop").Get(ctx, "solo", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Fatalf("e2 holds solo (%v)", err)
	}

	poll.Until(t, "CombinedStatus where the user looks: 2 destinations, 4 ready", func() error {
		out, err := s.kubectl(t, rt, "", "get", "combinedstatuses", "-n", "shop", "-o", "json")
		if err != nil {
			return err
		}
		var l struct {
			Items []struct {
				Object    struct{ Resource, Name string } `json:"object"`
				Placement string                          `json:"placement"`
				Results   []struct {
					ColumnNames []string `json:"columnNames"`
					Rows        []struct {
						Columns []any `json:"columns"`
					} `json:"rows"`
				} `json:"results"`
				Destinations int `json:"destinations"`
			} `json:"items"`
		}
		if err := json.Unmarshal([]byte(out), &l); err != nil {
			return err
		}
		for _, it := range l.Items {
			if it.Object.Name != "web" || it.Placement != "fleet" || len(it.Results) != 1 || len(it.Results[0].Rows) != 1 {
				continue
			}
			cols := fmt.Sprint(it.Results[0].Rows[0].Columns)
			if cols != "[2 4]" || it.Destinations != 2 {
				return fmt.Errorf("columns %v %s, destinations %d", it.Results[0].ColumnNames, cols, it.Destinations)
			}
			return nil
		}
		return errors.New(out)
	})
	s.mustKubectl(t, rt, "", "wait", "--for=condition=Synced", "edgeplacement/fleet", "--timeout=60s")
	t.Logf("kubectl get edgeplacements:\n%s", s.mustKubectl(t, rt, "", "get", "edgeplacements"))

	// Singleton reported state: solo where the user looks carries e1's
	// status.
	poll.Until(t, "solo's status where the user looks equal to e1's", func() error {
		out, err := s.kubectl(t, rt, "", "get", "deployment", "solo", "-n", "shop", "-o", "json")
		if err != nil {
			return err
		}
		var atSpace unstructured.Unstructured
		if err := atSpace.UnmarshalJSON([]byte(out)); err != nil {
			return err
		}
		live, err := rt.dyn["e1"].Resource(deployGVR).Namespace("shop").Get(ctx, "solo", metav1.GetOptions{})
		if err != nil {
			return err
		}
		ss, _, _ := unstructured.NestedMap(atSpace.Object, "status")
		ls, _, _ := unstructured.NestedMap(live.Object, "status")
		ready, _, _ := unstructured.NestedInt64(atSpace.Object, "status", "readyReplicas")
		if ready != 1 || !reflect.DeepEqual(ss, ls) {
			return fmt.Errorf("space %v, e1 %v", ss, ls)
		}
		return nil
	})

	// The root serves the space at its context, with the space's objects.
	poll.Until(t, "the root's context "+s.name+" to list the Deployments", func() error {
		out, err := rt.kubectl(t, "", "--context="+s.name, "get", "deployments", "-n", "shop", "-o", "name")
		if err != nil {
			return err
		}
		if got := strings.Fields(out); !slices.Equal(got, []string{"deployment.apps/solo", "deployment.apps/web"}) {
			return fmt.Errorf("%q", out)
		}
		return nil
	})

	// Prune: the ConfigMap deleted in the space leaves both clusters; the
	// other stays.
	s.mustKubectl(t, rt, "", "delete", "configmap", "extra", "-n", "shop")
	poll.Until(t, "extra pruned from both clusters", func() error {
		for name, c := range rt.dyn {
			if _, err := c.Resource(cmGVR).Namespace("shop").Get(ctx, "extra", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
				return fmt.Errorf("%s: extra still there (%v)", name, err)
			}
			if _, err := c.Resource(cmGVR).Namespace("shop").Get(ctx, "settings", metav1.GetOptions{}); err != nil {
				return fmt.Errorf("%s: settings: %v", name, err)
			}
		}
		return nil
	})

	// Drift: a managed field edited in e2's cluster is put back.
	patch := []byte(`{"data":{"color":"red"}}`)
	if _, err := rt.dyn["e2"].Resource(cmGVR).Namespace("shop").Patch(ctx, "settings", types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	poll.Until(t, "drift in e2 corrected", func() error {
		cm, err := rt.dyn["e2"].Resource(cmGVR).Namespace("shop").Get(ctx, "settings", metav1.GetOptions{})
		if err != nil {
			return err
		}
		color, _, _ := unstructured.NestedString(cm.Object, "data", "color")
		if color != "blue" {
			return fmt.Errorf("color %s", color)
		}
		return nil
	})

	// Upsync: a ConfigMap created in e1's cluster, named by the upsync
	// clause, reaches the root (the region's reports space).
	if _, err := rt.dyn["e1"].Resource(cmGVR).Namespace("shop").Create(ctx, &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "v1", "kind": "ConfigMap", "metadata": map[string]any{"name": "report-1", "namespace": "shop"},
		"data": map[string]any{"violations": "0"}}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	// It arrives in the root's store, in the region's reports space.
	poll.Until(t, "report-1 upsynced to the root's reports-r1 space", func() error {
		o, err := rt.root.Reports().Get(store.Key{Space: layout.ReportsSpace("r1"), Resource: store.Resource{Resource: "configmaps"}, Namespace: "shop", Name: "e1.report-1"})
		if err != nil {
			return fmt.Errorf("%w; edge outbox: %s; region outbox: %s", err,
				spaceKeys(rt.edges["e1"].Store(), layout.OutboxSpace), spaceKeys(rt.region.Store(), layout.OutboxSpace))
		}
		if !strings.Contains(string(o.Data), `"violations":"0"`) {
			return errors.New(string(o.Data))
		}
		return nil
	})
	// ... and readable at the root with kubectl, in the region's reports
	// space.
	if out, err := rt.kubectl(t, "", "--context=reports-r1", "get", "configmaps", "-A", "-o", "name"); err != nil || !strings.Contains(out, "e1.report-1") {
		t.Fatalf("kubectl --context=reports-r1 get configmaps -A: %q, %v; want e1.report-1", out, err)
	}
	// ... and in the space, where the user looks, labelled upsynced and
	// annotated with its destination.
	poll.Until(t, "report-1 upsynced into the space", func() error {
		out, err := s.kubectl(t, rt, "", "get", "configmap", "report-1", "-n", "shop", "-o", "json")
		if err != nil {
			return err
		}
		var cm unstructured.Unstructured
		if err := cm.UnmarshalJSON([]byte(out)); err != nil {
			return err
		}
		v, _, _ := unstructured.NestedString(cm.Object, "data", "violations")
		if v != "0" || cm.GetLabels()[edgev1alpha1.UpsyncedLabel] != "true" || cm.GetAnnotations()[edgev1alpha1.DestinationAnnotation] != "e1" {
			return errors.New(out)
		}
		return nil
	})

	// Withdrawal: every placement of the space ends; the edges lose all
	// it placed (the namespace deleted with all it holds, the CRD with its
	// CR), and the root's downsync space holds nothing of it.
	s.withdraw(t)
	poll.Until(t, "the space's objects withdrawn from both clusters", func() error {
		for name, c := range rt.dyn {
			if _, err := c.Resource(crdGVR).Get(ctx, "widgets.example.com", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
				return fmt.Errorf("%s: crd still there (%v)", name, err)
			}
			if _, err := c.Resource(nsGVR).Get(ctx, "shop", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
				return fmt.Errorf("%s: namespace shop still there (%v)", name, err)
			}
		}
		if got := downsyncNames(t, rt.root, "shop"); len(got) != 0 {
			return fmt.Errorf("downsync holds %v", got)
		}
		return nil
	}, poll.For(2*time.Minute))
	t.Logf("%s: %v", s.name, time.Since(began).Round(time.Millisecond))
}

// spaceKeys lists a space's keys (diagnostics).
func spaceKeys(st *store.Store, space string) string {
	lr, err := st.List(store.ListOptions{Space: space})
	if err != nil {
		return err.Error()
	}
	var out []string
	for _, o := range lr.Items {
		out = append(out, fmt.Sprintf("%s/%s/%s", o.Key.Resource.Resource, o.Key.Namespace, o.Key.Name))
	}
	return strings.Join(out, " ")
}

func deploymentAvailable(d *unstructured.Unstructured) bool {
	conds, _, _ := unstructured.NestedSlice(d.Object, "status", "conditions")
	for _, co := range conds {
		m := co.(map[string]any)
		if m["type"] == "Available" && m["status"] == "True" {
			return true
		}
	}
	return false
}

// putDownsync writes a ConfigMap straight into the root's downsync space,
// targeted at dests (what the placement controller would write).
func putDownsync(t testing.TB, root *Root, name, value string, dests ...string) {
	t.Helper()
	k := store.Key{Space: layout.DownsyncSpace, Resource: store.Resource{Resource: "configmaps"}, Namespace: "default", Name: name}
	data := fmt.Appendf(nil, `{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":%q,"namespace":"default","annotations":{%q:%q}},"data":{"v":%q}}`,
		name, edgev1alpha1.DestinationsAnnotation, strings.Join(dests, ","), value)
	ctx := context.Background()
	cur, err := root.Store().Get(k)
	if err != nil {
		if _, err := root.Store().Create(ctx, k, data); err != nil {
			t.Fatal(err)
		}
		return
	}
	if _, err := root.Store().Update(ctx, k, data, cur.Revision); err != nil {
		t.Fatal(err)
	}
}

// clusterValues reads v of the managed ConfigMaps in default.
func clusterValues(ctx context.Context, c dynamic.Interface) (map[string]string, error) {
	l, err := c.Resource(cmGVR).Namespace("default").List(ctx, metav1.ListOptions{LabelSelector: syncer.ManagedLabel + "=true"})
	if err != nil {
		return nil, err
	}
	out := map[string]string{}
	for _, it := range l.Items {
		v, _, _ := unstructured.NestedString(it.Object, "data", "v")
		out[it.GetName()] = v
	}
	return out, nil
}

func edgeStatus(c *Child, name string) (syncer.DestinationStatus, string) {
	var ds syncer.DestinationStatus
	o, err := c.Store().Get(store.Key{Space: layout.OutboxSpace, Resource: syncer.DestinationStatusResource, Name: name})
	if err != nil {
		return ds, err.Error()
	}
	if err := json.Unmarshal(o.Data, &ds); err != nil {
		return ds, err.Error()
	}
	return ds, string(o.Data)
}

// TestRealClusterEdgeAutonomy: the region (the edge's parent) stops; the
// edge restarts from its data directory with its parent unreachable and
// still corrects drift in its real cluster; one object changes at the
// root meanwhile; the region returns and the edge resumes from its cursor:
// no resync on either link, only the changed object sent (bytes logged).
func TestRealClusterEdgeAutonomy(t *testing.T) {
	rt := startRealTree(t, map[string]map[string]string{"e1": {"fleet": "yes"}})
	ctx := context.Background()
	const n = 20
	for i := range n {
		putDownsync(t, rt.root, fmt.Sprintf("cm-%02d", i), "v1", "e1")
	}
	c := rt.dyn["e1"]
	holds := func(want map[string]string) func() error {
		return func() error {
			got, err := clusterValues(ctx, c)
			if err != nil {
				return err
			}
			if !reflect.DeepEqual(got, want) {
				return fmt.Errorf("%v", got)
			}
			return nil
		}
	}
	want := map[string]string{}
	for i := range n {
		want[fmt.Sprintf("cm-%02d", i)] = "v1"
	}
	poll.Until(t, "the cluster to hold the ConfigMaps", holds(want))
	first := rt.edges["e1"].Uplink().Downsync()
	t.Logf("first connection: %d objects, %d bytes received, %d resyncs", first.Objects, first.BytesReceived, first.Resyncs)

	// The parent goes, then the edge restarts with the parent unreachable.
	rt.stopReg()
	rt.stops["e1"]()
	rt.startEdge(t, "e1")
	e := rt.edges["e1"]
	poll.Holds(t, "the edge offline with its parent down", time.Second, func() error {
		if e.Uplink().Connected() {
			return errors.New("connected")
		}
		return nil
	})
	var before int64
	poll.Until(t, "the restarted edge's status", func() error {
		ds, why := edgeStatus(e, "e1")
		before = ds.Status.DriftCorrections
		if ds.Status.Applied != n {
			return errors.New(why)
		}
		return nil
	})
	// Drift while offline: an edit and a deletion, both put back.
	if _, err := c.Resource(cmGVR).Namespace("default").Patch(ctx, "cm-03", types.MergePatchType, []byte(`{"data":{"v":"tampered"}}`), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := c.Resource(cmGVR).Namespace("default").Delete(ctx, "cm-04", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	poll.Until(t, "offline drift corrected", func() error {
		if err := holds(want)(); err != nil {
			return err
		}
		if ds, why := edgeStatus(e, "e1"); ds.Status.DriftCorrections < before+2 || e.Uplink().Connected() {
			return errors.New(why)
		}
		return nil
	})

	// One change at the root while the region is away.
	putDownsync(t, rt.root, "cm-07", "v2", "e1")
	want["cm-07"] = "v2"
	rt.startRegion(t)
	poll.Until(t, "the edge reconnected and the change applied", func() error {
		if !e.Uplink().Connected() {
			return errors.New("not connected")
		}
		return holds(want)()
	})
	// No frame of the change is still on its way once both links have
	// acknowledged all their senders have seen.
	poll.Until(t, "both links acknowledged", func() error {
		for _, ch := range append(rt.region.Downlink().Children(), rt.root.Children()...) {
			if ch.Down.LagRevisions != 0 {
				return fmt.Errorf("%s: %d revisions unacknowledged", ch.Identity, ch.Down.LagRevisions)
			}
		}
		return nil
	})
	// Receivers count bytes and resyncs; senders count object frames too.
	// The region is a new process: its downlink's counters cover only
	// the time since it returned. The root's cover both connections.
	es, rs := e.Uplink().Downsync(), rt.region.Uplink().Downsync()
	var toEdge, toRegion []string
	for _, ch := range rt.region.Downlink().Children() {
		toEdge = append(toEdge, fmt.Sprintf("%s: %d objects, %d bytes, %d resyncs", ch.Identity.Name, ch.Down.Objects, ch.Down.BytesSent, ch.Down.Resyncs))
		if ch.Down.Resyncs != 0 || ch.Down.Objects > 1 {
			t.Errorf("region to %s after reconnecting: %d resyncs, %d objects; want 0 and at most the 1 changed", ch.Identity.Name, ch.Down.Resyncs, ch.Down.Objects)
		}
	}
	for _, ch := range rt.root.Children() {
		toRegion = append(toRegion, fmt.Sprintf("%s: %d objects, %d bytes, %d resyncs (links %d)", ch.Identity.Name, ch.Down.Objects, ch.Down.BytesSent, ch.Down.Resyncs, ch.Links))
		if ch.Down.Resyncs != 1 {
			t.Errorf("root to %s: %d resyncs over both connections; want only the first", ch.Identity.Name, ch.Down.Resyncs)
		}
	}
	t.Logf("first connection: the edge received %d bytes (full send of %d objects); after the region's return: the edge received %d bytes in %d messages, %d resyncs; the region received %d bytes, %d resyncs; sent by the region: %v; sent by the root (both connections): %v",
		first.BytesReceived, n, es.BytesReceived, es.MessagesReceived, es.Resyncs, rs.BytesReceived, rs.Resyncs, toEdge, toRegion)
	if es.Resyncs != 0 || rs.Resyncs != 0 {
		t.Errorf("resyncs after reconnecting: edge %d, region %d; want none", es.Resyncs, rs.Resyncs)
	}
	if es.BytesReceived*4 > first.BytesReceived {
		t.Errorf("the edge received %d bytes after reconnecting, against %d for the full send", es.BytesReceived, first.BytesReceived)
	}
}

// ---- Benchmarks (run with -run=^$ -bench=RealCluster -benchtime=1x) ----

func percentile(ds []time.Duration, p float64) time.Duration {
	s := slices.Clone(ds)
	slices.Sort(s)
	i := int(float64(len(s)-1) * p)
	return s[i]
}

// BenchmarkRealClusterPropagation measures the delay from a write at the
// root (an update of a placed ConfigMap through the root's kube API) until
// each real cluster has it, over 20 updates, with 3 clusters
// (CANOPY_BENCH_CLUSTERS overrides).
func BenchmarkRealClusterPropagation(b *testing.B) {
	n := 3
	if s := os.Getenv("CANOPY_BENCH_CLUSTERS"); s != "" {
		n, _ = strconv.Atoi(s)
	}
	edges := map[string]map[string]string{}
	for i := range n {
		edges[fmt.Sprintf("e%02d", i)] = map[string]string{"fleet": "yes"}
	}
	rt := startRealTree(b, edges)
	ctx := context.Background()
	applyTB(b, rt.inv, edgev1alpha1.LocationsGVR, map[string]any{"apiVersion": "edge.canopy.dev/v1alpha1", "kind": "Location",
		"metadata": map[string]any{"name": "fleet", "labels": map[string]any{"fleet": "yes"}},
		"spec":     map[string]any{"instanceSelector": map[string]any{"matchLabels": map[string]any{"fleet": "yes"}}}})
	applyTB(b, rt.wds, edgev1alpha1.EdgePlacementsGVR, map[string]any{"apiVersion": "edge.canopy.dev/v1alpha1", "kind": "EdgePlacement",
		"metadata": map[string]any{"name": "bench"},
		"spec": map[string]any{"locationSelectors": []any{map[string]any{"matchLabels": map[string]any{"fleet": "yes"}}},
			"downsync": []any{map[string]any{"apiGroup": "", "resources": []any{"configmaps"}, "namespaces": []any{"default"}, "objectNames": []any{"bench"}}}}})
	write := func(i int) {
		applyTB(b, rt.wds, cmGVR, map[string]any{"apiVersion": "v1", "kind": "ConfigMap",
			"metadata": map[string]any{"name": "bench", "namespace": "default"}, "data": map[string]any{"v": strconv.Itoa(i)}})
	}
	write(0)
	// One watch per cluster records when each value arrives.
	type seen struct {
		name string
		v    int
		at   time.Time
	}
	events := make(chan seen, 1024)
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	for name, c := range rt.dyn {
		w, err := c.Resource(cmGVR).Namespace("default").Watch(wctx, metav1.ListOptions{FieldSelector: "metadata.name=bench"})
		if err != nil {
			b.Fatal(err)
		}
		go func() {
			for ev := range w.ResultChan() {
				u, ok := ev.Object.(*unstructured.Unstructured)
				if !ok {
					continue
				}
				s, _, _ := unstructured.NestedString(u.Object, "data", "v")
				v, _ := strconv.Atoi(s)
				events <- seen{name, v, time.Now()}
			}
		}()
	}
	got := map[string]int{}
	waitAll := func(v int) map[string]time.Time {
		at := map[string]time.Time{}
		timeout := time.After(60 * time.Second)
		for len(at) < n {
			select {
			case s := <-events:
				if s.v >= v {
					if _, dup := at[s.name]; !dup {
						at[s.name] = s.at
					}
				}
				got[s.name] = max(got[s.name], s.v)
			case <-timeout:
				b.Fatalf("value %d: only %d of %d clusters (%v)", v, len(at), n, got)
			}
		}
		return at
	}
	waitAll(0)
	var all []time.Duration
	var slowest []time.Duration
	for i := 1; i <= 20; i++ {
		t0 := time.Now()
		write(i)
		at := waitAll(i)
		var last time.Duration
		for _, t1 := range at {
			all = append(all, t1.Sub(t0))
			last = max(last, t1.Sub(t0))
		}
		slowest = append(slowest, last)
	}
	b.ReportMetric(float64(percentile(all, 0.5).Milliseconds()), "p50-ms")
	b.ReportMetric(float64(percentile(all, 0.9).Milliseconds()), "p90-ms")
	b.ReportMetric(float64(percentile(all, 1).Milliseconds()), "max-ms")
	b.ReportMetric(float64(percentile(slowest, 0.5).Milliseconds()), "p50-last-cluster-ms")
	b.Logf("%d clusters, 20 updates: per (update, cluster) p50 %v p90 %v max %v; until the last cluster p50 %v p90 %v max %v",
		n, percentile(all, 0.5), percentile(all, 0.9), percentile(all, 1), percentile(slowest, 0.5), percentile(slowest, 0.9), percentile(slowest, 1))
}

// applyTB is placementTree.apply for any testing.TB.
func applyTB(t testing.TB, c dynamic.Interface, gvr schema.GroupVersionResource, obj map[string]any) {
	t.Helper()
	u := &unstructured.Unstructured{Object: obj}
	ri := dynamic.ResourceInterface(c.Resource(gvr))
	if ns := u.GetNamespace(); ns != "" {
		ri = c.Resource(gvr).Namespace(ns)
	}
	ctx := context.Background()
	// Canopy writes the status of what it reads (an EdgePlacement's, a
	// View's) at any time: an update on a version just read may conflict,
	// and is made again on the next, as a controller would.
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		cur, err := ri.Get(ctx, u.GetName(), metav1.GetOptions{})
		if err != nil {
			return err
		}
		u.SetResourceVersion(cur.GetResourceVersion())
		_, err = ri.Update(ctx, u, metav1.UpdateOptions{})
		return err
	})
	switch {
	case apierrors.IsNotFound(err):
		u.SetResourceVersion("")
		if _, err := ri.Create(ctx, u, metav1.CreateOptions{}); err != nil {
			t.Fatalf("create %s %s: %v", gvr.Resource, u.GetName(), err)
		}
	case err != nil:
		t.Fatalf("update %s %s: %v", gvr.Resource, u.GetName(), err)
	}
}

func heapAfterGC() uint64 {
	var ms runtime.MemStats
	for range 3 {
		runtime.GC()
	}
	runtime.ReadMemStats(&ms)
	return ms.HeapAlloc
}

// BenchmarkRealClusterApply measures apply throughput into one real
// kube-apiserver (500 ConfigMaps written at once into the root's downsync
// space, until all are in the cluster) and the edge relay's heap with
// 1 000 managed objects (heap after GC with the edge running, minus heap
// after GC once it stopped; root, region and test share the process).
func BenchmarkRealClusterApply(b *testing.B) {
	rt := startRealTree(b, map[string]map[string]string{"e1": {"fleet": "yes"}})
	ctx := context.Background()
	c := rt.dyn["e1"]
	count := func(want int) func() error {
		return func() error {
			if got, err := clusterValues(ctx, c); err != nil || len(got) != want {
				return fmt.Errorf("%d (%v)", len(got), err)
			}
			return nil
		}
	}
	t0 := time.Now()
	for i := range 500 {
		putDownsync(b, rt.root, fmt.Sprintf("cm-%04d", i), "v1", "e1")
	}
	written := time.Since(t0)
	// Polled at least every 20 ms: the list of 500 is cheap next to the
	// applies.
	poll.Until(b, "500 ConfigMaps in the cluster", count(500), poll.For(3*time.Minute), poll.Every(20*time.Millisecond))
	d := time.Since(t0)
	b.ReportMetric(500/d.Seconds(), "objects/s")
	b.Logf("500 ConfigMaps: written at the root in %v, all in the real cluster after %v: %.0f objects/s end to end", written, d, 500/d.Seconds())

	for i := 500; i < 1000; i++ {
		putDownsync(b, rt.root, fmt.Sprintf("cm-%04d", i), "v1", "e1")
	}
	poll.Until(b, "1000 ConfigMaps in the cluster", count(1000), poll.For(3*time.Minute))
	poll.Until(b, "the edge to report 1000 applied", func() error {
		if ds, why := edgeStatus(rt.edges["e1"], "e1"); ds.Status.Applied != 1000 {
			return errors.New(why)
		}
		return nil
	}, poll.For(time.Minute))
	// Pauses that are part of the measure: the edge settles before the
	// first heap reading, and its goroutines end before the second.
	time.Sleep(2 * time.Second)
	with := heapAfterGC()
	rt.stops["e1"]()
	time.Sleep(time.Second)
	without := heapAfterGC()
	b.ReportMetric(float64(with-without)/(1<<20), "edge-heap-MiB")
	b.Logf("heap after GC: %.1f MiB with the edge (1000 managed objects), %.1f MiB without: the edge holds %.1f MiB",
		float64(with)/(1<<20), float64(without)/(1<<20), float64(with-without)/(1<<20))
}
