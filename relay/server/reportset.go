package server

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/canopy-dev/canopy/consensus"
	"github.com/canopy-dev/canopy/relay/apiserver/kubeapi"
	"github.com/canopy-dev/canopy/relay/layout"
	"github.com/canopy-dev/canopy/relay/store"
	"github.com/canopy-dev/canopy/relay/transport/mailbox"
	"github.com/canopy-dev/canopy/relay/transport/session"
	"github.com/canopy-dev/canopy/topology/reports"
	"github.com/canopy-dev/canopy/topology/summary"
)

// reportSet holds a root's children's reports in memory, out of the log
// (DESIGN.md section 2: reported state is soft). Each replica's Collectors
// write the reports of the children linked to it into its local store.
// With replicas, every follower mirrors its local store to the leader
// (pump, over consensus.Node.Deliver: everything when a leader is elected,
// then the latest state of each changed key), and the leader reads a
// child's reports from the store of the replica that the child's link
// record names (session.LinkReplicaOf): its own, or that replica's mirror.
// A child that moved between replicas is so counted once.
type reportSet struct {
	self  string       // this replica's name
	local *store.Store // the reports of the children linked here
	hard  *store.Store // the replicated store (spaces, link records)
	ha    bool
	log   *slog.Logger

	// hold holds reported state back from when this replica opens or
	// becomes leader (beginTerm) until the children have reported again:
	// placement.Config.Hold.
	hold *summary.Hold

	mu      sync.Mutex
	mirrors map[string]*mirror // on the leader: other replicas' reports
	owners  map[string]owner   // by child: the replica its link record names
	changed chan struct{}      // signalled when any report store changes
}

// owner is the replica a child's link record names, decoded once per
// version of the record (Store runs for every child at every flush).
type owner struct {
	rev     int64
	replica string
}

// mirror is the leader's copy of another replica's local report store.
// A pump session fills next with everything (batches from Begin to
// Complete), which then replaces st; st serves meanwhile, so a follower
// that sends everything again never leaves its children uncounted.
type mirror struct {
	session string
	st      *store.Store // nil until a session completes
	next    *store.Store // being filled by session
}

func (m *mirror) close() {
	for _, st := range []*store.Store{m.st, m.next} {
		if st != nil {
			st.Close()
		}
	}
}

func newReportSet(self string, hard *store.Store, ha bool, log *slog.Logger) *reportSet {
	return &reportSet{
		self: self, hard: hard, ha: ha, log: log,
		local:   newReportStore(),
		mirrors: map[string]*mirror{},
		owners:  map[string]owner{},
		hold:    summary.NewHold(summaryGrace),
		changed: make(chan struct{}, 1),
	}
}

// reportHistory is the history of a store of reports: every watcher of
// one starts from its current revision (and starts again so when it falls
// behind), so history only covers a watch's start, while every kept
// event pins a version of a region's merged reports.
const reportHistory = 1024

// newReportStore returns an empty store in memory for reports.
func newReportStore() *store.Store {
	return store.New(store.Options{Fields: mailbox.Fields(kubeapi.FieldsFor), HistorySize: reportHistory})
}

