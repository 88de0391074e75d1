package resources

import (
	"slices"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/runtime/schema"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
)

func TestBuiltinsMatchScheme(t *testing.T) {
	for _, info := range Builtins() {
		gvk := info.GroupVersionKind()
		t.Run(info.GroupVersionResource().String(), func(t *testing.T) {
			obj := info.New()
			if obj == nil {
				t.Fatal("New() returned nil")
			}
			if obj == info.New() {
				t.Fatal("New() returned the same object twice")
			}
			kinds, _, err := Scheme().ObjectKinds(obj)
			if err != nil || !slices.Contains(kinds, gvk) {
				t.Errorf("Scheme().ObjectKinds(%T) = %v, %v; want %v among them", obj, kinds, err, gvk)
			}
			// Every group but the two served by kube's extension servers
			// comes straight from client-go's scheme.
			if info.Group != "apiextensions.k8s.io" && info.Group != "apiregistration.k8s.io" {
				kinds, _, err := clientgoscheme.Scheme.ObjectKinds(obj)
				if err != nil || !slices.Contains(kinds, gvk) {
					t.Errorf("client-go scheme.ObjectKinds(%T) = %v, %v; want %v among them", obj, kinds, err, gvk)
				}
			}
			if list := gvk.GroupVersion().WithKind(info.ListKind); !Scheme().Recognizes(list) {
				if info.ListKind != "" || slices.Contains(info.Verbs, "list") {
					t.Errorf("ListKind %q not in scheme", info.ListKind)
				}
			}
			if info.Singular != strings.ToLower(info.Kind) || info.Resource == "" || info.Resource != strings.ToLower(info.Resource) {
				t.Errorf("names: resource %q, singular %q, kind %q", info.Resource, info.Singular, info.Kind)
			}
			if !slices.IsSorted(info.Verbs) || len(info.Verbs) == 0 {
				t.Errorf("verbs %v: want sorted and non-empty", info.Verbs)
			}
			for _, v := range info.Verbs {
				if !slices.Contains(allVerbs, v) {
					t.Errorf("unknown verb %q", v)
				}
			}
			if !info.Strategic {
				t.Error("built-ins support strategic merge patch")
			}
			if info.Table == nil {
				t.Error("no table")
			}
			if Lookup(info.Group, info.Resource) != info {
				t.Errorf("Lookup(%q, %q) did not return the Info", info.Group, info.Resource)
			}
		})
	}
}

func TestBuiltinsUniqueAndSorted(t *testing.T) {
	seen := make(map[schema.GroupResource]bool)
	infos := Builtins()
	for _, info := range infos {
		gr := schema.GroupResource{Group: info.Group, Resource: info.Resource}
		if seen[gr] {
			t.Errorf("%s served twice", gr)
		}
		seen[gr] = true
	}
	if !slices.IsSortedFunc(infos, func(a, b *Info) int {
		return strings.Compare(a.Group+"/"+a.Resource, b.Group+"/"+b.Resource)
	}) {
		t.Error("Builtins() is not sorted by group, then resource")
	}
	infos[0] = nil
	if Builtins()[0] == nil {
		t.Error("Builtins() returned the package's own slice")
	}
}

func TestLookupUnknown(t *testing.T) {
	for _, gr := range []schema.GroupResource{
		{Group: "", Resource: "pod"},                 // singular
		{Group: "apps", Resource: "pods"},            // wrong group
		{Group: "", Resource: "componentstatuses"},   // not served
		{Group: "", Resource: "bindings"},            // not served
		{Group: "extensions", Resource: "ingresses"}, // removed long ago
	} {
		if info := Lookup(gr.Group, gr.Resource); info != nil {
			t.Errorf("Lookup(%q, %q) = %s/%s, want nil", gr.Group, gr.Resource, info.Group, info.Resource)
		}
	}
}

// TestServesEveryStableKind cross-checks the catalogue against client-go's
// scheme: every kind of a GA group version is served, unless it is not a
// resource, or is deliberately left out.
func TestServesEveryStableKind(t *testing.T) {
	notServed := map[schema.GroupKind]string{
		{Kind: "Binding"}:                                      "needs a scheduler",
		{Kind: "ComponentStatus"}:                              "deprecated, nothing to probe",
		{Kind: "SerializedReference"}:                          "not a resource",
		{Kind: "RangeAllocation"}:                              "not a resource",
		{Kind: "APIVersions"}:                                  "a discovery document",
		{Kind: "APIGroup"}:                                     "a discovery document",
		{Group: "policy", Kind: "Eviction"}:                    "pods/eviction needs a kubelet",
		{Group: "authentication.k8s.io", Kind: "TokenRequest"}: "serviceaccounts/token subresource",
		{Group: "autoscaling", Kind: "Scale"}:                  "scale subresource",
	}
	served := make(map[schema.GroupKind]bool)
	for _, info := range Builtins() {
		served[info.GroupVersionKind().GroupKind()] = true
	}
	for gvk := range clientgoscheme.Scheme.AllKnownTypes() {
		v := gvk.Version
		if v == "__internal" || strings.Contains(v, "alpha") || strings.Contains(v, "beta") {
			continue
		}
		if strings.HasSuffix(gvk.Kind, "List") || strings.HasSuffix(gvk.Kind, "Options") || gvk.Kind == "WatchEvent" || gvk.Kind == "Status" {
			continue
		}
		if gvk.Group == "" && gvk.Version != "v1" {
			continue
		}
		gk := gvk.GroupKind()
		if _, ok := notServed[gk]; ok || served[gk] {
			continue
		}
		t.Errorf("%s is in client-go's scheme at a GA version but not served", gvk)
	}
}

