package kubeapi

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"mime"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"

	openapiv2 "github.com/google/gnostic-models/openapiv2"
	"google.golang.org/protobuf/proto"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/strategicpatch"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/openapi3"
	"k8s.io/client-go/rest"
	"k8s.io/kube-openapi/pkg/schemamutation"
	"k8s.io/kube-openapi/pkg/spec3"
	kproto "k8s.io/kube-openapi/pkg/util/proto"
	"k8s.io/kube-openapi/pkg/util/proto/validation"
	"k8s.io/kube-openapi/pkg/validation/spec"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/yaml"

	"github.com/canopy-dev/canopy/relay/apiserver/resources"
	"github.com/canopy-dev/canopy/relay/layout"
	"github.com/canopy-dev/canopy/relay/store"
)

// openAPIServer serves a Server with the default space and a second WDS
// space "team".
func openAPIServer(t *testing.T) *httptest.Server {
	t.Helper()
	st := store.New(store.Options{HistorySize: 100, Fields: FieldsFor})
	st.SetLog(store.NewMemLog(st))
	t.Cleanup(st.Close)
	s := New(Config{Store: st, Authenticator: allowAll{}, Authorizer: allowAll{}})
	for _, space := range []string{layout.DefaultSpace, "team"} {
		if err := s.EnsureSpace(context.Background(), space, layout.SpaceKindWDS); err != nil {
			t.Fatal(err)
		}
	}
	hs := httptest.NewServer(s)
	t.Cleanup(hs.Close)
	return hs
}

// openAPIRoot is client-go's OpenAPI v3 client (kubectl's) for a space.
func openAPIRoot(t *testing.T, hs *httptest.Server, space string) openapi3.Root {
	t.Helper()
	dc, err := discovery.NewDiscoveryClientForConfig(&rest.Config{Host: hs.URL + "/spaces/" + space})
	if err != nil {
		t.Fatal(err)
	}
	return openapi3.NewRoot(dc.OpenAPIV3())
}

