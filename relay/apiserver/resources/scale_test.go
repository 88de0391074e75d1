package resources

import (
	"errors"
	"testing"

	autoscalingv1 "k8s.io/api/autoscaling/v1"
)

func TestScaleRoundTrip(t *testing.T) {
	for _, tc := range []struct {
		name, group, resource, object string
		wantSelector                  string
		wantSpec, wantStatus          int32
	}{{
		name: "deployment", group: "apps", resource: "deployments",
		object: `
metadata: {name: web, namespace: prod, uid: u-1, resourceVersion: "17", creationTimestamp: "2025-05-01T10:00:00Z"}
spec: {replicas: 3, selector: {matchLabels: {app: web}, matchExpressions: [{key: tier, operator: NotIn, values: [db]}]}}
status: {replicas: 2}
`,
		wantSelector: "app=web,tier notin (db)", wantSpec: 3, wantStatus: 2,
	}, {
		name: "replicationcontroller", resource: "replicationcontrollers",
		object: `
metadata: {name: legacy, namespace: prod, resourceVersion: "5"}
spec: {replicas: 1, selector: {app: legacy, tier: web}}
status: {replicas: 1}
`,
		wantSelector: "app=legacy,tier=web", wantSpec: 1, wantStatus: 1,
	}, {
		name: "statefulset without status", group: "apps", resource: "statefulsets",
		object:       `{metadata: {name: db, resourceVersion: "9"}, spec: {replicas: 0}}`,
		wantSelector: "", wantSpec: 0, wantStatus: 0,
	}} {
		t.Run(tc.name, func(t *testing.T) {
			info := Lookup(tc.group, tc.resource)
			obj := decode(t, tc.object)
			scale, err := ScaleFromObject(info, obj)
			if err != nil {
				t.Fatal(err)
			}
			if scale.APIVersion != "autoscaling/v1" || scale.Kind != "Scale" ||
				scale.Name != obj.GetName() || scale.Namespace != obj.GetNamespace() || scale.UID != obj.GetUID() ||
				scale.ResourceVersion != obj.GetResourceVersion() || !scale.CreationTimestamp.Equal(new(obj.GetCreationTimestamp())) {
				t.Errorf("scale metadata = %+v %+v", scale.TypeMeta, scale.ObjectMeta)
			}
			if scale.Spec.Replicas != tc.wantSpec || scale.Status.Replicas != tc.wantStatus || scale.Status.Selector != tc.wantSelector {
				t.Errorf("scale = spec %d, status %d, selector %q", scale.Spec.Replicas, scale.Status.Replicas, scale.Status.Selector)
			}

			scale.Spec.Replicas = 7
			if err := ApplyScale(info, obj, scale); err != nil {
				t.Fatal(err)
			}
			again, err := ScaleFromObject(info, obj)
			if err != nil {
				t.Fatal(err)
			}
			if again.Spec.Replicas != 7 || again.Status.Replicas != tc.wantStatus || again.Status.Selector != tc.wantSelector {
				t.Errorf("after ApplyScale: %+v", again)
			}
		})
	}
}

func TestApplyScaleCarriesResourceVersion(t *testing.T) {
	info := Lookup("apps", "replicasets")
	obj := decode(t, `{metadata: {name: rs, resourceVersion: "10"}, spec: {replicas: 1}}`)
	stale := &autoscalingv1.Scale{Spec: autoscalingv1.ScaleSpec{Replicas: 2}}
	stale.ResourceVersion = "8"
	if err := ApplyScale(info, obj, stale); err != nil {
		t.Fatal(err)
	}
	if obj.GetResourceVersion() != "8" {
		t.Errorf("resourceVersion = %q, want the scale's 8 so the update conflicts", obj.GetResourceVersion())
	}
	if err := ApplyScale(info, obj, &autoscalingv1.Scale{Spec: autoscalingv1.ScaleSpec{Replicas: -1}}); err == nil {
		t.Error("negative replicas accepted")
	}
}

func TestScaleErrors(t *testing.T) {
	pods := Lookup("", "pods")
	obj := decode(t, `{metadata: {name: p}}`)
	if _, err := ScaleFromObject(pods, obj); !errors.Is(err, ErrNoScale) {
		t.Errorf("pods scale: err = %v, want ErrNoScale", err)
	}
	if err := ApplyScale(pods, obj, &autoscalingv1.Scale{}); !errors.Is(err, ErrNoScale) {
		t.Errorf("pods apply: err = %v, want ErrNoScale", err)
	}
	bad := decode(t, `{spec: {replicas: "three"}}`)
	if _, err := ScaleFromObject(Lookup("apps", "deployments"), bad); err == nil {
		t.Error("string replicas accepted")
	}
}

func TestScaleCustomResource(t *testing.T) {
	// A CRD's scale subresource keeps the selector as a string.
	info := &Info{Scale: &ScaleInfo{SpecReplicasPath: ".spec.size", StatusReplicasPath: ".status.size", LabelSelectorPath: ".status.selector"}}
	obj := decode(t, `{metadata: {name: c}, spec: {size: 4}, status: {size: 3, selector: "app=c"}}`)
	scale, err := ScaleFromObject(info, obj)
	if err != nil {
		t.Fatal(err)
	}
	if scale.Spec.Replicas != 4 || scale.Status.Replicas != 3 || scale.Status.Selector != "app=c" {
		t.Errorf("scale = %+v", scale)
	}
}
