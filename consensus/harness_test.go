package consensus

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"fmt"
	"io"
	"log/slog"
	"math/big"
	"net"
	"os"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/memberlist"
	"github.com/hashicorp/raft"

	"github.com/canopy-dev/canopy/relay/store"
	"github.com/canopy-dev/canopy/test/poll"
)

// testCA issues certificates for test replicas.
type testCA struct {
	cert *x509.Certificate
	key  *ecdsa.PrivateKey
	pool *x509.CertPool
}

func newTestCA(t testing.TB) *testCA {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "test-ca"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AddCert(cert)
	return &testCA{cert: cert, key: key, pool: pool}
}

// issue returns a certificate for name (and the extra DNS names), valid for
// 127.0.0.1 as server and client.
func (ca *testCA) issue(t testing.TB, name string, dnsNames ...string) tls.Certificate {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	serial, _ := rand.Int(rand.Reader, big.NewInt(1<<62))
	tmpl := &x509.Certificate{
		SerialNumber: serial, Subject: pkix.Name{CommonName: name},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		KeyUsage:    x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
		DNSNames:    append([]string{name}, dnsNames...), IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, &key.PublicKey, ca.key)
	if err != nil {
		t.Fatal(err)
	}
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}
}

func (ca *testCA) tls(t testing.TB, name string) *tls.Config {
	return PeerTLSConfig(ca.issue(t, name), ca.pool, "")
}

// fastTuning shortens raft's and memberlist's timers so a failover or a
// dead member is seen within about a second, while staying tolerant of a
// loaded 2-core machine under -race.
func fastTuning() *tuning {
	return &tuning{
		raft: func(c *raft.Config) {
			c.HeartbeatTimeout = 400 * time.Millisecond
			c.ElectionTimeout = 400 * time.Millisecond
			c.LeaderLeaseTimeout = 200 * time.Millisecond
		},
		memberlist: func(c *memberlist.Config) {
			c.ProbeInterval = 200 * time.Millisecond
			c.ProbeTimeout = 150 * time.Millisecond
			c.SuspicionMult = 3
			c.SuspicionMaxTimeoutMult = 2
			c.GossipInterval = 50 * time.Millisecond
			c.PushPullInterval = 3 * time.Second
			c.TCPTimeout = 2 * time.Second
			c.GossipToTheDeadTime = 5 * time.Second
			c.DeadNodeReclaimTime = time.Second
			c.IndirectChecks = 1
		},
	}
}

// steadyTuning is fastTuning with raft's own timers: for a test whose
// assertions need one leader throughout, which fastTuning's 200 ms lease
// can lose when the race detector and other tests starve the process.
func steadyTuning() *tuning {
	t := fastTuning()
	t.raft = func(*raft.Config) {}
	return t
}

func testLogger(t testing.TB) *slog.Logger {
	level := slog.LevelWarn + 4 // errors only: a killed node makes peers warn
	if os.Getenv("CONSENSUS_TEST_LOG") != "" {
		level = slog.LevelDebug
	}
	w := &testOutput{w: t.Output()}
	t.Cleanup(w.close)
	return slog.New(slog.NewTextHandler(w, &slog.HandlerOptions{Level: level}))
}

// testOutput writes to a test's output until the test ends, then drops:
// memberlist may log from a goroutine that outlives Shutdown.
type testOutput struct {
	mu     sync.Mutex
	w      io.Writer
	closed bool
}

func (o *testOutput) Write(p []byte) (int, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.closed {
		return len(p), nil
	}
	return o.w.Write(p)
}

func (o *testOutput) close() {
	o.mu.Lock()
	o.closed = true
	o.mu.Unlock()
}

// testCluster is a set of replicas on loopback with random ports.
type testCluster struct {
	t         *testing.T
	ca        *testCA
	newFSM    func() store.FSM
	nodes     []*testNode
	clusterID string
	tweak     func(*Config)
}

type testNode struct {
	cfg  Config
	fsm  store.FSM
	node *Node // nil while stopped
}

// newTestCluster opens n replicas n0…n(n-1) with BootstrapExpect n: n0
// first, the others joining it. tweak adjusts every Config.
func newTestCluster(t *testing.T, n int, newFSM func() store.FSM, tweak func(*Config), opts ...func(*testCluster)) *testCluster {
	t.Helper()
	c := &testCluster{t: t, ca: newTestCA(t), newFSM: newFSM, clusterID: "test", tweak: tweak}
	for _, o := range opts {
		o(c)
	}
	t.Cleanup(c.closeAll)
	for i := range n {
		c.add(fmt.Sprintf("n%d", i), n)
	}
	return c
}

