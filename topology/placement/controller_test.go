package placement

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/canopy-dev/canopy/relay/layout"
	"github.com/canopy-dev/canopy/relay/store"
	"github.com/canopy-dev/canopy/test/poll"
	"github.com/canopy-dev/canopy/topology/api/v1alpha1"
	"github.com/canopy-dev/canopy/topology/reports"
	"github.com/canopy-dev/canopy/topology/status"
	"github.com/canopy-dev/canopy/topology/summary"
)

const (
	inv  = "inventory"
	down = "downsync"
	ws   = "default"
)

type fixture struct {
	t  testing.TB
	st *store.Store
	// rs, when set, holds the reports-<child> spaces (Config.Reports).
	rs *store.Store
}

// newFixture returns a fixture whose controller runs (Controller.Run).
func newFixture(t *testing.T) *fixture { return newFixtureWith(t, nil) }

// newFixtureWith is newFixture with tweak applied to the controller's
// Config; the store of Config.Reports becomes the fixture's rs.
func newFixtureWith(t *testing.T, tweak func(*Config)) *fixture {
	f := newStoreFixture(t)
	st := f.st
	cfg := Config{Store: st, Inventory: inv, Downsync: down, Settle: time.Millisecond}
	if tweak != nil {
		tweak(&cfg)
	}
	if cfg.Reports != nil {
		f.rs = cfg.Reports("reports-r1")
	}
	c := New(cfg)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- c.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("controller: %v", err)
		}
	})
	return f
}

// newStoreFixture returns a fixture with its spaces and no controller.
func newStoreFixture(t testing.TB) *fixture {
	f := &fixture{t: t, st: newMemStore(t)}
	for name, kind := range map[string]string{ws: layout.SpaceKindWDS, inv: layout.SpaceKindInventory, down: layout.SpaceKindDownsync, "other": layout.SpaceKindWDS} {
		f.put(store.Key{Resource: layout.SpaceResource, Name: name}, map[string]any{"spec": map[string]any{"kind": kind}})
	}
	return f
}

// put creates or replaces the object at k; obj gets its metadata name and
// namespace from k.
func (f *fixture) put(k store.Key, obj map[string]any) {
	f.t.Helper()
	md, _ := obj["metadata"].(map[string]any)
	if md == nil {
		md = map[string]any{}
		obj["metadata"] = md
	}
	md["name"] = k.Name
	if k.Namespace != "" {
		md["namespace"] = k.Namespace
	}
	if _, ok := md["uid"]; !ok {
		md["uid"] = "uid-" + k.Space + "-" + k.Name
	}
	if _, ok := md["generation"]; !ok {
		md["generation"] = 1
	}
	data, err := json.Marshal(obj)
	if err != nil {
		f.t.Fatal(err)
	}
	ctx := context.Background()
	st := f.st
	if f.rs != nil && strings.HasPrefix(k.Space, "reports-") {
		st = f.rs
	}
	if cur, err := st.Get(k); err == nil {
		if g, ok := md["generation"].(int); ok {
			var old struct {
				Metadata struct {
					Generation int `json:"generation"`
				} `json:"metadata"`
			}
			_ = json.Unmarshal(cur.Data, &old)
			md["generation"] = max(g, old.Metadata.Generation+1)
			data, _ = json.Marshal(obj)
		}
		if _, err := st.Update(ctx, k, data, 0); err != nil {
			f.t.Fatal(err)
		}
		return
	}
	if _, err := st.Create(ctx, k, data); err != nil {
		f.t.Fatal(err)
	}
}

func (f *fixture) del(k store.Key) {
	f.t.Helper()
	if _, err := f.st.Delete(context.Background(), k, 0, ""); err != nil {
		f.t.Fatal(err)
	}
}

func (f *fixture) target(name string, labels map[string]string) {
	f.put(store.Key{Space: inv, Resource: syncTargetsRes, Name: name}, map[string]any{
		"apiVersion": "edge.canopy.dev/v1alpha1", "kind": "SyncTarget", "metadata": map[string]any{"labels": labels}})
}

func (f *fixture) location(name string, labels map[string]string, selector map[string]string) {
	f.put(store.Key{Space: inv, Resource: locationsRes, Name: name}, map[string]any{
		"apiVersion": "edge.canopy.dev/v1alpha1", "kind": "Location", "metadata": map[string]any{"labels": labels},
		"spec": map[string]any{"instanceSelector": map[string]any{"matchLabels": selector}}})
}

