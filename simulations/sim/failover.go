package sim

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sync/errgroup"
	apierrors "k8s.io/apimachinery/pkg/api/errors"

	"github.com/canopy-dev/canopy/consensus"
	"github.com/canopy-dev/canopy/relay/layout"
	"github.com/canopy-dev/canopy/relay/pki"
	"github.com/canopy-dev/canopy/relay/server"
	"github.com/canopy-dev/canopy/relay/transport/tree"
)

// rootReplicas is how many replicas the root-failover scenario starts: the
// smallest Raft cluster that survives the loss of one.
const rootReplicas = 3

// FailoverResult is the root-failover scenario's outcome.
type FailoverResult struct {
	Replicas  int    `json:"replicas"`
	Killed    string `json:"killed"`     // the leader that was killed
	NewLeader string `json:"new_leader"` // the replica leading after the kill
	// ElectedS is kill → a surviving replica leads.
	ElectedS float64 `json:"elected_s"`
	// GapS is the failover gap: kill → the next write acknowledged by
	// the root's kube API (the user retrying on the next replica).
	GapS float64 `json:"gap_s"`
	// FailedAttempts is how many attempts of that write failed first.
	FailedAttempts int `json:"failed_attempts"`
	// Linked is how many of the root's children were linked to the
	// killed replica; RelinkedS is kill → each linked to a survivor
	// (-1: not seen).
	Linked    int     `json:"linked"`
	RelinkedS float64 `json:"relinked_s"`
	// ConvergedS is kill → every destination holds the write made during
	// the failover.
	ConvergedS float64 `json:"converged_s"`
	// RestartS is the killed replica's restart → it serves again;
	// CaughtUpS is restart → its downsync space hashes as the leader's
	// (-1: not within a minute); Rejoined says whether, after a rollout
	// through the three, it still matched the leader and was a voter of
	// the leader's configuration.
	RestartS  float64 `json:"restart_s"`
	CaughtUpS float64 `json:"caught_up_s"`
	Rejoined  bool    `json:"rejoined"`
	// LeaderChangesBefore and LeaderChangesAfter count the leader changes
	// seen (sampled every 100 ms) from the start to the kill, and from the
	// new leader to the end: replicas in a busy process miss heartbeats.
	LeaderChangesBefore int `json:"leader_changes_before"`
	LeaderChangesAfter  int `json:"leader_changes_after"`
}

// rootReplica is one replica of a replicated root, across a crash and a
// restart (same data directory and addresses).
type rootReplica struct {
	name     string
	cfg      server.Config
	linkAddr string

	mu     sync.Mutex // guards the fields below
	root   *server.Root
	stop   func() error  // cancels Serve and waits for it
	up     bool          // serving: not crashed nor stopped
	halted chan struct{} // closed once a crashed incarnation's Serve returned
	// incarnation counts starts.
	incarnation int
}

// running returns the replica's root while it serves, else nil.
func (rr *rootReplica) running() *server.Root {
	rr.mu.Lock()
	defer rr.mu.Unlock()
	if !rr.up {
		return nil
	}
	return rr.root
}

