package tree

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/canopy-dev/canopy/relay/layout"
	"github.com/canopy-dev/canopy/relay/store"
	"github.com/canopy-dev/canopy/relay/transport/internal/wire"
)

// sink is the applying half shared by Receiver (downsync) and Collector
// (upsync): it writes the frames of one stream to one space, in one Txn per
// burst together with its cursor, and acknowledges the cursor.
type sink struct {
	st        *store.Store
	space     string
	cursorKey store.Key
	up        bool // Collector: Report frames, ReportAck
	allow     func(wire.Key) bool
	cfg       *wire.Config
	maxBatch  int

	serving atomic.Bool
	// parentEpoch is the epoch written with downsync cursors
	// (Receiver.SetEpoch).
	parentEpoch atomic.Pointer[string]
	c           counters

	movedMu sync.Mutex
	moved   chan struct{} // closed when the cursor next moves
}

func newSink(st *store.Store, space string, cursorKey store.Key, up bool, allow func(wire.Key) bool, cfg *wire.Config, maxBatch int) *sink {
	if maxBatch <= 0 {
		maxBatch = 256
	}
	return &sink{
		st: st, space: space, up: up, allow: allow, cfg: cfg, maxBatch: maxBatch,
		cursorKey: cursorKey,
	}
}

// cursorChanged returns a channel closed once the cursor has moved after
// the call.
func (s *sink) cursorChanged() <-chan struct{} {
	s.movedMu.Lock()
	defer s.movedMu.Unlock()
	if s.moved == nil {
		s.moved = make(chan struct{})
	}
	return s.moved
}

// cursorMoved wakes the callers of cursorChanged.
func (s *sink) cursorMoved() {
	s.movedMu.Lock()
	defer s.movedMu.Unlock()
	if s.moved != nil {
		close(s.moved)
		s.moved = nil
	}
}

// cursor reads the persisted cursor; ok is false when none was written.
func (s *sink) cursor() (rev uint64, ok bool, err error) {
	c, ok, err := s.cursorObject()
	return c.Revision, ok, err
}

func (s *sink) cursorObject() (layout.Cursor, bool, error) {
	var c layout.Cursor
	o, err := s.st.Get(s.cursorKey)
	if errors.Is(err, store.ErrNotFound) {
		return c, false, nil
	}
	if err != nil {
		return c, false, err
	}
	if err := json.Unmarshal(o.Data, &c); err != nil {
		return c, false, fmt.Errorf("tree: cursor %s: %w", s.cursorKey, err)
	}
	return c, true, nil
}

func (s *sink) epoch() string {
	if e := s.parentEpoch.Load(); e != nil {
		return *e
	}
	return ""
}

func (s *sink) cursorOp(rev uint64, exists bool) store.Op {
	data, _ := json.Marshal(layout.Cursor{
		APIVersion: "tree.canopy.dev/v1alpha1",
		Kind:       "Cursor",
		Metadata:   map[string]any{"name": s.cursorKey.Name},
		Revision:   rev,
		Epoch:      s.epoch(),
	})
	t := store.OpCreate
	if exists {
		t = store.OpUpdate
	}
	return store.Op{Type: t, Key: s.cursorKey, Data: data}
}

// pending is the latest frame of one key in a burst.
type pending struct {
	data []byte
	del  bool
}

// burst is what one Txn applies.
type burst struct {
	objs   map[store.Key]pending
	cursor uint64
	// resyncEnd: this burst ends a snapshot; keys not seen are deleted.
	resyncEnd bool
}

// snapshot tracks a resync in progress.
type snapshot struct {
	rev  uint64
	seen map[store.Key]struct{}
}

func (s *sink) serve(ctx context.Context, rw io.ReadWriter) error {
	if !s.serving.CompareAndSwap(false, true) {
		return ErrBusy
	}
	defer s.serving.Store(false)

	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	l := newLink(rw, s.cfg, &s.c)
	stop := context.AfterFunc(ctx, l.close)
	defer stop()

	// The reader reads ahead at most maxBatch frames; the applier takes
	// what is there, and what the peer wrote with it, so a burst becomes
	// one Txn and a lone frame is applied at once.
	frames := make(chan frame, s.maxBatch)
	var readErr error
	readDone := make(chan struct{})
	go func() {
		defer close(readDone)
		defer close(frames)
		for {
			m, more, err := l.readMore()
			if err != nil {
				readErr = err
				return
			}
			select {
			case frames <- frame{m, more}:
			case <-ctx.Done():
				readErr = ctx.Err()
				return
			}
		}
	}()

	err := s.apply(ctx, l, frames)
	cancel()
	l.close()
	if errors.Is(err, errStreamEnded) {
		err = readErr // set before frames was closed
	}
	if l.closable() {
		<-readDone
	}
	return err
}

var errStreamEnded = errors.New("tree: stream ended")

// frame is a message read by the sink's reader; more says that the bytes
// of the next one had arrived with it.
type frame struct {
	m    wire.Message
	more bool
}

