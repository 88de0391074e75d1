package placement

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/canopy-dev/canopy/relay/layout"
	"github.com/canopy-dev/canopy/relay/store"
	"github.com/canopy-dev/canopy/test/poll"
	"github.com/canopy-dev/canopy/topology/api/v1alpha1"
	"github.com/canopy-dev/canopy/topology/reports"
)

// upsyncedHere returns "name=data.k@destination" for every ConfigMap of
// namespace app of the workload space labelled v1alpha1.UpsyncedLabel, sorted.
func (f *fixture) upsyncedHere() []string {
	lr, err := f.st.List(store.ListOptions{Space: ws, Resource: store.Resource{Resource: "configmaps"}, Namespace: "app"})
	if err != nil {
		f.t.Fatal(err)
	}
	var out []string
	for _, o := range lr.Items {
		if o.Labels[v1alpha1.UpsyncedLabel] != "true" {
			continue
		}
		m := jsonMap(o)
		md := m["metadata"].(map[string]any)
		ann, _ := md["annotations"].(map[string]any)
		data, _ := m["data"].(map[string]any)
		out = append(out, fmt.Sprintf("%s=%v@%v", o.Key.Name, data["k"], ann[v1alpha1.DestinationAnnotation]))
		if md["uid"] == "edge-uid" || md["ownerReferences"] != nil {
			f.t.Errorf("%s keeps its cluster's metadata: %v", o.Key.Name, md)
		}
	}
	slices.Sort(out)
	return out
}

// upsyncReport puts what destination dest reports having upsynced:
// ConfigMap app/name with data k=value.
func (f *fixture) upsyncReport(dest, name, value string) {
	f.put(store.Key{Space: "reports-r1", Resource: store.Resource{Resource: "configmaps"}, Namespace: "app", Name: reports.ForwardedName(dest, name)},
		map[string]any{"apiVersion": "v1", "kind": "ConfigMap", "data": map[string]any{"k": value},
			"metadata": map[string]any{"uid": "edge-uid", "annotations": map[string]any{v1alpha1.DestinationAnnotation: dest},
				"ownerReferences": []any{map[string]any{"apiVersion": "v1", "kind": "Pod", "name": "x", "uid": "u"}}}})
}

