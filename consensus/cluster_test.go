package consensus

import (
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hashicorp/raft"

	"github.com/canopy-dev/canopy/relay/store"
	"github.com/canopy-dev/canopy/test/poll"
)

func newTestFSMAsStore() store.FSM { return newTestFSM() }

// stateOf returns node i's FSM state, failing on a contract violation.
func (c *testCluster) stateOf(i int) testState {
	c.t.Helper()
	s, _, err := c.nodes[i].fsm.(*testFSM).snapshot()
	if err != nil {
		c.t.Fatalf("%s: %v", c.nodes[i].cfg.NodeID, err)
	}
	if err := s.check(); err != nil {
		c.t.Fatalf("%s: %v", c.nodes[i].cfg.NodeID, err)
	}
	return s
}

// checkSameState waits for the live nodes to converge and checks that they
// hold the same state: the same commands at the same indexes.
func (c *testCluster) checkSameState() testState {
	c.t.Helper()
	c.waitConverged(10 * time.Second)
	live := c.live()
	want := c.stateOf(live[0])
	for _, i := range live[1:] {
		// A node may be ahead of the read index by later commands: none
		// are proposed while checking.
		if got := c.stateOf(i); !reflect.DeepEqual(got, want) {
			c.t.Fatalf("%s and %s differ: %d keys, last %d vs %d keys, last %d",
				c.nodes[i].cfg.NodeID, c.nodes[live[0]].cfg.NodeID, len(got.Keys), got.Last, len(want.Keys), want.Last)
		}
	}
	return want
}

// ackLog records acknowledged writes from concurrent writers.
type ackLog struct {
	mu      sync.Mutex
	acked   map[string]uint64 // key → index
	unknown map[string]bool
	maxIdx  atomic.Uint64
}

func newAckLog() *ackLog { return &ackLog{acked: map[string]uint64{}, unknown: map[string]bool{}} }

func (a *ackLog) ack(t *testing.T, key string, r applyResult) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if r.Index == 0 {
		t.Errorf("%s acked with index 0", key)
	}
	a.acked[key] = r.Index
	for {
		m := a.maxIdx.Load()
		if r.Index <= m || a.maxIdx.CompareAndSwap(m, r.Index) {
			return
		}
	}
}

func (a *ackLog) count() int {
	a.mu.Lock()
	defer a.mu.Unlock()
	return len(a.acked)
}

// check fails if an acked write is missing from s or at another index.
func (a *ackLog) check(t *testing.T, who string, s testState) {
	t.Helper()
	a.mu.Lock()
	defer a.mu.Unlock()
	for key, idx := range a.acked {
		if got, ok := s.Keys[key]; !ok || got != idx {
			t.Fatalf("%s: acked write %s (index %d) lost or moved (found %d, %v)", who, key, idx, got, ok)
		}
	}
}

