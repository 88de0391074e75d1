package consensus

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"reflect"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/canopy-dev/canopy/relay/store"
	"github.com/canopy-dev/canopy/test/poll"
)

// testState is the whole state of testFSM: each command is a distinct key.
type testState struct {
	Keys  map[string]uint64 `json:"keys"`  // key → index of the command
	Count uint64            `json:"count"` // commands applied
	Last  uint64            `json:"last"`  // index of the last command
}

// check reports a state that no sequence of whole commands with distinct
// keys can produce.
func (s testState) check() error {
	if uint64(len(s.Keys)) != s.Count {
		return fmt.Errorf("%d keys but %d commands applied", len(s.Keys), s.Count)
	}
	seen := make(map[uint64]string, len(s.Keys))
	var maxIndex uint64
	for k, i := range s.Keys {
		if other, dup := seen[i]; dup {
			return fmt.Errorf("keys %q and %q both at index %d", k, other, i)
		}
		seen[i] = k
		maxIndex = max(maxIndex, i)
	}
	if maxIndex != s.Last {
		return fmt.Errorf("last index %d, highest key index %d", s.Last, maxIndex)
	}
	return nil
}

// applyResult is what testFSM.Apply returns.
type applyResult struct {
	Index uint64
	Count uint64
}

// testFSM is a deterministic store.FSM for tests with a JSON snapshot. It
// records the first violation of the Apply contract it sees.
type testFSM struct {
	mu       sync.Mutex
	state    testState
	restores int
	// restored lists the Last index of every snapshot restored.
	restored []uint64
	err      error
}

var _ store.FSM = (*testFSM)(nil)

func newTestFSM() *testFSM {
	return &testFSM{state: testState{Keys: map[string]uint64{}}}
}

func (f *testFSM) Apply(index uint64, cmd []byte) any {
	f.mu.Lock()
	defer f.mu.Unlock()
	if index <= f.state.Last && f.err == nil {
		f.err = fmt.Errorf("Apply(%d) after Apply(%d)", index, f.state.Last)
	}
	f.state.Keys[string(cmd)] = index
	f.state.Count++
	f.state.Last = index
	return applyResult{Index: index, Count: f.state.Count}
}

func (f *testFSM) Snapshot() (store.Snapshot, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return testSnapshot{f.snapshotLocked()}, nil
}

func (f *testFSM) snapshotLocked() testState {
	s := f.state
	s.Keys = maps.Clone(s.Keys)
	return s
}

func (f *testFSM) Restore(r io.Reader) error {
	var s testState
	if err := json.NewDecoder(r).Decode(&s); err != nil {
		return err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.state = s
	f.restores++
	f.restored = append(f.restored, s.Last)
	return nil
}

// snapshot returns a copy of the state, the number of restores and the
// first contract violation.
func (f *testFSM) snapshot() (testState, int, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.snapshotLocked(), f.restores, f.err
}

type testSnapshot struct{ state testState }

func (s testSnapshot) WriteTo(w io.Writer) (int64, error) {
	b, err := json.Marshal(s.state)
	if err != nil {
		return 0, err
	}
	n, err := w.Write(b)
	return int64(n), err
}

func (s testSnapshot) Revision() int64 { return int64(s.state.Last) }

// Release has nothing to free: the snapshot is a private copy.
func (testSnapshot) Release() {}

// openNode opens a node on dir and closes it at the end of the test.
func openNode(tb testing.TB, dir string, fsm store.FSM, tweak ...func(*Config)) *Node {
	tb.Helper()
	cfg := Config{
		Dir:    dir,
		NodeID: "root-0",
		Logger: slog.New(slog.NewTextHandler(tb.Output(), &slog.HandlerOptions{Level: slog.LevelWarn})),
	}
	for _, f := range tweak {
		f(&cfg)
	}
	n, err := Open(cfg, fsm)
	if err != nil {
		tb.Fatalf("Open: %v", err)
	}
	tb.Cleanup(func() {
		if err := n.Close(); err != nil {
			tb.Errorf("Close: %v", err)
		}
	})
	return n
}

func propose(tb testing.TB, n *Node, cmd string) applyResult {
	tb.Helper()
	resp, err := n.Propose(context.Background(), []byte(cmd))
	if err != nil {
		tb.Fatalf("Propose(%q): %v", cmd, err)
	}
	return resp.(applyResult)
}

func TestProposeReturnsApplyResult(t *testing.T) {
	fsm := newTestFSM()
	n := openNode(t, t.TempDir(), fsm)

	var last applyResult
	for i := range 100 {
		got := propose(t, n, "seq-"+strconv.Itoa(i))
		if got.Index <= last.Index || got.Count != last.Count+1 {
			t.Fatalf("command %d: got %+v after %+v", i, got, last)
		}
		last = got
	}
	if got := n.AppliedIndex(); got != last.Index {
		t.Fatalf("AppliedIndex = %d, want %d", got, last.Index)
	}

	const writers, each = 16, 50
	results := make(chan applyResult, writers*each)
	var wg sync.WaitGroup
	for w := range writers {
		wg.Go(func() {
			for i := range each {
				resp, err := n.Propose(context.Background(), fmt.Appendf(nil, "par-%d-%d", w, i))
				if err != nil {
					t.Errorf("writer %d command %d: %v", w, i, err)
					return
				}
				results <- resp.(applyResult)
			}
		})
	}
	wg.Wait()
	close(results)
	indexes := map[uint64]bool{}
	for r := range results {
		if r.Index <= last.Index || indexes[r.Index] {
			t.Errorf("index %d reused or not after %d", r.Index, last.Index)
		}
		indexes[r.Index] = true
	}
	if len(indexes) != writers*each {
		t.Fatalf("%d proposals acked, want %d", len(indexes), writers*each)
	}
	state, _, err := fsm.snapshot()
	if err != nil {
		t.Fatal(err)
	}
	if err := state.check(); err != nil {
		t.Fatal(err)
	}
	if state.Count != 100+writers*each || n.AppliedIndex() != state.Last {
		t.Fatalf("count %d, last %d, AppliedIndex %d", state.Count, state.Last, n.AppliedIndex())
	}
}

func TestProposeErrors(t *testing.T) {
	n := openNode(t, t.TempDir(), newTestFSM())

	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := n.Propose(ctx, []byte("x")); !errors.Is(err, context.Canceled) {
		t.Errorf("Propose with cancelled ctx: %v, want context.Canceled", err)
	}
	if err := n.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := n.Propose(context.Background(), []byte("x")); !errors.Is(err, ErrClosed) {
		t.Errorf("Propose after Close: %v, want ErrClosed", err)
	}
	if err := n.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
}

func TestOpenRejectsIncompleteConfig(t *testing.T) {
	for _, tc := range []struct {
		name string
		cfg  Config
		fsm  store.FSM
	}{
		{"no dir", Config{NodeID: "n"}, newTestFSM()},
		{"no node id", Config{Dir: t.TempDir()}, newTestFSM()},
		{"no fsm", Config{Dir: t.TempDir(), NodeID: "n"}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if n, err := Open(tc.cfg, tc.fsm); err == nil {
				n.Close()
				t.Fatal("Open succeeded")
			}
		})
	}
}

