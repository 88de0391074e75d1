package summary

import (
	"bytes"
	"context"
	"errors"

	"github.com/canopy-dev/canopy/relay/store"
	"github.com/canopy-dev/canopy/topology/reports"
)

// Outbox is the Sink of a tier that reports up (a region): it keeps Space
// of Store, its outbox, equal to the merge of its children's reports, in
// Txns of at most outboxOps, writing only what differs (a key whose
// canonical data is unchanged is not written again). A write that lost a
// race with another writer is left to the next merge. It remembers what
// it wrote, by revision, so that a merge compares a report it wrote with
// its new form byte for byte, without encoding either again.
type Outbox struct {
	Store *store.Store
	Space string

	written map[store.Key]outboxVersion // by key without the space
}

// outboxVersion is what Outbox wrote to a key, and at which revision.
type outboxVersion struct {
	rev  int64
	data []byte
}

// outboxOps bounds the ops of one Txn.
const outboxOps = 256

// Write implements Sink.
func (o *Outbox) Write(ctx context.Context, m reports.Merged) error {
	want, err := m.Encoded()
	if err != nil {
		return err
	}
	cur, err := o.Store.List(store.ListOptions{Space: o.Space})
	if err != nil {
		return err
	}
	if o.written == nil {
		o.written = map[store.Key]outboxVersion{}
	}
	var ops []store.Op
	have := map[store.Key]*store.Object{}
	for _, obj := range cur.Items {
		k := obj.Key
		k.Space = ""
		have[k] = obj
		if _, ok := want[k]; !ok {
			ops = append(ops, store.Op{Type: store.OpDelete, Key: obj.Key, ExpectRevision: obj.Revision})
		}
	}
	for _, k := range reports.SortedKeys(want) {
		data := want[k]
		sk := k
		sk.Space = o.Space
		switch obj := have[k]; {
		case obj == nil:
			ops = append(ops, store.Op{Type: store.OpCreate, Key: sk, Data: data})
		case o.same(k, obj, data):
		default:
			ops = append(ops, store.Op{Type: store.OpUpdate, Key: sk, Data: data, ExpectRevision: obj.Revision})
		}
	}
	for len(ops) > 0 {
		n := min(len(ops), outboxOps)
		res, err := o.Store.Txn(ctx, ops[:n]...)
		switch {
		case err == nil:
			for _, op := range ops[:n] {
				k := op.Key
				k.Space = ""
				if op.Type == store.OpDelete {
					delete(o.written, k)
				} else {
					o.written[k] = outboxVersion{res.Revision, op.Data}
				}
			}
		case !errors.Is(err, store.ErrConflict):
			return err
		}
		ops = ops[n:]
	}
	for k := range o.written {
		if _, ok := have[k]; !ok {
			if _, ok := want[k]; !ok {
				delete(o.written, k)
			}
		}
	}
	return nil
}

// same reports whether obj, the outbox's version of k, holds data: byte
// for byte if it is the version this Outbox wrote, else in canonical form.
func (o *Outbox) same(k store.Key, obj *store.Object, data []byte) bool {
	if w, ok := o.written[k]; ok && w.rev == obj.Revision {
		return bytes.Equal(w.data, data)
	}
	return bytes.Equal(reports.Canonical(obj.Data), reports.Canonical(data))
}