func getRaw(t *testing.T, url string, header ...string) (*http.Response, []byte) {
	t.Helper()
	req, err := http.NewRequest("GET", url, nil)
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	// The redirect of a stale hash is checked as such.
	c := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := c.Do(req)
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

// findKind returns the model of a kind in a v3 document.
func findKind(doc *spec3.OpenAPI, gvk schema.GroupVersionKind) (string, *spec.Schema) {
	for name, s := range doc.Components.Schemas {
		var gvks []map[string]string
		if err := s.Extensions.GetObject(extGVK, &gvks); err != nil {
			continue
		}
		for _, g := range gvks {
			if g["group"] == gvk.Group && g["version"] == gvk.Version && g["kind"] == gvk.Kind {
				return name, s
			}
		}
	}
	return "", nil
}

// resolve follows a property's reference (direct or wrapped in allOf).
func resolve(doc *spec3.OpenAPI, s spec.Schema) *spec.Schema {
	ref := s.Ref.String()
	if ref == "" && len(s.AllOf) == 1 {
		ref = s.AllOf[0].Ref.String()
	}
	if ref == "" {
		return &s
	}
	return doc.Components.Schemas[strings.TrimPrefix(ref, "#/components/schemas/")]
}

func TestOpenAPIV3Index(t *testing.T) {
	hs := openAPIServer(t)
	for _, prefix := range []string{"", "/spaces/team"} {
		resp, body := getRaw(t, hs.URL+prefix+"/openapi/v3")
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("%s/openapi/v3: %d %s", prefix, resp.StatusCode, body)
		}
		var index struct {
			Paths map[string]struct {
				ServerRelativeURL string `json:"serverRelativeURL"`
			} `json:"paths"`
		}
		if err := json.Unmarshal(body, &index); err != nil {
			t.Fatal(err)
		}
		apps, ok := index.Paths["apis/apps/v1"]
		if !ok || !strings.HasPrefix(apps.ServerRelativeURL, prefix+"/openapi/v3/apis/apps/v1?hash=") {
			t.Fatalf("%s/openapi/v3: apis/apps/v1 is %+v", prefix, apps)
		}
		for _, info := range resources.Builtins() {
			if _, ok := index.Paths[groupVersionPath(info.Group, info.Version)]; !ok {
				t.Errorf("%s/openapi/v3 lists no document for %s/%s", prefix, info.Group, info.Version)
			}
		}

		// The URL with the current hash is immutable; a stale hash
		// redirects to it; an ETag makes a conditional GET cheap.
		resp, body = getRaw(t, hs.URL+apps.ServerRelativeURL)
		if resp.StatusCode != http.StatusOK || resp.Header.Get("Cache-Control") != "public, immutable" || !json.Valid(body) {
			t.Errorf("GET %s: %d, Cache-Control %q", apps.ServerRelativeURL, resp.StatusCode, resp.Header.Get("Cache-Control"))
		}
		resp, _ = getRaw(t, hs.URL+prefix+"/openapi/v3/apis/apps/v1?hash=0BSOLETE")
		if resp.StatusCode != http.StatusMovedPermanently || resp.Header.Get("Location") != apps.ServerRelativeURL {
			t.Errorf("stale hash: %d, Location %q; want 301 to %s", resp.StatusCode, resp.Header.Get("Location"), apps.ServerRelativeURL)
		}
		resp, _ = getRaw(t, hs.URL+prefix+"/openapi/v3/apis/apps/v1")
		etag := resp.Header.Get("Etag")
		resp, _ = getRaw(t, hs.URL+prefix+"/openapi/v3/apis/apps/v1", "If-None-Match", etag)
		if etag == "" || resp.StatusCode != http.StatusNotModified {
			t.Errorf("conditional GET with ETag %q: %d, want 304", etag, resp.StatusCode)
		}
		// The protobuf form is another representation.
		resp, _ = getRaw(t, hs.URL+prefix+"/openapi/v3/apis/apps/v1", "If-None-Match", etag, "Accept", "application/com.github.proto-openapi.spec.v3@v1.0+protobuf")
		if resp.StatusCode != http.StatusOK || resp.Header.Get("Content-Type") != openAPIV3ProtoType {
			t.Errorf("protobuf with the JSON form's ETag: %d %s, want 200 %s", resp.StatusCode, resp.Header.Get("Content-Type"), openAPIV3ProtoType)
		}
		if resp, _ := getRaw(t, hs.URL+prefix+"/openapi/v3/apis/nothing.example.com/v1"); resp.StatusCode != http.StatusNotFound {
			t.Errorf("unknown group-version: %d, want 404", resp.StatusCode)
		}
	}
}

