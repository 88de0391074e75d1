package server

import (
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/canopy-dev/canopy/relay/layout"
	"github.com/canopy-dev/canopy/relay/pki"
	"github.com/canopy-dev/canopy/relay/store"
	"github.com/canopy-dev/canopy/relay/transport/tree"
	"github.com/canopy-dev/canopy/test/poll"
	edgev1alpha1 "github.com/canopy-dev/canopy/topology/api/v1alpha1"
)

// replica is one root of a test cluster.
type replica struct {
	*Root
	stop func()
}

// freeTCPPort returns a loopback address whose port was free a moment ago
// (memberlist needs one fixed port for UDP and TCP).
func freeTCPPort(t testing.TB) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// sharePKI creates the shared credentials in the first data directory and
// imports them into the others, as "relay pki export | relay pki import"
// does.
func sharePKI(t testing.TB, dirs []string) {
	t.Helper()
	src := pki.Dir(dirs[0])
	if _, err := pki.LoadOrCreateCA(src); err != nil {
		t.Fatal(err)
	}
	if _, err := pki.LoadOrCreateToken(filepath.Join(src, pki.AdminTokenFile)); err != nil {
		t.Fatal(err)
	}
	if _, err := pki.LoadOrCreateSigningKey(filepath.Join(src, pki.SigningKeyFile)); err != nil {
		t.Fatal(err)
	}
	bundle, err := pki.ExportShared(src)
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range dirs[1:] {
		if err := pki.ImportShared(pki.Dir(d), bundle); err != nil {
			t.Fatal(err)
		}
	}
}

// startReplicas starts n roots on loopback that form one cluster
// (--bootstrap-expect=n, each joining the others) and waits until all
// serve.
func startReplicas(t testing.TB, n int) []*replica {
	t.Helper()
	rs, _, _ := startReplicasHA(t, n, Replication{})
	return rs
}

// leaderOf waits for one of rs to lead and returns its index.
func leaderOf(t testing.TB, rs []*replica) int {
	t.Helper()
	leader := -1
	poll.True(t, "a leader", func() bool {
		for i, r := range rs {
			if r != nil && r.IsLeader() {
				leader = i
				return true
			}
		}
		return false
	})
	return leader
}

// createConfigMap creates a ConfigMap through r's kube API, retrying while
// the cluster elects a leader (503) or the outcome is unknown (504: an
// AlreadyExists on the retry means the first one was applied).
func createConfigMap(t testing.TB, r *replica, name string) {
	t.Helper()
	cs := adminClient(t, r.Root, "default")
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default"}, Data: map[string]string{"k": name}}
	poll.Until(t, "creating "+name+" through "+r.cfg.Name, func() error {
		ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
		defer cancel()
		_, err := cs.CoreV1().ConfigMaps("default").Create(ctx, cm, metav1.CreateOptions{})
		switch {
		case err == nil, apierrors.IsAlreadyExists(err):
			return nil
		case apierrors.IsServiceUnavailable(err), apierrors.IsTimeout(err):
			return err
		}
		return poll.Stop(err)
	}, poll.Every(200*time.Millisecond))
}

// readBack checks that every replica serves each ConfigMap to a get
// without resourceVersion (linearizable: no waiting needed) and lists them
// all.
func readBack(t *testing.T, rs []*replica, names []string) {
	t.Helper()
	for _, r := range rs {
		if r == nil {
			continue
		}
		cs := adminClient(t, r.Root, "default")
		for _, name := range names {
			cm, err := cs.CoreV1().ConfigMaps("default").Get(context.Background(), name, metav1.GetOptions{})
			if err != nil || cm.Data["k"] != name {
				t.Fatalf("%s: get %s: %v", r.cfg.Name, name, err)
			}
		}
		list, err := cs.CoreV1().ConfigMaps("default").List(context.Background(), metav1.ListOptions{})
		if err != nil {
			t.Fatalf("%s: list: %v", r.cfg.Name, err)
		}
		if len(list.Items) < len(names) {
			t.Fatalf("%s: list has %d ConfigMaps, want at least %d", r.cfg.Name, len(list.Items), len(names))
		}
	}
}

