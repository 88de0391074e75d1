package syncer

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"

	"github.com/canopy-dev/canopy/relay/apiserver/vcluster"
	"github.com/canopy-dev/canopy/relay/store"
	"github.com/canopy-dev/canopy/test/kubecluster"
	"github.com/canopy-dev/canopy/test/poll"
	"github.com/canopy-dev/canopy/topology/api/v1alpha1"
	"github.com/canopy-dev/canopy/topology/reports"
	"github.com/canopy-dev/canopy/topology/status"
)

// Reported state: the same bodies against a virtual cluster (simulated
// kubelet) and a full real cluster (controller manager, scheduler, kwok).
type reportBody struct {
	name string
	run  func(*testing.T, *testCluster)
}

var reportBodies = []reportBody{
	{"CollectorsSyncUpsync", testReports},
}

func TestReportsVirtualCluster(t *testing.T) {
	bodies := append(slices.Clone(reportBodies),
		reportBody{"RestartKeepsReports", testReportsRestart},
		reportBody{"AssociatedBoundJobReady", testAssociatedBound},
		reportBody{"UpsyncLateResource", testUpsyncLateResource},
		reportBody{"ViewedCopy", testViewedCopy})
	for _, b := range bodies {
		t.Run(b.name, func(t *testing.T) { b.run(t, newFastVirtualCluster(t)) })
	}
}

// TestReportsKubeCluster runs the bodies against one full real cluster,
// each through its own gate.
func TestReportsKubeCluster(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a real cluster")
	}
	kc := kubecluster.Start(t, kubecluster.Options{})
	for _, b := range reportBodies {
		t.Run(b.name, func(t *testing.T) { b.run(t, gatedCluster(t, kc, true)) })
	}
}

// newFastVirtualCluster is a virtual cluster whose pods are ready 100 ms
// after they are created.
func newFastVirtualCluster(t testing.TB) *testCluster {
	return startVirtualCluster(t, vcluster.Options{ReadyDelay: 100 * time.Millisecond})
}

// placementObj is an EdgePlacement of space "default" as the root sends
// it down (named reports.PlacedName).
func placementObj(name string, downsync, upsync []any, collectors ...string) map[string]any {
	spec := map[string]any{"downsync": downsync}
	if upsync != nil {
		spec["upsync"] = upsync
	}
	if len(collectors) > 0 {
		cs := make([]any, len(collectors))
		for i, c := range collectors {
			cs[i] = c
		}
		spec["statusCollectors"] = cs
	}
	return map[string]any{"apiVersion": "edge.canopy.dev/v1alpha1", "kind": "EdgePlacement",
		"metadata": map[string]any{"name": reports.PlacedName("default", name)}, "spec": spec}
}

func collectorObj(name string, spec map[string]any) map[string]any {
	return map[string]any{"apiVersion": "edge.canopy.dev/v1alpha1", "kind": "StatusCollector",
		"metadata": map[string]any{"name": reports.PlacedName("default", name)}, "spec": spec}
}

// clause is a downsync or upsync clause of one resource of one namespace
// (names go in both objectNames, the downsync field, and names, the
// upsync one; each kind of clause ignores the other).
func clause(group, resource, ns string, names ...string) map[string]any {
	c := map[string]any{"apiGroup": group, "resources": []any{resource}, "namespaces": []any{ns}}
	if len(names) > 0 {
		l := make([]any, len(names))
		for i, n := range names {
			l[i] = n
		}
		c["objectNames"], c["names"] = l, l
	}
	return c
}

// withSourceRevision sets the source revision the root would set.
func withSourceRevision(obj map[string]any, rev int) map[string]any {
	u := unstructured.Unstructured{Object: obj}
	ann := u.GetAnnotations()
	if ann == nil {
		ann = map[string]string{}
	}
	ann[v1alpha1.SourceRevisionAnnotation] = fmt.Sprint(rev)
	u.SetAnnotations(ann)
	return obj
}

func appDeployment(ns, name string, replicas int64) map[string]any {
	return map[string]any{"apiVersion": "apps/v1", "kind": "Deployment",
		"metadata": map[string]any{"name": name, "namespace": ns, "labels": map[string]any{"app": name}},
		"spec": map[string]any{"replicas": replicas,
			"selector": map[string]any{"matchLabels": map[string]any{"app": name}},
			"template": map[string]any{"metadata": map[string]any{"labels": map[string]any{"app": name}},
				"spec": map[string]any{"containers": []any{map[string]any{"name": "app", "image": "registry.k8s.io/pause:3.10"}}}}}}
}