// TestOpenAPIBuiltinModels reads apps/v1 and core/v1 through client-go's
// OpenAPI v3 client, as kubectl does, and checks what kubectl explain,
// kubectl's strategic merge patch and its field validation check use.
func TestOpenAPIBuiltinModels(t *testing.T) {
	hs := openAPIServer(t)
	root := openAPIRoot(t, hs, "team")
	apps, err := root.GVSpec(appsv1.SchemeGroupVersion)
	if err != nil {
		t.Fatal(err)
	}
	name, deploy := findKind(apps, appsv1.SchemeGroupVersion.WithKind("Deployment"))
	if name != "io.k8s.api.apps.v1.Deployment" {
		t.Fatalf("model of Deployment: %q", name)
	}
	if deploy.Description != (appsv1.Deployment{}).SwaggerDoc()[""] || deploy.Description == "" {
		t.Errorf("Deployment description %q", deploy.Description)
	}
	spec := resolve(apps, deploy.Properties["spec"])
	if spec == nil || !slices.Contains(spec.Required, "selector") || !slices.Contains(spec.Required, "template") || slices.Contains(spec.Required, "replicas") {
		t.Fatalf("DeploymentSpec: %+v", spec)
	}
	replicas := spec.Properties["replicas"]
	if !replicas.Type.Contains("integer") || replicas.Format != "int32" || replicas.Description != (appsv1.DeploymentSpec{}).SwaggerDoc()["replicas"] {
		t.Errorf("spec.replicas: type %v format %q description %q", replicas.Type, replicas.Format, replicas.Description)
	}
	// A described reference is wrapped in allOf (kube's layout), which
	// kubectl explain prints as the field's and the type's description.
	tmpl := spec.Properties["template"]
	if len(tmpl.AllOf) != 1 || tmpl.AllOf[0].Ref.String() != "#/components/schemas/io.k8s.api.core.v1.PodTemplateSpec" || tmpl.Description == "" {
		t.Errorf("spec.template: %+v", tmpl)
	}
	podSpec := apps.Components.Schemas["io.k8s.api.core.v1.PodSpec"]
	if podSpec == nil {
		t.Fatal("apps/v1 has no PodSpec model")
	}
	containers := podSpec.Properties["containers"]
	for ext, want := range map[string]any{
		"x-kubernetes-patch-strategy":  "merge",
		"x-kubernetes-patch-merge-key": "name",
		"x-kubernetes-list-type":       "map",
		"x-kubernetes-list-map-keys":   []any{"name"},
	} {
		if got := containers.Extensions[ext]; fmt.Sprint(got) != fmt.Sprint(want) {
			t.Errorf("containers %s = %v, want %v", ext, got, want)
		}
	}
	if ios := apps.Components.Schemas["io.k8s.apimachinery.pkg.util.intstr.IntOrString"]; ios == nil || len(ios.OneOf) != 2 || ios.Format != "int-or-string" {
		t.Errorf("IntOrString model: %+v", ios)
	}
	if _, ok := apps.Components.Schemas["io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta"]; !ok {
		t.Error("apps/v1 has no ObjectMeta model")
	}

	// The PATCH of a deployment takes strategic merge patch and names
	// fieldValidation: kubectl then validates on the server.
	op := apps.Paths.Paths["/apis/apps/v1/namespaces/{namespace}/deployments/{name}"].Patch
	if op == nil || op.RequestBody == nil || op.RequestBody.Content["application/strategic-merge-patch+json"] == nil {
		t.Fatalf("deployments PATCH: %+v", op)
	}
	var params []string
	for _, p := range op.Parameters {
		params = append(params, p.In+":"+p.Name)
	}
	if !slices.Contains(params, "query:fieldValidation") || !slices.Contains(params, "query:dryRun") || op.OperationId != "patchAppsV1NamespacedDeployment" {
		t.Errorf("deployments PATCH %s parameters %v", op.OperationId, params)
	}
	if scale := apps.Paths.Paths["/apis/apps/v1/namespaces/{namespace}/deployments/{name}/scale"]; scale == nil || scale.Get == nil ||
		fmt.Sprint(scale.Get.Extensions[extGVK]) != fmt.Sprint(map[string]any{"group": "autoscaling", "version": "v1", "kind": "Scale"}) {
		t.Errorf("deployments/scale: %+v", scale)
	}

	// Every reference of every built-in document resolves.
	gvs, err := root.GroupVersions()
	if err != nil {
		t.Fatal(err)
	}
	for _, gv := range gvs {
		doc, err := root.GVSpecAsMap(gv)
		if err != nil {
			t.Fatal(err)
		}
		schemas, _ := doc["components"].(map[string]any)["schemas"].(map[string]any)
		var walk func(v any)
		walk = func(v any) {
			switch v := v.(type) {
			case map[string]any:
				if ref, ok := v["$ref"].(string); ok {
					if _, ok := schemas[strings.TrimPrefix(ref, "#/components/schemas/")]; !ok {
						t.Errorf("%s: dangling reference %s", gv, ref)
					}
				}
				for _, x := range v {
					walk(x)
				}
			case []any:
				for _, x := range v {
					walk(x)
				}
			}
		}
		walk(doc)
	}
}

