package resources

import (
	"encoding/json"
	"reflect"
	"testing"

	kjson "k8s.io/apimachinery/pkg/runtime/serializer/json"
	"k8s.io/apimachinery/pkg/util/strategicpatch"
)

// TestNewSupportsStrategicMergePatch checks that the Go types behind New
// carry kube's merge keys, including the APIService type written here.
func TestNewSupportsStrategicMergePatch(t *testing.T) {
	for _, tc := range []struct {
		group, resource, original, patch, want string
	}{{
		resource: "pods",
		original: `{"spec":{"containers":[{"name":"app","image":"a:1"},{"name":"log","image":"l:1"}]}}`,
		patch:    `{"spec":{"containers":[{"name":"app","image":"a:2"}]}}`,
		want:     `{"spec":{"containers":[{"image":"a:2","name":"app"},{"image":"l:1","name":"log"}]}}`,
	}, {
		group: "apiregistration.k8s.io", resource: "apiservices",
		original: `{"status":{"conditions":[{"type":"Available","status":"False"},{"type":"Other","status":"True"}]}}`,
		patch:    `{"status":{"conditions":[{"type":"Available","status":"True"}]}}`,
		want:     `{"status":{"conditions":[{"status":"True","type":"Available"},{"status":"True","type":"Other"}]}}`,
	}, {
		group: "apiextensions.k8s.io", resource: "customresourcedefinitions",
		original: `{"status":{"conditions":[{"type":"Established","status":"False"}]}}`,
		patch:    `{"status":{"conditions":[{"type":"NamesAccepted","status":"True"}]}}`,
		// CRD conditions carry no patch merge key: a strategic merge patch
		// replaces the list, in kube as here.
		want: `{"status":{"conditions":[{"status":"True","type":"NamesAccepted"}]}}`,
	}} {
		info := Lookup(tc.group, tc.resource)
		got, err := strategicpatch.StrategicMergePatch([]byte(tc.original), []byte(tc.patch), info.New())
		if err != nil {
			t.Errorf("%s: %v", tc.resource, err)
			continue
		}
		var g, w any
		if err := json.Unmarshal(got, &g); err != nil {
			t.Fatal(err)
		}
		if err := json.Unmarshal([]byte(tc.want), &w); err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(g, w) {
			t.Errorf("%s: patched = %s, want %s", tc.resource, got, tc.want)
		}
	}
}

// TestStrictDecodingAPIService checks that the APIService type knows every
// field of the published API and nothing else.
func TestStrictDecodingAPIService(t *testing.T) {
	s := kjson.NewSerializerWithOptions(kjson.DefaultMetaFactory, Scheme(), Scheme(), kjson.SerializerOptions{Strict: true})
	good := `{"apiVersion":"apiregistration.k8s.io/v1","kind":"APIService","metadata":{"name":"v1.example.com"},
		"spec":{"service":{"namespace":"ns","name":"svc","port":443},"group":"example.com","version":"v1",
		"insecureSkipTLSVerify":false,"caBundle":"Y2E=","groupPriorityMinimum":1000,"versionPriority":15},
		"status":{"conditions":[{"type":"Available","status":"True","lastTransitionTime":"2025-01-01T00:00:00Z","reason":"Passed","message":"all checks passed"}]}}`
	obj, _, err := s.Decode([]byte(good), nil, Lookup("apiregistration.k8s.io", "apiservices").New())
	if err != nil {
		t.Fatalf("strict decode: %v", err)
	}
	if copied := obj.DeepCopyObject(); !reflect.DeepEqual(copied, obj) {
		t.Errorf("DeepCopyObject differs: %#v", copied)
	}
	bad := `{"apiVersion":"apiregistration.k8s.io/v1","kind":"APIService","metadata":{"name":"x"},"spec":{"priority":1}}`
	if _, _, err := s.Decode([]byte(bad), nil, Lookup("apiregistration.k8s.io", "apiservices").New()); err == nil {
		t.Error("unknown field accepted by strict decoding")
	}
}
