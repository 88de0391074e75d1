package kubeapi

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/canopy-dev/canopy/relay/apiserver/crd"
	"github.com/canopy-dev/canopy/relay/layout"
	"github.com/canopy-dev/canopy/relay/store"
	"github.com/canopy-dev/canopy/test/poll"
)

// builtinGroupCRD is a CRD for plural.group, in the form kube accepts for a
// protected group (with the api-approved annotation).
func builtinGroupCRD(plural, kind, group string) *apiextensionsv1.CustomResourceDefinition {
	return &apiextensionsv1.CustomResourceDefinition{
		TypeMeta: metav1.TypeMeta{APIVersion: "apiextensions.k8s.io/v1", Kind: "CustomResourceDefinition"},
		ObjectMeta: metav1.ObjectMeta{
			Name:        plural + "." + group,
			Annotations: map[string]string{apiextensionsv1.KubeAPIApprovedAnnotation: "unapproved, testing"},
		},
		Spec: apiextensionsv1.CustomResourceDefinitionSpec{
			Group: group,
			Names: apiextensionsv1.CustomResourceDefinitionNames{Plural: plural, Kind: kind},
			Scope: apiextensionsv1.NamespaceScoped,
			Versions: []apiextensionsv1.CustomResourceDefinitionVersion{{
				Name: "v1", Served: true, Storage: true,
				Schema: &apiextensionsv1.CustomResourceValidation{OpenAPIV3Schema: &apiextensionsv1.JSONSchemaProps{
					Type: "object", XPreserveUnknownFields: new(true),
				}},
			}},
		},
	}
}

// A CRD may not define resources in a group of the built-in API: its
// objects would be the built-in objects, and deleting it would delete
// them. One already stored (from before the rule) is released on delete
// without touching them.
func TestCRDInBuiltinGroupRefused(t *testing.T) {
	s, hs, st := newTestAPI(t, 100)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); _ = s.StartControllers(ctx) }()
	t.Cleanup(func() { cancel(); <-done })

	ingresses := hs.URL + "/apis/networking.k8s.io/v1/namespaces/default/ingresses"
	ing := `{"apiVersion":"networking.k8s.io/v1","kind":"Ingress","metadata":{"name":"web"},"spec":{"defaultBackend":{"service":{"name":"web","port":{"number":80}}}}}`
	if resp, body := do(t, http.MethodPost, ingresses, ing); resp.StatusCode != http.StatusCreated {
		t.Fatalf("create ingress: %d %s", resp.StatusCode, body)
	}

	crds := hs.URL + "/apis/apiextensions.k8s.io/v1/customresourcedefinitions"
	for _, c := range []*apiextensionsv1.CustomResourceDefinition{
		builtinGroupCRD("ingresses", "Ingress", "networking.k8s.io"),
		builtinGroupCRD("widgets", "Widget", "rbac.authorization.k8s.io"),
	} {
		b, err := json.Marshal(c)
		if err != nil {
			t.Fatal(err)
		}
		resp, body := do(t, http.MethodPost, crds, string(b))
		var st metav1.Status
		_ = json.Unmarshal(body, &st)
		if resp.StatusCode != http.StatusUnprocessableEntity || st.Reason != metav1.StatusReasonInvalid ||
			st.Details == nil || len(st.Details.Causes) != 1 || st.Details.Causes[0].Field != "spec.group" ||
			!strings.Contains(st.Message, "group of the built-in API") {
			t.Errorf("create CRD %s: %d %s, want 422 naming spec.group", c.Name, resp.StatusCode, body)
		}
		if resp, _ := do(t, http.MethodGet, crds+"/"+c.Name, ""); resp.StatusCode != http.StatusNotFound {
			t.Errorf("CRD %s after a refused create: %d, want 404", c.Name, resp.StatusCode)
		}
	}

	// In another space, a CRD stored as it was before the rule, established,
	// then deleted through the API.
	if err := s.EnsureSpace(ctx, "team", layout.SpaceKindWDS); err != nil {
		t.Fatal(err)
	}
	team := hs.URL + "/spaces/team"
	if resp, body := do(t, http.MethodPost, team+"/apis/networking.k8s.io/v1/namespaces/default/ingresses", ing); resp.StatusCode != http.StatusCreated {
		t.Fatalf("create ingress in team: %d %s", resp.StatusCode, body)
	}
	old := builtinGroupCRD("ingresses", "Ingress", "networking.k8s.io")
	crd.Default(old)
	old.UID, old.CreationTimestamp = "b6a0c1f2-0000-4000-8000-000000000001", metav1.Now()
	old.Finalizers = []string{crdCleanupFinalizer}
	old.Status = apiextensionsv1.CustomResourceDefinitionStatus{
		AcceptedNames:  old.Spec.Names,
		StoredVersions: []string{"v1"},
		Conditions: []apiextensionsv1.CustomResourceDefinitionCondition{
			{Type: apiextensionsv1.Established, Status: apiextensionsv1.ConditionTrue},
			{Type: apiextensionsv1.NamesAccepted, Status: apiextensionsv1.ConditionTrue},
		},
	}
	data, err := json.Marshal(old)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := st.Create(ctx, store.Key{Space: "team", Resource: crdResource, Name: old.Name}, data); err != nil {
		t.Fatal(err)
	}
	teamCRD := team + "/apis/apiextensions.k8s.io/v1/customresourcedefinitions/" + old.Name
	if resp, body := do(t, http.MethodDelete, teamCRD, ""); resp.StatusCode != http.StatusOK {
		t.Fatalf("delete CRD %s: %d %s", old.Name, resp.StatusCode, body)
	}
	poll.Until(t, "CRD "+old.Name+" gone after its delete", func() error {
		if resp, _ := do(t, http.MethodGet, teamCRD, ""); resp.StatusCode != http.StatusNotFound {
			return fmt.Errorf("GET answers %d", resp.StatusCode)
		}
		return nil
	})
	if resp, body := do(t, http.MethodGet, team+"/apis/networking.k8s.io/v1/namespaces/default/ingresses/web", ""); resp.StatusCode != http.StatusOK {
		t.Errorf("ingress after the CRD's delete: %d %s, want 200", resp.StatusCode, body)
	}
}