// TestOpenAPIEveryBuiltinKind checks that each served built-in kind has its
// model, with descriptions, in its group-version's v3 document and in v2.
func TestOpenAPIEveryBuiltinKind(t *testing.T) {
	hs := openAPIServer(t)
	root := openAPIRoot(t, hs, layout.DefaultSpace)
	models := v2Models(t, hs.URL)
	for _, info := range resources.Builtins() {
		gvk := info.GroupVersionKind()
		doc, err := root.GVSpec(gvk.GroupVersion())
		if err != nil {
			t.Fatalf("%s: %v", gvk, err)
		}
		name, s := findKind(doc, gvk)
		if s == nil {
			t.Errorf("%s: no model in the v3 document", gvk)
			continue
		}
		if _, ok := s.Properties["metadata"]; !ok {
			t.Errorf("%s (%s): no metadata property", gvk, name)
		}
		if s.Description == "" && info.Group != "apiregistration.k8s.io" {
			t.Errorf("%s (%s): no description", gvk, name)
		}
		if lookupModel(models, gvk) == nil {
			t.Errorf("%s: no model in the v2 document", gvk)
		}
	}
}

// TestOpenAPIStrategicMergePatch: the patch kubectl apply computes from the
// served schema equals the one it computes from the Go types.
func TestOpenAPIStrategicMergePatch(t *testing.T) {
	hs := openAPIServer(t)
	apps, err := openAPIRoot(t, hs, layout.DefaultSpace).GVSpec(appsv1.SchemeGroupVersion)
	if err != nil {
		t.Fatal(err)
	}
	_, deploy := findKind(apps, appsv1.SchemeGroupVersion.WithKind("Deployment"))
	fromOpenAPI := strategicpatch.PatchMetaFromOpenAPIV3{Schema: deploy, SchemaList: apps.Components.Schemas}
	fromStruct, err := strategicpatch.NewPatchMetaFromStruct(&appsv1.Deployment{})
	if err != nil {
		t.Fatal(err)
	}
	deployment := func(containers string, extra ...string) []byte {
		return []byte(fmt.Sprintf(`{"apiVersion":"apps/v1","kind":"Deployment","metadata":{"name":"d"},"spec":{%s"template":{"spec":{"containers":%s,"volumes":[{"name":"v","emptyDir":{}}]}}}}`,
			strings.Join(extra, ""), containers))
	}
	original := deployment(`[{"name":"a","image":"a:1","env":[{"name":"X","value":"1"}]},{"name":"b","image":"b:1"}]`)
	modified := deployment(`[{"name":"a","image":"a:2","env":[{"name":"X","value":"1"}]},{"name":"c","image":"c:1"}]`, `"strategy":{"type":"Recreate"},`)
	current := deployment(`[{"name":"a","image":"a:1","env":[{"name":"X","value":"1"},{"name":"Y","value":"2"}]},{"name":"b","image":"b:1"},{"name":"sidecar","image":"s:1"}]`,
		`"strategy":{"type":"RollingUpdate","rollingUpdate":{"maxSurge":1}},`)
	want, err := strategicpatch.CreateThreeWayMergePatch(original, modified, current, fromStruct, true)
	if err != nil {
		t.Fatal(err)
	}
	got, err := strategicpatch.CreateThreeWayMergePatch(original, modified, current, fromOpenAPI, true)
	if err != nil {
		t.Fatal(err)
	}
	if string(got) != string(want) {
		t.Errorf("patch from the served schema:\n%s\nfrom the Go types:\n%s", got, want)
	}
	if !strings.Contains(string(got), `"$retainKeys"`) || !strings.Contains(string(got), `"$patch":"delete"`) {
		t.Errorf("patch %s: want retainKeys for strategy and a delete of container b", got)
	}
}