func TestClusterBootstrapsAndForwardsWrites(t *testing.T) {
	// Every write must be acknowledged: one leader throughout.
	c := newTestCluster(t, 3, newTestFSMAsStore, func(c *Config) { c.tune = steadyTuning() })
	leader := c.waitLeader(15 * time.Second)
	leaderID := c.nodes[leader].cfg.NodeID

	// Every node sees three live voters, one leader, the gossiped Meta.
	for i := range c.nodes {
		poll.True(t, "3 live voters seen by "+c.nodes[i].cfg.NodeID, func() bool {
			ms := c.nodes[i].node.Members()
			if len(ms) != 3 {
				return false
			}
			for _, m := range ms {
				if !m.Voter || !m.Alive || m.Leader != (m.ID == leaderID) || string(m.Meta) != "https://"+m.ID+".api" || m.RaftAddr == "" {
					return false
				}
			}
			return true
		})
		if l, ok := c.nodes[i].node.Leader(); !ok || l.ID != leaderID {
			t.Fatalf("%s: Leader() = %+v, %v; want %s", c.nodes[i].cfg.NodeID, l, ok, leaderID)
		}
	}

	// Writers on all three replicas; readers on the followers check that
	// ReadIndex covers every write acknowledged before they called it.
	acks := newAckLog()
	var stopReads atomic.Bool
	var readers sync.WaitGroup
	var reads atomic.Int64
	for i := range c.nodes {
		if i == leader {
			continue
		}
		n := c.nodes[i].node
		readers.Go(func() {
			for !stopReads.Load() {
				before := acks.maxIdx.Load()
				idx, err := n.ReadIndex(context.Background())
				if err != nil {
					t.Errorf("ReadIndex: %v", err)
					return
				}
				if idx < before {
					t.Errorf("ReadIndex on a follower = %d, below acked write %d", idx, before)
					return
				}
				if err := n.WaitApplied(context.Background(), idx); err != nil {
					t.Errorf("WaitApplied: %v", err)
					return
				}
				reads.Add(1)
			}
		})
	}
	const writers, each = 3, 30
	c.proposeAll(writers, func(node, w int, n *Node) {
		for j := range each {
			key := fmt.Sprintf("w%d-%d-%d", node, w, j)
			resp, err := n.Propose(context.Background(), []byte(key))
			if err != nil {
				t.Errorf("Propose(%s) on n%d: %v", key, node, err)
				return
			}
			acks.ack(t, key, resp.(applyResult))
		}
	})
	stopReads.Store(true)
	readers.Wait()
	if t.Failed() {
		t.FailNow()
	}
	if got := acks.count(); got != 3*writers*each {
		t.Fatalf("%d writes acked, want %d", got, 3*writers*each)
	}
	if reads.Load() == 0 {
		t.Fatal("no read index served on a follower")
	}

	// After the writes: a follower's read index covers them all.
	for i := range c.nodes {
		idx, err := c.nodes[i].node.ReadIndex(context.Background())
		if err != nil || idx < acks.maxIdx.Load() {
			t.Fatalf("%s: ReadIndex = %d, %v; last ack %d", c.nodes[i].cfg.NodeID, idx, err, acks.maxIdx.Load())
		}
	}
	s := c.checkSameState()
	acks.check(t, "all", s)
	if s.Count != 3*writers*each {
		t.Fatalf("%d commands applied, want %d", s.Count, 3*writers*each)
	}
}

func TestClusterLeaderFailover(t *testing.T) {
	c := newTestCluster(t, 3, newTestFSMAsStore, func(cfg *Config) {
		// Keep little log behind a snapshot, so the old leader can only
		// catch up by installing one.
		cfg.TrailingLogs = 32
		cfg.tune.walSegmentSize = 4096
	})
	leader := c.waitLeader(15 * time.Second)
	oldID := c.nodes[leader].cfg.NodeID

	acks := newAckLog()
	var stop atomic.Bool
	var wg sync.WaitGroup
	var unknown, notApplied atomic.Int64
	for i := range c.nodes {
		n := c.nodes[i].node
		for w := range 2 {
			wg.Go(func() {
				for j := 0; !stop.Load(); j++ {
					key := fmt.Sprintf("w%d-%d-%d", i, w, j)
					ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
					resp, err := n.Propose(ctx, []byte(key))
					cancel()
					switch {
					case err == nil:
						acks.ack(t, key, resp.(applyResult))
					case errors.Is(err, ErrClosed):
						unknown.Add(1)
						return // this writer's node was killed
					case errors.Is(err, ErrOutcomeUnknown):
						unknown.Add(1)
					case errors.Is(err, context.DeadlineExceeded):
						notApplied.Add(1)
					default:
						t.Errorf("Propose(%s): %v", key, err)
						return
					}
				}
			})
		}
	}
	poll.True(t, "200 acked writes", func() bool { return acks.count() >= 200 })
	lastBeforeKill := c.nodes[leader].node.AppliedIndex()
	killedAt := time.Now()
	c.kill(leader)
	newLeader := c.waitLeader(15 * time.Second)
	failover := time.Since(killedAt)
	if c.nodes[newLeader].cfg.NodeID == oldID {
		t.Fatal("the killed node is still the leader")
	}
	ackedAtKill := acks.count()
	poll.True(t, "200 more acked writes after the failover", func() bool {
		return acks.count() >= ackedAtKill+200
	})
	stop.Store(true)
	wg.Wait()
	t.Logf("failover to %s in %s; %d acked, %d unknown, %d not applied",
		c.nodes[newLeader].cfg.NodeID, failover.Round(time.Millisecond), acks.count(), unknown.Load(), notApplied.Load())

	s := c.checkSameState()
	acks.check(t, "survivors", s)

	// Compact the survivors' logs past the old leader's position, then
	// bring it back on its data directory: it must install a snapshot.
	for _, i := range c.live() {
		if err := c.nodes[i].node.Snapshot(); err != nil {
			t.Fatal(err)
		}
	}
	c.start(leader)
	poll.True(t, "the old leader caught up", func() bool {
		return c.nodes[leader].node.AppliedIndex() >= s.Last
	})
	restarted := c.nodes[leader].fsm.(*testFSM)
	restarted.mu.Lock()
	restored := slices.Clone(restarted.restored)
	restarted.mu.Unlock()
	if !slices.ContainsFunc(restored, func(last uint64) bool { return last > lastBeforeKill }) {
		t.Fatalf("old leader (at %d when killed) caught up without installing a snapshot from the leader (restored %v)", lastBeforeKill, restored)
	}
	if r, err := c.nodes[leader].node.Propose(context.Background(), []byte("after-restart")); err != nil || r.(applyResult).Index <= s.Last {
		t.Fatalf("Propose on the restarted node: %v, %v", r, err)
	}
	final := c.checkSameState()
	acks.check(t, "all after restart", final)
	if got := c.voters(c.live()[0]); !reflect.DeepEqual(got, []string{"n0", "n1", "n2"}) {
		t.Fatalf("voters %v", got)
	}
}

