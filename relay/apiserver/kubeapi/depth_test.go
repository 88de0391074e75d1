package kubeapi

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/canopy-dev/canopy/relay/layout"
)

// blobCRD is a schemaless CRD: blobs.example.com keep every field.
func blobCRD() *apiextensionsv1.CustomResourceDefinition {
	return &apiextensionsv1.CustomResourceDefinition{
		TypeMeta:   metav1.TypeMeta{APIVersion: "apiextensions.k8s.io/v1", Kind: "CustomResourceDefinition"},
		ObjectMeta: metav1.ObjectMeta{Name: "blobs.example.com"},
		Spec: apiextensionsv1.CustomResourceDefinitionSpec{
			Group: "example.com",
			Scope: apiextensionsv1.NamespaceScoped,
			Names: apiextensionsv1.CustomResourceDefinitionNames{Plural: "blobs", Singular: "blob", Kind: "Blob", ListKind: "BlobList"},
			Versions: []apiextensionsv1.CustomResourceDefinitionVersion{{
				Name: "v1", Served: true, Storage: true,
				Schema: &apiextensionsv1.CustomResourceValidation{OpenAPIV3Schema: &apiextensionsv1.JSONSchemaProps{
					Type: "object", XPreserveUnknownFields: new(true),
				}},
			}},
		},
	}
}

// nestedBlob is a Blob whose spec nests depth objects deep: the Blob
// nests depth+1 levels.
func nestedBlob(name string, depth int) string {
	return `{"apiVersion":"example.com/v1","kind":"Blob","metadata":{"name":"` + name + `"},"spec":` +
		strings.Repeat(`{"a":`, depth) + `1` + strings.Repeat(`}`, depth) + `}`
}

