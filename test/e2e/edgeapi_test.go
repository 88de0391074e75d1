package e2e

import (
	"errors"
	"net/http"
	"slices"
	"strings"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"

	"github.com/canopy-dev/canopy/test/poll"
	edgev1alpha1 "github.com/canopy-dev/canopy/topology/api/v1alpha1"
)

// The examples of docs/user-guide.md, section "API types".
const (
	exampleLocation = `apiVersion: edge.canopy.dev/v1alpha1
kind: Location
metadata:
  name: stores-east
  labels: {env: prod, region: east}
spec:
  instanceSelector:
    matchLabels: {region: east}
`
	exampleEdgePlacement = `apiVersion: edge.canopy.dev/v1alpha1
kind: EdgePlacement
metadata:
  name: web
spec:
  locationSelectors:
  - matchLabels: {env: prod}
  downsync:
  - apiGroup: apps
    resources: [deployments]
    namespaces: [web]
  - apiGroup: ""
    resources: [configmaps, services]
    namespaces: [web]
    labelSelectors:
    - matchLabels: {app: web}
  - apiGroup: apiextensions.k8s.io
    resources: [customresourcedefinitions]
    objectNames: [widgets.example.com]
  upsync:
  - apiGroup: example.com
    resources: [reports]
    namespaces: [web]
  wantSingletonReportedState: true
`
	exampleCustomizer = `apiVersion: edge.canopy.dev/v1alpha1
kind: Customizer
metadata:
  name: per-store
  namespace: default
replacements:
- path: /data/store
  value: '"%(syncTargetName)"'
- path: /spec/replicas
  value: '%(replicas)'
`
)