func TestClusterAddsNewServerRefusesForeignCluster(t *testing.T) {
	c := newTestCluster(t, 3, newTestFSMAsStore, nil)
	leader := c.waitLeader(15 * time.Second)
	for i := range 50 {
		propose(t, c.nodes[i%3].node, "before-"+strconv.Itoa(i))
	}

	// A replica of another cluster, with a certificate of the same CA,
	// joins through n0's gossip.
	foreignCfg := Config{
		Dir: t.TempDir(), NodeID: "x0", Logger: testLogger(t),
		RaftAddr: "127.0.0.1:0", PeerAddr: "127.0.0.1:0", TLS: c.ca.tls(t, "x0"),
		ClusterID: "other", Join: []string{c.nodes[0].node.gossipAddr()}, tune: fastTuning(),
	}
	foreign, err := Open(foreignCfg, newTestFSM())
	if err != nil {
		t.Fatal(err)
	}
	defer foreign.Close()

	// A replica of this cluster, started later, is added as a voter and
	// catches up.
	c.add("n3", 3)
	poll.True(t, "n3 a voter", func() bool {
		return slices.Contains(c.voters(leader), "n3")
	})
	propose(t, c.nodes[3].node, "from-n3")
	c.checkSameState()

	// Meanwhile, and for a few more reconcile rounds, x0 is nowhere.
	poll.Holds(t, "the foreign x0 kept apart", 3*reconcileInterval, func() error {
		for _, i := range c.live() {
			if slices.Contains(c.voters(i), "x0") {
				return fmt.Errorf("%s: foreign x0 in the raft configuration", c.nodes[i].cfg.NodeID)
			}
			for _, m := range c.nodes[i].node.Members() {
				if m.ID == "x0" {
					return fmt.Errorf("%s: foreign x0 among members", c.nodes[i].cfg.NodeID)
				}
			}
		}
		for _, m := range foreign.Members() {
			if m.ID != "x0" {
				return fmt.Errorf("foreign node sees %s", m.ID)
			}
		}
		return nil
	}, poll.Every(100*time.Millisecond))
	if got := c.voters(leader); !reflect.DeepEqual(got, []string{"n0", "n1", "n2", "n3"}) {
		t.Fatalf("voters %v", got)
	}
}

func TestClusterRemovesDeadServer(t *testing.T) {
	const grace = 2 * time.Second
	c := newTestCluster(t, 3, newTestFSMAsStore, func(cfg *Config) { cfg.DeadServerGrace = grace })
	leader := c.waitLeader(15 * time.Second)
	victim := (leader + 1) % 3
	victimID := c.nodes[victim].cfg.NodeID
	propose(t, c.nodes[leader].node, "before")

	killedAt := time.Now()
	c.kill(victim)
	poll.True(t, victimID+" removed", func() bool {
		return !slices.Contains(c.voters(leader), victimID)
	})
	if took := time.Since(killedAt); took < grace {
		t.Fatalf("%s removed %s after its death, before the %s grace", took, victimID, grace)
	}
	for _, m := range c.nodes[leader].node.Members() {
		if m.ID == victimID && (m.Alive || m.Voter) {
			t.Fatalf("removed member shown as %+v", m)
		}
	}
	// Two voters keep serving writes.
	propose(t, c.nodes[(leader+2)%3].node, "with-two")

	// Back on its data directory, it is added again.
	c.start(victim)
	leader = c.waitLeader(15 * time.Second)
	poll.True(t, victimID+" a voter again", func() bool {
		return slices.Contains(c.voters(leader), victimID)
	})
	c.checkSameState()
}

