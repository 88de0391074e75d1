package consensus

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"sync/atomic"

	"github.com/hashicorp/raft"

	"github.com/canopy-dev/canopy/relay/store"
)

// snapshotVersion is the first byte of every snapshot written by this
// package. The next 8 bytes are the index of the last command applied (big
// endian), then comes the FSM's own encoding.
const snapshotVersion byte = 1

const snapshotHeaderLen = 1 + 8

// fsmAdapter drives a store.FSM from raft. Raft calls its FSM methods from
// one goroutine (see the package doc for the contract it passes on).
type fsmAdapter struct {
	fsm store.FSM
	// applied is the index of the last command applied to fsm. It is
	// written on raft's FSM goroutine and read from anywhere.
	applied atomic.Uint64
}

var _ raft.BatchingFSM = (*fsmAdapter)(nil)

// Apply applies one committed entry. Only commands reach the store; raft
// also passes configuration entries, which the FSM has no use for.
func (a *fsmAdapter) Apply(l *raft.Log) any {
	if l.Type != raft.LogCommand {
		return nil
	}
	resp := a.fsm.Apply(l.Index, l.Data)
	a.applied.Store(l.Index)
	return resp
}

// ApplyBatch applies committed entries in order. Raft uses it instead of
// Apply because fsmAdapter implements raft.BatchingFSM.
func (a *fsmAdapter) ApplyBatch(logs []*raft.Log) []any {
	resps := make([]any, len(logs))
	for i, l := range logs {
		resps[i] = a.Apply(l)
	}
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
		return fmt.Errorf("consensus: unknown snapshot version %d", hdr[0])
	}
	if err := a.fsm.Restore(r); err != nil {
		return fmt.Errorf("consensus: restoring snapshot: %w", err)
	}
	a.applied.Store(binary.BigEndian.Uint64(hdr[1:]))
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
