package store

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"
)

// Group commit. A root with thousands of children receives thousands of
// small, independent report Txns at once. Proposed one by one, each is a
// log entry of its own: its own trip through Raft, its own turn of the FSM.
// Bulk Txns (Bulk: the children's reports) therefore queue, and a few
// proposers send what has queued meanwhile as one group command: one log
// entry, one revision, in which each Txn still succeeds or fails on its
// own, as if it had been proposed alone. Every other Txn is proposed at
// once and alone, as before (the Log shares fsyncs among concurrent
// proposals), so it never waits behind queued reports, and keeps a
// revision of its own: the tree protocol reads a revision as one Txn (a
// Sender replaying from a child's cursor), and sharing one between a route
// record and the objects it moves lost objects at a child
// (TestRoutedRandomized).
//
// A group never holds two Txns that touch the same key, so a key changes
// at most once per revision, as the kube resourceVersion requires; a Txn
// that overlaps one already in the group waits for the next.

// Bounds of one group command, and how many proposals may be in flight.
const (
	maxGroupTxns  = 1024
	maxGroupBytes = 4 << 20
	maxProposing  = 4
)

// groupVersion leads a group command: the number of Txns, then each one's
// command (encodeCommand) as bytes.
const groupVersion = 2

// Bulk marks ctx's Txns as bulk writes, committed in groups (group.go). A
// relay marks its children's report writes so: ten thousand children
// reporting at once then make a few log entries, and do not delay a user's
// write, or the placement controller's, by the time the log takes to
// commit them one by one.
func Bulk(ctx context.Context) context.Context { return context.WithValue(ctx, bulkKey{}, true) }

type bulkKey struct{}

func isBulk(ctx context.Context) bool { b, _ := ctx.Value(bulkKey{}).(bool); return b }

// txnCall is one Txn waiting to be proposed or answered.
type txnCall struct {
	ctx  context.Context
	ops  []Op
	size int
	done chan txnOutcome // buffered: the answer never blocks
	// state: queued, proposed, or withdrawn by a caller whose ctx ended
	// first.
	state atomic.Int32
}

const (
	callQueued int32 = iota
	callProposed
	callWithdrawn
)

type txnOutcome struct {
	out any
	err error
}

// committer queues bulk Txns for the proposers.
type committer struct {
	mu        sync.Mutex
	bulk      []*txnCall
	proposing int
}

// submit queues c and starts a proposer if fewer than maxProposing run.
func (s *Store) submit(c *txnCall) {
	g := &s.commits
	g.mu.Lock()
	g.bulk = append(g.bulk, c)
	start := g.proposing < maxProposing
	if start {
		g.proposing++
	}
	g.mu.Unlock()
	if start {
		go s.propose()
	}
}

// propose proposes groups until the queue is empty.
func (s *Store) propose() {
	for {
		group := s.commits.take()
		if group == nil {
			return
		}
		l, err := s.openLog()
		if err != nil {
			for _, c := range group {
				c.done <- txnOutcome{err: err}
			}
			continue
		}
		if len(group) == 1 {
			c := group[0]
			out, err := l.Propose(c.ctx, encodeCommand(c.ops))
			c.done <- txnOutcome{out, err}
			continue
		}
		ctx, stop := groupContext(group)
		out, err := l.Propose(ctx, encodeGroup(group))
		stop()
		outs, ok := out.([]any)
		if err == nil && (!ok || len(outs) != len(group)) {
			err = fmt.Errorf("store: unexpected result %T of a group of %d", out, len(group))
		}
		for i, c := range group {
			if err != nil {
				c.done <- txnOutcome{err: err}
			} else {
				c.done <- txnOutcome{out: outs[i]}
			}
		}
	}
}

// take removes from the queue the next group to propose: queued Txns in
// order, leaving those that overlap the group's keys and those past its
// bounds. It returns nil, and counts the proposer out, when nothing is
// queued.
func (g *committer) take() []*txnCall {
	g.mu.Lock()
	defer g.mu.Unlock()
	var gr group
	g.bulk = gr.fill(g.bulk, maxGroupTxns)
	if len(gr.calls) == 0 {
		g.proposing--
	}
	return gr.calls
}

