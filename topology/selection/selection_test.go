package selection

import (
	"fmt"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/canopy-dev/canopy/topology/api/v1alpha1"
)

func strp(s string) *string { return &s }

func sel(matchLabels map[string]string, exprs ...metav1.LabelSelectorRequirement) *metav1.LabelSelector {
	return &metav1.LabelSelector{MatchLabels: matchLabels, MatchExpressions: exprs}
}

// namespaces is the test's Namespace objects: name → labels.
var namespaces = map[string]map[string]string{
	"web":     {"team": "web", "env": "prod"},
	"web-dev": {"team": "web", "env": "dev"},
	"db":      {"team": "db", "env": "prod"},
	"bare":    nil,
}

func nsLabels(ns string) map[string]string { return namespaces[ns] }

var (
	deploy = Object{Group: "apps", Resource: "deployments", Namespace: "web", Name: "web", Labels: map[string]string{"app": "web", "tier": "front"}}
	cm     = Object{Group: "", Resource: "configmaps", Namespace: "web", Name: "settings", Labels: map[string]string{"app": "web"}}
	dbCM   = Object{Group: "", Resource: "configmaps", Namespace: "db", Name: "settings"}
	bareCM = Object{Group: "", Resource: "configmaps", Namespace: "bare", Name: "x"}
	crd    = Object{Group: "apiextensions.k8s.io", Resource: "customresourcedefinitions", Name: "widgets.example.com"}
	crd2   = Object{Group: "apiextensions.k8s.io", Resource: "customresourcedefinitions", Name: "gadgets.example.com"}
	widget = Object{Group: "example.com", Resource: "widgets", Namespace: "web-dev", Name: "w1", Labels: map[string]string{"app": "w"}}
	cr     = Object{Group: "rbac.authorization.k8s.io", Resource: "clusterroles", Name: "reader", Labels: map[string]string{"app": "web"}}
)

