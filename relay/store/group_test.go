package store

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
)

// gatedLog applies proposals through a MemLog, each only once the test
// lets it through, and counts them.
type gatedLog struct {
	inner Log
	gate  chan struct{}
	mu    sync.Mutex
	n     int
}

func (l *gatedLog) Propose(ctx context.Context, cmd []byte) (any, error) {
	<-l.gate
	l.mu.Lock()
	l.n++
	l.mu.Unlock()
	return l.inner.Propose(ctx, cmd)
}

// Bulk Txns that queue while proposals are in flight go together, as group
// commands, each Txn still succeeding or failing on its own: of many
// creates of one key exactly one succeeds, and a conflict fails alone.
func TestGroupCommit(t *testing.T) {
	s := newStore(t, Options{})
	gl := &gatedLog{inner: NewMemLog(s), gate: make(chan struct{})}
	s.SetLog(gl)
	res := Resource{Resource: "things"}
	shared := key("s", res, "", "shared")

	const n = 200
	type answer struct {
		name string
		res  Result
		err  error
	}
	answers := make(chan answer, 3*n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			k := key("s", res, "", fmt.Sprintf("o%d", i))
			r, err := s.Txn(Bulk(context.Background()), Op{Type: OpCreate, Key: k, Data: body("", nil, i)})
			answers <- answer{k.Name, r, err}
		})
		wg.Go(func() {
			r, err := s.Txn(Bulk(context.Background()), Op{Type: OpCreate, Key: shared, Data: body("", nil, i)})
			answers <- answer{"shared", r, err}
		})
		wg.Go(func() {
			// Expects a revision no object has: always a conflict.
			k := key("s", res, "", fmt.Sprintf("o%d", i))
			_, err := s.Txn(Bulk(context.Background()), Op{Type: OpUpdate, Key: k, Data: body("", nil, 0), ExpectRevision: 1 << 40})
			answers <- answer{"conflict", Result{}, err}
		})
	}
	// Let everything queue behind the first proposals, then open the gate.
	close(gl.gate)
	wg.Wait()
	close(answers)

	created, sharedWins := 0, 0
	for a := range answers {
		switch a.name {
		case "conflict":
			if !errors.Is(a.err, ErrConflict) && !errors.Is(a.err, ErrNotFound) {
				t.Fatalf("conflicting update: %v", a.err)
			}
		case "shared":
			switch {
			case a.err == nil:
				sharedWins++
			case !errors.Is(a.err, ErrExists):
				t.Fatalf("create of the shared key: %v", a.err)
			}
		default:
			if a.err != nil {
				t.Fatalf("create %s: %v", a.name, a.err)
			}
			created++
			if got := a.res.Objects[0]; got.Key.Name != a.name || got.Revision != a.res.Revision {
				t.Fatalf("create %s answered with %s@%d", a.name, got.Key.Name, got.Revision)
			}
		}
	}
	if created != n || sharedWins != 1 {
		t.Fatalf("%d of %d creates, %d creates of the shared key succeeded (want 1)", created, n, sharedWins)
	}
	gl.mu.Lock()
	proposals := gl.n
	gl.mu.Unlock()
	if proposals >= 3*n {
		t.Fatalf("%d proposals for %d Txns: none went together", proposals, 3*n)
	}
	lr, err := s.List(ListOptions{Space: "s"})
	if err != nil || len(lr.Items) != n+1 {
		t.Fatalf("listed %d objects (%v), want %d", len(lr.Items), err, n+1)
	}
	t.Logf("%d Txns in %d proposals", 3*n, proposals)
}

// A Txn whose context ends while it waits in the queue is never proposed:
// it fails with the context's error and changes nothing.
func TestGroupCommitWithdrawn(t *testing.T) {
	s := newStore(t, Options{})
	res := Resource{Resource: "things"}
	// As if every proposer were busy: the next Txn stays queued.
	s.commits.mu.Lock()
	s.commits.proposing = maxProposing
	s.commits.mu.Unlock()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		_, err := s.Txn(Bulk(ctx), Op{Type: OpCreate, Key: key("s", res, "", "late"), Data: body("", nil, 0)})
		done <- err
	}()
	for queued := 0; queued == 0; {
		s.commits.mu.Lock()
		queued = len(s.commits.bulk)
		s.commits.mu.Unlock()
	}
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) || errors.Is(err, ErrOutcomeUnknown) {
		t.Fatalf("withdrawn Txn: %v, want context.Canceled alone", err)
	}
	s.commits.mu.Lock()
	s.commits.proposing = 0
	s.commits.mu.Unlock()
	if _, err := s.Txn(Bulk(context.Background()), Op{Type: OpCreate, Key: key("s", res, "", "next"), Data: body("", nil, 0)}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Get(key("s", res, "", "late")); !errors.Is(err, ErrNotFound) {
		t.Fatalf("the withdrawn Txn was applied: %v", err)
	}
	s.commits.mu.Lock()
	defer s.commits.mu.Unlock()
	if len(s.commits.bulk) != 0 {
		t.Fatalf("%d calls left in the queue", len(s.commits.bulk))
	}
}

// Bulk Txns (a relay's children's reports) queue while the proposals are
// busy; any other write is proposed at once, alone, and so never waits
// behind them.
func TestGroupCommitBulkQueues(t *testing.T) {
	s := newStore(t, Options{})
	res := Resource{Resource: "things"}
	s.commits.mu.Lock()
	s.commits.proposing = maxProposing // as if every proposer were busy
	s.commits.mu.Unlock()
	var wg sync.WaitGroup
	for i := range 3 {
		wg.Go(func() {
			_, _ = s.Txn(Bulk(context.Background()), Op{Type: OpCreate, Key: key("s", res, "", fmt.Sprint("report", i)), Data: body("", nil, i)})
		})
	}
	for queued := 0; queued < 3; {
		s.commits.mu.Lock()
		queued = len(s.commits.bulk)
		s.commits.mu.Unlock()
	}
	if _, err := s.Txn(context.Background(), Op{Type: OpCreate, Key: key("s", res, "", "user"), Data: body("", nil, 0)}); err != nil {
		t.Fatalf("the user's write behind queued reports: %v", err)
	}
	group := s.commits.take()
	if len(group) != 3 {
		t.Fatalf("group of %d, want the 3 reports", len(group))
	}
	for _, c := range group {
		c.done <- txnOutcome{err: errors.New("not proposed in this test")}
	}
	wg.Wait()
}