func TestScopeAndDiscovery(t *testing.T) {
	for _, tc := range []struct {
		group, resource string
		namespaced      bool
		short           []string
		categories      []string
		status, scale   bool
		verbs           int
	}{
		{"", "pods", true, []string{"po"}, []string{"all"}, true, false, 8},
		{"", "nodes", false, []string{"no"}, nil, true, false, 8},
		{"", "namespaces", false, []string{"ns"}, nil, true, false, 7},
		{"", "events", true, []string{"ev"}, nil, false, false, 8},
		{"", "services", true, []string{"svc"}, []string{"all"}, true, false, 8},
		{"", "configmaps", true, []string{"cm"}, nil, false, false, 8},
		{"", "replicationcontrollers", true, []string{"rc"}, []string{"all"}, true, true, 8},
		{"events.k8s.io", "events", true, []string{"ev"}, nil, false, false, 8},
		{"apps", "deployments", true, []string{"deploy"}, []string{"all"}, true, true, 8},
		{"apps", "controllerrevisions", true, nil, nil, false, false, 8},
		{"batch", "cronjobs", true, []string{"cj"}, []string{"all"}, true, false, 8},
		{"autoscaling", "horizontalpodautoscalers", true, []string{"hpa"}, []string{"all"}, true, false, 8},
		{"rbac.authorization.k8s.io", "clusterroles", false, nil, nil, false, false, 8},
		{"rbac.authorization.k8s.io", "roles", true, nil, nil, false, false, 8},
		{"apiextensions.k8s.io", "customresourcedefinitions", false, []string{"crd", "crds"}, []string{"api-extensions"}, true, false, 8},
		{"apiregistration.k8s.io", "apiservices", false, nil, []string{"api-extensions"}, true, false, 8},
		{"authorization.k8s.io", "localsubjectaccessreviews", true, nil, nil, false, false, 1},
		{"authorization.k8s.io", "selfsubjectaccessreviews", false, nil, nil, false, false, 1},
		{"authentication.k8s.io", "tokenreviews", false, nil, nil, false, false, 1},
		{"storage.k8s.io", "storageclasses", false, []string{"sc"}, nil, false, false, 8},
		{"networking.k8s.io", "ingresses", true, []string{"ing"}, nil, true, false, 8},
	} {
		info := Lookup(tc.group, tc.resource)
		if info == nil {
			t.Errorf("%s.%s not served", tc.resource, tc.group)
			continue
		}
		if info.Namespaced != tc.namespaced || !slices.Equal(info.ShortNames, tc.short) ||
			!slices.Equal(info.Categories, tc.categories) || info.Status != tc.status ||
			(info.Scale != nil) != tc.scale || len(info.Verbs) != tc.verbs {
			t.Errorf("%s.%s: namespaced %v, short %v, categories %v, status %v, scale %v, verbs %v",
				tc.resource, tc.group, info.Namespaced, info.ShortNames, info.Categories, info.Status, info.Scale != nil, info.Verbs)
		}
	}
	if hpa := Lookup("autoscaling", "horizontalpodautoscalers"); hpa.Version != "v2" {
		t.Errorf("HPAs served at %s, want v2", hpa.Version)
	}
	sa := Lookup("", "serviceaccounts")
	if len(sa.Subresources) != 1 || sa.Subresources[0].Name != "token" || sa.Subresources[0].Kind != "TokenRequest" ||
		!slices.Equal(sa.Subresources[0].Verbs, []string{"create"}) {
		t.Errorf("serviceaccounts subresources = %+v, want token (create)", sa.Subresources)
	}
}

func TestBuiltinGroup(t *testing.T) {
	for group, want := range map[string]bool{
		"": true, "apps": true, "networking.k8s.io": true, "apiextensions.k8s.io": true,
		"storagemigration.k8s.io": true, "edge.canopy.dev": false, "example.com": false, "k8s.io": false,
	} {
		if got := BuiltinGroup(group); got != want {
			t.Errorf("BuiltinGroup(%q) = %v, want %v", group, got, want)
		}
	}
}