// openReplicas starts n root replicas on loopback (Raft, gossip and the
// kube API on TCP ports picked now, so that a restart finds the same
// addresses), sharing one PKI as `relay pki export | relay pki import`
// does, and waits for a leader, which becomes f.root.
func (f *fleet) openReplicas(ctx context.Context, n int) error {
	dirs := make([]string, n)
	for i := range n {
		dirs[i] = filepath.Join(f.dir, fmt.Sprintf("root-%d", i))
		if err := os.MkdirAll(dirs[i], 0o700); err != nil {
			return err
		}
	}
	if err := sharePKI(dirs); err != nil {
		return err
	}
	gossip := make([]string, n)
	for i := range n {
		addrs := make([]string, 4) // API, Raft, gossip, link (loopback UDP)
		for j := range addrs {
			a, err := freeAddr()
			if err != nil {
				return err
			}
			addrs[j] = a
		}
		link := addrs[3]
		if f.net != nil {
			// One host for every replica: a child checks every replica's
			// certificate against the host of its first parent address.
			link = fmt.Sprintf("127.0.2.1:%d", 7443+i)
		}
		gossip[i] = addrs[2]
		rr := &rootReplica{name: fmt.Sprintf("root-%d", i), linkAddr: link}
		rr.cfg = server.Config{Name: rr.name, DataDir: dirs[i], APIAddr: addrs[0], LinkAddr: link, Network: f.net, StatusWindow: f.opts.StatusWindow,
			HA: server.Replication{RaftAddr: addrs[1], PeerAddr: addrs[2], BootstrapExpect: n, RaftMultiplier: f.raftMultiplier()}}
		f.replicas = append(f.replicas, rr)
	}
	for i, rr := range f.replicas {
		for j, g := range gossip {
			if j != i {
				rr.cfg.HA.Join = append(rr.cfg.HA.Join, g)
			}
		}
	}
	// Each waits for the others to form the cluster.
	octx, cancel := context.WithTimeout(ctx, 120*time.Second)
	defer cancel()
	g := errgroup.Group{}
	for _, rr := range f.replicas {
		g.Go(func() error { return f.startReplica(ctx, octx, rr) })
	}
	if err := g.Wait(); err != nil {
		return err
	}
	var leader *rootReplica
	if err := waitUntil(ctx, 60*time.Second, "a leader among the root replicas", func() bool {
		leader = f.leader()
		return leader != nil
	}); err != nil {
		return err
	}
	f.setRoot(leader.running())
	go f.countLeaders(ctx)
	return nil
}

// countLeaders counts leader changes until ctx ends.
func (f *fleet) countLeaders(ctx context.Context) {
	tk := time.NewTicker(100 * time.Millisecond)
	defer tk.Stop()
	var last *rootReplica
	for {
		if l := f.leader(); l != nil && l != last {
			if last != nil {
				f.leaderChanges.Add(1)
			}
			last = l
		}
		select {
		case <-ctx.Done():
			return
		case <-tk.C:
		}
	}
}

// startReplica opens rr (waiting until octx ends for its cluster) and
// serves it until the fleet stops or crashes it.
func (f *fleet) startReplica(ctx, octx context.Context, rr *rootReplica) error {
	var r *server.Root
	var err error
	labelled(ctx, "root", func() { r, err = server.OpenContext(octx, rr.cfg, f.log.With("relay", rr.name)) })
	if err != nil {
		return fmt.Errorf("%s: %w", rr.name, err)
	}
	stop := serve(ctx, "root", r.Serve)
	<-r.Ready()
	rr.mu.Lock()
	rr.root, rr.stop, rr.up, rr.halted = r, stop, true, nil
	rr.incarnation++
	rr.mu.Unlock()
	return nil
}

// crash kills rr as kill -9 would (server.Root.Crash). On the in-memory
// network its links first go silent, as a dead process's would: its
// children notice after the links' idle timeout, not from a close.
func (f *fleet) crash(rr *rootReplica) {
	f.recordLinks() // keep its counters
	rr.mu.Lock()
	r, stop := rr.root, rr.stop
	rr.up, rr.stop = false, nil
	halted := make(chan struct{})
	rr.halted = halted
	rr.mu.Unlock()
	if f.mn != nil {
		for _, c := range f.rootChildren() {
			if d := c.dialAddrOf(); d != "" {
				_ = f.mn.Partition(rr.linkAddr, d)
			}
		}
	}
	r.Crash()
	go func() {
		defer close(halted)
		_ = stop() // Serve returns the closed listener's error
	}()
}

// restart starts a crashed rr again on its data directory.
func (f *fleet) restart(ctx context.Context, rr *rootReplica) error {
	rr.mu.Lock()
	halted := rr.halted
	rr.mu.Unlock()
	if halted != nil {
		<-halted
	}
	if f.mn != nil {
		for _, c := range f.rootChildren() {
			if d := c.dialAddrOf(); d != "" {
				_ = f.mn.Heal(rr.linkAddr, d)
			}
		}
	}
	if f.net != nil {
		// server.Network leaves a stopped root's endpoint bound: the
		// replica comes back at another port of the same host (its
		// children's parent lists keep the two others).
		f.nextLink++
		f.pastLinkAddrs = append(f.pastLinkAddrs, rr.linkAddr)
		rr.linkAddr = fmt.Sprintf("127.0.2.1:%d", 7443+len(f.replicas)+f.nextLink)
		rr.cfg.LinkAddr = rr.linkAddr
	}
	octx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	return f.startReplica(ctx, octx, rr)
}