func TestReopenRebuildsFSM(t *testing.T) {
	for _, tc := range []struct {
		name string
		// snapshot is called between the two batches of proposals.
		snapshot func(t *testing.T, n *Node)
		tweak    func(*Config)
		restores int
	}{
		{name: "log only", snapshot: func(*testing.T, *Node) {}},
		{
			name: "forced snapshot",
			snapshot: func(t *testing.T, n *Node) {
				if err := n.raft.Snapshot().Error(); err != nil {
					t.Fatalf("Snapshot: %v", err)
				}
			},
			restores: 1,
		},
		{
			// Raft snapshots on its own while proposals keep coming,
			// so WriteTo runs concurrently with Apply (under -race).
			name: "automatic snapshots",
			tweak: func(c *Config) {
				c.SnapshotThreshold = 20
				c.SnapshotInterval = 10 * time.Millisecond
				c.TrailingLogs = 5
			},
			snapshot: func(t *testing.T, n *Node) {
				poll.True(t, "an automatic snapshot", func() bool {
					return n.Stats()["last_snapshot_index"] != "0"
				})
			},
			restores: 1,
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			var tweaks []func(*Config)
			if tc.tweak != nil {
				tweaks = append(tweaks, tc.tweak)
			}
			fsm := newTestFSM()
			n := openNode(t, dir, fsm, tweaks...)
			for i := range 200 {
				propose(t, n, "a-"+strconv.Itoa(i))
			}
			tc.snapshot(t, n)
			for i := range 50 {
				propose(t, n, "b-"+strconv.Itoa(i))
			}
			want, _, _ := fsm.snapshot()
			wantApplied := n.AppliedIndex()
			if err := n.Close(); err != nil {
				t.Fatal(err)
			}

			fsm2 := newTestFSM()
			n2 := openNode(t, dir, fsm2, tweaks...)
			got, restores, err := fsm2.snapshot()
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, want) {
				t.Fatalf("rebuilt state differs: %d keys, last %d; want %d keys, last %d",
					len(got.Keys), got.Last, len(want.Keys), want.Last)
			}
			if restores != tc.restores {
				t.Errorf("%d restores from snapshot, want %d", restores, tc.restores)
			}
			if got := n2.AppliedIndex(); got != wantApplied {
				t.Errorf("AppliedIndex after reopen = %d, want %d", got, wantApplied)
			}
			if r := propose(t, n2, "after-reopen"); r.Index <= wantApplied || r.Count != want.Count+1 {
				t.Errorf("first command after reopen: %+v", r)
			}
		})
	}
}

func TestHCLogAdapter(t *testing.T) {
	var buf bytes.Buffer
	l := newHCLogger(slog.New(slog.NewJSONHandler(&buf, &slog.HandlerOptions{Level: slog.LevelDebug})), "raft")
	l = l.Named("snap").With("id", "s1")

	l.Debug("hidden")
	l.Info("routine", "k", 1)
	l.Warn("odd")
	l.StandardLogger(&hclog.StandardLoggerOptions{InferLevels: true}).Print("[ERROR] broken")

	var got []string
	for line := range bytes.Lines(buf.Bytes()) {
		var rec map[string]any
		if err := json.Unmarshal(line, &rec); err != nil {
			t.Fatal(err)
		}
		got = append(got, fmt.Sprintf("%v %v %v %v", rec["level"], rec["msg"], rec["logger"], rec["id"]))
	}
	want := []string{
		"DEBUG routine raft.snap s1",
		"WARN odd raft.snap s1",
		"ERROR broken raft.snap s1",
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("got %q, want %q", got, want)
	}
	if lvl := l.GetLevel(); lvl != hclog.Info {
		t.Errorf("GetLevel = %v, want Info", lvl)
	}
}