// group is a group command being gathered.
type group struct {
	calls []*txnCall
	keys  map[Key]struct{}
	size  int
}

// fill moves into the group what it can take of queue, in order, up to
// max Txns, and returns what is left of queue.
func (gr *group) fill(queue []*txnCall, max int) []*txnCall {
	kept := queue[:0]
	for _, c := range queue {
		if c.state.Load() == callWithdrawn {
			continue
		}
		n := len(gr.calls)
		wait := n == max || n > 0 && gr.size+c.size > maxGroupBytes || overlaps(gr.keys, c.ops)
		if wait || !c.state.CompareAndSwap(callQueued, callProposed) {
			kept = append(kept, c)
			continue
		}
		if gr.keys == nil {
			gr.keys = map[Key]struct{}{}
		}
		for _, op := range c.ops {
			gr.keys[op.Key] = struct{}{}
		}
		gr.calls = append(gr.calls, c)
		gr.size += c.size
	}
	clear(queue[len(kept):])
	return kept
}

func overlaps(keys map[Key]struct{}, ops []Op) bool {
	for _, op := range ops {
		if _, ok := keys[op.Key]; ok {
			return true
		}
	}
	return false
}

// groupContext returns the context of a group's proposal: done once every
// member's context is done, with the latest of their deadlines when they
// all have one. stop releases it.
func groupContext(group []*txnCall) (context.Context, func()) {
	var latest time.Time
	for _, c := range group {
		d, ok := c.ctx.Deadline()
		if !ok {
			latest = time.Time{}
			break
		}
		if d.After(latest) {
			latest = d
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	if !latest.IsZero() {
		ctx, cancel = context.WithDeadline(context.Background(), latest)
	}
	left := atomic.Int64{}
	left.Store(int64(len(group)))
	stops := make([]func() bool, 0, len(group))
	for _, c := range group {
		stops = append(stops, context.AfterFunc(c.ctx, func() {
			if left.Add(-1) == 0 {
				cancel()
			}
		}))
	}
	return ctx, func() {
		for _, s := range stops {
			s()
		}
		cancel()
	}
}

// encodeGroup encodes a group command.
func encodeGroup(group []*txnCall) []byte {
	n := 16
	for _, c := range group {
		n += c.size + 8
	}
	e := encoder{buf: make([]byte, 0, n)}
	e.byte(groupVersion)
	e.uvarint(uint64(len(group)))
	for _, c := range group {
		e.bytes(encodeCommand(c.ops))
	}
	return e.buf
}

// decodeGroup decodes the Txns of a group command (cmd without its
// version byte). A Txn that does not decode, or that touches a key an
// earlier Txn of the group touches, comes back as an error of its own.
func decodeGroup(cmd []byte) ([][]Op, []error, error) {
	d := decoder{buf: cmd}
	n := d.uvarint()
	if n > uint64(len(d.buf)) {
		d.fail()
	}
	var (
		txns [][]Op
		errs []error
	)
	if d.err == nil {
		txns, errs = make([][]Op, n), make([]error, n)
	}
	seen := map[Key]struct{}{}
	for i := range txns {
		sub := d.bytes()
		if d.err != nil {
			break
		}
		ops, err := decodeCommand(sub)
		if err == nil {
			err = validateOps(ops)
		}
		if err == nil && overlaps(seen, ops) {
			err = fmt.Errorf("%w: txn %d of a group touches a key an earlier one does", ErrInvalid, i)
		}
		if err != nil {
			errs[i] = err
			continue
		}
		for _, op := range ops {
			seen[op.Key] = struct{}{}
		}
		txns[i] = ops
	}
	if d.err == nil && len(d.buf) > 0 {
		return nil, nil, fmt.Errorf("%w: %d bytes after the group", ErrInvalid, len(d.buf))
	}
	if d.err != nil {
		return nil, nil, fmt.Errorf("%w: group command: %v", ErrInvalid, d.err)
	}
	return txns, errs, nil
}
