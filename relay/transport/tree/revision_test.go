package tree

import (
	"context"
	"fmt"
	"io"
	"testing"
	"time"

	"github.com/canopy-dev/canopy/relay/store"
	"github.com/canopy-dev/canopy/relay/transport/internal/wire"
)

// A Progress covers a revision only once every key that revision changed
// has been sent: one Txn changes many keys at one revision (the root's
// placement writes a whole workload so), and a child acknowledging the
// revision after a part of them would resume past the rest and never get
// it. The same holds for a Reporter's Progress (a syncer's flush writes
// many outbox keys in one Txn).
func TestProgressCoversWholeRevision(t *testing.T) {
	for _, tc := range []struct {
		name  string
		serve func(st *store.Store, space string, rw io.ReadWriter) error
	}{
		{"downsync", func(st *store.Store, space string, rw io.ReadWriter) error {
			return NewSender(st, space, SenderOptions{}).Serve(context.Background(), rw, 0)
		}},
		{"upsync", func(st *store.Store, space string, rw io.ReadWriter) error {
			return NewReporter(st, space, ReporterOptions{}).Serve(context.Background(), rw, 0)
		}},
	} {
		t.Run(tc.name, func(t *testing.T) { testProgressCoversWholeRevision(t, tc.serve) })
	}
}

func testProgressCoversWholeRevision(t *testing.T, serve func(*store.Store, string, io.ReadWriter) error) {
	const keys, rounds = 40, 60
	parent := newStore(t, store.Options{})
	p := newPipe()
	t.Cleanup(p.close)
	go func() { _ = serve(parent, mailbox, p.parent) }()
	// A Progress that never comes fails the read, not the test binary.
	if err := p.child.SetReadDeadline(time.Now().Add(waitFor)); err != nil {
		t.Fatal(err)
	}
	r := wire.NewReader(p.child, nil)
	next := func() wire.Message {
		t.Helper()
		m, err := r.Read()
		if err != nil {
			t.Fatalf("reading the Sender: %v", err)
		}
		return m
	}
	for m := next(); ; m = next() {
		if _, ok := m.(*wire.ResyncEnd); ok {
			break
		}
	}
	ops := make([]store.Op, keys)
	for round := range rounds {
		for i := range ops {
			typ := store.OpUpdate
			if round == 0 {
				typ = store.OpCreate
			}
			name := fmt.Sprint("o", i)
			ops[i] = store.Op{Type: typ, Key: key(mailbox, "ns", name), Data: body(name, fmt.Sprint(round), 50)}
		}
		res, err := parent.Txn(context.Background(), ops...)
		if err != nil {
			t.Fatal(err)
		}
		sent := map[string]bool{}
		for {
			switch m := next().(type) {
			case *wire.Put:
				if m.Revision == uint64(res.Revision) {
					sent[m.Key.Name] = true
				}
				continue
			case *wire.Report:
				if m.Seq == uint64(res.Revision) {
					sent[m.Key.Name] = true
				}
				continue
			case *wire.Progress:
				if m.Revision < uint64(res.Revision) {
					continue
				}
				if len(sent) != keys {
					t.Fatalf("round %d: Progress(%d) after %d of the %d keys written at revision %d",
						round, m.Revision, len(sent), keys, res.Revision)
				}
			default:
				t.Fatalf("round %d: unexpected %v", round, m.Type())
			}
			break
		}
	}
}
