package server

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/canopy-dev/canopy/consensus"
	"github.com/canopy-dev/canopy/relay/kubeapi"
	"github.com/canopy-dev/canopy/relay/session"
	"github.com/canopy-dev/canopy/relay/store"
	"github.com/canopy-dev/canopy/relay/tree"
)

// reportSet holds a root's children's reports in memory, out of the log
// (DESIGN.md section 2: reported state is soft). Each replica's Collectors
// write the reports of the children linked to it into its local store.
// With replicas, every follower mirrors its local store to the leader
// (pump, over consensus.Node.Deliver: a snapshot when a leader is elected,
// then the latest state of each changed key), and the leader reads a
// child's reports from the store of the replica that the child's link
// record names (session.LinkReplica): its own, or that replica's mirror.
// A child that moved between replicas is so counted once.
type reportSet struct {
	self  string       // this replica's name
	local *store.Store // the reports of the children linked here
	hard  *store.Store // the replicated store (spaces, link records)
	ha    bool
	log   *slog.Logger

	mu      sync.Mutex
	mirrors map[string]*mirror // on the leader: other replicas' reports
	term    time.Time          // when this replica last became leader (or opened)
	ready   atomic.Bool        // ready latched for this term
	changed chan struct{}      // signalled when any report store changes
}

// mirror is the leader's copy of another replica's local report store,
// as of one pump session of that replica.
type mirror struct {
	session string
	st      *store.Store
}

func newReportSet(self string, hard *store.Store, ha bool, log *slog.Logger) *reportSet {
	return &reportSet{
		self: self, hard: hard, ha: ha, log: log,
		local:   newReportStore(),
		mirrors: map[string]*mirror{},
		term:    time.Now(),
		changed: make(chan struct{}, 1),
	}
}

// newReportStore returns an empty store in memory for reports.
func newReportStore() *store.Store {
	return store.New(store.Options{Fields: withDestinations(kubeapi.FieldsFor)})
}

func (rs *reportSet) close() {
	rs.local.Close()
	rs.mu.Lock()
	defer rs.mu.Unlock()
	for _, m := range rs.mirrors {
		m.st.Close()
	}
	rs.mirrors = map[string]*mirror{}
}

// signal notes a change of some report store.
func (rs *reportSet) signal() {
	select {
	case rs.changed <- struct{}{}:
	default:
	}
}

// Changed receives after a report store changed, or a child's link moved
// to another replica (placement.Config.ReportsChanged).
func (rs *reportSet) Changed() <-chan struct{} { return rs.changed }

// Store returns the store that holds the reports of space (a
// reports-<child> space) for this replica to read: its local store, or on
// the leader the mirror of the replica the child is linked to. Nil when
// that replica's reports are not here (yet).
func (rs *reportSet) Store(space string) *store.Store {
	if !rs.ha {
		return rs.local
	}
	child, _ := strings.CutPrefix(space, ReportsSpace(""))
	owner, err := session.LinkReplica(rs.hard, DownsyncSpace, child)
	if err != nil || owner == "" || owner == rs.self {
		return rs.local
	}
	rs.mu.Lock()
	defer rs.mu.Unlock()
	if m := rs.mirrors[owner]; m != nil {
		return m.st
	}
	return nil
}

// beginTerm starts a term as leader: the mirrors of an earlier term are
// dropped (every follower sends its reports again to this leader), and
// reported state waits again until the reports are in (Ready).
func (rs *reportSet) beginTerm() {
	rs.mu.Lock()
	for _, m := range rs.mirrors {
		m.st.Close()
	}
	rs.mirrors = map[string]*mirror{}
	rs.term = time.Now()
	rs.ready.Store(false)
	rs.mu.Unlock()
	rs.signal()
}

// Ready reports whether the reports at hand are complete enough to
// rewrite reported state from (placement.Config.ReportsReady): every
// child with a reports space has reported to the replica it is linked to
// since that replica opened, and that replica's reports reached this one;
// or summaryGrace has passed since this replica opened or became leader
// (a child that stays away no longer counts). Once true it stays true for
// the term.
func (rs *reportSet) Ready() bool {
	if rs.ready.Load() {
		return true
	}
	rs.mu.Lock()
	term := rs.term
	rs.mu.Unlock()
	if time.Since(term) < summaryGrace {
		spaces, err := rs.hard.List(store.ListOptions{Resource: kubeapi.SpaceResource})
		if err != nil {
			return false
		}
		for _, sp := range spaces.Items {
			if !strings.HasPrefix(sp.Key.Name, ReportsSpace("")) {
				continue
			}
			st := rs.Store(sp.Key.Name)
			if st == nil {
				return false
			}
			if in, err := tree.Collected(st, sp.Key.Name); err != nil || !in {
				return false
			}
		}
	}
	rs.ready.Store(true)
	return true
}

// follow signals Changed on every change of the local store and, with
// replicas, of the link records, until ctx is done.
func (rs *reportSet) follow(ctx context.Context) {
	var wg sync.WaitGroup
	watch := func(st *store.Store, opts store.WatchOptions) {
		defer wg.Done()
		for ctx.Err() == nil {
			opts.Since = st.Revision()
			w, err := st.Watch(ctx, opts)
			if err != nil {
				return // closed
			}
			rs.signal() // what changed before the watch
			for range w.Events() {
				rs.signal()
			}
			w.Stop()
			if errors.Is(w.Err(), store.ErrClosed) {
				return
			}
		}
	}
	wg.Add(1)
	go watch(rs.local, store.WatchOptions{})
	if rs.ha {
		wg.Add(1)
		go watch(rs.hard, store.WatchOptions{Resource: session.LinkResource})
	}
	wg.Wait()
}