// stopReplicas stops every replica (waiting for crashed ones to finish).
func (f *fleet) stopReplicas() error {
	var errs []error
	for _, rr := range f.replicas {
		rr.mu.Lock()
		stop, halted := rr.stop, rr.halted
		rr.up, rr.stop = false, nil
		rr.mu.Unlock()
		if stop != nil {
			if err := stop(); err != nil {
				errs = append(errs, fmt.Errorf("%s: %w", rr.name, err))
			}
		}
		if halted != nil {
			<-halted
		}
	}
	return errors.Join(errs...)
}

// leader returns the serving replica that leads, or nil.
func (f *fleet) leader() *rootReplica {
	for _, rr := range f.replicas {
		if r := rr.running(); r != nil && r.IsLeader() {
			return rr
		}
	}
	return nil
}

// currentRoot is the root the simulator reads routing from.
func (f *fleet) currentRoot() *server.Root {
	f.rootMu.Lock()
	defer f.rootMu.Unlock()
	return f.root
}

func (f *fleet) setRoot(r *server.Root) {
	f.rootMu.Lock()
	f.root = r
	f.rootMu.Unlock()
}

// rootLinkAddrs are the root's link addresses: every replica's.
func (f *fleet) rootLinkAddrs() []string {
	if len(f.replicas) == 0 {
		return []string{f.rootAddr}
	}
	out := make([]string, len(f.replicas))
	for i, rr := range f.replicas {
		out[i] = rr.linkAddr
	}
	return append(out, f.pastLinkAddrs...)
}

// apiAddrs are the replicas' kube API addresses, the current root's first
// (nil: one root).
func (f *fleet) apiAddrs() []string {
	if len(f.replicas) == 0 {
		return nil
	}
	first := f.currentRoot().Addr()
	out := []string{first}
	for _, rr := range f.replicas {
		if a := rr.cfg.APIAddr; a != first {
			out = append(out, a)
		}
	}
	return out
}

// rootDataDir is the data directory holding the root's CA.
func (f *fleet) rootDataDir(single server.Config) string {
	if len(f.replicas) > 0 {
		return f.replicas[0].cfg.DataDir
	}
	return single.DataDir
}

// rootChildren are the relays under the root.
func (f *fleet) rootChildren() []*relay {
	var out []*relay
	for _, r := range append(append([]*relay(nil), f.regions...), f.edges...) {
		if r.parent == nil {
			out = append(out, r)
		}
	}
	return out
}

func (r *relay) dialAddrOf() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.dialAddr
}

// sharePKI creates the shared credentials in the first data directory and
// imports them into the others.
func sharePKI(dirs []string) error {
	src := pki.Dir(dirs[0])
	if _, err := pki.LoadOrCreateCA(src); err != nil {
		return err
	}
	if _, err := pki.LoadOrCreateToken(filepath.Join(src, pki.AdminTokenFile)); err != nil {
		return err
	}
	if _, err := pki.LoadOrCreateSigningKey(filepath.Join(src, pki.SigningKeyFile)); err != nil {
		return err
	}
	bundle, err := pki.ExportShared(src)
	if err != nil {
		return err
	}
	for _, d := range dirs[1:] {
		if err := pki.ImportShared(pki.Dir(d), bundle); err != nil {
			return err
		}
	}
	return nil
}

// freeAddr returns a loopback address whose port was free a moment ago
// for both TCP and UDP (gossip uses one port for both).
func freeAddr() (string, error) {
	for range 20 {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return "", err
		}
		addr := ln.Addr().String()
		pc, err := net.ListenPacket("udp", addr)
		_ = ln.Close()
		if err == nil {
			_ = pc.Close()
			return addr, nil
		}
	}
	return "", errors.New("sim: no loopback port free for both TCP and UDP")
}

