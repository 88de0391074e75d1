package server

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/yaml"

	"github.com/canopy-dev/canopy/relay/internal/wire"
	"github.com/canopy-dev/canopy/relay/kubeapi"
)

// syncTargetCRD serves SyncTargets in the inventory space: one per
// destination announced from below, with where it is in the tree and
// whether it is connected. The placement issue extends the type (spec,
// generated Go types); this is the part the relay tree maintains.
const syncTargetCRD = `
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: synctargets.edge.canopy.dev
spec:
  group: edge.canopy.dev
  scope: Cluster
  names: {kind: SyncTarget, listKind: SyncTargetList, plural: synctargets, singular: synctarget, shortNames: [st]}
  versions:
  - name: v1alpha1
    served: true
    storage: true
    subresources: {status: {}}
    additionalPrinterColumns:
    - {name: Path, type: string, jsonPath: .status.path}
    - {name: Connected, type: boolean, jsonPath: .status.connected}
    - {name: Last-Seen, type: date, jsonPath: .status.lastSeen}
    - {name: Age, type: date, jsonPath: .metadata.creationTimestamp}
    schema:
      openAPIV3Schema:
        type: object
        description: A workload execution cluster (a destination), as announced through the relay tree.
        properties:
          spec:
            type: object
            x-kubernetes-preserve-unknown-fields: true
          status:
            type: object
            properties:
              path: {type: string, description: "Relays from the root down to the edge serving this destination."}
              connected: {type: boolean, description: "Whether every link on the path is up."}
              lastSeen: {type: string, format: date-time, description: "When the destination was last heard from."}
`

var (
	crdGVR        = schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"}
	syncTargetGVR = schema.GroupVersionResource{Group: "edge.canopy.dev", Version: "v1alpha1", Resource: "synctargets"}
)

// maintainInventory installs the SyncTarget CRD in the inventory space and
// keeps one SyncTarget per announced destination, rewriting only those
// whose announced state changed, until ctx is done. It
// writes through the root's own kube API as the admin, like any client.
func (r *Root) maintainInventory(ctx context.Context) error {
	cc := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(
		&clientcmd.ClientConfigLoadingRules{ExplicitPath: r.KubeconfigPath()},
		&clientcmd.ConfigOverrides{CurrentContext: kubeapi.InventorySpace})
	rc, err := cc.ClientConfig()
	if err != nil {
		return err
	}
	rc.QPS = -1
	dc, err := dynamic.NewForConfig(rc)
	if err != nil {
		return err
	}
	var crd unstructured.Unstructured
	if err := yaml.Unmarshal([]byte(syncTargetCRD), &crd.Object); err != nil {
		return err
	}
	if _, err := dc.Resource(crdGVR).Create(ctx, &crd, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("server: installing the SyncTarget CRD: %w", err)
	}
	targets := dc.Resource(syncTargetGVR)
	// written remembers what each SyncTarget was last written with, so a
	// change in the subtree costs writes only for the destinations it
	// touched, not for the whole fleet.
	written := map[string]string{}
	for {
		dests, changed := r.down.Subtree()
		for _, d := range dests {
			fp := fingerprint(d)
			if written[d.Name] == fp {
				continue
			}
			if err := upsertSyncTarget(ctx, targets, r.cfg.Name, d); err != nil {
				if ctx.Err() == nil {
					r.log.Warn("updating a SyncTarget", "destination", d.Name, "error", err)
				}
				continue
			}
			written[d.Name] = fp
		}
		select {
		case <-ctx.Done():
			return nil
		case <-changed:
		}
	}
}

// fingerprint is what a SyncTarget shows of a destination: its path,
// connectivity and labels.
func fingerprint(d wire.Destination) string {
	keys := make([]string, 0, len(d.Labels))
	for k := range d.Labels {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var b strings.Builder
	fmt.Fprintf(&b, "%s|%t", strings.Join(d.Path, "/"), d.Connected)
	for _, k := range keys {
		fmt.Fprintf(&b, "|%s=%s", k, d.Labels[k])
	}
	return b.String()
}

// upsertSyncTarget writes one destination's SyncTarget: labels from the
// announcement, status from its path and link state. lastSeen is when the
// root learned the state it shows: for a connected destination, when it
// (re)connected or changed.
func upsertSyncTarget(ctx context.Context, c dynamic.NamespaceableResourceInterface, rootName string, d wire.Destination) error {
	status := map[string]any{
		"path":      strings.Join(append([]string{rootName}, d.Path...), "/"),
		"connected": d.Connected,
	}
	if d.Connected {
		status["lastSeen"] = time.Now().UTC().Format(time.RFC3339)
	} else if d.LastSeen > 0 {
		status["lastSeen"] = time.Unix(0, d.LastSeen).UTC().Format(time.RFC3339)
	}
	labels := map[string]any{}
	for k, v := range d.Labels {
		labels[k] = v
	}
	cur, err := c.Get(ctx, d.Name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		obj := &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": "edge.canopy.dev/v1alpha1", "kind": "SyncTarget",
			"metadata": map[string]any{"name": d.Name, "labels": labels},
			"spec":     map[string]any{},
		}}
		if cur, err = c.Create(ctx, obj, metav1.CreateOptions{}); err != nil {
			return err
		}
	} else if err != nil {
		return err
	} else {
		cur.Object["metadata"].(map[string]any)["labels"] = labels
		if cur, err = c.Update(ctx, cur, metav1.UpdateOptions{}); err != nil {
			return err
		}
	}
	cur.Object["status"] = status
	_, err = c.UpdateStatus(ctx, cur, metav1.UpdateOptions{})
	return err
}