func (f *fixture) placement(space, name string, locSel map[string]string, clauses ...map[string]any) {
	f.put(store.Key{Space: space, Resource: placementsRes, Name: name}, map[string]any{
		"apiVersion": "edge.canopy.dev/v1alpha1", "kind": "EdgePlacement",
		"spec": map[string]any{"locationSelectors": []any{map[string]any{"matchLabels": locSel}}, "downsync": clauses}})
}

func (f *fixture) configMap(space, ns, name string, labels, annotations map[string]string) {
	f.put(store.Key{Space: space, Resource: store.Resource{Resource: "configmaps"}, Namespace: ns, Name: name}, map[string]any{
		"apiVersion": "v1", "kind": "ConfigMap", "metadata": map[string]any{"labels": labels, "annotations": annotations},
		"data": map[string]any{"k": name}})
}

func (f *fixture) namespace(space, name string) {
	f.put(store.Key{Space: space, Resource: namespacesRes, Name: name}, map[string]any{"apiVersion": "v1", "kind": "Namespace"})
}

// downsync returns "resource/ns/name→dests" for every object the
// controller placed (but the placements and collectors themselves, see
// travelling), sorted.
func (f *fixture) downsync() []string { return f.placed(false) }

// travelling returns the placements and collectors placed, as downsync
// does.
func (f *fixture) travelling() []string { return f.placed(true) }

func (f *fixture) placed(control bool) []string {
	lr, err := f.st.List(store.ListOptions{Space: down})
	if err != nil {
		f.t.Fatal(err)
	}
	var out []string
	for _, o := range lr.Items {
		md, _ := jsonMap(o)["metadata"].(map[string]any)
		ann, _ := md["annotations"].(map[string]any)
		if _, ok := ann[v1alpha1.SourceAnnotation]; !ok {
			continue
		}
		if r := o.Key.Resource; (r == placementsRes || r == collectorsRes) != control {
			continue
		}
		out = append(out, fmt.Sprintf("%s/%s/%s→%s", o.Key.Resource.Resource, o.Key.Namespace, o.Key.Name, ann[v1alpha1.DestinationsAnnotation]))
	}
	slices.Sort(out)
	return out
}

func (f *fixture) waitDownsync(want ...string) {
	f.t.Helper()
	slices.Sort(want)
	poll.Until(f.t, "downsync space", func() error {
		if got := f.downsync(); !slices.Equal(got, want) {
			return fmt.Errorf("\n got  %s\n want %s", strings.Join(got, "\n      "), strings.Join(want, "\n      "))
		}
		return nil
	})
}

func (f *fixture) status(space, name string) v1alpha1.EdgePlacementStatus {
	f.t.Helper()
	o, err := f.st.Get(store.Key{Space: space, Resource: placementsRes, Name: name})
	if err != nil {
		f.t.Fatal(err)
	}
	var p v1alpha1.EdgePlacement
	if err := json.Unmarshal(o.Data, &p); err != nil {
		f.t.Fatal(err)
	}
	return p.Status
}

func (f *fixture) waitStatus(space, name, what string, ok func(v1alpha1.EdgePlacementStatus) bool) v1alpha1.EdgePlacementStatus {
	f.t.Helper()
	var st v1alpha1.EdgePlacementStatus
	poll.Until(f.t, fmt.Sprintf("placement %s/%s: %s", space, name, what), func() error {
		if st = f.status(space, name); !ok(st) {
			return fmt.Errorf("status %+v", st)
		}
		return nil
	})
	return st
}

// slices returns "slice→dest,dest" for a placement's slices.
func (f *fixture) slices(space, placement string) []string {
	lr, err := f.st.List(store.ListOptions{Space: space, Resource: slicesRes})
	if err != nil {
		f.t.Fatal(err)
	}
	var out []string
	for _, o := range lr.Items {
		var sl v1alpha1.SinglePlacementSlice
		if err := json.Unmarshal(o.Data, &sl); err != nil || sl.EdgePlacement != placement {
			continue
		}
		var names []string
		for _, d := range sl.Destinations {
			names = append(names, d.SyncTargetName+"@"+d.LocationName)
		}
		out = append(out, strings.Join(names, ","))
	}
	slices.Sort(out)
	return out
}