// TestMatches covers every field of a clause alone and in combination.
// want lists, per object, the index of the first matching clause or -1.
func TestMatches(t *testing.T) {
	objs := []Object{deploy, cm, dbCM, bareCM, crd, crd2, widget, cr}
	names := []string{"deploy", "cm", "dbCM", "bareCM", "crd", "crd2", "widget", "clusterrole"}
	cases := []struct {
		name    string
		clauses []v1alpha1.DownsyncClause
		want    []int
	}{
		{"no clauses", nil, []int{-1, -1, -1, -1, -1, -1, -1, -1}},
		{"every resource of every group", []v1alpha1.DownsyncClause{{Resources: []string{"*"}}},
			[]int{0, 0, 0, 0, 0, 0, 0, 0}},
		{"core group only", []v1alpha1.DownsyncClause{{APIGroup: strp(""), Resources: []string{"*"}}},
			[]int{-1, 0, 0, 0, -1, -1, -1, -1}},
		{"named group", []v1alpha1.DownsyncClause{{APIGroup: strp("apps"), Resources: []string{"*"}}},
			[]int{0, -1, -1, -1, -1, -1, -1, -1}},
		{"resource in any group", []v1alpha1.DownsyncClause{{Resources: []string{"configmaps", "widgets"}}},
			[]int{-1, 0, 0, 0, -1, -1, 0, -1}},
		{"resource in the wrong group", []v1alpha1.DownsyncClause{{APIGroup: strp("apps"), Resources: []string{"configmaps"}}},
			[]int{-1, -1, -1, -1, -1, -1, -1, -1}},
		{"CRDs by name", []v1alpha1.DownsyncClause{{APIGroup: strp("apiextensions.k8s.io"), Resources: []string{"customresourcedefinitions"},
			ObjectNames: []string{"widgets.example.com"}}},
			[]int{-1, -1, -1, -1, 0, -1, -1, -1}},
		{"CRDs ignore namespaces", []v1alpha1.DownsyncClause{{APIGroup: strp("apiextensions.k8s.io"), Resources: []string{"customresourcedefinitions"},
			Namespaces: []string{"web"}, NamespaceSelector: sel(map[string]string{"team": "nobody"})}},
			[]int{-1, -1, -1, -1, 0, 0, -1, -1}},
		{"namespaces listed", []v1alpha1.DownsyncClause{{Resources: []string{"*"}, Namespaces: []string{"web", "bare"}}},
			[]int{0, 0, -1, 0, 0, 0, -1, 0}},
		{"namespaces star", []v1alpha1.DownsyncClause{{Resources: []string{"*"}, Namespaces: []string{"*"}}},
			[]int{0, 0, 0, 0, 0, 0, 0, 0}},
		{"namespace selector", []v1alpha1.DownsyncClause{{Resources: []string{"*"}, NamespaceSelector: sel(map[string]string{"team": "web"})}},
			[]int{0, 0, -1, -1, 0, 0, 0, 0}},
		{"namespace selector expression", []v1alpha1.DownsyncClause{{Resources: []string{"*"},
			NamespaceSelector: sel(nil, metav1.LabelSelectorRequirement{Key: "env", Operator: metav1.LabelSelectorOpNotIn, Values: []string{"dev"}})}},
			[]int{0, 0, 0, 0, 0, 0, -1, 0}},
		{"empty namespace selector selects all", []v1alpha1.DownsyncClause{{Resources: []string{"*"}, NamespaceSelector: sel(nil)}},
			[]int{0, 0, 0, 0, 0, 0, 0, 0}},
		{"listed or selected", []v1alpha1.DownsyncClause{{Resources: []string{"*"}, Namespaces: []string{"db"},
			NamespaceSelector: sel(map[string]string{"env": "dev"})}},
			[]int{-1, -1, 0, -1, 0, 0, 0, 0}},
		{"object names", []v1alpha1.DownsyncClause{{Resources: []string{"*"}, ObjectNames: []string{"settings", "reader"}}},
			[]int{-1, 0, 0, -1, -1, -1, -1, 0}},
		{"object names star", []v1alpha1.DownsyncClause{{Resources: []string{"configmaps"}, ObjectNames: []string{"*"}}},
			[]int{-1, 0, 0, 0, -1, -1, -1, -1}},
		{"label selectors any of", []v1alpha1.DownsyncClause{{Resources: []string{"*"},
			LabelSelectors: []metav1.LabelSelector{*sel(map[string]string{"tier": "front"}), *sel(map[string]string{"app": "w"})}}},
			[]int{0, -1, -1, -1, -1, -1, 0, -1}},
		{"empty label selector selects all", []v1alpha1.DownsyncClause{{Resources: []string{"*"}, LabelSelectors: []metav1.LabelSelector{{}}}},
			[]int{0, 0, 0, 0, 0, 0, 0, 0}},
		{"label selector DoesNotExist", []v1alpha1.DownsyncClause{{Resources: []string{"*"},
			LabelSelectors: []metav1.LabelSelector{*sel(nil, metav1.LabelSelectorRequirement{Key: "app", Operator: metav1.LabelSelectorOpDoesNotExist})}}},
			[]int{-1, -1, 0, 0, 0, 0, -1, -1}},
		{"every field must match", []v1alpha1.DownsyncClause{{APIGroup: strp(""), Resources: []string{"configmaps"}, Namespaces: []string{"web", "db"},
			ObjectNames: []string{"settings"}, LabelSelectors: []metav1.LabelSelector{*sel(map[string]string{"app": "web"})}}},
			[]int{-1, 0, -1, -1, -1, -1, -1, -1}},
		{"first matching clause", []v1alpha1.DownsyncClause{
			{APIGroup: strp("apps"), Resources: []string{"deployments"}},
			{Resources: []string{"*"}, Namespaces: []string{"web"}},
			{Resources: []string{"*"}},
		}, []int{0, 1, 2, 2, 1, 1, 2, 1}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s, err := Compile(tc.clauses)
			if err != nil {
				t.Fatal(err)
			}
			if s.Len() != len(tc.clauses) {
				t.Errorf("Len %d, want %d", s.Len(), len(tc.clauses))
			}
			for i, o := range objs {
				got, ok := s.Matches(o, nsLabels)
				if ok != (tc.want[i] >= 0) || got != tc.want[i] {
					t.Errorf("%s: clause %d ok=%t, want %d", names[i], got, ok, tc.want[i])
				}
			}
		})
	}
}