// TestEdgeAPI: a root serves the edge.canopy.dev kinds in the right
// spaces as soon as it is ready, with kubectl's columns, and refuses bad
// input with 422 without storing it.
func TestEdgeAPI(t *testing.T) {
	t.Parallel()
	r := startRoot(t) // waits for /readyz, which waits for the CRDs
	ctx := t.Context()

	r.mustKubectl(t, "get", "edgeplacements,singleplacementslices,customizers")
	r.mustKubectl(t, "--context=inventory", "get", "locations,synctargets")
	if _, err := r.kubectl(t, "--context=inventory", "get", "edgeplacements"); err == nil {
		t.Error("the inventory serves EdgePlacements")
	}
	if _, err := r.kubectl(t, "get", "synctargets"); err == nil {
		t.Error("the default space serves SyncTargets")
	}

	// A Location, in the inventory.
	wantContains(t, "apply location", r.mustKubectlIn(t, exampleLocation, "--context=inventory", "apply", "-f", "-"),
		"location.edge.canopy.dev/stores-east created")
	wantMatch(t, "get locations", r.mustKubectl(t, "--context=inventory", "get", "locations"),
		`^NAME\s+SELECTOR\s+AGE$`, `^stores-east\s+\{"region":"east"\}\s`)

	// An EdgePlacement, its status columns and its slices.
	wantContains(t, "apply placement", r.mustKubectlIn(t, exampleEdgePlacement, "apply", "-f", "-"),
		"edgeplacement.edge.canopy.dev/web created")
	wantContains(t, "re-apply placement", r.mustKubectlIn(t, exampleEdgePlacement, "apply", "-f", "-"),
		"edgeplacement.edge.canopy.dev/web unchanged")
	wantMatch(t, "get edgeplacements", r.mustKubectl(t, "get", "edgeplacements"),
		`^NAME\s+MATCHED\s+SYNCED\s+READY\s+AGE$`, `^web\s+`)
	dc := r.dynamicClient(t, "default")
	eps := dc.Resource(edgev1alpha1.EdgePlacementsGVR)
	ep, err := eps.Get(ctx, "web", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var want map[string]any
	if err := yaml.Unmarshal([]byte(exampleEdgePlacement), &want); err != nil {
		t.Fatal(err)
	}
	if got, _ := yaml.Marshal(ep.Object["spec"]); string(got) != string(must(yaml.Marshal(want["spec"]))) {
		t.Errorf("stored spec differs from the applied one:\n%s", got)
	}
	ep.Object["status"] = map[string]any{
		"observedGeneration": ep.GetGeneration(), "matchedDestinations": int64(3), "syncedDestinations": int64(2), "failedDestinations": int64(0),
		"conditions": []any{map[string]any{"type": edgev1alpha1.ConditionReady, "status": "False", "reason": edgev1alpha1.ReasonPending,
			"message": "1 destination pending", "lastTransitionTime": "2026-01-01T00:00:00Z"}},
	}
	if ep, err = eps.UpdateStatus(ctx, ep, metav1.UpdateOptions{}); err != nil {
		t.Fatalf("placement status: %v", err)
	}
	wantMatch(t, "get epl (status)", r.mustKubectl(t, "get", "epl", "-o", "wide"),
		`^NAME\s+MATCHED\s+SYNCED\s+FAILED\s+READY\s+AGE$`, `^web\s+3\s+2\s+0\s+False\s`)

	slice := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": edgev1alpha1.SchemeGroupVersion.String(), "kind": edgev1alpha1.KindSinglePlacementSlice,
		"metadata": map[string]any{"name": "web-0", "labels": map[string]any{edgev1alpha1.PlacementLabel: "web"},
			"ownerReferences": []any{map[string]any{"apiVersion": edgev1alpha1.SchemeGroupVersion.String(), "kind": edgev1alpha1.KindEdgePlacement,
				"name": "web", "uid": string(ep.GetUID()), "controller": true, "blockOwnerDeletion": true}}},
		"edgePlacement": "web", "destinationCount": int64(1),
		"destinations": []any{map[string]any{"syncTargetName": "store-1", "locationName": "stores-east", "labels": map[string]any{"region": "east"}}},
	}}
	if _, err := dc.Resource(edgev1alpha1.SinglePlacementSlicesGVR).Create(ctx, slice, metav1.CreateOptions{}); err != nil {
		t.Fatalf("slice: %v", err)
	}
	wantMatch(t, "get sps", r.mustKubectl(t, "get", "sps", "-l", edgev1alpha1.PlacementLabel+"=web"),
		`^NAME\s+PLACEMENT\s+DESTINATIONS\s+AGE$`, `^web-0\s+web\s+1\s`)

	// A Customizer, namespaced.
	wantContains(t, "apply customizer", r.mustKubectlIn(t, exampleCustomizer, "apply", "-f", "-"),
		"customizer.edge.canopy.dev/per-store created")
	wantMatch(t, "get customizers", r.mustKubectl(t, "get", "customizers", "-n", "default"), `^NAME\s+AGE$`, `^per-store\s`)
	if got := lines(r.mustKubectl(t, "get", "canopy", "-A", "-o", "name")); len(got) != 3 {
		t.Errorf("get canopy (the category): %q", got)
	}

	// Bad input: 422 from kubectl and from client-go, and nothing stored.
	bad := strings.Replace(strings.Replace(exampleEdgePlacement, "name: web", "name: bad", 1),
		"wantSingletonReportedState: true", `wantSingletonReportedState: "yes"`, 1)
	_, err = r.kubectlIn(t, bad, nil, "create", "-f", "-")
	if err == nil || !strings.Contains(err.Error(), "is invalid") || !strings.Contains(err.Error(), "spec.wantSingletonReportedState") {
		t.Errorf("kubectl create of a placement with a string for a boolean: want Invalid on spec.wantSingletonReportedState, got %v", err)
	}
	var obj map[string]any
	if err := yaml.Unmarshal([]byte(bad), &obj); err != nil {
		t.Fatal(err)
	}
	_, err = eps.Create(ctx, &unstructured.Unstructured{Object: obj}, metav1.CreateOptions{})
	var status apierrors.APIStatus
	if !errors.As(err, &status) || status.Status().Code != http.StatusUnprocessableEntity || !apierrors.IsInvalid(err) {
		t.Errorf("client-go create of the bad placement: want 422 Invalid, got %v", err)
	}
	noClause := strings.Replace(strings.Replace(exampleEdgePlacement, "name: web", "name: bad", 1), "resources: [deployments]", "resources: []", 1)
	if _, err := r.kubectlIn(t, noClause, nil, "create", "-f", "-"); err == nil || !strings.Contains(err.Error(), "spec.downsync[0].resources") {
		t.Errorf("a downsync clause without resources: want Invalid on spec.downsync[0].resources, got %v", err)
	}
	if _, err := r.kubectl(t, "get", "edgeplacement", "bad"); err == nil || !strings.Contains(err.Error(), "NotFound") {
		t.Errorf("the bad placement was stored, or get failed otherwise: %v", err)
	}
	if got := lines(r.mustKubectl(t, "get", "edgeplacements", "-o", "name")); !slices.Equal(got, []string{"edgeplacement.edge.canopy.dev/web"}) {
		t.Errorf("placements: %q", got)
	}

	// Deleting the placement deletes its slices (ownerReference).
	r.mustKubectl(t, "delete", "edgeplacement", "web")
	poll.Until(t, "the placement's slices deleted", func() error {
		if out := r.mustKubectl(t, "get", "sps", "-o", "name"); out != "" {
			return errors.New("slices left: " + out)
		}
		return nil
	})
}

func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}