func cmClause(ns ...string) map[string]any {
	return map[string]any{"apiGroup": "", "resources": []any{"configmaps"}, "namespaces": ns}
}

// The whole path of one placement: scheduling into slices, the selected
// objects and their namespace placed once with their destinations, each
// destination's own SyncTarget and Location sent along, and what changes
// when labels change, objects leave the selection and the placement goes.
func TestPlacementEndToEnd(t *testing.T) {
	f := newFixture(t)
	f.target("s1", map[string]string{"env": "prod"})
	f.target("s2", map[string]string{"env": "dev"})
	f.target("s3", map[string]string{"env": "prod"})
	f.location("prod", map[string]string{"tier": "prod"}, map[string]string{"env": "prod"})
	f.namespace(ws, "app")
	f.namespace(ws, "other")
	f.configMap(ws, "app", "a", nil, nil)
	f.configMap(ws, "other", "b", nil, nil)
	f.placement(ws, "p1", map[string]string{"tier": "prod"}, cmClause("app"))

	f.waitDownsync(
		"configmaps/app/a→s1,s3", "namespaces//app→s1,s3",
		"synctargets//s1→s1", "synctargets//s3→s3", "locations//prod→s1,s3")
	if got := f.slices(ws, "p1"); !slices.Equal(got, []string{"s1@prod,s3@prod"}) {
		t.Fatalf("slices = %v", got)
	}
	// The placement travels to its destinations (the edge reads its
	// clauses), under a name qualified by its space, with the source
	// revision of what it placed.
	if got := f.travelling(); !slices.Equal(got, []string{"edgeplacements//default.p1→s1,s3"}) {
		t.Fatalf("placements travelling = %v", got)
	}
	cm, err := f.st.Get(store.Key{Space: down, Resource: store.Resource{Resource: "configmaps"}, Namespace: "app", Name: "a"})
	if err != nil {
		t.Fatal(err)
	}
	src, _ := f.st.Get(store.Key{Space: ws, Resource: store.Resource{Resource: "configmaps"}, Namespace: "app", Name: "a"})
	if got := jsonMap(cm)["metadata"].(map[string]any)["annotations"].(map[string]any)[v1alpha1.SourceRevisionAnnotation]; got != fmt.Sprint(src.Revision) {
		t.Fatalf("source revision %v, want %d", got, src.Revision)
	}
	f.waitStatus(ws, "p1", "2 matched", func(s v1alpha1.EdgePlacementStatus) bool {
		return s.MatchedDestinations == 2 && s.ObservedGeneration == 1
	})

	// s2 becomes prod: it joins everything p1 places.
	f.target("s2", map[string]string{"env": "prod"})
	f.waitDownsync(
		"configmaps/app/a→s1,s2,s3", "namespaces//app→s1,s2,s3",
		"synctargets//s1→s1", "synctargets//s2→s2", "synctargets//s3→s3", "locations//prod→s1,s2,s3")

	// The object leaves the selection (moved by label: a clause with a
	// label selector now), and another enters.
	f.placement(ws, "p1", map[string]string{"tier": "prod"}, map[string]any{
		"resources": []any{"configmaps"}, "labelSelectors": []any{map[string]any{"matchLabels": map[string]any{"ship": "yes"}}}})
	f.configMap(ws, "other", "b", map[string]string{"ship": "yes"}, nil)
	f.waitDownsync(
		"configmaps/other/b→s1,s2,s3", "namespaces//other→s1,s2,s3",
		"synctargets//s1→s1", "synctargets//s2→s2", "synctargets//s3→s3", "locations//prod→s1,s2,s3")

	// The placement goes: so does everything it placed, and its slices.
	f.del(store.Key{Space: ws, Resource: placementsRes, Name: "p1"})
	f.waitDownsync()
	poll.Until(t, "no slice left after the placement was deleted", func() error {
		if left := f.slices(ws, "p1"); len(left) > 0 {
			return fmt.Errorf("%v", left)
		}
		return nil
	})
}