// TestLongLists checks the set form of long name lists.
func TestLongLists(t *testing.T) {
	var names, nss []string
	for i := range 100 {
		names = append(names, fmt.Sprintf("obj-%d", i))
		nss = append(nss, fmt.Sprintf("ns-%d", i))
	}
	s, err := Compile([]v1alpha1.DownsyncClause{{Resources: []string{"configmaps"}, Namespaces: nss, ObjectNames: names}})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		ns, name string
		want     bool
	}{{"ns-7", "obj-99", true}, {"ns-100", "obj-1", false}, {"ns-0", "obj-100", false}} {
		if _, ok := s.Matches(Object{Resource: "configmaps", Namespace: tc.ns, Name: tc.name}, nil); ok != tc.want {
			t.Errorf("%s/%s: %t, want %t", tc.ns, tc.name, ok, tc.want)
		}
	}
	s, err = Compile([]v1alpha1.DownsyncClause{{Resources: []string{"configmaps"}, ObjectNames: append(names, "*")}})
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := s.Matches(Object{Resource: "configmaps", Namespace: "a", Name: "anything"}, nil); !ok {
		t.Error(`"*" at the end of a long list does not match`)
	}
}

// TestNamespaceLabels follows a namespace whose labels change, and checks
// that nsLabels is called only when needed, at most once per Matches.
func TestNamespaceLabels(t *testing.T) {
	s, err := Compile([]v1alpha1.DownsyncClause{
		{APIGroup: strp("apps"), Resources: []string{"deployments"}, Namespaces: []string{"fixed"}},
		{APIGroup: strp("apps"), Resources: []string{"deployments"}, NamespaceSelector: sel(map[string]string{"canopy": "on"})},
		{Resources: []string{"configmaps"}, NamespaceSelector: sel(map[string]string{"canopy": "on"})},
	})
	if err != nil {
		t.Fatal(err)
	}
	if !s.UsesNamespaceLabels() {
		t.Error("UsesNamespaceLabels false")
	}
	cur := map[string]string{}
	calls := 0
	lookup := func(ns string) map[string]string {
		calls++
		if ns != "shop" {
			t.Errorf("nsLabels(%q)", ns)
		}
		return cur
	}
	d := Object{Group: "apps", Resource: "deployments", Namespace: "shop", Name: "d"}
	check := func(want int) {
		t.Helper()
		calls = 0
		got, ok := s.Matches(d, lookup)
		if ok != (want >= 0) || got != want {
			t.Errorf("labels %v: clause %d ok=%t, want %d", cur, got, ok, want)
		}
		if calls > 1 {
			t.Errorf("nsLabels called %d times", calls)
		}
	}
	check(-1)
	if s.MayMatchNamespace("shop", cur) {
		t.Error("MayMatchNamespace true before the label")
	}
	next := map[string]string{"canopy": "on"}
	if !s.NamespaceLabelsChangeMatter("shop", cur, next) {
		t.Error("adding the label does not matter")
	}
	if s.NamespaceLabelsChangeMatter("shop", cur, map[string]string{"other": "x"}) {
		t.Error("an unrelated label matters")
	}
	cur = next
	check(1)
	if !s.MayMatchNamespace("shop", cur) {
		t.Error("MayMatchNamespace false after the label")
	}
	if s.NamespaceLabelsChangeMatter("shop", cur, map[string]string{"canopy": "on", "other": "x"}) {
		t.Error("an unrelated label matters")
	}
	// A listed namespace depends on its labels only through the other
	// clauses (here the configmaps of clause 2).
	if !s.MayMatchNamespace("fixed", nil) || !s.NamespaceLabelsChangeMatter("fixed", nil, next) {
		t.Error("fixed: clause 2 selects its configmaps by label")
	}
	listed, err := Compile([]v1alpha1.DownsyncClause{{Resources: []string{"*"}, Namespaces: []string{"fixed"}, NamespaceSelector: sel(map[string]string{"canopy": "on"})}})
	if err != nil {
		t.Fatal(err)
	}
	if !listed.MayMatchNamespace("fixed", nil) || listed.NamespaceLabelsChangeMatter("fixed", nil, next) {
		t.Error("a listed namespace depends on its labels")
	}
	if listed.MayMatchNamespace("other", nil) || !listed.MayMatchNamespace("other", next) || !listed.NamespaceLabelsChangeMatter("other", next, nil) {
		t.Error("a selected namespace does not depend on its labels")
	}
	d.Namespace = "fixed"
	calls = 0
	if got, ok := s.Matches(d, func(string) map[string]string { calls++; return nil }); !ok || got != 0 || calls != 0 {
		t.Errorf("listed namespace: clause %d ok=%t, nsLabels called %d times", got, ok, calls)
	}
	// Cluster-scoped objects never consult namespaces.
	if s.NamespaceLabelsChangeMatter("", nil, next) || !s.MayMatchNamespace("", nil) {
		t.Error("cluster-scoped")
	}
	// A nil nsLabels means no labels.
	d.Namespace = "shop"
	if _, ok := s.Matches(d, nil); ok {
		t.Error("nil nsLabels matched a selector")
	}
}