// failover spreads a user's requests over a replicated root's kube APIs:
// every request goes to the current one; a request that fails on the way
// (the replica is gone) or is answered 5xx moves the user on to the next.
// A follower forwards writes to the leader. Safe for concurrent use.
type failover struct {
	addrs []string
	cur   atomic.Int64
}

func (fo *failover) wrap(next http.RoundTripper) http.RoundTripper {
	return &failoverTransport{fo: fo, next: next}
}

// move moves on from replica i, unless another request already did.
func (fo *failover) move(i int64) {
	fo.cur.CompareAndSwap(i, (i+1)%int64(len(fo.addrs)))
}

type failoverTransport struct {
	fo   *failover
	next http.RoundTripper
}

func (t *failoverTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	i := t.fo.cur.Load()
	r := req.Clone(req.Context())
	r.URL.Host, r.Host = t.fo.addrs[i], ""
	resp, err := t.next.RoundTrip(r)
	if err != nil || resp.StatusCode >= 500 {
		t.fo.move(i)
	}
	return resp, err
}

// retryable reports whether a write that failed with err may succeed if
// tried again (on another replica): not a refusal of the request itself.
func retryable(ctx context.Context, err error) bool {
	if err == nil || ctx.Err() != nil {
		return false
	}
	switch {
	case apierrors.IsNotFound(err), apierrors.IsBadRequest(err), apierrors.IsInvalid(err),
		apierrors.IsForbidden(err), apierrors.IsUnauthorized(err), apierrors.IsConflict(err),
		apierrors.IsAlreadyExists(err), apierrors.IsMethodNotSupported(err):
		return false
	}
	return true
}