// Two placements choosing different Customizers for one object on one
// destination: both report the conflict, the first by name wins there, and
// where only one places it, its choice applies.
func TestPlacementConflict(t *testing.T) {
	f := newFixture(t)
	f.target("s1", map[string]string{"env": "prod", "zone": "a"})
	f.target("s2", map[string]string{"env": "prod", "zone": "b"})
	f.location("a", map[string]string{"zone": "a"}, map[string]string{"zone": "a"})
	f.location("all", map[string]string{"zone": "all"}, map[string]string{"env": "prod"})
	f.namespace(ws, "app")
	f.configMap(ws, "app", "cfg", nil, map[string]string{v1alpha1.CustomizerAnnotation: "base"})
	for _, c := range []string{"base", "special"} {
		f.put(store.Key{Space: ws, Resource: customizersRes, Namespace: "app", Name: c}, map[string]any{
			"apiVersion": "edge.canopy.dev/v1alpha1", "kind": "Customizer"})
	}
	// p-a: zone a only, the object's own customizer. p-b: everywhere,
	// with a clause override.
	f.placement(ws, "p-a", map[string]string{"zone": "a"}, cmClause("app"))
	special := cmClause("app")
	special["customizer"] = "special"
	f.placement(ws, "p-b", map[string]string{"zone": "all"}, special)

	f.waitDownsync(
		"configmaps/app/cfg→s1,s2", "namespaces//app→s1,s2",
		"customizers/app/base→s1", "customizers/app/special→s2",
		"synctargets//s1→s1", "synctargets//s2→s2", "locations//a→s1", "locations//all→s2")
	o, err := f.st.Get(store.Key{Space: down, Resource: store.Resource{Resource: "configmaps"}, Namespace: "app", Name: "cfg"})
	if err != nil {
		t.Fatal(err)
	}
	md := jsonMap(o)["metadata"].(map[string]any)
	ann := md["annotations"].(map[string]any)
	if ann[v1alpha1.CustomizerAnnotation] != "base" || ann[v1alpha1.CustomizerOverridesAnnotation] != "s2=app/special" {
		t.Fatalf("customizer annotations = %v, want base with s2 overridden to app/special", ann)
	}
	for _, p := range []string{"p-a", "p-b"} {
		st := f.waitStatus(ws, p, "one conflict", func(s v1alpha1.EdgePlacementStatus) bool { return s.ConflictCount == 1 })
		c := st.Conflicts[0]
		if c.Destination != "s1" || c.Winner != "p-a" || c.Object.Name != "cfg" || !slices.Equal(c.Placements, []string{"p-a", "p-b"}) {
			t.Fatalf("%s conflict = %+v", p, c)
		}
	}
}

// Objects of other spaces, RBAC objects that govern a space, and Canopy's
// own kinds are never placed; an object placed from two spaces goes from
// the first by name.
func TestPlacementBoundaries(t *testing.T) {
	f := newFixture(t)
	f.target("s1", map[string]string{"env": "prod"})
	f.location("prod", map[string]string{"tier": "prod"}, map[string]string{"env": "prod"})
	for _, sp := range []string{ws, "other"} {
		f.namespace(sp, "app")
		f.configMap(sp, "app", "same", nil, nil)
		f.placement(sp, "all", map[string]string{"tier": "prod"}, map[string]any{"resources": []any{"*"}})
	}
	f.put(store.Key{Space: ws, Resource: store.Resource{Group: "rbac.authorization.k8s.io", Resource: "rolebindings"}, Namespace: "app", Name: "space-own"},
		map[string]any{"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
			"metadata": map[string]any{"labels": map[string]any{"edge.canopy.dev/space-rbac": "true"}}})
	f.put(store.Key{Space: ws, Resource: store.Resource{Group: "rbac.authorization.k8s.io", Resource: "rolebindings"}, Namespace: "app", Name: "for-the-edge"},
		map[string]any{"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding"})
	f.waitDownsync(
		"configmaps/app/same→s1", "namespaces//app→s1", "rolebindings/app/for-the-edge→s1",
		"synctargets//s1→s1", "locations//prod→s1")
	o, err := f.st.Get(store.Key{Space: down, Resource: store.Resource{Resource: "configmaps"}, Namespace: "app", Name: "same"})
	if err != nil {
		t.Fatal(err)
	}
	if src := jsonMap(o)["metadata"].(map[string]any)["annotations"].(map[string]any)[v1alpha1.SourceAnnotation]; src != ws {
		t.Fatalf("the object placed from two spaces came from %v, want %s", src, ws)
	}
	f.waitStatus("other", "all", "a cross-space conflict", func(s v1alpha1.EdgePlacementStatus) bool { return s.ConflictCount > 0 })
}