// withCA exposes the cluster's CA to the caller before nodes start.
func withCA(ca **testCA) func(*testCluster) {
	return func(c *testCluster) { *ca = c.ca }
}

// add opens one more replica of the cluster, joining the live ones.
func (c *testCluster) add(id string, expect int) *testNode {
	c.t.Helper()
	cfg := Config{
		Dir: c.t.TempDir(), NodeID: id, Logger: testLogger(c.t),
		RaftAddr: "127.0.0.1:0", PeerAddr: "127.0.0.1:0", TLS: c.ca.tls(c.t, id),
		BootstrapExpect: expect, ClusterID: c.clusterID, Meta: []byte("https://" + id + ".api"),
		tune: fastTuning(),
	}
	if c.tweak != nil {
		c.tweak(&cfg)
	}
	tn := &testNode{cfg: cfg}
	c.nodes = append(c.nodes, tn)
	c.start(len(c.nodes) - 1)
	return tn
}

// start opens node i on its Dir (and, after the first start, on the same
// addresses), joining the gossip of the live nodes.
func (c *testCluster) start(i int) {
	c.t.Helper()
	tn := c.nodes[i]
	tn.cfg.Join = nil
	for j, o := range c.nodes {
		if j != i && o.node != nil {
			tn.cfg.Join = append(tn.cfg.Join, o.node.gossipAddr())
		}
	}
	tn.fsm = c.newFSM()
	n, err := Open(tn.cfg, tn.fsm)
	if err != nil {
		c.t.Fatalf("Open %s: %v", tn.cfg.NodeID, err)
	}
	tn.node = n
	tn.cfg.RaftAddr, tn.cfg.PeerAddr = n.cluster.raftAddr, n.gossipAddr()
}

// kill closes node i without leaving the cluster.
func (c *testCluster) kill(i int) {
	c.t.Helper()
	if err := c.nodes[i].node.Close(); err != nil {
		c.t.Errorf("Close %s: %v", c.nodes[i].cfg.NodeID, err)
	}
	c.nodes[i].node = nil
}

func (c *testCluster) closeAll() {
	for i, tn := range c.nodes {
		if tn.node != nil {
			c.kill(i)
		}
	}
}

func (c *testCluster) live() []int {
	var out []int
	for i, tn := range c.nodes {
		if tn.node != nil {
			out = append(out, i)
		}
	}
	return out
}

// waitLeader waits until every live node knows the same leader, which is
// among them and ready, and returns its index.
func (c *testCluster) waitLeader(timeout time.Duration) int {
	c.t.Helper()
	leader := -1
	poll.True(c.t, "one leader known to all live nodes", func() bool {
		leader = -1
		var id raft.ServerID
		for _, i := range c.live() {
			_, lid := c.nodes[i].node.raft.LeaderWithID()
			if lid == "" || (id != "" && lid != id) {
				return false
			}
			id = lid
		}
		for _, i := range c.live() {
			if c.nodes[i].cfg.NodeID == string(id) && c.nodes[i].node.IsLeader() {
				leader = i
			}
		}
		return leader >= 0
	}, poll.For(timeout))
	return leader
}

// voters returns the voter IDs of the configuration node i knows.
func (c *testCluster) voters(i int) []string {
	f := c.nodes[i].node.raft.GetConfiguration()
	if err := f.Error(); err != nil {
		c.t.Fatal(err)
	}
	var ids []string
	for _, s := range f.Configuration().Servers {
		if s.Suffrage == raft.Voter {
			ids = append(ids, string(s.ID))
		}
	}
	slices.Sort(ids)
	return ids
}

// waitConverged waits until every live node has applied the same index as
// the leader's read index.
func (c *testCluster) waitConverged(timeout time.Duration) uint64 {
	c.t.Helper()
	live := c.live()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	idx, err := c.nodes[live[0]].node.ReadIndex(ctx)
	if err != nil {
		c.t.Fatalf("ReadIndex: %v", err)
	}
	for _, i := range live {
		if err := c.nodes[i].node.WaitApplied(ctx, idx); err != nil {
			c.t.Fatalf("%s: WaitApplied(%d): %v (at %d)", c.nodes[i].cfg.NodeID, idx, err, c.nodes[i].node.AppliedIndex())
		}
	}
	return idx
}

// proposeAll runs fn concurrently for each of writers goroutines on each
// live node and waits for them.
func (c *testCluster) proposeAll(writers int, fn func(node, writer int, n *Node)) {
	var wg sync.WaitGroup
	for _, i := range c.live() {
		n := c.nodes[i].node
		for w := range writers {
			wg.Go(func() { fn(i, w, n) })
		}
	}
	wg.Wait()
}