// rootFailover: a rollout; then the leader of the 3 root replicas is
// killed and rollouts go on, the user's writes moving to another replica
// (a follower forwards them to the new leader); the failover gap is kill →
// the next acknowledged write. The killed replica then restarts and must
// catch up, and a last rollout goes through the three.
func rootFailover(e *env) error {
	f := e.f
	if len(f.replicas) < 2 {
		return errorf("root-failover needs a replicated root")
	}
	e.p.phase("root failover", 100)
	e.t.setPhase("before")
	if err := rolloutFor(e, 0, 1, false); err != nil {
		return err
	}
	var old *rootReplica // the replicas may be electing (a busy process misses heartbeats)
	if err := waitUntil(e.ctx, 60*time.Second, "a leader among the root replicas", func() bool {
		old = f.leader()
		return old != nil
	}); err != nil {
		return err
	}
	var linked []string
	for _, c := range old.running().Children() {
		if c.Connected {
			linked = append(linked, c.Identity.Name)
		}
	}
	res := &FailoverResult{Replicas: len(f.replicas), Killed: old.name, Linked: len(linked), RelinkedS: -1, CaughtUpS: -1,
		LeaderChangesBefore: int(f.leaderChanges.Load())}
	e.s.Failover = res // filled in as it goes: a failed run shows how far it got

	// Watch the election and the children re-linking while the user writes.
	killed := time.Now()
	wctx, stopWatch := context.WithCancel(e.ctx)
	var watched sync.WaitGroup
	var elected, relinked atomic.Int64 // ns after the kill; 0: not yet
	var newLeader atomic.Pointer[rootReplica]
	watched.Go(func() {
		tk := time.NewTicker(20 * time.Millisecond)
		defer tk.Stop()
		for {
			if elected.Load() == 0 {
				if l := f.leader(); l != nil && l != old {
					elected.Store(int64(time.Since(killed)))
					newLeader.Store(l)
				}
			}
			if relinked.Load() == 0 && f.linkedToSurvivors(old, linked) {
				relinked.Store(int64(time.Since(killed)))
			}
			if elected.Load() != 0 && relinked.Load() != 0 {
				return
			}
			select {
			case <-wctx.Done():
				return
			case <-tk.C:
			}
		}
	})
	defer func() { stopWatch(); watched.Wait() }()

	e.t.setPhase("failover")
	attempts := e.u.failedAttempts()
	e.event(fmt.Sprintf("kill the leader %s (%d of the root's children linked to it)", old.name, len(linked)))
	f.crash(old)
	if err := e.u.rollout(e.ctx, e.o.RolloutObject); err != nil {
		return err
	}
	e.changes++
	res.GapS = time.Since(killed).Seconds()
	res.FailedAttempts = e.u.failedAttempts() - attempts
	e.event(fmt.Sprintf("first write acknowledged after the kill: a gap of %.2f s (%d failed attempts)", res.GapS, res.FailedAttempts))
	if err := waitUntil(e.ctx, 60*time.Second, "a new leader", func() bool { return elected.Load() != 0 }); err != nil {
		return err
	}
	nl := newLeader.Load()
	res.NewLeader, res.ElectedS = nl.name, time.Duration(elected.Load()).Seconds()
	f.setRoot(nl.running())
	changes := f.leaderChanges.Load()
	defer func() { res.LeaderChangesAfter = int(f.leaderChanges.Load() - changes) }()
	e.event(fmt.Sprintf("%s leads, %.2f s after the kill", nl.name, res.ElectedS))
	if err := e.t.waitConverged(e.ctx, e.roundTimeout(), "the failover's write at every destination"); err != nil {
		return err
	}
	res.ConvergedS = time.Since(killed).Seconds()
	if err := waitUntil(e.ctx, 10*time.Second, "", func() bool { return relinked.Load() != 0 }); err == nil {
		res.RelinkedS = time.Duration(relinked.Load()).Seconds()
	}
	e.event(fmt.Sprintf("every destination holds it, %.2f s after the kill (%d children re-linked after %.2f s)", res.ConvergedS, len(linked), res.RelinkedS))
	e.p.set(40)

	// Rollouts through the surviving two.
	e.t.setPhase("after")
	if err := rolloutFor(e, e.o.Duration-time.Since(e.start), 2, false); err != nil {
		return err
	}
	e.p.set(70)

	// The killed replica comes back and catches up.
	restarted := time.Now()
	e.event("restart " + old.name)
	if err := f.restart(e.ctx, old); err != nil {
		return err
	}
	res.RestartS = time.Since(restarted).Seconds()
	back := old.running()
	caughtUp := func() bool {
		l := f.leader()
		if l == nil {
			return false
		}
		want, err1 := tree.ContentHash(l.running().Store(), layout.DownsyncSpace)
		got, err2 := tree.ContentHash(back.Store(), layout.DownsyncSpace)
		return err1 == nil && err2 == nil && want == got
	}
	if waitUntil(e.ctx, 60*time.Second, "", caughtUp) == nil {
		res.CaughtUpS = time.Since(restarted).Seconds()
		e.event(fmt.Sprintf("%s caught up, %.2f s after its restart", old.name, res.CaughtUpS))
	}
	e.t.setPhase("rejoined")
	if err := rolloutFor(e, 0, 1, false); err != nil {
		return err
	}
	res.Rejoined = res.CaughtUpS >= 0 && waitUntil(e.ctx, 30*time.Second, "", func() bool {
		l := f.leader()
		if l == nil || !caughtUp() {
			return false
		}
		return slices.ContainsFunc(l.running().Members(), func(m consensus.Member) bool { return m.ID == old.name && m.Voter })
	}) == nil
	e.event(fmt.Sprintf("%s rejoined (caught up after the last rollout, a voter): %v", old.name, res.Rejoined))
	e.p.set(100)
	return nil
}

// linkedToSurvivors reports whether every name is linked to a serving
// replica other than old.
func (f *fleet) linkedToSurvivors(old *rootReplica, names []string) bool {
	var up []string
	for _, rr := range f.replicas {
		r := rr.running()
		if rr == old || r == nil {
			continue
		}
		for _, c := range r.Children() {
			if c.Connected {
				up = append(up, c.Identity.Name)
			}
		}
	}
	for _, n := range names {
		if !slices.Contains(up, n) {
			return false
		}
	}
	return true
}

// raftMultiplier scales the replicas' Raft timers: the three share the
// process's 2 cores with the whole fleet, and with hundreds of relays
// busy a heartbeat waits more than raft's 1 s for a core (5 to 12 leader
// changes per run at 500 edges with 1), which is no failure of a replica.
func (f *fleet) raftMultiplier() int {
	if regions, edges := Relays(f.fan); regions+edges > 100 {
		return 3
	}
	return 1
}