// An object whose template names a parameter a destination lacks is
// reported in its placement's status (Customized False), and the report
// clears once the parameter exists.
func TestPlacementReportsCustomizationFailures(t *testing.T) {
	f := newFixture(t)
	f.target("s1", map[string]string{"env": "prod", "zone": "a"})
	f.target("s2", map[string]string{"env": "prod"})
	f.location("prod", map[string]string{"tier": "prod"}, map[string]string{"env": "prod"})
	f.namespace(ws, "app")
	f.put(store.Key{Space: ws, Resource: store.Resource{Resource: "configmaps"}, Namespace: "app", Name: "zoned"}, map[string]any{
		"apiVersion": "v1", "kind": "ConfigMap",
		"metadata": map[string]any{"annotations": map[string]any{v1alpha1.ExpandParametersAnnotation: "true"}},
		"data":     map[string]any{"zone": "%(zone)"}})
	f.placement(ws, "p", map[string]string{"tier": "prod"}, cmClause("app"))
	cond := func(s v1alpha1.EdgePlacementStatus) *metav1.Condition {
		return apimeta.FindStatusCondition(s.Conditions, ConditionCustomized)
	}
	st := f.waitStatus(ws, "p", "Customized False", func(s v1alpha1.EdgePlacementStatus) bool {
		c := cond(s)
		return c != nil && c.Status == metav1.ConditionFalse
	})
	if m := cond(st).Message; !strings.Contains(m, "1 object(s)") || !strings.Contains(m, "at s2") || !strings.Contains(m, `"zone"`) {
		t.Fatalf("message %q should name the object, s2 and the parameter", m)
	}
	f.target("s2", map[string]string{"env": "prod", "zone": "b"})
	f.waitStatus(ws, "p", "Customized True", func(s v1alpha1.EdgePlacementStatus) bool {
		c := cond(s)
		return c != nil && c.Status == metav1.ConditionTrue
	})
}

// Reported state: partials and placement syncs that children reported
// (reports-<child> spaces) become a CombinedStatus per (object,
// placement), the placement's Synced and Ready conditions, and, for a
// placement that wants it, the status of its single destination copied
// into the object's status.
func TestReportedState(t *testing.T) {
	t.Run("in the store", func(t *testing.T) { testReportedState(t, newFixture(t)) })
	// The root keeps reports in memory, apart from its log.
	t.Run("kept apart", func(t *testing.T) {
		testReportedState(t, newFixtureWith(t, func(c *Config) { keptApart(t, c) }))
	})
}

// keptApart keeps the reports in a store of their own, as the root keeps
// them in memory: Config.Reports returns it, and ReportsChanged receives
// after each of its changes.
func keptApart(t *testing.T, c *Config) {
	rs := newMemStore(t)
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	w, err := rs.Watch(ctx, store.WatchOptions{Since: rs.Revision()})
	if err != nil {
		t.Fatal(err)
	}
	changed := make(chan struct{}, 1)
	go func() {
		for range w.Events() {
			select {
			case changed <- struct{}{}:
			default:
			}
		}
	}()
	c.Reports = func(string) *store.Store { return rs }
	c.ReportsChanged = changed
}

// newMemStore returns an empty store on a log that keeps nothing.
func newMemStore(t testing.TB) *store.Store {
	st := store.New(store.Options{})
	st.SetLog(store.NewMemLog(st))
	t.Cleanup(st.Close)
	return st
}

// Reports kept apart wait for Config.Hold: after the hold begins again
// (a new term), a partial reported while the child has not reported
// again (its Collector's cursor went with the reports of the last term)
// makes no CombinedStatus; one is written once the cursor is back, with
// no other report.
func TestHoldHoldsReportedState(t *testing.T) {
	hold := summary.NewHold(time.Hour)
	f := newFixtureWith(t, func(c *Config) {
		keptApart(t, c)
		c.Hold, c.ReportWindow = hold, 10*time.Millisecond
	})
	ctx := context.Background()
	cursor := layout.UpsyncCursor("reports-r1")
	if _, err := f.rs.Create(ctx, cursor, []byte(`{"metadata":{"name":"cursor"}}`)); err != nil {
		t.Fatal(err)
	}
	ref, _ := setUpReported(t, f)
	if _, err := f.rs.Delete(ctx, cursor, 0, ""); err != nil {
		t.Fatal(err)
	}
	hold.Reset()
	partial := reportedPartial(t, f, ref)
	f.report("reports-r1", partial.Key(), reports.KindPartial, partial)
	poll.Holds(t, "no CombinedStatus before the reports are ready", 300*time.Millisecond, func() error { // thirty windows
		if _, err := f.st.Get(store.Key{Space: ws, Resource: combinedRes, Namespace: "app", Name: "a.configmaps.p"}); !errors.Is(err, store.ErrNotFound) {
			return fmt.Errorf("%v", err)
		}
		return nil
	})
	if _, err := f.rs.Create(ctx, cursor, []byte(`{"metadata":{"name":"cursor"}}`)); err != nil {
		t.Fatal(err)
	}
	if cs := f.waitCombined("app", "a.configmaps.p"); cs.Destinations != 2 {
		t.Fatalf("CombinedStatus = %+v", cs)
	}
}

