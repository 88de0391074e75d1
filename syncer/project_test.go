package syncer

import (
	"errors"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utiljson "k8s.io/apimachinery/pkg/util/json"
)

func decodeJSON(t *testing.T, s string) map[string]any {
	t.Helper()
	var m map[string]any
	if err := utiljson.Unmarshal([]byte(s), &m); err != nil {
		t.Fatal(err)
	}
	return m
}

// Drift is a change to what the syncer set, as the cluster answered it;
// what others add (defaults, status, their own fields) is not.
func TestDrifted(t *testing.T) {
	applied := `{"metadata": {"name": "web", "labels": {"app": "web"}},
		"spec": {"replicas": 2, "containers": [{"name": "a", "image": "x:1"}], "cpu": "500m"}}`
	for _, tc := range []struct {
		name, live string
		drift      bool
	}{
		{"same, with what others added", `{"metadata": {"name": "web", "uid": "u", "labels": {"app": "web", "other": "1"}, "annotations": {"a": "b"}},
			"spec": {"replicas": 2.0, "containers": [{"name": "a", "image": "x:1", "imagePullPolicy": "IfNotPresent"}], "cpu": "500m", "paused": false},
			"status": {"replicas": 2}}`, false},
		{"a value changed", `{"metadata": {"name": "web", "labels": {"app": "web"}}, "spec": {"replicas": 3, "containers": [{"name": "a", "image": "x:1"}], "cpu": "500m"}}`, true},
		{"a label removed", `{"metadata": {"name": "web", "labels": {}}, "spec": {"replicas": 2, "containers": [{"name": "a", "image": "x:1"}], "cpu": "500m"}}`, true},
		{"inside a list", `{"metadata": {"name": "web", "labels": {"app": "web"}}, "spec": {"replicas": 2, "containers": [{"name": "a", "image": "x:2"}], "cpu": "500m"}}`, true},
		{"a list grew", `{"metadata": {"name": "web", "labels": {"app": "web"}}, "spec": {"replicas": 2, "containers": [{"name": "a", "image": "x:1"}, {"name": "b"}], "cpu": "500m"}}`, true},
		{"a field removed", `{"metadata": {"name": "web", "labels": {"app": "web"}}, "spec": {"containers": [{"name": "a", "image": "x:1"}], "cpu": "500m"}}`, true},
		{"a map became a value", `{"metadata": {"name": "web", "labels": "x"}, "spec": {"replicas": 2, "containers": [{"name": "a", "image": "x:1"}], "cpu": "500m"}}`, true},
	} {
		r := &record{Applied: decodeJSON(t, applied)}
		if got := drifted(r, &unstructured.Unstructured{Object: decodeJSON(t, tc.live)}); got != tc.drift {
			t.Errorf("%s: drifted = %v, want %v", tc.name, got, tc.drift)
		}
	}
	// The cluster's answer is what the projection keeps: normalized
	// values, not what was sent.
	sent := decodeJSON(t, `{"spec": {"cpu": "0.5", "containers": [{"name": "a"}]}}`)
	answer := decodeJSON(t, `{"metadata": {"uid": "u"}, "spec": {"cpu": "500m", "containers": [{"name": "a", "imagePullPolicy": "Always"}], "x": 1}}`)
	if got := projectMap(sent, answer); !jsonEqual(got, decodeJSON(t, `{"spec": {"cpu": "500m", "containers": [{"name": "a"}]}}`)) {
		t.Errorf("projection %v", got)
	}
}

func TestConfigValidate(t *testing.T) {
	_, err := New(Config{Inbox: "same", Outbox: "same"})
	if !errors.Is(err, ErrInvalidConfig) {
		t.Fatalf("New: %v", err)
	}
	if n := len(Config{Inbox: "same", Outbox: "same"}.Validate()); n != 4 {
		t.Errorf("%d errors, want 4 (Name, Store, Cluster, same spaces)", n)
	}
}