// readyPodsExpr counts the ready Pods among the associated objects.
const readyPodsExpr = "associated.filter(a, a.kind == 'Pod' && a.?status.?conditions.orValue([]).exists(c, c.type == 'Ready' && c.status == 'True')).size()"

// partialOf reads the partial report of (placement, object, collector).
func (h *harness) partialOf(placement, collector string, obj store.Key) (status.Partial, error) {
	rp := reports.Partial{Placement: reports.PlacementRef{Space: "default", Name: placement}, Collector: collector,
		Object: objectRef(obj)}
	k := rp.Key()
	k.Space = "outbox"
	o, err := h.st.Get(k)
	if err != nil {
		return status.Partial{}, err
	}
	got, err := reports.Decode[reports.Partial](o.Data)
	if err != nil {
		return status.Partial{}, err
	}
	if got.Placement != rp.Placement || got.Object != rp.Object || got.Collector != collector {
		return status.Partial{}, fmt.Errorf("partial %s holds %+v", k.Name, got)
	}
	return got.Partial, nil
}

// placementSync reads the PlacementSync report of a placement.
func (h *harness) placementSync(placement string) (reports.PlacementSync, error) {
	ps := reports.PlacementSync{Placement: reports.PlacementRef{Space: "default", Name: placement}}
	k := ps.Key()
	k.Space = "outbox"
	o, err := h.st.Get(k)
	if err != nil {
		return ps, err
	}
	return reports.Decode[reports.PlacementSync](o.Data)
}

// partialNames lists the partial reports of the outbox as
// "placement/object/collector", sorted.
func (h *harness) partialNames() []string {
	lr, _ := h.st.List(store.ListOptions{Space: "outbox", Resource: reports.PartialResource})
	var out []string
	for _, o := range lr.Items {
		p, err := reports.Decode[reports.Partial](o.Data)
		if err != nil {
			out = append(out, "undecodable:"+err.Error())
			continue
		}
		out = append(out, p.Placement.Name+"/"+p.Object.Name+"/"+p.Collector)
	}
	slices.Sort(out)
	return out
}

// waitPartial waits until a partial satisfies ok (its rows rendered).
func (h *harness) waitPartial(what, placement, collector string, obj store.Key, ok func(p status.Partial, rows string) bool) status.Partial {
	h.t.Helper()
	var p status.Partial
	poll.Until(h.t, what, func() error {
		var err error
		if p, err = h.partialOf(placement, collector, obj); err != nil {
			return err
		}
		if r := rows(p, collector); !ok(p, r) {
			return fmt.Errorf("partial rows %s, failing %+v", r, p.Failing)
		}
		return nil
	})
	return p
}

func (h *harness) waitSync(what, placement string, ok func(reports.PlacementSync) bool) reports.PlacementSync {
	h.t.Helper()
	var ps reports.PlacementSync
	poll.Until(h.t, what, func() error {
		var err error
		if ps, err = h.placementSync(placement); err != nil {
			return err
		}
		if !ok(ps) {
			return fmt.Errorf("placement sync %+v", ps)
		}
		return nil
	})
	return ps
}

// rows renders a partial's table: "[web z-a 2 1]".
func rows(p status.Partial, name string) string {
	var out []string
	for _, r := range p.Result(name).Rows {
		vals := make([]string, len(r.Columns))
		for i, c := range r.Columns {
			vals[i] = fmt.Sprint(c.Interface())
		}
		out = append(out, "["+strings.Join(vals, " ")+"]")
	}
	return strings.Join(out, "")
}

func objectRef(k store.Key) v1alpha1.ObjectReference {
	return v1alpha1.ObjectReference{Group: k.Resource.Group, Resource: k.Resource.Resource, Namespace: k.Namespace, Name: k.Name}
}

func revs(ps reports.PlacementSync) string { return fmt.Sprint(ps.Revisions) }