// writeCombined skips a CombinedStatus it found equal to the same result
// at the same revision, and only that: a new result is written, and so is
// the result over a CombinedStatus someone else changed. Each step is
// followed by a flush that finds the CombinedStatus equal (a placement sync
// report whose effect is awaited), which is when the skip is remembered.
func TestCombinedStatusRewrittenWhenResultOrObjectChanges(t *testing.T) {
	f := newFixture(t)
	ref, st := setUpReported(t, f)
	key := store.Key{Space: ws, Resource: combinedRes, Namespace: "app", Name: "a.configmaps.p"}
	ready := int64(0)
	flushEqual := func() { // a report that changes only the placement's status
		ready = 1 - ready
		sync := reports.PlacementSync{Placement: ref, Destinations: 2, Revisions: map[string]int64{st.SyncedRevision: 2}, Ready: ready}
		f.report("reports-r1", sync.Key(), reports.KindPlacementSync, sync)
		f.waitStatus(ws, "p", fmt.Sprintf("ready %d", ready), func(s v1alpha1.EdgePlacementStatus) bool {
			c := apimeta.FindStatusCondition(s.Conditions, v1alpha1.ConditionReady)
			return s.SyncedDestinations == 2 && c != nil && c.Status == metav1.ConditionFalse && strings.Contains(c.Message, fmt.Sprintf("%d of 2", ready))
		})
	}
	count := func(what, want string) {
		t.Helper()
		poll.Until(t, what+": the CombinedStatus counting "+want, func() error {
			o, err := f.st.Get(key)
			if err != nil {
				return err
			}
			var cs v1alpha1.CombinedStatus
			_ = json.Unmarshal(o.Data, &cs)
			if len(cs.Results) != 1 || len(cs.Results[0].Rows) != 1 || cs.Results[0].Rows[0].Columns[0].String() != want {
				return fmt.Errorf("results %+v", cs.Results)
			}
			return nil
		})
	}
	partial := reportedPartial(t, f, ref)
	f.report("reports-r1", partial.Key(), reports.KindPartial, partial)
	count("two destinations reported", "2")
	flushEqual()

	// Someone else rewrites it: the next flush puts the result back.
	o, err := f.st.Get(key)
	if err != nil {
		t.Fatal(err)
	}
	m := jsonMap(o)
	m["results"] = []any{}
	if _, err := f.st.Update(context.Background(), key, mustJSON(m), o.Revision); err != nil {
		t.Fatal(err)
	}
	flushEqual()
	count("after another writer emptied it", "2")
	flushEqual()

	// A new result is written.
	col := compile(t, f, "count")
	one, err := col.Evaluate(map[string]any{"metadata": map[string]any{"name": "a"}}, nil, status.Destination{Name: "s1"})
	if err != nil {
		t.Fatal(err)
	}
	partial.Partial = one
	f.report("reports-r1", partial.Key(), reports.KindPartial, partial)
	count("one destination reported", "1")
}