func TestUsesNamespaceLabels(t *testing.T) {
	for _, tc := range []struct {
		name string
		c    v1alpha1.DownsyncClause
		want bool
	}{
		{"none", v1alpha1.DownsyncClause{Resources: []string{"*"}, Namespaces: []string{"a"}}, false},
		{"empty selector", v1alpha1.DownsyncClause{Resources: []string{"*"}, NamespaceSelector: sel(nil)}, false},
		{"star and selector", v1alpha1.DownsyncClause{Resources: []string{"*"}, Namespaces: []string{"*"}, NamespaceSelector: sel(map[string]string{"a": "b"})}, false},
		{"selector", v1alpha1.DownsyncClause{Resources: []string{"*"}, NamespaceSelector: sel(map[string]string{"a": "b"})}, true},
	} {
		s, err := Compile([]v1alpha1.DownsyncClause{tc.c})
		if err != nil {
			t.Fatal(err)
		}
		if got := s.UsesNamespaceLabels(); got != tc.want {
			t.Errorf("%s: %t, want %t", tc.name, got, tc.want)
		}
	}
}

func TestCompileErrors(t *testing.T) {
	bad := metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "a", Operator: metav1.LabelSelectorOpIn}}}
	badKey := metav1.LabelSelector{MatchLabels: map[string]string{"not a key!": "x"}}
	ok := v1alpha1.DownsyncClause{Resources: []string{"*"}}
	for _, tc := range []struct {
		name    string
		clauses []v1alpha1.DownsyncClause
		want    string
	}{
		{"label selector", []v1alpha1.DownsyncClause{ok, ok, {Resources: []string{"*"}, LabelSelectors: []metav1.LabelSelector{{}, bad}}},
			"downsync[2].labelSelectors[1]: "},
		{"label selector key", []v1alpha1.DownsyncClause{{Resources: []string{"*"}, LabelSelectors: []metav1.LabelSelector{badKey}}},
			"downsync[0].labelSelectors[0]: "},
		{"namespace selector", []v1alpha1.DownsyncClause{ok, {Resources: []string{"*"}, NamespaceSelector: &bad}},
			"downsync[1].namespaceSelector: "},
		{"no resources", []v1alpha1.DownsyncClause{ok, {Namespaces: []string{"a"}}},
			"downsync[1].resources: "},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, err := Compile(tc.clauses)
			if err == nil || !strings.HasPrefix(err.Error(), tc.want) || s != nil {
				t.Fatalf("got %v, %v; want an error starting %q", s, err, tc.want)
			}
		})
	}
}