func (rs *reportSet) close() {
	rs.local.Close()
	rs.mu.Lock()
	defer rs.mu.Unlock()
	for _, m := range rs.mirrors {
		m.close()
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
	child, _ := strings.CutPrefix(space, layout.ReportsSpace(""))
	o, err := rs.hard.Get(session.LinkKey(layout.DownsyncSpace, child))
	if err != nil {
		return rs.local // no link record: none but this replica's
	}
	rs.mu.Lock()
	defer rs.mu.Unlock()
	ow, ok := rs.owners[child]
	if !ok || ow.rev != o.Revision {
		ow.rev = o.Revision
		if ow.replica, err = session.LinkReplicaOf(o); err != nil {
			return rs.local
		}
		rs.owners[child] = ow
	}
	if ow.replica == "" || ow.replica == rs.self {
		return rs.local
	}
	if m := rs.mirrors[ow.replica]; m != nil && m.st != nil {
		return m.st
	}
	return nil
}

// beginTerm starts a term as leader: the mirrors of an earlier term are
// dropped (every follower sends its reports again to this leader), and
// reported state waits again until the reports are in (hold).
func (rs *reportSet) beginTerm() {
	rs.mu.Lock()
	for _, m := range rs.mirrors {
		m.close()
	}
	rs.mirrors = map[string]*mirror{}
	rs.hold.Reset()
	rs.mu.Unlock()
	rs.signal()
}

// spaces names the reports spaces the replicated store holds.
func (rs *reportSet) spaces() ([]string, error) {
	lr, err := rs.hard.List(store.ListOptions{Resource: layout.SpaceResource})
	if err != nil {
		return nil, err
	}
	var names []string
	for _, sp := range lr.Items {
		if strings.HasPrefix(sp.Key.Name, layout.ReportsSpace("")) {
			names = append(names, sp.Key.Name)
		}
	}
	return names, nil
}

// follow signals Changed on every change of the local store but the
// Relays (which no reported state depends on: relayView samples them) and,
// with replicas, of the link records, until ctx is done (or the stores
// close).
func (rs *reportSet) follow(ctx context.Context) error {
	var wg sync.WaitGroup
	watch := func(st *store.Store, opts store.WatchOptions) {
		defer wg.Done()
		for ctx.Err() == nil {
			// From the current revision, taken under the store's lock: no
			// history is needed, so the watch cannot have expired.
			w, err := st.Watch(ctx, opts)
			if err != nil {
				return // closed
			}
			rs.signal() // what changed before the watch
			for ev := range w.Events() {
				if ev.Object == nil || ev.Object.Key.Resource != reports.LinksResource {
					rs.signal()
				}
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
	<-ctx.Done() // a store closes only after the relay's parts have stopped
	return nil
}

// reportBatch is what a follower's pump sends the leader: the latest state
// of some keys of its local store. A session starts with everything, in
// batches from the one marked Begin to the one marked Complete.
type reportBatch struct {
	Replica  string      `json:"replica"`
	Session  string      `json:"session"`
	Begin    bool        `json:"begin,omitempty"`
	Complete bool        `json:"complete,omitempty"`
	Puts     []reportPut `json:"puts,omitempty"`
	Deletes  []store.Key `json:"deletes,omitempty"`
}

type reportPut struct {
	Key  store.Key `json:"key"`
	Data []byte    `json:"data"`
}

// errUnknownSession: a batch of a session this leader does not know
// (it became leader since, or dropped the mirror): the pump sends
// everything again.
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
	if b.Begin {
		if m == nil {
			m = &mirror{}
			rs.mirrors[b.Replica] = m
		}
		if m.next != nil {
			m.next.Close()
		}
		m.session, m.next = b.Session, newReportStore()
	}
	if m == nil || m.session != b.Session {
		return errUnknownSession
	}
	st := m.st
	if m.next != nil {
		st = m.next
	}
	var ops []store.Op
	for _, p := range b.Puts {
		op := store.Op{Type: store.OpCreate, Key: p.Key, Data: p.Data}
		if _, err := st.Get(p.Key); err == nil {
			op.Type = store.OpUpdate
		}
		ops = append(ops, op)
	}
	for _, k := range b.Deletes {
		if _, err := st.Get(k); err == nil {
			ops = append(ops, store.Op{Type: store.OpDelete, Key: k})
		}
	}
	if len(ops) > 0 {
		if _, err := st.Txn(ctx, ops...); err != nil {
			return err
		}
	}
	if b.Complete && m.next != nil {
		if m.st != nil {
			m.st.Close()
		}
		m.st, m.next = m.next, nil
	}
	return nil
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

// pumpBatchBytes bounds the objects of one batch, well under the forward
// protocol's 64 MiB. A variable for tests.
var pumpBatchBytes = 4 << 20

// pump mirrors this replica's local store to the leader while another
// replica leads, until ctx is done: everything first, then the latest state
// of every changed key, every pumpInterval at most. A new leader, or a
// batch the leader refuses, starts a new session that sends everything again.
func (rs *reportSet) pump(ctx context.Context, node *consensus.Node) error {
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
	return nil
}

// errLeaderChanged ends a pump session.
var errLeaderChanged = errors.New("the leader changed")

func (rs *reportSet) pumpSession(ctx context.Context, node *consensus.Node, leader string) error {
	id := make([]byte, 8)
	_, _ = rand.Read(id)
	session := hex.EncodeToString(id)
	// Changes are marked from here on, then read at their latest state:
	// a change made while everything is sent is sent again, to the same
	// effect.
	w, err := rs.local.Watch(ctx, store.WatchOptions{}) // from the current revision
	if err != nil {
		return err
	}
	defer w.Stop()
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
	if err := rs.sendAll(send); err != nil {
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

// sendAll sends everything in the local store, in batches of at most
// pumpBatchBytes, the first marked Begin and the last Complete: the
// Collectors' cursors (the system space), this replica's links
// (layout.LinksSpace) and every reports space the replicated store names.
func (rs *reportSet) sendAll(send func(reportBatch) error) error {
	spaces, err := rs.spaces()
	if err != nil {
		return err
	}
	names := append([]string{"", layout.LinksSpace}, spaces...)
	b, size := reportBatch{Begin: true}, 0
	for _, name := range names {
		lr, err := rs.local.List(store.ListOptions{Space: name})
		if err != nil {
			return err
		}
		for _, o := range lr.Items {
			if size > 0 && size+len(o.Data) > pumpBatchBytes {
				if err := send(b); err != nil {
					return err
				}
				b, size = reportBatch{}, 0
			}
			b.Puts = append(b.Puts, reportPut{Key: o.Key, Data: o.Data})
			size += len(o.Data)
		}
	}
	b.Complete = true
	return send(b)
}