// Objects that destinations upsync reach the workload space of the
// placement whose upsync clause names them, annotated with their
// destination; when two destinations upsync the same one, the first by
// name is kept and the placement says so; an object of the space that was
// not upsynced is never written over; and what no report wants any more
// goes. Upsynced objects are never placed back down.
func TestUpsyncIntoTheWorkloadSpace(t *testing.T) {
	f := newFixture(t)
	f.put(store.Key{Resource: layout.SpaceResource, Name: "reports-r1"}, map[string]any{"spec": map[string]any{"kind": layout.SpaceKindMailbox}})
	for _, s := range []string{"s1", "s2"} {
		f.target(s, map[string]string{"env": "prod"})
	}
	f.target("s3", map[string]string{"env": "dev"})
	f.location("prod", map[string]string{"tier": "prod"}, map[string]string{"env": "prod"})
	f.namespace(ws, "app")
	f.configMap(ws, "app", "placed", nil, nil)
	f.configMap(ws, "app", "up-mine", nil, nil) // the user's own
	f.put(store.Key{Space: ws, Resource: placementsRes, Name: "p"}, map[string]any{
		"apiVersion": "edge.canopy.dev/v1alpha1", "kind": "EdgePlacement",
		"spec": map[string]any{"locationSelectors": []any{map[string]any{"matchLabels": map[string]any{"tier": "prod"}}},
			"downsync": []any{cmClause("app")},
			"upsync":   []any{map[string]any{"apiGroup": "", "resources": []any{"configmaps"}, "namespaces": []any{"app"}, "names": []any{"up-*"}}}}})
	f.waitDownsync("configmaps/app/placed→s1,s2", "configmaps/app/up-mine→s1,s2", "namespaces//app→s1,s2",
		"synctargets//s1→s1", "synctargets//s2→s2", "locations//prod→s1,s2")
	upsynced := func(what string, want ...string) {
		t.Helper()
		poll.Until(t, what, func() error {
			if got := f.upsyncedHere(); !slices.Equal(got, want) {
				return fmt.Errorf("%v", got)
			}
			return nil
		})
	}
	cond := func(what string, status metav1.ConditionStatus, reason string, msg ...string) {
		t.Helper()
		f.waitStatus(ws, "p", what, func(s v1alpha1.EdgePlacementStatus) bool {
			c := apimeta.FindStatusCondition(s.Conditions, ConditionUpsynced)
			if c == nil || c.Status != status || c.Reason != reason {
				return false
			}
			for _, m := range msg {
				if !strings.Contains(c.Message, m) {
					return false
				}
			}
			return true
		})
	}
	cond("Upsynced True with nothing reported", metav1.ConditionTrue, v1alpha1.ReasonAsExpected, "0 object(s)")

	// s1 upsyncs up-1 (and an object the clause does not name); s3, not a
	// destination of p, upsyncs up-3.
	f.upsyncReport("s1", "up-1", "one")
	f.upsyncReport("s1", "other", "no")
	f.upsyncReport("s3", "up-3", "no")
	upsynced("up-1 from s1", "up-1=one@s1")
	cond("Upsynced True", metav1.ConditionTrue, v1alpha1.ReasonAsExpected, "1 object(s)")

	// s2 upsyncs up-1 too: s1's is kept, and the placement names the
	// conflict. s2 also upsyncs up-mine, which the user wrote: it stays.
	f.upsyncReport("s2", "up-1", "two")
	f.upsyncReport("s2", "up-mine", "no")
	cond("Upsynced False: a conflict", metav1.ConditionFalse, v1alpha1.ReasonConflict,
		"configmaps app/up-1 upsynced by s1, s2; s1's is kept", "configmaps app/up-mine from s2 not written")
	upsynced("up-1 from s1 still", "up-1=one@s1")
	if o, err := f.st.Get(store.Key{Space: ws, Resource: store.Resource{Resource: "configmaps"}, Namespace: "app", Name: "up-mine"}); err != nil ||
		jsonMap(o)["data"].(map[string]any)["k"] != "up-mine" {
		t.Fatalf("the user's up-mine was written over: %v", err)
	}

	// s1's goes: s2's takes its place; changes follow.
	f.del(store.Key{Space: "reports-r1", Resource: store.Resource{Resource: "configmaps"}, Namespace: "app", Name: reports.ForwardedName("s1", "up-1")})
	f.del(store.Key{Space: "reports-r1", Resource: store.Resource{Resource: "configmaps"}, Namespace: "app", Name: reports.ForwardedName("s2", "up-mine")})
	upsynced("up-1 from s2", "up-1=two@s2")
	cond("Upsynced True again", metav1.ConditionTrue, v1alpha1.ReasonAsExpected, "1 object(s)")
	f.upsyncReport("s2", "up-1", "two, changed")
	upsynced("up-1 changed", "up-1=two, changed@s2")

	// The upsynced object is selected by p's downsync clause, but is not
	// placed back down.
	f.waitDownsync("configmaps/app/placed→s1,s2", "configmaps/app/up-mine→s1,s2", "namespaces//app→s1,s2",
		"synctargets//s1→s1", "synctargets//s2→s2", "locations//prod→s1,s2")

	// No report wants it any more: it goes.
	f.del(store.Key{Space: "reports-r1", Resource: store.Resource{Resource: "configmaps"}, Namespace: "app", Name: reports.ForwardedName("s2", "up-1")})
	upsynced("nothing upsynced")

	// A RoleBinding labelled to govern the space arrives inert; a CRD is
	// not written at all (the root would serve it).
	f.put(store.Key{Space: ws, Resource: placementsRes, Name: "p"}, map[string]any{
		"apiVersion": "edge.canopy.dev/v1alpha1", "kind": "EdgePlacement",
		"spec": map[string]any{"locationSelectors": []any{map[string]any{"matchLabels": map[string]any{"tier": "prod"}}},
			"downsync": []any{cmClause("app")},
			"upsync": []any{map[string]any{"apiGroup": "rbac.authorization.k8s.io", "resources": []any{"rolebindings"}},
				map[string]any{"apiGroup": "apiextensions.k8s.io", "resources": []any{"customresourcedefinitions"}}}}})
	rb := store.Resource{Group: "rbac.authorization.k8s.io", Resource: "rolebindings"}
	f.put(store.Key{Space: "reports-r1", Resource: rb, Namespace: "app", Name: reports.ForwardedName("s1", "admin")},
		map[string]any{"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
			"metadata": map[string]any{"annotations": map[string]any{v1alpha1.DestinationAnnotation: "s1"},
				"labels": map[string]any{"edge.canopy.dev/space-rbac": "true", "kubernetes.io/bootstrapping": "rbac-defaults"}},
			"roleRef":  map[string]any{"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "cluster-admin"},
			"subjects": []any{map[string]any{"kind": "Group", "name": "system:authenticated"}}})
	f.put(store.Key{Space: "reports-r1", Resource: crdsRes, Name: reports.ForwardedName("s1", "gadgets.example.com")},
		map[string]any{"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
			"metadata": map[string]any{"annotations": map[string]any{v1alpha1.DestinationAnnotation: "s1"}}})
	cond("the CRD not written", metav1.ConditionFalse, ReasonNotUpsynced, "CustomResourceDefinitions are not upsynced")
	o, err := f.st.Get(store.Key{Space: ws, Resource: rb, Namespace: "app", Name: "admin"})
	if err != nil {
		t.Fatalf("the RoleBinding was not upsynced: %v", err)
	}
	if o.Labels[v1alpha1.UpsyncedLabel] != "true" || o.Labels["edge.canopy.dev/space-rbac"] != "" || o.Labels["kubernetes.io/bootstrapping"] != "" {
		t.Fatalf("the upsynced RoleBinding's labels: %v", o.Labels)
	}
	if _, err := f.st.Get(store.Key{Space: ws, Resource: crdsRes, Name: "gadgets.example.com"}); err == nil {
		t.Fatal("an upsynced CRD was written into the space")
	}
}
