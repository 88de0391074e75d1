package session

import (
	"context"
	"fmt"
	"sync"
	"testing"

	"github.com/canopy-dev/canopy/relay/transport/mailbox"
)

// Link records of children that connect together are written in a few
// Txns, not one each, and each record ends as its child's last state
// asked for.
func TestSaveLinkBatches(t *testing.T) {
	st := newStore(t)
	d := NewDownlink(DownlinkConfig{Name: "root", Store: st, Mailboxes: mailbox.New(mailbox.Config{Store: st, Space: downsync}), Logger: quiet})
	ctx := context.Background()
	before := st.Revision()
	const n = 1000
	var wg sync.WaitGroup
	errs := make(chan error, 2*n)
	for i := range n {
		wg.Go(func() {
			child := fmt.Sprint("e", i)
			errs <- d.saveLink(ctx, child, true)
			if i%2 == 0 {
				errs <- d.saveLink(ctx, child, false)
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	if txns := st.Revision() - before; txns >= n/2 {
		t.Errorf("%d Txns for %d children's links, want them batched", txns, n)
	}
	for i := range n {
		rec, o, err := readLink(st, linkKey(downsync, fmt.Sprint("e", i)))
		if err != nil || o == nil {
			t.Fatalf("e%d: record %v, %v", i, o, err)
		}
		if want := i%2 != 0; rec.Connected != want || rec.Replica != "root" {
			t.Errorf("e%d: connected %v replica %q, want %v and root", i, rec.Connected, rec.Replica, want)
		}
	}
	// Nothing to write: no Txn at all.
	rev := st.Revision()
	if err := d.saveLink(ctx, "e1", true); err != nil || st.Revision() != rev {
		t.Errorf("rewriting an unchanged record: %v, revision %d → %d", err, rev, st.Revision())
	}
	// A child unknown to this replica going down writes nothing either.
	if err := d.saveLink(ctx, "never-seen", false); err != nil || st.Revision() != rev {
		t.Errorf("recording an unknown link down: %v, revision %d → %d", err, rev, st.Revision())
	}
}