// setUpReported places ConfigMap app/a on s1 and s2 through placement p
// with StatusCollector count, with a reports-r1 space, and returns the
// placement and its status once synced to nothing.
func setUpReported(t *testing.T, f *fixture) (reports.PlacementRef, v1alpha1.EdgePlacementStatus) {
	t.Helper()
	f.put(store.Key{Resource: layout.SpaceResource, Name: "reports-r1"}, map[string]any{"spec": map[string]any{"kind": layout.SpaceKindMailbox}})
	f.countedPlacement("s1", "s2")
	f.waitDownsync("configmaps/app/a→s1,s2", "namespaces//app→s1,s2", "synctargets//s1→s1", "synctargets//s2→s2", "locations//prod→s1,s2")
	if got := f.travelling(); !slices.Equal(got, []string{"edgeplacements//default.p→s1,s2", "statuscollectors//default.count→s1,s2"}) {
		t.Fatalf("placements and collectors travelling: %v", got)
	}
	st := f.waitStatus(ws, "p", "Synced False while nothing reported", func(s v1alpha1.EdgePlacementStatus) bool {
		c := apimeta.FindStatusCondition(s.Conditions, v1alpha1.ConditionSynced)
		return c != nil && c.Status == metav1.ConditionFalse && s.SyncedRevision != ""
	})
	return reports.PlacementRef{Space: ws, Name: "p"}, st
}

// countedPlacement writes SyncTargets named targets, Location prod
// selecting them, ConfigMap app/a, and placement p of it there with
// StatusCollector count (a COUNT column).
func (f *fixture) countedPlacement(targets ...string) {
	for _, name := range targets {
		f.target(name, map[string]string{"env": "prod"})
	}
	f.location("prod", map[string]string{"tier": "prod"}, map[string]string{"env": "prod"})
	f.namespace(ws, "app")
	f.configMap(ws, "app", "a", nil, nil)
	f.put(store.Key{Space: ws, Resource: collectorsRes, Name: "count"}, map[string]any{
		"apiVersion": "edge.canopy.dev/v1alpha1", "kind": "StatusCollector",
		"spec": map[string]any{"combinedFields": []any{map[string]any{"name": "n", "type": "COUNT"}}}})
	f.put(store.Key{Space: ws, Resource: placementsRes, Name: "p"}, map[string]any{
		"apiVersion": "edge.canopy.dev/v1alpha1", "kind": "EdgePlacement",
		"spec": map[string]any{"locationSelectors": []any{map[string]any{"matchLabels": map[string]any{"tier": "prod"}}},
			"downsync": []any{cmClause("app")}, "statusCollectors": []any{"count"}}})
}

// reportedPartial is the COUNT partial of setUpReported's ConfigMap over
// s1 and s2.
func reportedPartial(t *testing.T, f *fixture, ref reports.PlacementRef) reports.Partial {
	t.Helper()
	col := compile(t, f, "count")
	var parts []status.Partial
	for _, d := range []string{"s1", "s2"} {
		p, err := col.Evaluate(map[string]any{"metadata": map[string]any{"name": "a"}}, nil, status.Destination{Name: d})
		if err != nil {
			t.Fatal(err)
		}
		parts = append(parts, p)
	}
	return reports.Partial{Placement: ref, Object: v1alpha1.ObjectReference{Resource: "configmaps", Namespace: "app", Name: "a"},
		Collector: "count", Partial: status.MergeAll(parts...)}
}

