package consensus

import (
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/canopy-dev/canopy/test/poll"
)

// seeded runs a node through commands commands and seeds a new
// directory with a snapshot of its state at index: the directory, and the
// state it holds.
func seeded(t *testing.T, commands int, index uint64) (dir string, want testState) {
	t.Helper()
	src := newTestFSM()
	a := openNode(t, t.TempDir(), src)
	for i := range commands {
		propose(t, a, "a-"+strconv.Itoa(i))
	}
	snap, err := src.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	defer snap.Release()
	dir = t.TempDir()
	if err := Seed(dir, index, snap); err != nil {
		t.Fatalf("Seed: %v", err)
	}
	want, _, _ = src.snapshot()
	return dir, want
}

// A seeded node starts from the seed's state at its index; the next
// commands get later indexes, and the state survives a restart as raft's
// own snapshot plus log.
func TestSeedStartsAtItsIndex(t *testing.T) {
	const index = 1000
	dir, want := seeded(t, 20, index)
	if err := Seed(dir, index, testSnapshot{want}); !errors.Is(err, ErrHasState) {
		t.Fatalf("Seed over a seed: %v, want ErrHasState", err)
	}

	fsm := newTestFSM()
	n := openNode(t, dir, fsm)
	if got := n.AppliedIndex(); got != index {
		t.Fatalf("AppliedIndex after the seed = %d, want %d", got, index)
	}
	if got, restores, err := fsm.snapshot(); err != nil || restores != 1 || !reflect.DeepEqual(got, want) {
		t.Fatalf("state after the seed %+v (restores %d, error %v), want %+v", got, restores, err, want)
	}
	r := propose(t, n, "after")
	if r.Index <= index {
		t.Fatalf("first command after the seed at index %d, want past %d", r.Index, index)
	}
	if _, err := os.Stat(filepath.Join(dir, seedFile)); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("the seed is still there after Open: %v", err)
	}
	if err := n.Close(); err != nil {
		t.Fatal(err)
	}

	again := newTestFSM()
	n = openNode(t, dir, again)
	got, _, err := again.snapshot()
	if err != nil || got.Keys["after"] != r.Index || len(got.Keys) != len(want.Keys)+1 || n.AppliedIndex() != r.Index {
		t.Fatalf("after a restart: state %+v, applied %d, error %v; want %d keys, \"after\" at %d", got, n.AppliedIndex(), err, len(want.Keys)+1, r.Index)
	}
	if err := Seed(dir, index, testSnapshot{want}); !errors.Is(err, ErrHasState) {
		t.Fatalf("Seed over a log: %v, want ErrHasState", err)
	}
}

// A seed damaged on disk is refused by Open, which installs nothing: the
// next Open refuses it the same way.
func TestSeedDamagedIsRefused(t *testing.T) {
	dir, _ := seeded(t, 5, 100)
	path := filepath.Join(dir, seedFile)
	xorByte(t, path, snapshotHeaderLen+3, 0x20)
	for range 2 {
		n, err := Open(Config{Dir: dir, NodeID: "root-0", Logger: testLogger(t)}, newTestFSM())
		if err == nil {
			n.Close()
			t.Fatal("Open installed a damaged seed")
		}
		var de *DamageError
		if !errors.As(err, &de) || de.File != path {
			t.Fatalf("Open: %v, want a DamageError naming %s", err, path)
		}
	}
	if ents, _ := os.ReadDir(filepath.Join(dir, "snapshots")); len(ents) != 0 {
		t.Fatalf("a damaged seed left snapshots: %v", ents)
	}
}

// A seeded replica of a cluster refuses to start with peers to join, starts
// alone as a one-voter cluster at the seed's index, and new replicas join
// it and catch up.
func TestSeedClusterStartsAlone(t *testing.T) {
	const index = 5000
	dir, want := seeded(t, 10, index)

	c := &testCluster{t: t, ca: newTestCA(t), newFSM: newTestFSMAsStore, clusterID: "test"}
	t.Cleanup(c.closeAll)
	cfg := Config{
		Dir: dir, NodeID: "n0", Logger: testLogger(t),
		RaftAddr: "127.0.0.1:0", PeerAddr: "127.0.0.1:0", TLS: c.ca.tls(t, "n0"), ClusterID: "test", tune: fastTuning(),
	}
	joining := cfg
	joining.Join = []string{"127.0.0.1:1"}
	if n, err := Open(joining, newTestFSM()); err == nil || !strings.Contains(err.Error(), "start this replica alone") {
		if n != nil {
			n.Close()
		}
		t.Fatalf("Open of a seeded replica with Join: %v, want a refusal saying to start it alone", err)
	}
	c.nodes = append(c.nodes, &testNode{cfg: cfg})
	c.start(0)
	c.waitLeader(10 * time.Second)
	if got := c.stateOf(0); !reflect.DeepEqual(got, want) || c.nodes[0].node.AppliedIndex() != index {
		t.Fatalf("seeded replica: state %+v at %d, want %+v at %d", got, c.nodes[0].node.AppliedIndex(), want, index)
	}
	c.add("n1", 3)
	c.add("n2", 3)
	poll.True(t, "three voters", func() bool {
		return reflect.DeepEqual(c.voters(0), []string{"n0", "n1", "n2"})
	})
	r := propose(t, c.nodes[2].node, "from-n2")
	if r.Index <= index {
		t.Fatalf("a command after the seed at index %d, want past %d", r.Index, index)
	}
	c.waitConverged(10 * time.Second)
	s := c.checkSameState()
	if len(s.Keys) != len(want.Keys)+1 {
		t.Fatalf("state %+v, want the seed's %d keys and one more", s, len(want.Keys))
	}
}