// v2Models fetches /openapi/v2 as kubectl does (protobuf) and parses it as
// kubectl's client-side validation does.
func v2Models(t *testing.T, base string) kproto.Models {
	t.Helper()
	// kubectl's Accept; the answer's type is one client-go can parse.
	resp, body := getRaw(t, base+"/openapi/v2", "Accept", "application/com.github.proto-openapi.spec.v2@v1.0+protobuf")
	if resp.StatusCode != http.StatusOK || resp.Header.Get("Content-Type") != "application/com.github.proto-openapi.spec.v2.v1.0+protobuf" {
		t.Fatalf("/openapi/v2: %d %s", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	if _, _, err := mime.ParseMediaType(resp.Header.Get("Content-Type")); err != nil {
		t.Fatalf("/openapi/v2: %v", err)
	}
	var doc openapiv2.Document
	if err := proto.Unmarshal(body, &doc); err != nil {
		t.Fatal(err)
	}
	models, err := kproto.NewOpenAPIData(&doc)
	if err != nil {
		t.Fatal(err)
	}
	return models
}

// lookupModel finds a kind's model by x-kubernetes-group-version-kind, as
// kubectl's openapi.Resources does.
func lookupModel(models kproto.Models, gvk schema.GroupVersionKind) kproto.Schema {
	for _, name := range models.ListModels() {
		m := models.LookupModel(name)
		gvks, _ := m.GetExtensions()[extGVK].([]any)
		for _, g := range gvks {
			g, _ := g.(map[any]any)
			if g["group"] == gvk.Group && g["version"] == gvk.Version && g["kind"] == gvk.Kind {
				return m
			}
		}
	}
	return nil
}

// validateV2 is kubectl's client-side validation of a manifest.
func validateV2(t *testing.T, models kproto.Models, manifest string) []error {
	t.Helper()
	var obj map[string]any
	if err := yaml.Unmarshal([]byte(manifest), &obj); err != nil {
		t.Fatal(err)
	}
	u := unstructured.Unstructured{Object: obj}
	m := lookupModel(models, u.GroupVersionKind())
	if m == nil {
		t.Fatalf("no v2 model of %s", u.GroupVersionKind())
	}
	return validation.ValidateModel(obj, m, u.GetKind())
}

func TestOpenAPIV2ClientSideValidation(t *testing.T) {
	hs := openAPIServer(t)
	createWidgetCRD(t, hs, layout.DefaultSpace, widgetCRD(""))
	models := v2Models(t, hs.URL)
	for _, tc := range []struct {
		name, manifest, wantErr string
	}{
		{"valid deployment", `
apiVersion: apps/v1
kind: Deployment
metadata: {name: web, labels: {app: web}}
spec:
  replicas: 2
  selector: {matchLabels: {app: web}}
  strategy: {type: RollingUpdate, rollingUpdate: {maxSurge: 25%, maxUnavailable: 1}}
  template:
    metadata: {labels: {app: web}}
    spec:
      containers:
      - name: web
        image: nginx
        ports: [{containerPort: 80}]
        resources: {limits: {cpu: 500m, memory: 128Mi}}
        env: [{name: A, valueFrom: {configMapKeyRef: {name: c, key: k}}}]
`, ""},
		{"unknown field", `
apiVersion: apps/v1
kind: Deployment
metadata: {name: web}
spec:
  selector: {matchLabels: {app: web}}
  foo: bar
  template: {spec: {containers: [{name: web, image: nginx}]}}
`, `ValidationError(Deployment.spec): unknown field "foo" in io.k8s.api.apps.v1.DeploymentSpec`},
		{"wrong type", `
apiVersion: v1
kind: ConfigMap
metadata: {name: c}
data: {a: [1]}
`, `ValidationError(ConfigMap.data.a): invalid type for io.k8s.api.core.v1.ConfigMap.data: got "array", expected "string"`},
		{"missing required", `
apiVersion: apps/v1
kind: Deployment
metadata: {name: web}
spec: {selector: {matchLabels: {app: web}}, template: {spec: {containers: [{image: nginx}]}}}
`, `ValidationError(Deployment.spec.template.spec.containers[0]): missing required field "name" in io.k8s.api.core.v1.Container`},
		{"valid custom resource", `
apiVersion: example.com/v1
kind: Widget
metadata: {name: w}
spec: {size: 3, colour: red}
`, ""},
		{"custom resource unknown field", `
apiVersion: example.com/v1
kind: Widget
metadata: {name: w}
spec: {size: 3, shape: round}
`, `ValidationError(Widget.spec): unknown field "shape" in com.example.v1.Widget.spec`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			errs := validateV2(t, models, tc.manifest)
			if tc.wantErr == "" {
				if len(errs) > 0 {
					t.Errorf("errors for a valid manifest: %v", errs)
				}
				return
			}
			if len(errs) != 1 || errs[0].Error() != tc.wantErr {
				t.Errorf("errors %v, want [%s]", errs, tc.wantErr)
			}
		})
	}
}

// widgetCRD is a namespaced CRD with descriptions; extra adds a property to
// its spec.
func widgetCRD(extra string) *apiextensionsv1.CustomResourceDefinition {
	props := map[string]apiextensionsv1.JSONSchemaProps{
		"size":   {Type: "integer", Description: "Size of the widget in centimetres.", Minimum: ptr.To(1.0)},
		"colour": {Type: "string", Description: "Colour of the widget."},
	}
	if extra != "" {
		props[extra] = apiextensionsv1.JSONSchemaProps{Type: "string", Description: "Added later."}
	}
	return &apiextensionsv1.CustomResourceDefinition{
		TypeMeta:   metav1.TypeMeta{APIVersion: "apiextensions.k8s.io/v1", Kind: "CustomResourceDefinition"},
		ObjectMeta: metav1.ObjectMeta{Name: "widgets.example.com"},
		Spec: apiextensionsv1.CustomResourceDefinitionSpec{
			Group: "example.com",
			Scope: apiextensionsv1.NamespaceScoped,
			Names: apiextensionsv1.CustomResourceDefinitionNames{Plural: "widgets", Singular: "widget", Kind: "Widget", ListKind: "WidgetList"},
			Versions: []apiextensionsv1.CustomResourceDefinitionVersion{{
				Name: "v1", Served: true, Storage: true,
				Subresources: &apiextensionsv1.CustomResourceSubresources{Status: &apiextensionsv1.CustomResourceSubresourceStatus{}},
				Schema: &apiextensionsv1.CustomResourceValidation{OpenAPIV3Schema: &apiextensionsv1.JSONSchemaProps{
					Type: "object", Description: "A widget.",
					Properties: map[string]apiextensionsv1.JSONSchemaProps{
						"spec": {Type: "object", Description: "What the widget should be.", Required: []string{"size"}, Properties: props},
					},
				}},
			}},
		},
	}
}

var crdsGVR = schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"}

// createWidgetCRD creates (or, when it exists, replaces) the widget CRD in
// a space.
func createWidgetCRD(t *testing.T, hs *httptest.Server, space string, c *apiextensionsv1.CustomResourceDefinition) {
	t.Helper()
	dc, err := dynamic.NewForConfig(&rest.Config{Host: hs.URL + "/spaces/" + space})
	if err != nil {
		t.Fatal(err)
	}
	m, err := toUnstructuredMap(c)
	if err != nil {
		t.Fatal(err)
	}
	crds := dc.Resource(crdsGVR)
	if old, err := crds.Get(t.Context(), c.Name, metav1.GetOptions{}); err == nil {
		u := &unstructured.Unstructured{Object: m}
		u.SetResourceVersion(old.GetResourceVersion())
		if _, err := crds.Update(t.Context(), u, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
		return
	}
	if _, err := crds.Create(t.Context(), &unstructured.Unstructured{Object: m}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}

func TestOpenAPICustomResources(t *testing.T) {
	hs := openAPIServer(t)
	widgets := schema.GroupVersion{Group: "example.com", Version: "v1"}
	team := openAPIRoot(t, hs, "team")
	if _, err := team.GVSpec(widgets); err == nil {
		t.Fatal("example.com/v1 is served before its CRD exists")
	}
	createWidgetCRD(t, hs, "team", widgetCRD(""))

	doc, err := team.GVSpec(widgets)
	if err != nil {
		t.Fatal(err)
	}
	name, widget := findKind(doc, widgets.WithKind("Widget"))
	if name != "com.example.v1.Widget" || widget.Description != "A widget." {
		t.Fatalf("Widget model %q: %+v", name, widget)
	}
	spec := resolve(doc, widget.Properties["spec"])
	if spec.Properties["size"].Description != "Size of the widget in centimetres." || !slices.Contains(spec.Required, "size") {
		t.Errorf("Widget spec: %+v", spec)
	}
	if meta := resolve(doc, widget.Properties["metadata"]); meta == nil || meta.Properties["name"].Description == "" {
		t.Errorf("Widget metadata is not ObjectMeta: %+v", widget.Properties["metadata"])
	}
	// As kube: the patch of a custom resource takes no strategic merge
	// patch, and names fieldValidation.
	patch := doc.Paths.Paths["/apis/example.com/v1/namespaces/{namespace}/widgets/{name}"].Patch
	if patch == nil || patch.RequestBody.Content["application/strategic-merge-patch+json"] != nil || patch.RequestBody.Content["application/merge-patch+json"] == nil {
		t.Fatalf("widgets PATCH: %+v", patch)
	}
	if !slices.ContainsFunc(patch.Parameters, func(p *spec3.Parameter) bool { return p.Name == "fieldValidation" }) {
		t.Error("widgets PATCH has no fieldValidation parameter")
	}

	// Per space: the default space does not see team's CRD.
	if _, err := openAPIRoot(t, hs, layout.DefaultSpace).GVSpec(widgets); err == nil {
		t.Error("the default space serves team's example.com/v1")
	}
	teamModels, defaultModels := v2Models(t, hs.URL+"/spaces/team"), v2Models(t, hs.URL)
	if lookupModel(teamModels, widgets.WithKind("Widget")) == nil {
		t.Error("team's v2 has no Widget model")
	}
	if lookupModel(defaultModels, widgets.WithKind("Widget")) != nil {
		t.Error("the default space's v2 has a Widget model")
	}
	// The CRD's models merge with the built-in ones: the meta/v1 models
	// they share are not duplicated under other names.
	added := slices.DeleteFunc(slices.Clone(teamModels.ListModels()), func(n string) bool { return slices.Contains(defaultModels.ListModels(), n) })
	if !slices.Equal(added, []string{"com.example.v1.Widget", "com.example.v1.WidgetList"}) {
		t.Errorf("the CRD added v2 models %q", added)
	}

	// A changed CRD changes the document and its hash; the old URL
	// redirects to the new one.
	before := indexURL(t, hs, "team", "apis/example.com/v1")
	createWidgetCRD(t, hs, "team", widgetCRD("shape"))
	after := indexURL(t, hs, "team", "apis/example.com/v1")
	if before == after {
		t.Fatalf("the CRD changed and its document's URL did not: %s", after)
	}
	if resp, _ := getRaw(t, hs.URL+before); resp.StatusCode != http.StatusMovedPermanently || resp.Header.Get("Location") != after {
		t.Errorf("old URL: %d to %q, want 301 to %s", resp.StatusCode, resp.Header.Get("Location"), after)
	}
	doc, err = openAPIRoot(t, hs, "team").GVSpec(widgets)
	if err != nil {
		t.Fatal(err)
	}
	_, widget = findKind(doc, widgets.WithKind("Widget"))
	if _, ok := resolve(doc, widget.Properties["spec"]).Properties["shape"]; !ok {
		t.Error("the changed CRD's new property is not in the document")
	}
	// The built-in documents did not change.
	_, teamHash, _ := strings.Cut(indexURL(t, hs, "team", "apis/apps/v1"), "?")
	_, defaultHash, _ := strings.Cut(indexURL(t, hs, layout.DefaultSpace, "apis/apps/v1"), "?")
	if teamHash != defaultHash {
		t.Errorf("apps/v1 differs between spaces: %s and %s", teamHash, defaultHash)
	}
}

// indexURL returns the serverRelativeURL of a group-version's document.
func indexURL(t *testing.T, hs *httptest.Server, space, gv string) string {
	t.Helper()
	_, body := getRaw(t, hs.URL+"/spaces/"+space+"/openapi/v3")
	var index struct {
		Paths map[string]map[string]string `json:"paths"`
	}
	if err := json.Unmarshal(body, &index); err != nil {
		t.Fatal(err)
	}
	return index.Paths[gv]["serverRelativeURL"]
}

func TestOpenAPIV2Forms(t *testing.T) {
	hs := openAPIServer(t)
	resp, body := getRaw(t, hs.URL+"/openapi/v2")
	var swagger spec.Swagger
	if resp.StatusCode != http.StatusOK || resp.Header.Get("Content-Type") != "application/json" || json.Unmarshal(body, &swagger) != nil {
		t.Fatalf("/openapi/v2 as JSON: %d %s", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	if swagger.Swagger != "2.0" || swagger.Definitions["io.k8s.api.core.v1.Pod"].Description != (corev1.Pod{}).SwaggerDoc()[""] {
		t.Errorf("v2: swagger %q, Pod %+v", swagger.Swagger, swagger.Definitions["io.k8s.api.core.v1.Pod"])
	}
	if _, ok := swagger.Paths.Paths["/api/v1/namespaces/{namespace}/pods/{name}"]; !ok {
		t.Error("v2 has no path for a pod")
	}
	// As kube-apiserver's, v2 has no defaults.
	defaults := 0
	w := schemamutation.Walker{
		SchemaCallback: func(s *spec.Schema) *spec.Schema {
			if s.Default != nil {
				defaults++
			}
			return s
		},
		RefCallback: schemamutation.RefCallbackNoop,
	}
	for _, def := range swagger.Definitions {
		w.WalkSchema(&def)
	}
	if defaults > 0 {
		t.Errorf("v2 states %d defaults", defaults)
	}
	resp, gz := getRaw(t, hs.URL+"/openapi/v2", "Accept", openAPIV2ProtoType, "Accept-Encoding", "gzip")
	if resp.Header.Get("Content-Encoding") != "gzip" || len(gz) >= len(body)/2 {
		t.Errorf("protobuf with gzip: Content-Encoding %q, %d bytes (JSON %d)", resp.Header.Get("Content-Encoding"), len(gz), len(body))
	}
}

func BenchmarkOpenAPIV3Document(b *testing.B) {
	st := store.New(store.Options{HistorySize: 100, Fields: FieldsFor})
	st.SetLog(store.NewMemLog(st))
	defer st.Close()
	s := New(Config{Store: st, Authenticator: allowAll{}, Authorizer: allowAll{}})
	if err := s.EnsureSpace(context.Background(), layout.DefaultSpace, layout.SpaceKindWDS); err != nil {
		b.Fatal(err)
	}
	get := func() {
		w := httptest.NewRecorder()
		s.ServeHTTP(w, httptest.NewRequest("GET", "/openapi/v3/apis/apps/v1", nil))
		if w.Code != http.StatusOK {
			b.Fatal(w.Code)
		}
	}
	get() // the first request builds the documents, once per process
	for b.Loop() {
		w := httptest.NewRecorder()
		s.ServeHTTP(w, httptest.NewRequest("GET", "/openapi/v3/apis/apps/v1", nil))
		if w.Code != http.StatusOK {
			b.Fatal(w.Code)
		}
	}
}
