package server

import (
	"context"
	"slices"
	"strings"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/canopy-dev/canopy/relay/layout"
	"github.com/canopy-dev/canopy/test/poll"
	edgev1alpha1 "github.com/canopy-dev/canopy/topology/api/v1alpha1"
)

// edgeCRDs lists the edge.canopy.dev CRDs of a space, by name.
func edgeCRDs(t *testing.T, r *Root, space string) []string {
	t.Helper()
	dc, err := r.spaceClient(space)
	if err != nil {
		t.Fatal(err)
	}
	list, err := dc.Resource(crdGVR).List(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Fatalf("listing the CRDs of %s: %v", space, err)
	}
	var out []string
	for _, it := range list.Items {
		if strings.HasSuffix(it.GetName(), "."+edgev1alpha1.GroupName) {
			out = append(out, it.GetName())
		}
	}
	slices.Sort(out)
	return out
}

func crdNames(resources []string) []string {
	var out []string
	for _, res := range resources {
		out = append(out, edgev1alpha1.CRDName(res))
	}
	slices.Sort(out)
	return out
}

// TestCRDsInSpaces: the inventory serves SyncTarget and Location, every
// workload description space (default at start, and any created later)
// serves EdgePlacement, SinglePlacementSlice and Customizer, and mailbox
// spaces serve none of them.
func TestCRDsInSpaces(t *testing.T) {
	r := startTestRoot(t)
	ctx := context.Background()
	inventory, workload := crdNames(edgev1alpha1.InventoryResources), crdNames(edgev1alpha1.WorkloadResources)

	poll.True(t, "readiness to include the CRDs", func() bool { return r.crds.ready() == nil })
	if got := edgeCRDs(t, r, layout.InventorySpace); !slices.Equal(got, inventory) {
		t.Errorf("inventory CRDs: %v, want %v", got, inventory)
	}
	if got := edgeCRDs(t, r, layout.DefaultSpace); !slices.Equal(got, workload) {
		t.Errorf("default space CRDs: %v, want %v", got, workload)
	}

	// A mailbox, then a new WDS: the WDS gets the CRDs, the mailbox never.
	mailbox, err := r.childSpace(ctx, layout.MailboxSpace("child-1"))
	if err != nil {
		t.Fatal(err)
	}
	if err := r.api.EnsureSpace(ctx, "team-a", layout.SpaceKindWDS); err != nil {
		t.Fatal(err)
	}
	poll.True(t, "the workload CRDs in a new WDS", func() bool { return slices.Equal(edgeCRDs(t, r, "team-a"), workload) })
	if got := edgeCRDs(t, r, mailbox); len(got) != 0 {
		t.Errorf("mailbox %s has CRDs %v", mailbox, got)
	}
	for _, sp := range []string{mailbox, layout.InventorySpace, "no-such-space"} {
		if err := r.InstallWorkloadCRDs(ctx, sp); err == nil {
			t.Errorf("InstallWorkloadCRDs(%s) succeeded", sp)
		}
	}
	if got := edgeCRDs(t, r, mailbox); len(got) != 0 {
		t.Errorf("mailbox %s has CRDs %v", mailbox, got)
	}
}

// TestCRDUpgrade: an older definition (the hand-written SyncTarget CRD of
// earlier releases, say, or one a user changed) is replaced by the root at
// once; installing over the current one writes nothing.
func TestCRDUpgrade(t *testing.T) {
	r := startTestRoot(t)
	ctx := context.Background()
	poll.True(t, "the start-up CRDs", func() bool { return r.crds.ready() == nil })
	dc, err := r.spaceClient(layout.InventorySpace)
	if err != nil {
		t.Fatal(err)
	}
	crds := dc.Resource(crdGVR)
	name := edgev1alpha1.CRDName(edgev1alpha1.ResourceSyncTargets)
	cur, err := crds.Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if cur.GetLabels()[ManagedByLabel] != ManagedBy {
		t.Errorf("labels %v, want %s=%s", cur.GetLabels(), ManagedByLabel, ManagedBy)
	}
	// What earlier releases installed: spec preserved unknown fields.
	versions, _, _ := unstructured.NestedSlice(cur.Object, "spec", "versions")
	v0 := versions[0].(map[string]any)
	if err := unstructured.SetNestedField(v0, map[string]any{"type": "object", "x-kubernetes-preserve-unknown-fields": true},
		"schema", "openAPIV3Schema", "properties", "spec"); err != nil {
		t.Fatal(err)
	}
	_ = unstructured.SetNestedSlice(cur.Object, versions, "spec", "versions")
	old, err := crds.Update(ctx, cur, metav1.UpdateOptions{})
	if err != nil {
		t.Fatal(err)
	}

	var upgraded *unstructured.Unstructured
	poll.True(t, "the root to replace the older definition", func() bool {
		upgraded, err = crds.Get(ctx, name, metav1.GetOptions{})
		if err != nil || upgraded.GetResourceVersion() == old.GetResourceVersion() {
			return false
		}
		versions, _, _ = unstructured.NestedSlice(upgraded.Object, "spec", "versions")
		_, found, _ := unstructured.NestedBool(versions[0].(map[string]any), "schema", "openAPIV3Schema", "properties", "spec", "x-kubernetes-preserve-unknown-fields")
		return !found
	})

	manifests, err := edgev1alpha1.InventoryCRDs()
	if err != nil {
		t.Fatal(err)
	}
	if err := installCRDs(ctx, dc, manifests); err != nil {
		t.Fatal(err)
	}
	again, err := crds.Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if again.GetResourceVersion() != upgraded.GetResourceVersion() {
		t.Errorf("installing the current definition rewrote it (resourceVersion %s -> %s)", upgraded.GetResourceVersion(), again.GetResourceVersion())
	}
}

// A StatusCollector whose CEL does not compile, or has the wrong type, is
// refused with 422 naming the field, and nothing is stored; a good one is
// stored.
func TestStatusCollectorCELIsValidated(t *testing.T) {
	r := startTestRoot(t)
	poll.True(t, "the workload CRDs", func() bool { return r.crds.ready() == nil })
	dc, err := r.spaceClient(layout.DefaultSpace)
	if err != nil {
		t.Fatal(err)
	}
	sc := dc.Resource(edgev1alpha1.SchemeGroupVersion.WithResource("statuscollectors"))
	collector := func(name, subject string) *unstructured.Unstructured {
		return &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": "edge.canopy.dev/v1alpha1", "kind": "StatusCollector", "metadata": map[string]any{"name": name},
			"spec": map[string]any{"combinedFields": []any{map[string]any{"name": "ready", "type": "SUM", "subject": subject}}}}}
	}
	for subject, want := range map[string]string{
		"obj.status.readyReplicas +": "spec.combinedFields[0].subject",
		`"not a number"`:             "spec.combinedFields[0].subject",
	} {
		_, err := sc.Create(context.Background(), collector("bad", subject), metav1.CreateOptions{})
		if !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), want) {
			t.Fatalf("subject %q: %v, want 422 naming %s", subject, err, want)
		}
	}
	if _, err := sc.Get(context.Background(), "bad", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Fatalf("a refused collector was stored: %v", err)
	}
	if _, err := sc.Create(context.Background(), collector("good", "obj.status.readyReplicas"), metav1.CreateOptions{}); err != nil {
		t.Fatalf("a valid collector: %v", err)
	}
}