// TestSingleNodeUpgradesToCluster reopens the data of a single node (the
// default in-memory transport) as a cluster replica, then grows it to
// three: the configuration is re-addressed and nothing is lost.
func TestSingleNodeUpgradesToCluster(t *testing.T) {
	dir := t.TempDir()
	fsm := newTestFSM()
	single := openNode(t, dir, fsm, func(c *Config) { c.NodeID = "n0" })
	for i := range 30 {
		propose(t, single, "single-"+strconv.Itoa(i))
	}
	want, _, _ := fsm.snapshot()
	if err := single.Close(); err != nil {
		t.Fatal(err)
	}

	c := &testCluster{t: t, ca: newTestCA(t), newFSM: newTestFSMAsStore, clusterID: "test"}
	t.Cleanup(c.closeAll)
	c.nodes = append(c.nodes, &testNode{cfg: Config{
		Dir: dir, NodeID: "n0", Logger: testLogger(t),
		RaftAddr: "127.0.0.1:0", PeerAddr: "127.0.0.1:0", TLS: c.ca.tls(t, "n0"), ClusterID: "test", tune: fastTuning(),
	}})
	c.start(0)
	c.waitLeader(10 * time.Second)
	poll.True(t, "n0 re-addressed", func() bool {
		ms := c.nodes[0].node.Members()
		f := c.nodes[0].node.raft.GetConfiguration()
		return f.Error() == nil && len(ms) == 1 && string(f.Configuration().Servers[0].Address) == c.nodes[0].cfg.RaftAddr
	})
	c.add("n1", 3)
	c.add("n2", 3)
	poll.True(t, "three voters", func() bool {
		return reflect.DeepEqual(c.voters(0), []string{"n0", "n1", "n2"})
	})
	propose(t, c.nodes[2].node, "from-n2")
	s := c.checkSameState()
	for k, idx := range want.Keys {
		if s.Keys[k] != idx {
			t.Fatalf("%s at %d, want %d", k, s.Keys[k], idx)
		}
	}
}

// TestPeerTLSRefusesStrangers: only holders of a replica certificate (of
// the cluster's CA, carrying the peer name) get to speak raft or forward.
func TestPeerTLSRefusesStrangers(t *testing.T) {
	const peerName = "raft.test"
	var ca *testCA
	c := newTestCluster(t, 1, newTestFSMAsStore, func(cfg *Config) {
		// Re-issue with the peer name; newTestCluster's CA is set by now.
		cfg.TLS = PeerTLSConfig(ca.issue(t, cfg.NodeID, peerName), ca.pool, peerName)
	}, withCA(&ca))
	c.waitLeader(10 * time.Second)
	addr := c.nodes[0].cfg.RaftAddr

	// readIndex sends a raw read-index request and returns the status of
	// the answer.
	readIndex := func(cfg *tls.Config) (byte, error) {
		conn, err := tls.DialWithDialer(&net.Dialer{Timeout: 2 * time.Second}, "tcp", addr, cfg)
		if err != nil {
			return 0, err
		}
		defer conn.Close()
		_ = conn.SetDeadline(time.Now().Add(5 * time.Second))
		req := make([]byte, 1+reqHeaderLen)
		req[0], req[1+8] = protoForward, kindReadIndex
		if _, err := conn.Write(req); err != nil {
			return 0, err
		}
		resp := make([]byte, respHeaderLen)
		if _, err := io.ReadFull(conn, resp); err != nil {
			return 0, err
		}
		return resp[8], nil
	}
	other := newTestCA(t)
	for _, tc := range []struct {
		name string
		cfg  *tls.Config
	}{
		{"foreign CA", PeerTLSConfig(other.issue(t, "intruder", peerName), ca.pool, peerName)},
		{"no client certificate", &tls.Config{RootCAs: ca.pool, ServerName: peerName, MinVersion: tls.VersionTLS13}},
		{"same CA, not a replica", PeerTLSConfig(ca.issue(t, "some-user"), ca.pool, peerName)},
	} {
		if status, err := readIndex(tc.cfg); err == nil {
			t.Errorf("%s: answered with status %d", tc.name, status)
		}
	}
	if status, err := readIndex(PeerTLSConfig(ca.issue(t, "n9", peerName), ca.pool, peerName)); err != nil || status != statusOK {
		t.Fatalf("replica certificate: status %d, %v", status, err)
	}
}

