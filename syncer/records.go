package syncer

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	utiljson "k8s.io/apimachinery/pkg/util/json"

	"github.com/canopy-dev/canopy/relay/store"
)

// AppliedResource holds, in the system space ("") of the edge's store, one
// record per object the syncer manages: what it is in the cluster, whether
// the syncer created it (namespaces), and what was last applied. A
// restarted syncer reads them back, so it knows what it manages (and what
// to delete) without asking the cluster, and does not re-apply what has
// not changed.
var AppliedResource = store.Resource{Group: "syncer.canopy.dev", Resource: "applied"}

// maxOps bounds the ops of one store Txn.
const maxOps = 256

// ref names an object in the cluster, whatever its version.
type ref struct {
	Group, Resource, Namespace, Name string
}

// record is one managed object, as stored. Its members are in the order
// of their JSON names: the store then sets its resourceVersion without
// decoding and encoding the record again.
type record struct {
	APIVersion string `json:"apiVersion"`
	// Object is the object last applied, Applied the cluster's answer
	// projected on Object's fields: what the cluster holds while nobody
	// else changes a field the syncer set (drift).
	Applied map[string]any `json:"applied,omitempty"`
	// Group, Version, Resource, Namespace and Name are the object in the
	// cluster.
	Group string `json:"group,omitempty"`
	// Hash is that of the last object applied with success ("" until
	// then: the record is written before the first apply, so that a crash
	// never leaves a labelled object the syncer does not know of).
	Hash string `json:"hash,omitempty"`
	// Key is the object's inbox key (Space empty).
	Key       store.Key      `json:"key"`
	Kind      string         `json:"kind"`
	Metadata  recordMetadata `json:"metadata"`
	Name      string         `json:"name"`
	Namespace string         `json:"namespace,omitempty"`
	Object    map[string]any `json:"object,omitempty"`
	Resource  string         `json:"resource"`
	Version   string         `json:"version"`

	revision int64 // of the stored version; 0: not stored yet
	dirty    bool  // changed since stored
}

type recordMetadata struct {
	Name            string `json:"name"`
	ResourceVersion string `json:"resourceVersion,omitempty"`
}

func (r *record) gvr() schema.GroupVersionResource {
	return schema.GroupVersionResource{Group: r.Group, Version: r.Version, Resource: r.Resource}
}

func (r *record) ref() ref {
	return ref{Group: r.Group, Resource: r.Resource, Namespace: r.Namespace, Name: r.Name}
}

func (r *record) applied() bool { return r.Hash != "" }

func (r *record) object() *unstructured.Unstructured {
	if r.Object == nil {
		return nil
	}
	return &unstructured.Unstructured{Object: r.Object}
}

// recordName is the store name of the record of inbox key k.
func recordName(k store.Key) string {
	h := sha256.Sum256([]byte(k.Resource.Group + "\x00" + k.Resource.Resource + "\x00" + k.Namespace + "\x00" + k.Name))
	return hex.EncodeToString(h[:16])
}

func (s *Syncer) recordKey(k store.Key) store.Key {
	return store.Key{Resource: AppliedResource, Name: recordName(k)}
}

// loadRecords reads every record of the store.
func loadRecords(st *store.Store) (map[store.Key]*record, error) {
	lr, err := st.List(store.ListOptions{Space: "", Resource: AppliedResource})
	if err != nil {
		return nil, err
	}
	out := make(map[store.Key]*record, len(lr.Items))
	for _, o := range lr.Items {
		var r record
		if err := utiljson.Unmarshal(o.Data, &r); err != nil {
			return nil, fmt.Errorf("syncer: record %s: %w", o.Key.Name, err)
		}
		r.revision = o.Revision
		out[r.Key] = &r
	}
	return out, nil
}

// saveRecords writes the dirty records among recs and deletes those of
// gone, maxOps per Txn.
func (s *Syncer) saveRecords(ctx context.Context, recs []*record, gone []*record) error {
	var ops []store.Op
	var written []*record
	flush := func() error {
		if len(ops) == 0 {
			return nil
		}
		res, err := s.cfg.Store.Txn(ctx, ops...)
		if err != nil {
			return fmt.Errorf("syncer: saving %d records: %w", len(ops), err)
		}
		for i, r := range written {
			if r != nil {
				r.revision, r.dirty = res.Objects[i].Revision, false
			}
		}
		ops, written = ops[:0], written[:0]
		return nil
	}
	for _, r := range recs {
		if !r.dirty {
			continue
		}
		r.APIVersion, r.Kind, r.Metadata = "syncer.canopy.dev/v1alpha1", "Applied", recordMetadata{Name: recordName(r.Key)}
		data, err := json.Marshal(r)
		if err != nil {
			return err
		}
		op := store.Op{Type: store.OpCreate, Key: s.recordKey(r.Key), Data: data}
		if r.revision != 0 {
			op.Type = store.OpUpdate
		}
		ops, written = append(ops, op), append(written, r)
		if len(ops) >= maxOps {
			if err := flush(); err != nil {
				return err
			}
		}
	}
	for _, r := range gone {
		if r.revision == 0 {
			continue
		}
		ops, written = append(ops, store.Op{Type: store.OpDelete, Key: s.recordKey(r.Key)}), append(written, nil)
		if len(ops) >= maxOps {
			if err := flush(); err != nil {
				return err
			}
		}
	}
	return flush()
}

// isStoreClosed reports a store that is shutting down under the syncer.
func isStoreClosed(err error) bool { return errors.Is(err, store.ErrClosed) }
