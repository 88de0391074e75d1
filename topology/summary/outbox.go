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
// race with another writer is left to the next merge.
type Outbox struct {
	Store *store.Store
	Space string
}

// outboxOps bounds the ops of one Txn.
const outboxOps = 256

// Write implements Sink.
func (o Outbox) Write(ctx context.Context, m reports.Merged) error {
	want, err := m.Encoded()
	if err != nil {
		return err
	}
	cur, err := o.Store.List(store.ListOptions{Space: o.Space})
	if err != nil {
		return err
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
		case !bytes.Equal(reports.Canonical(obj.Data), reports.Canonical(data)):
			ops = append(ops, store.Op{Type: store.OpUpdate, Key: sk, Data: data, ExpectRevision: obj.Revision})
		}
	}
	for len(ops) > 0 {
		n := min(len(ops), outboxOps)
		if _, err := o.Store.Txn(ctx, ops[:n]...); err != nil && !errors.Is(err, store.ErrConflict) {
			return err
		}
		ops = ops[n:]
	}
	return nil
}