// A Deployment with a collector counting its ready Pods (its associated
// objects) grouped by a label, a ConfigMap with a select collector, a
// placement whose collector fails at run time, placement sync through an
// unreachable cluster, an apply failure and a scale, upsync of an object
// someone else created, and reports removed when they no longer apply.
func testReports(t *testing.T, c *testCluster) {
	const ns = "rep"
	h := newHarness(t, c, "edge-s")
	ctx := context.Background()
	web := store.Key{Resource: resDeployments, Namespace: ns, Name: "web"}
	cfg := store.Key{Resource: resConfigMaps, Namespace: ns, Name: "cfg"}
	bad := store.Key{Resource: resConfigMaps, Namespace: ns, Name: "bad"}

	readyPods := collectorObj("ready-pods", map[string]any{
		"filter": "obj.kind == 'Deployment'",
		"groupBy": []any{
			map[string]any{"name": "app", "def": "obj.metadata.labels['app']"},
			map[string]any{"name": "zone", "def": "destination.labels['zone']"}},
		"combinedFields": []any{
			map[string]any{"name": "readyPods", "type": "SUM", "subject": readyPodsExpr},
			map[string]any{"name": "replicaSets", "type": "SUM", "subject": "associated.filter(a, a.kind == 'ReplicaSet').size()"}},
	})
	cmKeys := collectorObj("cm-keys", map[string]any{"select": []any{map[string]any{"name": "keys", "def": "obj.data.size()"}}})
	broken := collectorObj("broken", map[string]any{"combinedFields": []any{
		map[string]any{"name": "x", "type": "SUM", "subject": "obj.status.noSuchField"}}})
	p1 := placementObj("p1", []any{clause("apps", "deployments", ns)}, []any{clause("", "configmaps", ns, "found", "later")}, "ready-pods")
	p2 := placementObj("p2", []any{clause("", "configmaps", ns)}, nil, "cm-keys")
	p3 := placementObj("p3", []any{clause("apps", "deployments", ns, "web")}, nil, "broken", "ready-pods")
	h.put(namespace(ns), withSourceRevision(appDeployment(ns, "web", 2), 10),
		withSourceRevision(configMap(ns, "cfg", map[string]any{"a": "1", "b": "2"}), 11),
		readyPods, cmKeys, broken, p1, p2, p3)
	s := h.start()

	h.waitPartial("2 ready pods of web", "p1", "ready-pods", web, func(_ status.Partial, r string) bool { return r == "[web z-edge-s 2 1]" })
	p := h.waitPartial("cfg's row", "p2", "cm-keys", cfg, func(_ status.Partial, r string) bool { return r == "[2]" })
	if p.Destinations != 1 || p.FailingCount != 0 || len(p.Rows) != 1 || p.Rows[0].Destination != "edge-s" {
		t.Errorf("cm-keys partial %+v", p)
	}
	// A failing collector fails the destination for every collector of
	// its placement, and for none of the other placements.
	for _, col := range []string{"broken", "ready-pods"} {
		p := h.waitPartial("p3 failing", "p3", col, web, func(p status.Partial, _ string) bool { return p.FailingCount == 1 })
		if p.Destinations != 1 || len(p.Groups) != 0 || p.Failing[0].Name != "edge-s" ||
			!strings.Contains(p.Failing[0].Reason, "spec.combinedFields[0].subject") {
			t.Errorf("p3/%s partial %+v", col, p)
		}
	}
	if got, want := h.partialNames(), []string{"p1/web/ready-pods", "p2/cfg/cm-keys", "p3/web/broken", "p3/web/ready-pods"}; !slices.Equal(got, want) {
		t.Errorf("partials %v, want %v", got, want)
	}
	if s.Stats().EvalErrors == 0 {
		t.Error("no evaluation error counted")
	}
	for _, pl := range []struct {
		name, revs string
	}{{"p1", "map[10:1]"}, {"p2", "map[11:1]"}, {"p3", "map[10:1]"}} {
		ps := h.waitSync(pl.name+" synced and ready", pl.name, func(ps reports.PlacementSync) bool { return ps.Ready == 1 && revs(ps) == pl.revs })
		if ps.Destinations != 1 || ps.Failed != 0 || len(ps.Failing) != 0 {
			t.Errorf("%s: %+v", pl.name, ps)
		}
	}

	// Singleton live state: annotated with the destination, without
	// managedFields.
	o, err := h.st.Get(store.Key{Space: "outbox", Resource: resDeployments, Namespace: ns, Name: "web"})
	if err != nil {
		t.Fatal(err)
	}
	var live unstructured.Unstructured
	if err := live.UnmarshalJSON(o.Data); err != nil {
		t.Fatal(err)
	}
	if live.GetAnnotations()[v1alpha1.DestinationAnnotation] != "edge-s" || live.GetManagedFields() != nil || live.GetName() != "web" {
		t.Errorf("live state of web: annotations %v, managedFields %v", live.GetAnnotations(), live.GetManagedFields())
	}

	// A new version while the cluster is unreachable: not reported as
	// applied until it is.
	c.setDown(true)
	h.put(withSourceRevision(appDeployment(ns, "web", 3), 20))
	h.waitSync("p1 applying", "p1", func(ps reports.PlacementSync) bool { return ps.Revisions == nil })
	h.waitStatus("the pass to fail", func(s DestinationState) bool { return !s.Reachable && s.ObservedInboxRevision < int64(h.cursor) })
	if ps, err := h.placementSync("p1"); err != nil || ps.Revisions != nil || ps.Failed != 0 {
		t.Errorf("p1 while unreachable: %+v, %v", ps, err)
	}
	c.setDown(false)
	h.waitSync("p1 synced at 20, ready", "p1", func(ps reports.PlacementSync) bool { return revs(ps) == "map[20:1]" && ps.Ready == 1 })
	h.waitPartial("3 ready pods of web", "p1", "ready-pods", web, func(_ status.Partial, r string) bool { return r == "[web z-edge-s 3 1]" })

	// An object the cluster refuses fails its placement, and only it.
	h.put(withSourceRevision(map[string]any{"apiVersion": "v1", "kind": "ConfigMap",
		"metadata": map[string]any{"name": "bad", "namespace": ns, "labels": map[string]any{"x": "not a valid value!"}}}, 12))
	ps := h.waitSync("p2 failed", "p2", func(ps reports.PlacementSync) bool { return ps.Failed == 1 })
	if ps.Revisions != nil || ps.Ready != 0 || len(ps.Failing) != 1 || ps.Failing[0].Name != "edge-s" ||
		!strings.HasPrefix(ps.Failing[0].Reason, "configmaps/rep/bad: ") {
		t.Errorf("p2 with a bad object: %+v", ps)
	}
	p = h.waitPartial("bad's partial failing", "p2", "cm-keys", bad, func(p status.Partial, _ string) bool { return p.FailingCount == 1 })
	if !strings.Contains(p.Failing[0].Reason, "not a valid value") {
		t.Errorf("bad's partial: %+v", p)
	}
	if ps, _ := h.placementSync("p1"); revs(ps) != "map[20:1]" || ps.Failed != 0 {
		t.Errorf("p1 after p2's failure: %+v", ps)
	}

	// Upsync: a ConfigMap someone creates in the cluster comes up under
	// the destination's name; one the clause does not name does not, nor
	// does a managed one.
	cms := h.admin.Resource(gvrCM).Namespace(ns)
	for _, name := range []string{"found", "ignored"} {
		if _, err := cms.Create(ctx, &unstructured.Unstructured{Object: configMap(ns, name, map[string]any{"k": name})}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	upKey := store.Key{Space: "outbox", Resource: resConfigMaps, Namespace: ns, Name: reports.ForwardedName("edge-s", "found")}
	poll.Until(t, "found upsynced", func() error {
		o, err := h.st.Get(upKey)
		if err != nil {
			return err
		}
		var u unstructured.Unstructured
		if err := u.UnmarshalJSON(o.Data); err != nil {
			return err
		}
		if d, _, _ := unstructured.NestedString(u.Object, "data", "k"); d != "found" || u.GetName() != "edge-s.found" ||
			u.GetAnnotations()[v1alpha1.DestinationAnnotation] != "edge-s" || u.GetManagedFields() != nil {
			return fmt.Errorf("upsynced %s", o.Data)
		}
		return nil
	})
	for _, name := range []string{"ignored", "cfg"} {
		if _, err := h.st.Get(store.Key{Space: "outbox", Resource: resConfigMaps, Namespace: ns, Name: reports.ForwardedName("edge-s", name)}); !errors.Is(err, store.ErrNotFound) {
			t.Errorf("%s upsynced: %v", name, err)
		}
	}
	if err := cms.Delete(ctx, "found", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	poll.Until(t, "found's report gone", func() error {
		if _, err := h.st.Get(upKey); !errors.Is(err, store.ErrNotFound) {
			return fmt.Errorf("still there: %v", err)
		}
		return nil
	})

	// Reports that no longer apply go: a placement leaves, then a
	// placement stops naming its collector.
	h.remove(p3, broken)
	poll.Until(t, "p3's reports gone", func() error {
		if got, want := h.partialNames(), []string{"p1/web/ready-pods", "p2/bad/cm-keys", "p2/cfg/cm-keys"}; !slices.Equal(got, want) {
			return fmt.Errorf("partials %v", got)
		}
		if _, err := h.placementSync("p3"); !errors.Is(err, store.ErrNotFound) {
			return fmt.Errorf("p3's sync: %v", err)
		}
		return nil
	})
	h.put(placementObj("p2", []any{clause("", "configmaps", ns)}, nil))
	poll.Until(t, "p2's partials gone", func() error {
		if got := h.partialNames(); !slices.Equal(got, []string{"p1/web/ready-pods"}) {
			return fmt.Errorf("partials %v", got)
		}
		return nil
	})
	if st := s.Stats(); st.Partials != 1 || st.PlacementSyncs != 2 {
		t.Errorf("stats %+v", st)
	}
}

// A restarted syncer keeps the reports of the previous run while its
// cluster is unreachable and takes them over when it answers: no report
// is deleted on the way, and an unchanged partial is not rewritten.
func testReportsRestart(t *testing.T, c *testCluster) {
	const ns = "again"
	h := newHarness(t, c, "edge-r")
	web := store.Key{Resource: resDeployments, Namespace: ns, Name: "web"}
	h.put(namespace(ns), withSourceRevision(appDeployment(ns, "web", 2), 5),
		collectorObj("ready", map[string]any{"combinedFields": []any{map[string]any{"name": "ready", "type": "SUM", "subject": readyPodsExpr}}}),
		placementObj("p", []any{clause("apps", "deployments", ns)}, nil, "ready"))
	h.start()
	h.waitPartial("2 ready", "p", "ready", web, func(_ status.Partial, r string) bool { return r == "[2]" })
	h.waitSync("ready", "p", func(ps reports.PlacementSync) bool { return ps.Ready == 1 && revs(ps) == "map[5:1]" })
	// Not a check: time for the first run's last writes to land (two
	// windows) before it stops, lest the next run make them and they be
	// taken for its own.
	time.Sleep(100 * time.Millisecond)
	h.stop()

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	w, err := h.st.Watch(ctx, store.WatchOptions{Space: "outbox", Since: h.st.Revision()})
	if err != nil {
		t.Fatal(err)
	}
	var (
		mu     sync.Mutex
		events []string
	)
	go func() {
		for ev := range w.Events() {
			if ev.Type == store.Bookmark || ev.Object.Key.Resource == DestinationStatusResource {
				continue
			}
			mu.Lock()
			events = append(events, fmt.Sprintf("%v %s", ev.Type, KeyString(ev.Object.Key)))
			mu.Unlock()
		}
	}()

	// wrong says which outbox event so far is one no restart may cause.
	wrong := func() error {
		mu.Lock()
		defer mu.Unlock()
		for _, e := range events {
			if strings.HasPrefix(e, "DELETED") || strings.Contains(e, reports.PartialResource.Resource) ||
				strings.Contains(e, reports.PlacementSyncResource.Resource) {
				return fmt.Errorf("%s (all: %v)", e, events)
			}
		}
		return nil
	}

	c.setDown(true)
	s := h.start()
	h.waitStatus("unreachable after the restart", func(st DestinationState) bool { return !st.Reachable })
	poll.Until(t, "a pass to fail", func() error {
		if st := s.Stats(); st.Passes == 0 || st.Reachable {
			return fmt.Errorf("stats %+v", st)
		}
		return nil
	})
	// A wrong write would land within a few windows.
	poll.Holds(t, "no outbox event while the cluster is down", 150*time.Millisecond, wrong)
	c.setDown(false)
	h.waitStatus("reachable", func(st DestinationState) bool { return st.Reachable && st.Applied == 2 })
	poll.Until(t, "the reporter to take over", func() error {
		if st := s.Stats(); st.Partials != 1 || st.PlacementSyncs != 1 {
			return fmt.Errorf("stats %+v", st)
		}
		return nil
	})
	poll.Holds(t, "no outbox event after the restart", 200*time.Millisecond, wrong)
	if _, err := h.partialOf("p", "ready", web); err != nil {
		t.Error(err)
	}
}

// The model: placements of the destination's inbox, by space, with
// namespace selectors over the inbox's Namespaces; collectors compiled.
func TestBuildModel(t *testing.T) {
	obj := func(res store.Resource, m map[string]any, space, dests string) *store.Object {
		u := unstructured.Unstructured{Object: m}
		ann := u.GetAnnotations()
		if ann == nil {
			ann = map[string]string{}
		}
		ann["edge.canopy.dev/placed-from"] = space
		if dests != "" {
			ann["edge.canopy.dev/destinations"] = dests
		}
		u.SetAnnotations(ann)
		return inboxObject(t, res, u.Object)
	}
	nsObj := func(name string, labels map[string]any) map[string]any {
		return map[string]any{"apiVersion": "v1", "kind": "Namespace", "metadata": map[string]any{"name": name, "labels": labels}}
	}
	placementIn := func(space, name string, downsync []any, collectors ...any) map[string]any {
		return map[string]any{"apiVersion": "edge.canopy.dev/v1alpha1", "kind": "EdgePlacement",
			"metadata": map[string]any{"name": reports.PlacedName(space, name)},
			"spec":     map[string]any{"downsync": downsync, "statusCollectors": collectors}}
	}
	sel := map[string]any{"resources": []any{"configmaps"}, "namespaceSelector": map[string]any{"matchLabels": map[string]any{"team": "a"}}}
	inbox := []*store.Object{
		obj(namespacesResource, nsObj("a1", map[string]any{"team": "a"}), "s1", "me"),
		obj(namespacesResource, nsObj("b1", map[string]any{"team": "b"}), "s1", "me"),
		obj(namespacesResource, nsObj("x", map[string]any{"team": "a"}), "s2", "me"),
		obj(resConfigMaps, configMap("a1", "c", nil), "s1", "me"),
		obj(resConfigMaps, configMap("b1", "c", nil), "s1", "me"),
		obj(resConfigMaps, configMap("x", "c", nil), "s2", "me"),
		obj(resConfigMaps, configMap("a1", "elsewhere", nil), "s1", "other"),
		obj(placementsResource, placementIn("s1", "sel", []any{sel}, "good", "bad", "missing"), "s1", "me"),
		obj(placementsResource, placementIn("s2", "all", []any{map[string]any{"resources": []any{"*"}}}), "s2", "me"),
		obj(placementsResource, placementIn("s1", "not-here", []any{sel}), "s1", "other"),
		obj(collectorsResource, collectorObj("good", map[string]any{"select": []any{map[string]any{"name": "n", "def": "obj.metadata.name"}}}), "s1", "me"),
		obj(collectorsResource, collectorObj("bad", map[string]any{"select": []any{map[string]any{"name": "n", "def": "obj.("}}}), "s1", "me"),
	}
	// collectorObj names them in space "default": rename into s1.
	for _, o := range inbox[len(inbox)-2:] {
		o.Key.Name = strings.Replace(o.Key.Name, "default.", "s1.", 1)
	}
	inbox = append(inbox, obj(targetsResource, syncTargetObj("me", "loc", map[string]any{"zone": "z1"}), "inventory", "me"))
	m := buildModel(nil, inbox, "me")

	var held []string
	for _, ref := range m.refs {
		for _, k := range m.held[ref] {
			held = append(held, ref.String()+"→"+KeyString(k))
		}
	}
	want := []string{"s1/sel→configmaps/a1/c", "s2/all→configmaps/x/c", "s2/all→namespaces/x"}
	if !slices.Equal(held, want) {
		t.Errorf("held %v, want %v", held, want)
	}
	s1 := reports.PlacementRef{Space: "s1", Name: "sel"}
	if cols := m.collectorsOf(s1); len(cols) != 1 || cols[0].Name() != "good" {
		t.Errorf("collectors of s1/sel: %v", cols)
	}
	if c := m.collectors[reports.PlacementRef{Space: "s1", Name: "bad"}]; c == nil || c.err == nil || !strings.Contains(c.err.Error(), "spec.select[0].def") {
		t.Errorf("bad collector: %+v", c)
	}
	if m.dest.Name != "me" || m.dest.Labels["zone"] != "z1" {
		t.Errorf("destination %+v", m.dest)
	}
	if !m.evaluated(store.Key{Resource: resConfigMaps, Namespace: "a1", Name: "c"}) || m.evaluated(store.Key{Resource: resConfigMaps, Namespace: "x", Name: "c"}) {
		t.Error("evaluated: wrong objects")
	}
	// A model built again from an unchanged inbox reuses what it compiled.
	m2 := buildModel(m, inbox, "me")
	if m2.placements[s1] != m.placements[s1] || m2.collectors[reports.PlacementRef{Space: "s1", Name: "good"}] != m.collectors[reports.PlacementRef{Space: "s1", Name: "good"}] {
		t.Error("compiled placements or collectors not reused")
	}
	a1 := inbox[0].Key
	if !reflect.DeepEqual(m2.metas[a1], m.metas[a1]) || m2.metas[a1].om.Metadata.Labels["team"] != "a" {
		t.Errorf("metadata of an unchanged object: %+v, before %+v", m2.metas[a1], m.metas[a1])
	}
	// A changed object is read again: namespace b1 joins team a at a new
	// revision, and its ConfigMap is held.
	changed := slices.Clone(inbox)
	changed[1] = obj(namespacesResource, nsObj("b1", map[string]any{"team": "a"}), "s1", "me")
	changed[1].Revision = inbox[1].Revision + 1
	m3 := buildModel(m2, changed, "me")
	if got := m3.held[s1]; len(got) != 2 || got[1].Namespace != "b1" {
		t.Errorf("after b1 joined team a, s1/sel holds %v", got)
	}
	b, _ := json.Marshal(m.held)
	if strings.Contains(string(b), "elsewhere") {
		t.Errorf("an object for another destination is held: %s", b)
	}
}

// Readiness of the kinds PlacementSync knows.
func TestIsReady(t *testing.T) {
	u := func(m map[string]any) *unstructured.Unstructured { return &unstructured.Unstructured{Object: m} }
	dep := func(gen, observed, replicas, updated, available, current int64) *unstructured.Unstructured {
		return u(map[string]any{"metadata": map[string]any{"generation": gen}, "spec": map[string]any{"replicas": replicas},
			"status": map[string]any{"observedGeneration": observed, "updatedReplicas": updated, "availableReplicas": available, "replicas": current}})
	}
	deps := store.Resource{Group: "apps", Resource: "deployments"}
	jobs := store.Resource{Group: "batch", Resource: "jobs"}
	for i, tc := range []struct {
		res  store.Resource
		obj  *unstructured.Unstructured
		want bool
	}{
		{deps, dep(2, 2, 3, 3, 3, 3), true},
		{deps, dep(2, 1, 3, 3, 3, 3), false}, // old generation
		{deps, dep(1, 1, 3, 3, 2, 3), false}, // one unavailable
		{deps, dep(1, 1, 3, 3, 3, 4), false}, // an old pod still there
		{deps, dep(1, 1, 0, 0, 0, 0), true},
		{store.Resource{Group: "apps", Resource: "daemonsets"}, u(map[string]any{"status": map[string]any{
			"desiredNumberScheduled": int64(2), "numberReady": int64(2), "updatedNumberScheduled": int64(2), "numberAvailable": int64(1)}}), false},
		{jobs, u(map[string]any{"status": map[string]any{"conditions": []any{map[string]any{"type": "Complete", "status": "True"}}}}), true},
		{jobs, u(map[string]any{"status": map[string]any{}}), false},
		{resConfigMaps, u(map[string]any{}), true},
	} {
		if got := isReady(tc.res, tc.obj); got != tc.want {
			t.Errorf("%d: isReady = %v, want %v", i, got, tc.want)
		}
	}
}

// Associated objects are bounded (Config.MaxAssociated, then a marker);
// a Job's Pods are its associated objects, and a complete Job is ready.
func testAssociatedBound(t *testing.T, c *testCluster) {
	const ns = "bound"
	h := newHarness(t, c, "edge-b")
	h.tweak = func(cfg *Config) { cfg.MaxAssociated = 2 }
	web := store.Key{Resource: resDeployments, Namespace: ns, Name: "web"}
	job := store.Key{Resource: store.Resource{Group: "batch", Resource: "jobs"}, Namespace: ns, Name: "once"}
	h.put(namespace(ns), withSourceRevision(appDeployment(ns, "web", 3), 7),
		withSourceRevision(map[string]any{"apiVersion": "batch/v1", "kind": "Job", "metadata": map[string]any{"name": "once", "namespace": ns},
			"spec": map[string]any{"completions": int64(1), "template": map[string]any{"spec": map[string]any{"restartPolicy": "Never",
				"containers": []any{map[string]any{"name": "run", "image": "registry.k8s.io/pause:3.10"}}}}}}, 8),
		collectorObj("assoc", map[string]any{"select": []any{
			map[string]any{"name": "n", "def": "associated.size()"},
			map[string]any{"name": "first", "def": "associated[0].kind"},
			map[string]any{"name": "last", "def": "associated[associated.size()-1].kind"},
			map[string]any{"name": "omitted", "def": "associated[associated.size()-1].?omitted.orValue(0)"}}}),
		collectorObj("succeeded", map[string]any{"combinedFields": []any{map[string]any{"name": "pods", "type": "SUM",
			"subject": "associated.filter(a, a.kind == 'Pod' && a.?status.?phase.orValue('') == 'Succeeded').size()"}}}),
		placementObj("pa", []any{clause("apps", "deployments", ns)}, nil, "assoc"),
		placementObj("pj", []any{clause("batch", "jobs", ns)}, nil, "succeeded"))
	h.start()
	h.waitPartial("web's associated objects cut at 2", "pa", "assoc", web, func(_ status.Partial, r string) bool {
		return r == "[3 ReplicaSet "+TruncatedKind+" 2]"
	})
	h.waitPartial("the job's pod succeeded", "pj", "succeeded", job, func(_ status.Partial, r string) bool { return r == "[1]" })
	h.waitSync("pj ready", "pj", func(ps reports.PlacementSync) bool { return ps.Ready == 1 && revs(ps) == "map[8:1]" })
	h.waitSync("pa ready", "pa", func(ps reports.PlacementSync) bool { return ps.Ready == 1 && revs(ps) == "map[7:1]" })
}

// An upsync clause naming a resource the cluster does not serve yet is
// resolved again until it does: a CRD and a custom resource someone else
// creates later come up.
func testUpsyncLateResource(t *testing.T, c *testCluster) {
	const ns = "late"
	h := newHarness(t, c, "edge-l")
	ctx := context.Background()
	h.put(namespace(ns), configMap(ns, "placed", nil),
		placementObj("p", []any{clause("", "configmaps", ns)}, []any{map[string]any{"apiGroup": "test.canopy.dev", "resources": []any{"gadgets"}}}))
	h.start()
	h.waitSync("p synced", "p", func(ps reports.PlacementSync) bool { return ps.Ready == 1 && revs(ps) == "map[0:1]" })
	if _, err := h.admin.Resource(gvrCRD).Create(ctx, &unstructured.Unstructured{Object: gadgetCRD()}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	poll.Until(t, "gadgets served", func() error {
		_, err := h.admin.Resource(gvrGadget).Namespace(ns).Create(ctx, &unstructured.Unstructured{Object: gadget(ns, "g", 4)}, metav1.CreateOptions{})
		return err
	})
	poll.Until(t, "the gadget upsynced", func() error {
		o, err := h.st.Get(store.Key{Space: "outbox", Resource: store.Resource{Group: "test.canopy.dev", Resource: "gadgets"},
			Namespace: ns, Name: reports.ForwardedName("edge-l", "g")})
		if err != nil {
			return err
		}
		if !strings.Contains(string(o.Data), `"size":4`) {
			return fmt.Errorf("upsynced %s", o.Data)
		}
		return nil
	})
}

// testViewedCopy: a placed object marked v1alpha1.ViewedAnnotation is
// applied without the mark, and its live copy is reported under
// reports.ForwardedName with the mark and the destination, changing with
// the cluster's object; unmarked, the copy goes.
func testViewedCopy(t *testing.T, c *testCluster) {
	const ns = "viewed"
	h := newHarness(t, c, "edge-v")
	ctx := context.Background()
	viewed := func(obj map[string]any) map[string]any {
		obj["metadata"].(map[string]any)["annotations"] = map[string]any{v1alpha1.ViewedAnnotation: "true"}
		return obj
	}
	h.put(namespace(ns), viewed(configMap(ns, "cm", map[string]any{"k": "1"})))
	h.start()
	copyKey := store.Key{Space: "outbox", Resource: resConfigMaps, Namespace: ns, Name: reports.ForwardedName("edge-v", "cm")}
	copyHas := func(what, label string) {
		t.Helper()
		poll.Until(t, what, func() error {
			o, err := h.st.Get(copyKey)
			if err != nil {
				return err
			}
			var u unstructured.Unstructured
			if err := json.Unmarshal(o.Data, &u.Object); err != nil {
				return err
			}
			if a := u.GetAnnotations(); a[v1alpha1.ViewedAnnotation] != "true" || a[v1alpha1.DestinationAnnotation] != "edge-v" {
				return fmt.Errorf("annotations %v", a)
			}
			if u.GetName() != copyKey.Name || u.GetLabels()["seen"] != label {
				return fmt.Errorf("%s labelled %v", u.GetName(), u.GetLabels())
			}
			return nil
		})
	}
	copyHas("the live copy", "")
	live, err := h.get(gvrCM, ns, "cm")
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := live.GetAnnotations()[v1alpha1.ViewedAnnotation]; ok {
		t.Fatalf("the mark reached the cluster: %v", live.GetAnnotations())
	}
	if _, err := h.admin.Resource(gvrCM).Namespace(ns).Patch(ctx, "cm", types.MergePatchType,
		[]byte(`{"metadata":{"labels":{"seen":"yes"}}}`), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	copyHas("the copy following the cluster", "yes")

	h.put(configMap(ns, "cm", map[string]any{"k": "1"}))
	poll.Until(t, "the copy gone", func() error {
		if _, err := h.st.Get(copyKey); !errors.Is(err, store.ErrNotFound) {
			return fmt.Errorf("still reported: %v", err)
		}
		return nil
	})
}