func (s *sink) apply(ctx context.Context, l *link, frames <-chan frame) error {
	cur, exists, err := s.cursor()
	if err != nil {
		return err
	}
	var snap *snapshot
	b := burst{objs: make(map[store.Key]pending), cursor: cur}
	for {
		var (
			f     frame
			ok    bool
			ended bool
		)
		select {
		case f, ok = <-frames:
		case <-ctx.Done():
			return ctx.Err()
		}
		if !ok {
			return errStreamEnded
		}
		for {
			end, err := s.add(&b, &snap, f.m)
			if err != nil {
				code := wire.CodeProtocol
				if errors.Is(err, ErrNotAllowed) {
					code = wire.CodePermissionDenied
				}
				if !errors.Is(err, ErrRemote) {
					l.fail(code, err)
				}
				return err
			}
			if end || len(b.objs) >= s.maxBatch {
				break
			}
			// The next frame joins the burst if it is there, or if its
			// bytes came with this one (a source writes a batch of frames
			// and its Progress at once): the reader is decoding it.
			got := false
			if f.more {
				select {
				case f, ok = <-frames:
					got = true
				case <-ctx.Done():
					return ctx.Err()
				}
			} else {
				select {
				case f, ok = <-frames:
					got = true
				default:
				}
			}
			if !got {
				break
			}
			if !ok {
				ended = true
				break
			}
		}
		// Commit what was read, even if the stream just ended: every frame
		// is a complete state of its key, and the cursor moves only with
		// Progress and ResyncEnd, never past a frame not applied.
		if err := s.commit(ctx, &b, &snap, cur, exists); err != nil {
			return err
		}
		if b.cursor != cur {
			cur, exists = b.cursor, true
			s.c.acked.Store(cur)
			var ack wire.Message = &wire.Ack{Revision: cur}
			if s.up {
				ack = &wire.ReportAck{Seq: cur}
			}
			if err := l.write(ack); err != nil {
				return err
			}
			if err := l.flush(); err != nil {
				return err
			}
		}
		if ended {
			return errStreamEnded
		}
	}
}

// add adds frame m to the burst; end says the burst must be committed now.
func (s *sink) add(b *burst, snap **snapshot, m wire.Message) (end bool, err error) {
	var (
		wk   wire.Key
		data []byte
		del  bool
	)
	switch m := m.(type) {
	case *wire.Put:
		if s.up {
			return false, unexpected(m)
		}
		wk, data = m.Key, m.Data
	case *wire.Delete:
		if s.up {
			return false, unexpected(m)
		}
		wk, del = m.Key, true
	case *wire.Report:
		if !s.up {
			return false, unexpected(m)
		}
		wk, data, del = m.Key, m.Data, m.Deleted
	case *wire.ResyncBegin:
		*snap = &snapshot{rev: m.Revision, seen: make(map[store.Key]struct{})}
		s.c.resyncs.Add(1)
		return false, nil
	case *wire.ResyncEnd:
		if *snap == nil || (*snap).rev != m.Revision {
			return false, fmt.Errorf("%w: ResyncEnd %d without its ResyncBegin", ErrProtocol, m.Revision)
		}
		b.cursor = m.Revision // authoritative, even if lower: the peer's state
		b.resyncEnd = true
		return true, nil
	case *wire.Progress:
		if *snap != nil {
			return false, fmt.Errorf("%w: Progress inside a resync", ErrProtocol)
		}
		b.cursor = max(b.cursor, m.Revision)
		return false, nil
	case *wire.Error:
		return false, remoteError(m)
	default:
		return false, unexpected(m)
	}
	k, err := storeKey(s.space, wk)
	if err != nil {
		return false, err
	}
	if s.allow != nil && !s.allow(wk) {
		return false, fmt.Errorf("%w: %s", ErrNotAllowed, wk.String())
	}
	b.objs[k] = pending{data: data, del: del}
	if *snap != nil {
		if del {
			delete((*snap).seen, k)
		} else {
			(*snap).seen[k] = struct{}{}
		}
	}
	return false, nil
}

func unexpected(m wire.Message) error {
	return fmt.Errorf("%w: unexpected %v", ErrProtocol, m.Type())
}

// commit applies the burst in one Txn with the cursor, then resets it.
func (s *sink) commit(ctx context.Context, b *burst, snap **snapshot, cur uint64, exists bool) error {
	keys := make([]store.Key, 0, len(b.objs))
	for k := range b.objs {
		keys = append(keys, k)
	}
	slices.SortFunc(keys, func(a, c store.Key) int { return compareKeys(a, c) })
	ops := make([]store.Op, 0, len(keys)+1)
	for _, k := range keys {
		p := b.objs[k]
		_, err := s.st.Get(k)
		present := err == nil
		if err != nil && !errors.Is(err, store.ErrNotFound) {
			return err
		}
		switch {
		case p.del && present:
			ops = append(ops, store.Op{Type: store.OpDelete, Key: k})
		case p.del:
		case present:
			ops = append(ops, store.Op{Type: store.OpUpdate, Key: k, Data: p.data})
		default:
			ops = append(ops, store.Op{Type: store.OpCreate, Key: k, Data: p.data})
		}
	}
	if b.resyncEnd {
		lr, err := s.st.List(store.ListOptions{Space: s.space})
		if err != nil {
			return err
		}
		for _, o := range lr.Items {
			_, seen := (*snap).seen[o.Key]
			_, inBurst := b.objs[o.Key]
			if !seen && !inBurst {
				ops = append(ops, store.Op{Type: store.OpDelete, Key: o.Key})
			}
		}
		*snap = nil
	}
	if b.cursor != cur {
		ops = append(ops, s.cursorOp(b.cursor, exists))
	}
	if len(ops) > 0 {
		if s.up {
			ctx = store.Bulk(ctx) // reports wait behind users' writes
		}
		if _, err := s.st.Txn(ctx, ops...); err != nil {
			return fmt.Errorf("tree: applying %d ops to %s: %w", len(ops), s.space, err)
		}
	}
	if b.cursor != cur {
		s.cursorMoved()
	}
	clear(b.objs)
	b.resyncEnd = false
	return nil
}

func compareKeys(a, b store.Key) int {
	for _, c := range [...][2]string{
		{a.Resource.Group, b.Resource.Group},
		{a.Resource.Resource, b.Resource.Resource},
		{a.Namespace, b.Namespace},
		{a.Name, b.Name},
	} {
		if c[0] != c[1] {
			if c[0] < c[1] {
				return -1
			}
			return 1
		}
	}
	return 0
}