// reportBatch is what a follower's pump sends the leader: its whole local
// store (Reset, a store snapshot) or the latest state of changed keys.
type reportBatch struct {
	Replica string      `json:"replica"`
	Session string      `json:"session"`
	Reset   []byte      `json:"reset,omitempty"`
	Puts    []reportPut `json:"puts,omitempty"`
	Deletes []store.Key `json:"deletes,omitempty"`
}

type reportPut struct {
	Key  store.Key `json:"key"`
	Data []byte    `json:"data"`
}

// errUnknownSession: a batch of a session this leader has no snapshot of
// (it became leader since, or dropped the mirror): the pump sends a
// snapshot again.
var errUnknownSession = errors.New("reports: unknown session, send everything again")

// deliver applies a pump's batch on the leader (consensus.Config.Deliver).
func (rs *reportSet) deliver(ctx context.Context, payload []byte) error {
	var b reportBatch
	if err := json.Unmarshal(payload, &b); err != nil {
		return fmt.Errorf("reports: batch: %w", err)
	}
	if b.Replica == "" || b.Replica == rs.self {
		return fmt.Errorf("reports: a batch from %q", b.Replica)
	}
	defer rs.signal()
	rs.mu.Lock()
	defer rs.mu.Unlock()
	m := rs.mirrors[b.Replica]
	if b.Reset != nil {
		st := newReportStore()
		if err := st.Restore(bytes.NewReader(b.Reset)); err != nil {
			st.Close()
			return err
		}
		if m != nil {
			m.st.Close()
		}
		m = &mirror{session: b.Session, st: st}
		rs.mirrors[b.Replica] = m
	}
	if m == nil || m.session != b.Session {
		return errUnknownSession
	}
	var ops []store.Op
	for _, p := range b.Puts {
		op := store.Op{Type: store.OpCreate, Key: p.Key, Data: p.Data}
		if _, err := m.st.Get(p.Key); err == nil {
			op.Type = store.OpUpdate
		}
		ops = append(ops, op)
	}
	for _, k := range b.Deletes {
		if _, err := m.st.Get(k); err == nil {
			ops = append(ops, store.Op{Type: store.OpDelete, Key: k})
		}
	}
	if len(ops) == 0 {
		return nil
	}
	_, err := m.st.Txn(ctx, ops...)
	return err
}

// pumpInterval gathers the changes of a follower's local store into one
// batch to the leader. pumpKeepalive is how long a pump stays silent at
// most: an empty batch tells it whether the leader still holds its session
// (a leader restarted under the same name, or one that started a new
// term, does not).
const (
	pumpInterval  = 50 * time.Millisecond
	pumpKeepalive = time.Second
)

// pump mirrors this replica's local store to the leader while another
// replica leads, until ctx is done: a snapshot first, then the latest state
// of every changed key, every pumpInterval at most. A new leader, or a
// batch the leader refuses, starts a new session with a new snapshot.
func (rs *reportSet) pump(ctx context.Context, node *consensus.Node) {
	for ctx.Err() == nil {
		leader, ok := node.Leader()
		if !ok || leader.ID == rs.self {
			select {
			case <-ctx.Done():
			case <-time.After(pumpInterval):
			}
			continue
		}
		err := rs.pumpSession(ctx, node, leader.ID)
		if ctx.Err() == nil && err != nil {
			rs.log.Debug("reports: mirroring to the leader again", "leader", leader.ID, "reason", err)
			select {
			case <-ctx.Done():
			case <-time.After(pumpInterval):
			}
		}
	}
}

// errLeaderChanged ends a pump session.
var errLeaderChanged = errors.New("the leader changed")

func (rs *reportSet) pumpSession(ctx context.Context, node *consensus.Node, leader string) error {
	id := make([]byte, 8)
	_, _ = rand.Read(id)
	session := hex.EncodeToString(id)
	// Changes are marked from here on, then read at their latest state:
	// a change made before the snapshot is sent again, to the same effect.
	w, err := rs.local.Watch(ctx, store.WatchOptions{Since: rs.local.Revision()})
	if err != nil {
		return err
	}
	defer w.Stop()
	snap, err := rs.local.Snapshot()
	if err != nil {
		return err
	}
	var buf bytes.Buffer
	_, err = snap.WriteTo(&buf)
	snap.Release()
	if err != nil {
		return err
	}
	send := func(b reportBatch) error {
		b.Replica, b.Session = rs.self, session
		payload, err := json.Marshal(b)
		if err != nil {
			return err
		}
		dctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		defer cancel()
		took, err := node.Deliver(dctx, payload)
		if err == nil && took != leader {
			return errLeaderChanged
		}
		return err
	}
	if err := send(reportBatch{Reset: buf.Bytes()}); err != nil {
		return err
	}
	sent := time.Now()
	dirty := map[store.Key]bool{}
	tick := time.NewTicker(pumpInterval)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case ev, ok := <-w.Events():
			if !ok {
				return w.Err()
			}
			if ev.Object != nil {
				dirty[ev.Object.Key] = true
			}
		case <-tick.C:
			if l, ok := node.Leader(); !ok || l.ID != leader {
				return errLeaderChanged
			}
			if len(dirty) == 0 && time.Since(sent) < pumpKeepalive {
				continue
			}
			var b reportBatch
			for k := range dirty {
				switch o, err := rs.local.Get(k); {
				case errors.Is(err, store.ErrNotFound):
					b.Deletes = append(b.Deletes, k)
				case err != nil:
					return err
				default:
					b.Puts = append(b.Puts, reportPut{Key: k, Data: o.Data})
				}
			}
			if err := send(b); err != nil {
				return err
			}
			sent = time.Now()
			clear(dirty)
		}
	}
}
