package store

import (
	"context"
	"sync"
)

// memLog is the Log of NewMemLog.
type memLog struct {
	mu   sync.Mutex
	fsm  FSM
	last uint64
}

// NewMemLog returns a Log that keeps nothing, for tests and simulations:
// Propose assigns the next index (the last one plus one) and returns what
// fsm.Apply returned for it. Proposals are serialized, so fsm sees one Apply
// at a time. When fsm has a Revision method, as a *Store has, indexes
// continue after it, so the log keeps working after fsm.Restore.
func NewMemLog(fsm FSM) Log { return &memLog{fsm: fsm} }

func (l *memLog) Propose(ctx context.Context, cmd []byte) (any, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if r, ok := l.fsm.(interface{ Revision() int64 }); ok {
		l.last = max(l.last, uint64(max(r.Revision(), 0)))
	}
	l.last++
	return l.fsm.Apply(l.last, cmd), nil
}
