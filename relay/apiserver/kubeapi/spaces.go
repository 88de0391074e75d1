package kubeapi

import (
	"context"
	"encoding/json"
	"errors"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/canopy-dev/canopy/relay/layout"
	"github.com/canopy-dev/canopy/relay/store"
)

// EnsureSpace creates space name of the given kind, with its system
// namespaces and default ClusterRoles (spaceContents), unless it exists.
// It is idempotent.
func (s *Server) EnsureSpace(ctx context.Context, name, kind string) error {
	now := metav1.NewTime(time.Now())
	rec := map[string]any{
		"apiVersion": "canopy.dev/v1alpha1", "kind": "Space",
		"metadata": map[string]any{"name": name, "uid": newUID(), "creationTimestamp": now.UTC().Format(time.RFC3339)},
		"spec":     map[string]any{"kind": kind},
	}
	data, err := json.Marshal(rec)
	if err != nil {
		return err
	}
	contents, err := spaceContents(name, kind, now.Time)
	if err != nil {
		return err
	}
	ops := append([]store.Op{{Type: store.OpCreate, Key: store.Key{Resource: layout.SpaceResource, Name: name}, Data: data}}, contents...)
	_, err = s.store.Txn(ctx, ops...)
	switch {
	case !errors.Is(err, store.ErrExists):
		return err
	case kind != layout.SpaceKindSystem:
		return nil
	}
	// The system space exists: its namespace comes back if it was
	// deleted, as kube's own do, or is added to a space made before it.
	for _, op := range contents {
		if _, err := s.store.Get(op.Key); op.Key.Resource.Resource != "namespaces" || err == nil {
			continue
		}
		if _, err := s.store.Txn(ctx, op); err != nil && !errors.Is(err, store.ErrExists) {
			return err
		}
	}
	return nil
}

// spaceContents are the creates of what a new space name of kind starts
// with: the system namespaces and (but for mailboxes) the default
// ClusterRoles; the system space has only layout.SystemSecretsNamespace
// and cluster-admin.
func spaceContents(name, kind string, at time.Time) ([]store.Op, error) {
	created := at.UTC().Format(time.RFC3339)
	var ops []store.Op
	namespaces := layout.SystemNamespaces
	if kind == layout.SpaceKindSystem {
		namespaces = []string{layout.SystemSecretsNamespace}
	}
	for _, ns := range namespaces {
		obj := map[string]any{
			"apiVersion": "v1", "kind": "Namespace",
			"metadata": map[string]any{
				"name": ns, "uid": newUID(), "creationTimestamp": created,
				"labels": map[string]any{"kubernetes.io/metadata.name": ns},
			},
			"spec":   map[string]any{"finalizers": []any{"kubernetes"}},
			"status": map[string]any{"phase": "Active"},
		}
		b, err := json.Marshal(obj)
		if err != nil {
			return nil, err
		}
		ops = append(ops, store.Op{Type: store.OpCreate, Key: store.Key{Space: name, Resource: store.Resource{Resource: "namespaces"}, Name: ns}, Data: b})
	}
	roles := defaultClusterRoles()
	switch kind {
	case layout.SpaceKindMailbox:
		// A mailbox holds exactly what its child receives; only the admin
		// writes there, so it needs no roles (and must not ship them).
		roles = nil
	case layout.SpaceKindSystem:
		roles = roles[:1] // cluster-admin: the others grant workloads
	}
	for _, cr := range roles {
		m, err := toUnstructuredMap(cr)
		if err != nil {
			return nil, err
		}
		md := m["metadata"].(map[string]any)
		md["uid"], md["creationTimestamp"] = newUID(), created
		b, err := json.Marshal(m)
		if err != nil {
			return nil, err
		}
		ops = append(ops, store.Op{Type: store.OpCreate, Key: store.Key{Space: name, Resource: store.Resource{Group: "rbac.authorization.k8s.io", Resource: "clusterroles"}, Name: cr.Name}, Data: b})
	}
	return ops, nil
}

// Spaces lists the names of all spaces.
func (s *Server) Spaces() ([]string, error) {
	list, err := s.store.List(store.ListOptions{Space: "", Resource: layout.SpaceResource})
	if err != nil {
		return nil, err
	}
	out := make([]string, 0, len(list.Items))
	for _, it := range list.Items {
		out = append(out, it.Key.Name)
	}
	return out, nil
}
