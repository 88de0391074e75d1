package consensus

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"

	"github.com/canopy-dev/canopy/relay/store"
	"github.com/canopy-dev/canopy/test/poll"
)

// kvFSM is a deterministic key-value register: each command sets one key.
type kvFSM struct {
	mu   sync.Mutex
	data map[string]string
}

type kvPut struct {
	Key   string `json:"k"`
	Value string `json:"v"`
}

func newKVFSM() store.FSM { return &kvFSM{data: map[string]string{}} }

func (f *kvFSM) Apply(index uint64, cmd []byte) any {
	var p kvPut
	if err := json.Unmarshal(cmd, &p); err != nil {
		return err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.data[p.Key] = p.Value
	return index
}

func (f *kvFSM) get(key string) string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.data[key]
}

func (f *kvFSM) Snapshot() (store.Snapshot, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return kvSnapshot(maps.Clone(f.data)), nil
}

func (f *kvFSM) Restore(r io.Reader) error {
	data := map[string]string{}
	if err := json.NewDecoder(r).Decode(&data); err != nil {
		return err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.data = data
	return nil
}

type kvSnapshot map[string]string

func (s kvSnapshot) WriteTo(w io.Writer) (int64, error) {
	b, err := json.Marshal(map[string]string(s))
	if err != nil {
		return 0, err
	}
	n, err := w.Write(b)
	return int64(n), err
}

// Revision is not kept by this FSM; consensus never asks for it.
func (kvSnapshot) Revision() int64 { return 0 }

func (kvSnapshot) Release() {}

// kvInput and kvOutput are porcupine's view of one operation.
type kvInput struct {
	put   bool
	key   string
	value string
}

type kvOutput struct{ value string }

// kvModel is a map of registers, partitioned by key: each partition's
// state is one register's value.
var kvModel = porcupine.Model{
	Partition: func(history []porcupine.Operation) [][]porcupine.Operation {
		byKey := map[string][]porcupine.Operation{}
		for _, op := range history {
			k := op.Input.(kvInput).key
			byKey[k] = append(byKey[k], op)
		}
		var out [][]porcupine.Operation
		for _, ops := range byKey {
			out = append(out, ops)
		}
		return out
	},
	Init: func() any { return "" },
	Step: func(state, input, output any) (bool, any) {
		in := input.(kvInput)
		if in.put {
			return true, in.value
		}
		return output.(kvOutput).value == state.(string), state
	},
	DescribeOperation: func(input, output any) string {
		in := input.(kvInput)
		if in.put {
			return fmt.Sprintf("put(%s, %s)", in.key, in.value)
		}
		return fmt.Sprintf("get(%s) -> %q", in.key, output.(kvOutput).value)
	},
}

// TestClusterLinearizable drives a key-value register through Propose
// (writes, forwarded from followers) and ReadIndex plus a local read, from
// two clients on each of three replicas, kills the leader in the middle,
// and checks the history with porcupine. A write whose outcome is unknown
// may take effect at any time after its call, or never (porcupine puts it
// last); a write that failed with a bare context error must not have
// happened.
func TestClusterLinearizable(t *testing.T) {
	c := newTestCluster(t, 3, newKVFSM, nil)
	leader := c.waitLeader(15 * time.Second)

	start := time.Now()
	now := func() int64 { return int64(time.Since(start)) }
	var (
		mu      sync.Mutex
		history []porcupine.Operation
	)
	record := func(op porcupine.Operation) {
		mu.Lock()
		history = append(history, op)
		mu.Unlock()
	}
	keys := []string{"a", "b", "c"}
	var stop atomic.Bool
	var wg sync.WaitGroup
	var puts, gets, unknown, followerGets atomic.Int64
	client := 0
	for i := range c.nodes {
		n, fsm := c.nodes[i].node, c.nodes[i].fsm.(*kvFSM)
		for range 2 {
			id := client
			client++
			wg.Go(func() {
				rng := rand.New(rand.NewPCG(uint64(id), 1))
				for seq := 0; !stop.Load(); seq++ {
					key := keys[rng.IntN(len(keys))]
					ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
					if rng.IntN(2) == 0 {
						value := fmt.Sprintf("c%d-%d", id, seq)
						cmd, _ := json.Marshal(kvPut{Key: key, Value: value})
						call := now()
						_, err := n.Propose(ctx, cmd)
						ret := now()
						cancel()
						in := kvInput{put: true, key: key, value: value}
						switch {
						case err == nil:
							puts.Add(1)
						case errors.Is(err, ErrOutcomeUnknown), errors.Is(err, ErrClosed):
							unknown.Add(1)
							ret = math.MaxInt64 // may apply at any later time
						case errors.Is(err, context.DeadlineExceeded):
							continue // certainly not applied
						default:
							t.Errorf("Propose: %v", err)
							return
						}
						record(porcupine.Operation{ClientId: id, Input: in, Call: call, Output: kvOutput{}, Return: ret})
						if errors.Is(err, ErrClosed) {
							return
						}
						continue
					}
					call := now()
					idx, err := n.ReadIndex(ctx)
					if err == nil {
						err = n.WaitApplied(ctx, idx)
					}
					var value string
					if err == nil {
						value = fsm.get(key)
					}
					ret := now()
					cancel()
					switch {
					case err == nil:
						gets.Add(1)
						if !n.IsLeader() {
							followerGets.Add(1)
						}
						record(porcupine.Operation{ClientId: id, Input: kvInput{key: key}, Call: call, Output: kvOutput{value}, Return: ret})
					case errors.Is(err, ErrClosed):
						return
					case errors.Is(err, context.DeadlineExceeded):
					default:
						t.Errorf("read: %v", err)
						return
					}
				}
			})
		}
	}
	poll.True(t, "300 operations", func() bool { return puts.Load()+gets.Load() >= 300 })
	c.kill(leader)
	c.waitLeader(15 * time.Second)
	before := puts.Load() + gets.Load()
	poll.True(t, "300 operations after the failover", func() bool { return puts.Load()+gets.Load() >= before+300 })
	stop.Store(true)
	wg.Wait()
	if t.Failed() {
		t.FailNow()
	}
	if followerGets.Load() == 0 {
		t.Fatal("no read served by a follower")
	}

	res, info := porcupine.CheckOperationsVerbose(kvModel, history, 60*time.Second)
	t.Logf("%d puts, %d gets (%d on followers), %d unknown outcomes: %s", puts.Load(), gets.Load(), followerGets.Load(), unknown.Load(), res)
	if res != porcupine.Ok {
		path := filepath.Join(os.TempDir(), fmt.Sprintf("consensus-linearizability-%d.html", time.Now().UnixNano()))
		if err := porcupine.VisualizePath(kvModel, info, path); err == nil {
			t.Logf("visualization: %s", path)
		}
		t.Fatalf("history is not linearizable: %s", res)
	}
}

// TestKVModelRejectsStaleRead shows the model can fail: a read that misses
// a write completed before it began is not linearizable.
func TestKVModelRejectsStaleRead(t *testing.T) {
	history := []porcupine.Operation{
		{ClientId: 0, Input: kvInput{put: true, key: "a", value: "1"}, Call: 0, Output: kvOutput{}, Return: 10},
		{ClientId: 1, Input: kvInput{key: "a"}, Call: 20, Output: kvOutput{""}, Return: 30},
	}
	if res := porcupine.CheckOperationsTimeout(kvModel, history, time.Second); res != porcupine.Illegal {
		t.Fatalf("stale read judged %s", res)
	}
	history[0].Return = math.MaxInt64 // outcome unknown: may apply later
	if res := porcupine.CheckOperationsTimeout(kvModel, history, time.Second); res != porcupine.Ok {
		t.Fatalf("read before an unknown write judged %s", res)
	}
}
