package consensus

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"sync"
	"sync/atomic"

	"github.com/hashicorp/raft"

	"github.com/canopy-dev/canopy/relay/store"
)

// snapshotVersion is the first byte of every snapshot written by this
// package. The next 8 bytes are the index of the last command applied (big
// endian), then comes the FSM's own encoding.
const snapshotVersion byte = 1

const snapshotHeaderLen = 1 + 8

// snapshotVersionError says why a snapshot of version v cannot be read:
// one of a newer format, written by a newer relay, is refused in words
// that say so.
func snapshotVersionError(v byte) error {
	if v > snapshotVersion {
		return fmt.Errorf("snapshot format %d is newer than this relay reads (%d): run a relay at least as new as the one that wrote it", v, snapshotVersion)
	}
	return fmt.Errorf("unknown snapshot format %d", v)
}

// resultRingSize is how many recent Apply results a node keeps for the
// proposals it forwarded to the leader (see fsmAdapter.result).
const resultRingSize = 4096

// fsmAdapter drives a store.FSM from raft. Raft calls its FSM methods from
// one goroutine (see the package doc for the contract it passes on).
//
// It also keeps what a forwarded proposal needs on a follower: a bounded
// ring of recent Apply results keyed by log index (the FSM is deterministic,
// so the result this replica computed for an index is the result), and a
// broadcast of applied-index changes to wake waiters. The ring is written
// only while recording > 0, that is while this node has a forwarded
// proposal whose result it has not collected yet: the counter is raised
// before the proposal is sent, so its entry can only be applied after.
type fsmAdapter struct {
	fsm store.FSM
	// applied is the index of the last command applied to fsm. It is
	// written on raft's FSM goroutine and read from anywhere.
	applied atomic.Uint64
	// recording counts forwarded proposals waiting for their result.
	recording atomic.Int64
	// restores counts snapshots restored into fsm (Status).
	restores atomic.Uint64

	mu sync.Mutex // guards ring and changed
	// ring[i % resultRingSize] holds the result of command i, if recorded
	// and not overwritten since. It is allocated by the first forward, so
	// a node that never forwards (a single node, a leader) pays nothing.
	ring []appliedResult
	// changed is closed (and replaced) when applied advances.
	changed chan struct{}
}

type appliedResult struct {
	index uint64
	resp  any
}

func newFSMAdapter(fsm store.FSM) *fsmAdapter {
	return &fsmAdapter{fsm: fsm, changed: make(chan struct{})}
}

// setApplied publishes a new applied index and wakes waitApplied.
func (a *fsmAdapter) setApplied(index uint64) {
	a.applied.Store(index)
	a.mu.Lock()
	close(a.changed)
	a.changed = make(chan struct{})
	a.mu.Unlock()
}

// appliedChanged returns a channel closed the next time applied advances.
func (a *fsmAdapter) appliedChanged() <-chan struct{} {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.changed
}

// startRecording keeps the results of the commands applied from now on,
// until the matching stopRecording.
func (a *fsmAdapter) startRecording() {
	a.mu.Lock()
	if a.ring == nil {
		a.ring = make([]appliedResult, resultRingSize)
	}
	a.mu.Unlock()
	a.recording.Add(1)
}

func (a *fsmAdapter) stopRecording() { a.recording.Add(-1) }

// result returns what Apply returned for the command at index, if it was
// recorded and has not been overwritten by a command resultRingSize later.
func (a *fsmAdapter) result(index uint64) (any, bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.ring == nil || index == 0 {
		return nil, false
	}
	r := a.ring[index%resultRingSize]
	if r.index != index {
		return nil, false
	}
	return r.resp, true
}

var _ raft.BatchingFSM = (*fsmAdapter)(nil)

// Apply applies one committed entry. Only commands reach the store; raft
// also passes configuration entries, which the FSM has no use for.
func (a *fsmAdapter) Apply(l *raft.Log) any {
	resp, ok := a.apply(l)
	if ok {
		a.setApplied(l.Index)
	}
	return resp
}