// serveLocal answers one request with srv, in process.
func serveLocal(srv *Server, method, path, body string) *httptest.ResponseRecorder {
	req := httptest.NewRequest(method, path, strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	rec := httptest.NewRecorder()
	srv.ServeHTTP(rec, req)
	return rec
}

// A body, or an object a patch makes, that nests more than
// MaxNestingDepth levels is refused before anything is stored: a schemaless
// custom resource nested 9 000 levels took seconds of CPU (see
// BenchmarkNestedCustomResource).
func TestNestingDepthBounded(t *testing.T) {
	s, hs, _ := newTestAPI(t, 100)
	crd, err := json.Marshal(blobCRD())
	if err != nil {
		t.Fatal(err)
	}
	if rec := serveLocal(s, http.MethodPost, "/apis/apiextensions.k8s.io/v1/customresourcedefinitions", string(crd)); rec.Code != http.StatusCreated {
		t.Fatalf("create CRD: %d %s", rec.Code, rec.Body)
	}
	blobs := hs.URL + "/apis/example.com/v1/namespaces/default/blobs"
	refused := func(what string, resp *http.Response, body []byte, code int, limit int) {
		t.Helper()
		var st metav1.Status
		_ = json.Unmarshal(body, &st)
		want := fmt.Sprintf("more than %d levels deep", limit)
		reason := metav1.StatusReasonBadRequest
		if code == http.StatusUnprocessableEntity {
			reason = metav1.StatusReasonInvalid
		}
		if resp.StatusCode != code || st.Reason != reason || !strings.Contains(st.Message, want) {
			t.Errorf("%s: %d %.300s, want %d %s saying %q", what, resp.StatusCode, body, code, reason, want)
		}
		if code == http.StatusUnprocessableEntity && (st.Details == nil || len(st.Details.Causes) != 1 || st.Details.Causes[0].Field != "spec") {
			t.Errorf("%s: %.300s, want one cause, on field spec", what, body)
		}
	}

	// The deepest Blob allowed nests MaxNestingDepth levels; its managed
	// fields nest deeper, and it can be sent back with them.
	resp, body := do(t, http.MethodPost, blobs, nestedBlob("deepest", MaxNestingDepth-1))
	if resp.StatusCode != http.StatusCreated {
		t.Fatalf("blob at the limit: %d %.300s", resp.StatusCode, body)
	}
	if resp, body := do(t, http.MethodPut, blobs+"/deepest", string(body)); resp.StatusCode != http.StatusOK {
		t.Fatalf("update of the blob at the limit with its managed fields: %d %.300s", resp.StatusCode, body)
	}
	resp, body = do(t, http.MethodPost, blobs, nestedBlob("too-deep", MaxNestingDepth))
	refused("blob nested one level too deep", resp, body, http.StatusUnprocessableEntity, MaxNestingDepth)
	resp, body = do(t, http.MethodPost, blobs, nestedBlob("too-deep", 9900))
	refused("blob nested 9 901 levels", resp, body, http.StatusBadRequest, MaxNestingDepth+5)
	// Brackets inside strings do not count.
	if resp, body := do(t, http.MethodPost, blobs, `{"apiVersion":"example.com/v1","kind":"Blob","metadata":{"name":"brackets"},"spec":{"s":"`+
		strings.Repeat(`{[\"`, 200)+`"}}`); resp.StatusCode != http.StatusCreated {
		t.Errorf("blob with brackets in a string: %d %.300s", resp.StatusCode, body)
	}
	// YAML, and the bodies of patches and applies, are bounded alike.
	deepYAML := "apiVersion: example.com/v1\nkind: Blob\nmetadata:\n  name: yaml\nspec: " + strings.Repeat("{a: ", 150) + "1" + strings.Repeat("}", 150) + "\n"
	req, err := http.NewRequest(http.MethodPost, blobs, strings.NewReader(deepYAML))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/yaml")
	if resp, err = http.DefaultClient.Do(req); err != nil {
		t.Fatal(err)
	}
	body, _ = io.ReadAll(resp.Body)
	resp.Body.Close()
	refused("YAML blob nested 151 levels", resp, body, http.StatusBadRequest, MaxNestingDepth+5)
	deepSpec := strings.Repeat(`{"a":`, 150) + `1` + strings.Repeat(`}`, 150)
	for _, c := range []struct{ contentType, patch string }{
		{"application/merge-patch+json", `{"spec":` + deepSpec + `}`},
		{"application/json-patch+json", `[{"op":"add","path":"/spec/b","value":` + deepSpec + `}]`},
		{"application/apply-patch+yaml", `{"apiVersion":"example.com/v1","kind":"Blob","metadata":{"name":"deepest"},"spec":` + deepSpec + `}`},
		{"application/apply-patch+yaml", "apiVersion: example.com/v1\nkind: Blob\nmetadata:\n  name: deepest\nspec: " + strings.Repeat("{a: ", 150) + "1" + strings.Repeat("}", 150) + "\n"},
	} {
		resp, body := patch(t, blobs+"/deepest?fieldManager=test", c.contentType, c.patch)
		refused(c.contentType+" nested 151 levels", resp, body, http.StatusBadRequest, MaxNestingDepth+5)
	}

	// A patch within the limit that makes the object too deep.
	path := "/spec" + strings.Repeat("/a", MaxNestingDepth-2)
	resp, body = patch(t, blobs+"/deepest", "application/json-patch+json", `[{"op":"replace","path":"`+path+`","value":{"b":{"c":1}}}]`)
	refused("a JSON patch deepening the object", resp, body, http.StatusUnprocessableEntity, MaxNestingDepth)

	for _, name := range []string{"too-deep", "yaml"} {
		if resp, _ := do(t, http.MethodGet, blobs+"/"+name, ""); resp.StatusCode != http.StatusNotFound {
			t.Errorf("blob %s after its refused create: %d, want 404", name, resp.StatusCode)
		}
	}
	resp, body = do(t, http.MethodGet, blobs+"/deepest", "")
	if resp.StatusCode != http.StatusOK || strings.Contains(string(body), `"b"`) {
		t.Errorf("blob deepest after refused patches: %d %.300s", resp.StatusCode, body)
	}
}

// patch sends a PATCH of the given content type.
func patch(t *testing.T, url, contentType, body string) (*http.Response, []byte) {
	t.Helper()
	req, err := http.NewRequest(http.MethodPatch, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", contentType)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp, b
}

// BenchmarkNestedCustomResource creates schemaless custom resources nested
// deeper and deeper, up to the limit; beyond it they are refused before
// anything is decoded:
//
//	go test ./relay/apiserver/kubeapi -run '^$' -bench NestedCustomResource -benchtime=20x
func BenchmarkNestedCustomResource(b *testing.B) {
	for _, depth := range []int{8, 32, MaxNestingDepth - 1, 9000} {
		b.Run(fmt.Sprint("depth=", depth), func(b *testing.B) {
			st := newBenchStore(b)
			srv := New(Config{Store: st, Authenticator: allowAll{}, Authorizer: allowAll{}})
			if err := srv.EnsureSpace(context.Background(), layout.DefaultSpace, layout.SpaceKindWDS); err != nil {
				b.Fatal(err)
			}
			crd, _ := json.Marshal(blobCRD())
			if rec := serveLocal(srv, http.MethodPost, "/apis/apiextensions.k8s.io/v1/customresourcedefinitions", string(crd)); rec.Code != http.StatusCreated {
				b.Fatalf("create CRD: %d %s", rec.Code, rec.Body)
			}
			i := 0
			for b.Loop() {
				i++
				rec := serveLocal(srv, http.MethodPost, "/apis/example.com/v1/namespaces/default/blobs", nestedBlob(fmt.Sprint("b", i), depth))
				want := http.StatusCreated
				if depth > MaxNestingDepth-1 {
					want = http.StatusBadRequest
				}
				if rec.Code != want {
					b.Fatalf("%d %.300s", rec.Code, rec.Body)
				}
			}
		})
	}
}