func TestClusterConfigValidation(t *testing.T) {
	ca := newTestCA(t)
	base := func() Config {
		return Config{Dir: t.TempDir(), NodeID: "n", RaftAddr: "127.0.0.1:0", PeerAddr: "127.0.0.1:0", TLS: ca.tls(t, "n")}
	}
	for _, tc := range []struct {
		name  string
		tweak func(*Config)
		want  string
	}{
		{"peer addr without raft addr", func(c *Config) { c.RaftAddr = "" }, "PeerAddr needs RaftAddr"},
		{"expect without raft addr", func(c *Config) { c.RaftAddr, c.PeerAddr, c.BootstrapExpect = "", "", 3 }, "BootstrapExpect 3 needs RaftAddr"},
		{"join without raft addr", func(c *Config) { c.RaftAddr, c.PeerAddr, c.Join = "", "", []string{"a:1"} }, "Join needs RaftAddr"},
		{"no peer addr", func(c *Config) { c.PeerAddr = "" }, "RaftAddr needs PeerAddr"},
		{"no TLS", func(c *Config) { c.TLS = nil }, "RaftAddr needs TLS"},
		{"negative expect", func(c *Config) { c.BootstrapExpect = -1 }, "negative"},
		{"bad gossip key", func(c *Config) { c.GossipKey = []byte("short") }, "GossipKey"},
		{"unspecified host", func(c *Config) { c.RaftAddr = "0.0.0.0:0" }, "AdvertiseHost"},
		{"advertise with a random gossip port", func(c *Config) { c.AdvertiseHost = "127.0.0.1" }, "fixed port"},
		{"huge meta", func(c *Config) { c.Meta = bytes.Repeat([]byte("m"), 600) }, "exceeds"},
		{"raft multiplier too high", func(c *Config) { c.RaftMultiplier = 11 }, "RaftMultiplier 11 is not from 1 to 10"},
		{"negative raft multiplier", func(c *Config) { c.RaftMultiplier = -1 }, "RaftMultiplier -1"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := base()
			tc.tweak(&cfg)
			n, err := Open(cfg, newTestFSM())
			if err == nil {
				n.Close()
				t.Fatal("Open succeeded")
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %q does not mention %q", err, tc.want)
			}
		})
	}
}

// TestRaftMultiplier: a replica's raft timers are raft's defaults times
// RaftMultiplier; a single node keeps its short timers whatever it says.
func TestRaftMultiplier(t *testing.T) {
	ca := newTestCA(t)
	def := raft.DefaultConfig()
	for _, m := range []int{0, 1, 5} {
		cfg, err := Config{Dir: t.TempDir(), NodeID: "n", RaftAddr: "127.0.0.1:0", PeerAddr: "127.0.0.1:0", TLS: ca.tls(t, "n"), RaftMultiplier: m}.complete()
		if err != nil {
			t.Fatal(err)
		}
		rc := cfg.raftConfig(slog.Default())
		want := time.Duration(max(m, 1))
		if rc.HeartbeatTimeout != want*def.HeartbeatTimeout || rc.ElectionTimeout != want*def.ElectionTimeout || rc.LeaderLeaseTimeout != want*def.LeaderLeaseTimeout {
			t.Errorf("multiplier %d: heartbeat %v, election %v, lease %v", m, rc.HeartbeatTimeout, rc.ElectionTimeout, rc.LeaderLeaseTimeout)
		}
	}
	single, err := Config{Dir: t.TempDir(), NodeID: "n", RaftMultiplier: 5}.complete()
	if err != nil {
		t.Fatal(err)
	}
	if rc := single.raftConfig(slog.Default()); rc.HeartbeatTimeout != 100*time.Millisecond {
		t.Errorf("single node heartbeat %v", rc.HeartbeatTimeout)
	}
}