func TestNilSelector(t *testing.T) {
	var s *Selector
	if _, ok := s.Matches(deploy, nsLabels); ok || s.Len() != 0 || s.MayMatchNamespace("web", nil) ||
		s.NamespaceLabelsChangeMatter("web", nil, nil) || s.UsesNamespaceLabels() {
		t.Error("a nil Selector selects something")
	}
}

func TestMatchesAllocatesNothing(t *testing.T) {
	s, objs := benchSetup(nil)
	if n := testing.AllocsPerRun(10, func() {
		for _, o := range objs {
			s.Matches(o, nsLabels)
		}
	}); n != 0 {
		t.Errorf("%v allocations per run", n)
	}
}

// benchSetup builds a realistic placement (8 clauses) and 1000 objects,
// a mix of namespaced and cluster-scoped, matching and not.
func benchSetup(b *testing.B) (*Selector, []Object) {
	clauses := []v1alpha1.DownsyncClause{
		{APIGroup: strp("apiextensions.k8s.io"), Resources: []string{"customresourcedefinitions"}, ObjectNames: []string{"widgets.example.com", "gadgets.example.com"}},
		{APIGroup: strp("rbac.authorization.k8s.io"), Resources: []string{"clusterroles", "clusterrolebindings"}, LabelSelectors: []metav1.LabelSelector{*sel(map[string]string{"app": "web"})}},
		{APIGroup: strp("apps"), Resources: []string{"deployments", "statefulsets"}, Namespaces: []string{"web", "db"},
			LabelSelectors: []metav1.LabelSelector{*sel(map[string]string{"tier": "front"}), *sel(map[string]string{"tier": "back"})}},
		{APIGroup: strp(""), Resources: []string{"configmaps", "secrets"}, NamespaceSelector: sel(map[string]string{"env": "prod"})},
		{APIGroup: strp(""), Resources: []string{"services"}, Namespaces: []string{"web"}, ObjectNames: []string{"web", "web-internal"}},
		{APIGroup: strp("example.com"), Resources: []string{"*"}, NamespaceSelector: sel(nil, metav1.LabelSelectorRequirement{Key: "team", Operator: metav1.LabelSelectorOpIn, Values: []string{"web", "db"}})},
		{APIGroup: strp("batch"), Resources: []string{"cronjobs"}, Namespaces: []string{"*"}},
		{APIGroup: strp("networking.k8s.io"), Resources: []string{"ingresses"}, Namespaces: []string{"web"}},
	}
	s, err := Compile(clauses)
	if err != nil {
		if b != nil {
			b.Fatal(err)
		}
		panic(err)
	}
	kinds := []struct{ g, r string }{{"apps", "deployments"}, {"", "configmaps"}, {"", "secrets"}, {"", "services"},
		{"example.com", "widgets"}, {"batch", "jobs"}, {"apiextensions.k8s.io", "customresourcedefinitions"}, {"rbac.authorization.k8s.io", "clusterroles"}}
	nss := []string{"web", "web-dev", "db", "bare"}
	tiers := []string{"front", "back", "batch"}
	objs := make([]Object, 1000)
	for i := range objs {
		k := kinds[i%len(kinds)]
		o := Object{Group: k.g, Resource: k.r, Name: fmt.Sprintf("obj-%d", i),
			Labels: map[string]string{"app": "web", "tier": tiers[i%len(tiers)], "release": "r1"}}
		if k.r != "customresourcedefinitions" && k.r != "clusterroles" {
			o.Namespace = nss[i%len(nss)]
		}
		objs[i] = o
	}
	return s, objs
}

// BenchmarkMatches evaluates 1000 objects against one 8-clause placement
// per iteration.
func BenchmarkMatches(b *testing.B) {
	s, objs := benchSetup(b)
	b.ReportAllocs()
	matched := 0
	for b.Loop() {
		for _, o := range objs {
			if _, ok := s.Matches(o, nsLabels); ok {
				matched++
			}
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*len(objs)), "ns/pair")
}