// Three root replicas: writes through a follower's kube API (forwarded to
// the leader) are read back, linearizably, from every replica; the leader
// is killed and writes continue through a survivor; an edge given all
// three link addresses keeps its inbox converged across the kill.
func TestRootReplicasFailover(t *testing.T) {
	if testing.Short() {
		t.Skip("starts three replicas with raft's default timers")
	}
	rs := startReplicas(t, 3)
	leader := leaderOf(t, rs)
	follower := (leader + 1) % 3
	for _, r := range rs {
		if got := len(r.Members()); got != 3 {
			t.Fatalf("%s sees %d members, want 3", r.cfg.Name, got)
		}
	}

	var names []string
	for i := range 5 {
		names = append(names, fmt.Sprintf("before-%d", i))
		createConfigMap(t, rs[follower], names[i])
	}
	readBack(t, rs, names)

	// The edge joins through a follower and lists the leader first, so the
	// kill below takes its parent away.
	token := joinToken(t, rs[follower].Root)
	parents := []string{rs[leader].LinkAddr()}
	for i, r := range rs {
		if i != leader {
			parents = append(parents, r.LinkAddr())
		}
	}
	edge := startTestChild(t, ChildConfig{Role: pki.RoleEdge, Name: "edge-1", DataDir: t.TempDir(),
		Parents: parents, JoinToken: token, VirtualCluster: true})
	poll.True(t, "edge connected", func() bool { return edge.Uplink().Connected() })
	put := func(via *replica, name string) {
		data := fmt.Sprintf(`{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":%q,"namespace":"default","annotations":{%q:"edge-1"}}}`, name, edgev1alpha1.DestinationsAnnotation)
		k := store.Key{Space: layout.DownsyncSpace, Resource: store.Resource{Resource: "configmaps"}, Namespace: "default", Name: name}
		if _, err := via.Store().Create(context.Background(), k, []byte(data)); err != nil {
			t.Fatalf("downsync %s via %s: %v", name, via.cfg.Name, err)
		}
	}
	converged := func(ref *replica, n int) func() bool {
		return func() bool {
			want, err := tree.RoutedContentHash(ref.Store(), layout.DownsyncSpace, ref.Routing("edge-1"))
			if err != nil {
				return false
			}
			got, err := tree.ContentHash(edge.Store(), layout.InboxSpace)
			items, _ := edge.Store().List(store.ListOptions{Space: layout.InboxSpace})
			return err == nil && got == want && len(items.Items) == n
		}
	}
	for i := range 3 {
		put(rs[follower], fmt.Sprintf("down-%d", i))
	}
	poll.True(t, "inbox converged before the kill", converged(rs[follower], 3))

	killed := rs[leader].cfg.Name
	epochOf := func(r *replica) string {
		o, err := r.Store().Get(store.Key{Resource: store.Resource{Group: "tree.canopy.dev", Resource: "epochs"}, Name: layout.DownsyncSpace})
		if err != nil {
			t.Fatalf("%s: epoch record: %v", r.cfg.Name, err)
		}
		return string(o.Data)
	}
	epoch := epochOf(rs[follower])
	start := time.Now()
	rs[leader].stop()
	rs[leader] = nil
	newLeader := leaderOf(t, rs)
	t.Logf("killed leader %s; %s leads after %v", killed, rs[newLeader].cfg.Name, time.Since(start).Round(time.Millisecond))

	survivor := (newLeader + 1) % 3
	if rs[survivor] == nil {
		survivor = (survivor + 1) % 3
	}
	for i := range 3 {
		names = append(names, fmt.Sprintf("after-%d", i))
		createConfigMap(t, rs[survivor], names[len(names)-1])
	}
	readBack(t, rs, names)

	for i := 3; i < 6; i++ {
		put(rs[survivor], fmt.Sprintf("down-%d", i))
	}
	poll.True(t, "inbox converged after the kill", converged(rs[survivor], 6))
	if !edge.Uplink().Connected() {
		t.Fatal("edge not reconnected")
	}
	for _, r := range rs {
		if r != nil && epochOf(r) != epoch {
			t.Fatalf("%s has epoch record %s, want %s", r.cfg.Name, epochOf(r), epoch)
		}
	}
}

// Replicas sharing a PKI derive one cluster id and a peer certificate for
// it; the bundle import refuses a directory with other credentials.
func TestSharedPKIAndPeerCertificate(t *testing.T) {
	a, b, c := t.TempDir(), t.TempDir(), t.TempDir()
	sharePKI(t, []string{a, b})
	caA, err := pki.LoadCA(pki.Dir(a))
	if err != nil {
		t.Fatal(err)
	}
	caB, err := pki.LoadCA(pki.Dir(b))
	if err != nil {
		t.Fatal(err)
	}
	if caA.ClusterID() != caB.ClusterID() {
		t.Fatalf("cluster ids differ: %s, %s", caA.ClusterID(), caB.ClusterID())
	}
	for _, f := range []string{pki.CAKeyFile, pki.AdminTokenFile, pki.SigningKeyFile} {
		fi, err := os.Stat(filepath.Join(pki.Dir(b), f))
		if err != nil || fi.Mode().Perm() != 0o600 {
			t.Fatalf("%s: %v, mode %v; want 0600", f, err, fi.Mode())
		}
	}
	cert, err := caB.EnsurePeer(pki.Dir(b), caB.ClusterID())
	if err != nil {
		t.Fatal(err)
	}
	if got := cert.Leaf.DNSNames; len(got) != 1 || got[0] != pki.PeerName(caA.ClusterID()) {
		t.Fatalf("peer certificate names %v", got)
	}
	if _, err := pki.LoadOrCreateCA(pki.Dir(c)); err != nil {
		t.Fatal(err)
	}
	bundle, err := pki.ExportShared(pki.Dir(a))
	if err != nil {
		t.Fatal(err)
	}
	if err := pki.ImportShared(pki.Dir(c), bundle); err == nil {
		t.Fatal("import over another CA succeeded")
	}
	if err := pki.ImportShared(pki.Dir(b), bundle); err != nil {
		t.Fatalf("importing the same bundle again: %v", err)
	}
}