// TestClusterWithoutQuorum: with two of three replicas down, a write on the
// survivor fails with ErrNoLeader (not appended), not an unknown outcome;
// once a second replica is back, writes and the WaitReady of a restarted
// replica go through.
func TestClusterWithoutQuorum(t *testing.T) {
	c := newTestCluster(t, 3, newTestFSMAsStore, nil)
	leader := c.waitLeader(15 * time.Second)
	survivor := (leader + 1) % 3
	propose(t, c.nodes[survivor].node, "before")
	c.kill(leader)
	c.kill((leader + 2) % 3)

	ctx, cancel := context.WithTimeout(context.Background(), 1500*time.Millisecond)
	defer cancel()
	_, err := c.nodes[survivor].node.Propose(ctx, []byte("no-quorum"))
	if !errors.Is(err, ErrNoLeader) || !errors.Is(err, context.DeadlineExceeded) || errors.Is(err, ErrOutcomeUnknown) {
		t.Fatalf("Propose without quorum: %v", err)
	}
	ctx, cancel = context.WithTimeout(context.Background(), 500*time.Millisecond)
	defer cancel()
	if _, err := c.nodes[survivor].node.ReadIndex(ctx); !errors.Is(err, ErrNoLeader) {
		t.Fatalf("ReadIndex without quorum: %v", err)
	}

	c.start(leader)
	ctx, cancel = context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	if err := c.nodes[leader].node.WaitReady(ctx); err != nil {
		t.Fatalf("WaitReady: %v", err)
	}
	propose(t, c.nodes[survivor].node, "after")
	s := c.checkSameState()
	if _, ok := s.Keys["no-quorum"]; ok {
		t.Fatal("the write refused without quorum was applied")
	}
}

// A replica added after the log was compacted catches up from the leader's
// snapshot, with raft-wal's default 64 MiB segments (which keep serving
// compacted entries of a segment still in use: walStore.GetLog refuses
// them), and Status shows it.
func TestClusterNewServerInstallsSnapshot(t *testing.T) {
	c := newTestCluster(t, 3, newTestFSMAsStore, func(cfg *Config) { cfg.TrailingLogs = 16 })
	leader := c.waitLeader(15 * time.Second)
	for i := range 100 {
		propose(t, c.nodes[i%3].node, "before-"+strconv.Itoa(i))
	}
	for _, i := range c.live() {
		if err := c.nodes[i].node.Snapshot(); err != nil {
			t.Fatal(err)
		}
	}
	st := c.nodes[leader].node.Status()
	if st.State != "Leader" || st.FirstLogIndex <= 1 || st.LastSnapshotIndex < 100 || st.NumPeers != 2 || st.LastContact != 0 {
		t.Fatalf("leader status after compaction: %+v", st)
	}
	var entry raft.Log
	if err := c.nodes[leader].node.wal.GetLog(1, &entry); !errors.Is(err, raft.ErrLogNotFound) {
		t.Fatalf("GetLog(1) after compaction: %v, want raft.ErrLogNotFound", err)
	}

	c.add("n3", 3)
	last := c.waitConverged(20 * time.Second)
	// Raft records the installed snapshot and the leader's contact just
	// after the FSM has restored it.
	var got Status
	poll.True(t, "n3's status after installing the snapshot", func() bool {
		got = c.nodes[3].node.Status()
		return got.LastSnapshotIndex > 0 && got.LastContact >= 0 && got.NumPeers == 3
	})
	if got.SnapshotsRestored == 0 || got.Revision < last || got.State != "Follower" {
		t.Fatalf("new replica status %+v: want a snapshot restored, revision >= %d", got, last)
	}
	propose(t, c.nodes[3].node, "from-n3")
	c.checkSameState()
}

// VotersHave is true once every voter gossips the feature: replicas of a
// release before it (here: without "y") hold it back until they are
// restarted with it, as in an upgrade one replica at a time.
func TestVotersHaveFeatures(t *testing.T) {
	c := newTestCluster(t, 3, newTestFSMAsStore, func(cfg *Config) {
		cfg.Features = []string{"x"}
		if cfg.NodeID == "n2" {
			cfg.Features = append(cfg.Features, "y")
		}
	})
	c.waitLeader(15 * time.Second)
	for i := range c.nodes {
		n := c.nodes[i].node
		poll.True(t, "x on every voter, seen by "+c.nodes[i].cfg.NodeID, func() bool { return n.VotersHave("x") })
		if n.VotersHave("y") || n.VotersHave("z") {
			t.Fatalf("%s: y or z on every voter", c.nodes[i].cfg.NodeID)
		}
	}
	for _, i := range []int{0, 1} {
		c.kill(i)
		c.nodes[i].cfg.Features = []string{"x", "y"}
		c.start(i)
	}
	for i := range c.nodes {
		n := c.nodes[i].node
		poll.True(t, "y on every voter, seen by "+c.nodes[i].cfg.NodeID, func() bool { return n.VotersHave("y") })
	}
}