// apply applies one entry without publishing the applied index; ok reports
// a command.
func (a *fsmAdapter) apply(l *raft.Log) (resp any, ok bool) {
	if l.Type != raft.LogCommand {
		return nil, false
	}
	resp = a.fsm.Apply(l.Index, l.Data)
	if a.recording.Load() > 0 {
		a.mu.Lock()
		a.ring[l.Index%resultRingSize] = appliedResult{index: l.Index, resp: resp}
		a.mu.Unlock()
	}
	a.applied.Store(l.Index)
	return resp, true
}

// ApplyBatch applies committed entries in order and wakes waiters once per
// batch. Raft uses it instead of Apply because fsmAdapter implements
// raft.BatchingFSM.
//
// An FSM that implements store.BatchFSM gets the batch's commands in one
// call: the store then takes its lock once per batch.
func (a *fsmAdapter) ApplyBatch(logs []*raft.Log) []any {
	resps := make([]any, len(logs))
	bf, ok := a.fsm.(store.BatchFSM)
	if !ok {
		var last uint64
		for i, l := range logs {
			var ok bool
			if resps[i], ok = a.apply(l); ok {
				last = l.Index
			}
		}
		if last != 0 {
			a.setApplied(last)
		}
		return resps
	}
	var (
		entries []store.Entry
		at      []int // entries[j] is logs[at[j]]
	)
	for i, l := range logs {
		if l.Type == raft.LogCommand {
			entries = append(entries, store.Entry{Index: l.Index, Cmd: l.Data})
			at = append(at, i)
		}
	}
	if len(entries) == 0 {
		return resps
	}
	for j, r := range bf.ApplyBatch(entries) {
		resps[at[j]] = r
	}
	if a.recording.Load() > 0 {
		a.mu.Lock()
		for _, i := range at {
			l := logs[i]
			a.ring[l.Index%resultRingSize] = appliedResult{index: l.Index, resp: resps[i]}
		}
		a.mu.Unlock()
	}
	a.setApplied(entries[len(entries)-1].Index)
	return resps
}

// Snapshot takes the FSM's copy-on-write snapshot, tagged with the index of
// the last command it contains.
func (a *fsmAdapter) Snapshot() (raft.FSMSnapshot, error) {
	s, err := a.fsm.Snapshot()
	if err != nil {
		return nil, fmt.Errorf("consensus: taking snapshot: %w", err)
	}
	return &fsmSnapshot{snap: s, index: a.applied.Load()}, nil
}

// Restore replaces the FSM's state with a snapshot written by
// fsmSnapshot.Persist. Raft closes r.
func (a *fsmAdapter) Restore(r io.ReadCloser) error {
	var hdr [snapshotHeaderLen]byte
	if _, err := io.ReadFull(r, hdr[:]); err != nil {
		return fmt.Errorf("consensus: reading snapshot header: %w", err)
	}
	if hdr[0] != snapshotVersion {
		return fmt.Errorf("consensus: %w", snapshotVersionError(hdr[0]))
	}
	if err := a.fsm.Restore(r); err != nil {
		return fmt.Errorf("consensus: restoring snapshot: %w", err)
	}
	a.setApplied(binary.BigEndian.Uint64(hdr[1:]))
	a.restores.Add(1)
	return nil
}

// fsmSnapshot writes a store.Snapshot into raft's snapshot store. Raft calls
// Persist on its snapshot goroutine, concurrently with later Applies.
type fsmSnapshot struct {
	snap  store.Snapshot
	index uint64
}

func (s *fsmSnapshot) Persist(sink raft.SnapshotSink) error {
	var hdr [snapshotHeaderLen]byte
	hdr[0] = snapshotVersion
	binary.BigEndian.PutUint64(hdr[1:], s.index)
	_, err := sink.Write(hdr[:])
	if err == nil {
		_, err = s.snap.WriteTo(sink)
	}
	if err != nil {
		return fmt.Errorf("consensus: writing snapshot: %w", errors.Join(err, sink.Cancel()))
	}
	return sink.Close()
}

func (s *fsmSnapshot) Release() { s.snap.Release() }