func testReportedState(t *testing.T, f *fixture) {
	ref, st := setUpReported(t, f)

	// The region reports: both destinations applied the latest revision,
	// one is ready; a COUNT partial over both.
	sync := reports.PlacementSync{Placement: ref, Destinations: 2, Revisions: map[string]int64{st.SyncedRevision: 2}, Ready: 1}
	f.report("reports-r1", sync.Key(), reports.KindPlacementSync, sync)
	partial := reportedPartial(t, f, ref)
	f.report("reports-r1", partial.Key(), reports.KindPartial, partial)
	f.waitStatus(ws, "p", "Synced True, Ready False", func(s v1alpha1.EdgePlacementStatus) bool {
		syncd := apimeta.FindStatusCondition(s.Conditions, v1alpha1.ConditionSynced)
		ready := apimeta.FindStatusCondition(s.Conditions, v1alpha1.ConditionReady)
		return s.SyncedDestinations == 2 && syncd != nil && syncd.Status == metav1.ConditionTrue && ready != nil && ready.Status == metav1.ConditionFalse
	})
	cs := f.waitCombined("app", "a.configmaps.p")
	if cs.Destinations != 2 || len(cs.Results) != 1 || len(cs.Results[0].Rows) != 1 || cs.Results[0].Rows[0].Columns[0].String() != "2" {
		t.Fatalf("CombinedStatus = %+v", cs)
	}

	// Narrowed to one destination with singleton reported state: s2's
	// status lands in the object.
	f.target("s1", map[string]string{"env": "dev"})
	f.put(store.Key{Space: ws, Resource: placementsRes, Name: "p"}, map[string]any{
		"apiVersion": "edge.canopy.dev/v1alpha1", "kind": "EdgePlacement",
		"spec": map[string]any{"locationSelectors": []any{map[string]any{"matchLabels": map[string]any{"tier": "prod"}}},
			"downsync": []any{cmClause("app")}, "wantSingletonReportedState": true}})
	f.waitDownsync("configmaps/app/a→s2", "namespaces//app→s2", "synctargets//s2→s2", "locations//prod→s2")
	f.put(store.Key{Space: "reports-r1", Resource: store.Resource{Resource: "configmaps"}, Namespace: "app", Name: "a"}, map[string]any{
		"apiVersion": "v1", "kind": "ConfigMap", "status": map[string]any{"seen": "at s2"},
		"metadata": map[string]any{"annotations": map[string]any{v1alpha1.DestinationAnnotation: "s2"}}})
	f.waitSeen("at s2", "the singleton status never reached the object")

	// A second placement places the same object on the same destination,
	// also with singleton reported state: both would write the same
	// status, which is written once (in one Txn with the other reported
	// state, two writes of one key would fail it at every flush).
	f.put(store.Key{Space: ws, Resource: placementsRes, Name: "p2"}, map[string]any{
		"apiVersion": "edge.canopy.dev/v1alpha1", "kind": "EdgePlacement",
		"spec": map[string]any{"locationSelectors": []any{map[string]any{"matchLabels": map[string]any{"tier": "prod"}}},
			"downsync": []any{cmClause("app")}, "wantSingletonReportedState": true}})
	f.waitStatus(ws, "p2", "p2 scheduled", func(s v1alpha1.EdgePlacementStatus) bool { return s.MatchedDestinations == 1 })
	f.put(store.Key{Space: "reports-r1", Resource: store.Resource{Resource: "configmaps"}, Namespace: "app", Name: "a"}, map[string]any{
		"apiVersion": "v1", "kind": "ConfigMap", "status": map[string]any{"seen": "at s2, again"},
		"metadata": map[string]any{"annotations": map[string]any{v1alpha1.DestinationAnnotation: "s2"}}})
	f.waitSeen("at s2, again", "with two placements, the singleton status never reached the object")
}

// waitSeen waits until ConfigMap app/a of the workload space has
// status.seen equal to want, and fails with msg.
func (f *fixture) waitSeen(want, msg string) {
	f.t.Helper()
	poll.Until(f.t, msg, func() error {
		o, _ := f.st.Get(store.Key{Space: ws, Resource: store.Resource{Resource: "configmaps"}, Namespace: "app", Name: "a"})
		if st, _ := jsonMap(o)["status"].(map[string]any); st["seen"] != want {
			return fmt.Errorf("status %v, want seen %q", st, want)
		}
		return nil
	})
}

func (f *fixture) report(space string, k store.Key, kind string, r any) {
	f.t.Helper()
	data, err := reports.Encode(kind, k.Name, r)
	if err != nil {
		f.t.Fatal(err)
	}
	var m map[string]any
	_ = json.Unmarshal(data, &m)
	k.Space = space
	f.put(k, m)
}

func compile(t testing.TB, f *fixture, name string) *status.Collector {
	t.Helper()
	o, err := f.st.Get(store.Key{Space: ws, Resource: collectorsRes, Name: name})
	if err != nil {
		t.Fatal(err)
	}
	var sc v1alpha1.StatusCollector
	if err := json.Unmarshal(o.Data, &sc); err != nil {
		t.Fatal(err)
	}
	c, errs := status.Compile(&sc)
	if len(errs) > 0 {
		t.Fatal(errs)
	}
	return c
}

func (f *fixture) waitCombined(ns, name string) v1alpha1.CombinedStatus {
	f.t.Helper()
	var o *store.Object
	poll.Until(f.t, "CombinedStatus "+ns+"/"+name, func() (err error) {
		o, err = f.st.Get(store.Key{Space: ws, Resource: combinedRes, Namespace: ns, Name: name})
		return err
	})
	var cs v1alpha1.CombinedStatus
	if err := json.Unmarshal(o.Data, &cs); err != nil {
		f.t.Fatal(err)
	}
	return cs
}
