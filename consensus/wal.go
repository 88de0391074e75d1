package consensus

import (
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/raft"
	raftwal "github.com/hashicorp/raft-wal"
	"github.com/hashicorp/raft-wal/fs"
	"github.com/hashicorp/raft-wal/metadb"
	"github.com/hashicorp/raft-wal/segment"
	"github.com/hashicorp/raft-wal/types"
)

// ErrStorage: this node's log could not be written, so the command was not
// appended (nothing was written; retrying is safe once the cause is gone).
// The error names the cause: errors.Is(err, syscall.ENOSPC) tells a full
// disk. Node.LogError reports it until a write succeeds again.
var ErrStorage = errors.New("consensus: log not writable")

// storedKey is the key, in raft-wal's stable store (its metadata database),
// of the highest log index this log is known to have stored durably. Open
// refuses a log that no longer reaches it (nor a snapshot does): a
// truncated or partly lost log. It is written at most every storedInterval
// after appends, and at Close, so a log stopped cleanly is checked to its
// last entry; it is lowered before raft deletes the end of the log.
var storedKey = []byte("canopy/stored-index")

const (
	storedInterval = 100 * time.Millisecond
	// reopenInterval spaces the attempts to reopen a log whose segment
	// could not be started (walStore.reopen).
	reopenInterval = time.Second
)

// walConfig configures openWAL.
type walConfig struct {
	dir         string
	segmentSize int // 0: raft-wal's 64 MiB
	log         *slog.Logger
	// snapshot is the newest snapshot's last index (0: none): the log may
	// end before what was stored if a snapshot covers it.
	snapshot uint64
	// vfs, when set, wraps raft-wal's file system (tests).
	vfs func(types.VFS) types.VFS
}

// walStore is raft's log and stable store: raft-wal in Dir/wal, plus
//   - checkedMeta, which checks every segment before raft-wal opens it
//     (verify.go) and keeps the metadata database open across reopens;
//   - the storedKey record of what was stored;
//   - recovery from a failed write: raft-wal refuses every append once it
//     could not create its next segment (a full disk) until it is opened
//     again, which walStore does, and it reports the fault (LogError)
//     until an append succeeds.
type walStore struct {
	cfg  walConfig
	meta *checkedMeta

	// wmu serializes what changes the log (StoreLogs, DeleteRange) with
	// reopen.
	wmu sync.Mutex
	// mu guards wal, which reopen replaces; readers hold it for their call.
	mu  sync.RWMutex
	wal *raftwal.WAL
	// sealed: raft-wal answered ErrSealed and needs reopening.
	sealed     atomic.Bool
	lastReopen time.Time // guarded by wmu

	faultMu sync.Mutex
	fault   error

	// stored is the last index appended; persisted, what storedKey holds.
	stored    atomic.Uint64
	storedMu  sync.Mutex
	persisted uint64 // guarded by storedMu

	kick      chan struct{}
	stop      chan struct{}
	done      chan struct{}
	closeOnce sync.Once
	closeErr  error
}

var (
	_ raft.LogStore          = (*walStore)(nil)
	_ raft.MonotonicLogStore = (*walStore)(nil)
	_ raft.StableStore       = (*walStore)(nil)
)

// openWAL checks and opens the log in cfg.dir. A damaged log is an error
// matching ErrDamaged.
func openWAL(cfg walConfig) (*walStore, error) {
	if cfg.segmentSize == 0 {
		cfg.segmentSize = raftwal.DefaultSegmentSize
	}
	w := &walStore{
		cfg:  cfg,
		meta: &checkedMeta{BoltMetaDB: &metadb.BoltMetaDB{}, dir: cfg.dir, segmentSize: cfg.segmentSize, snapshot: cfg.snapshot, log: cfg.log, checked: map[uint64]bool{}},
		kick: make(chan struct{}, 1), stop: make(chan struct{}), done: make(chan struct{}),
	}
	wal, err := w.open()
	if err != nil {
		if !errors.Is(err, ErrDamaged) {
			err = fmt.Errorf("consensus: opening log %s: %w", cfg.dir, err)
		}
		return nil, errors.Join(err, w.meta.BoltMetaDB.Close())
	}
	w.wal = wal
	if first, _ := wal.FirstIndex(); first > 1 && cfg.snapshot < first-1 {
		err := damaged(filepath.Join(filepath.Dir(cfg.dir), "snapshots"), -1, "no snapshot holds the entries before index %d, where the log starts", first)
		return nil, errors.Join(err, wal.Close(), w.meta.BoltMetaDB.Close())
	}
	last, _ := wal.LastIndex()
	w.persisted = w.meta.stored
	w.stored.Store(max(last, w.meta.stored))
	go w.run()
	w.poke()
	return w, nil
}

// open opens raft-wal on the directory; checkedMeta.Load checks it first
// (its error matches ErrDamaged).
func (w *walStore) open() (*raftwal.WAL, error) {
	filer := raftwal.WithSegmentSize(w.cfg.segmentSize) // a no-op repeat, unless:
	if w.cfg.vfs != nil {
		filer = raftwal.WithSegmentFiler(segment.NewFiler(w.cfg.dir, w.cfg.vfs(fs.New())))
	}
	wal, err := raftwal.Open(w.cfg.dir, raftwal.WithMetaStore(w.meta),
		raftwal.WithLogger(newHCLogger(w.cfg.log, "raft-wal")),
		raftwal.WithSegmentSize(w.cfg.segmentSize), filer)
	return wal, err
}

func (w *walStore) current() *raftwal.WAL {
	w.mu.RLock()
	defer w.mu.RUnlock()
	return w.wal
}

// FirstIndex implements raft.LogStore.
func (w *walStore) FirstIndex() (uint64, error) {
	w.mu.RLock()
	defer w.mu.RUnlock()
	return w.wal.FirstIndex()
}

// LastIndex implements raft.LogStore.
func (w *walStore) LastIndex() (uint64, error) {
	w.mu.RLock()
	defer w.mu.RUnlock()
	return w.wal.LastIndex()
}

// GetLog reads the entry at index, or answers raft.ErrLogNotFound for an
// index below the first one kept. raft-wal drops a compacted range only
// when its whole segment is deleted and serves the rest of the segment
// until then; without this check a leader would send a new follower the
// compacted entries rather than its snapshot (docs/ha.md).
func (w *walStore) GetLog(index uint64, log *raft.Log) error {
	w.mu.RLock()
	defer w.mu.RUnlock()
	if first, err := w.wal.FirstIndex(); err == nil && index < first {
		return raft.ErrLogNotFound
	}
	return w.wal.GetLog(index, log)
}

// StoreLog implements raft.LogStore.
func (w *walStore) StoreLog(log *raft.Log) error {
	return w.StoreLogs([]*raft.Log{log})
}

// StoreLogs appends logs durably. When raft-wal could not start a new
// segment (ErrSealed: it failed to create the file, the disk being full) it
// reopens the log, which creates the segment, and appends again; while that
// fails, every append fails with ErrStorage naming the cause.
func (w *walStore) StoreLogs(logs []*raft.Log) error {
	if len(logs) == 0 {
		return nil
	}
	w.wmu.Lock()
	defer w.wmu.Unlock()
	if err := w.reopenIfSealed(false); err != nil {
		return err
	}
	err := w.current().StoreLogs(logs)
	if errors.Is(err, raftwal.ErrSealed) {
		w.sealed.Store(true)
		if err = w.reopenIfSealed(true); err == nil {
			err = w.current().StoreLogs(logs)
		}
	}
	if err != nil {
		return w.fail(err)
	}
	w.recovered()
	w.stored.Store(logs[len(logs)-1].Index)
	w.poke()
	return nil
}

// DeleteRange implements raft.LogStore. Before raft deletes the end of the
// log (a follower's entries the leader does not have, or the whole log
// after a snapshot is installed), the record of what was stored is lowered
// to what remains.
func (w *walStore) DeleteRange(min, max uint64) error {
	w.wmu.Lock()
	defer w.wmu.Unlock()
	if err := w.reopenIfSealed(false); err != nil {
		return err
	}
	wal := w.current()
	if last, err := wal.LastIndex(); err == nil && min <= last && max >= last {
		if err := w.lowerStored(min - 1); err != nil {
			return err
		}
	}
	return wal.DeleteRange(min, max)
}

// IsMonotonic implements raft.MonotonicLogStore: indexes have no gaps.
func (w *walStore) IsMonotonic() bool { return true }

// Set, Get, SetUint64 and GetUint64 implement raft.StableStore on
// raft-wal's metadata database, as raft-wal does, but without going
// through the WAL, which reopen may replace.
func (w *walStore) Set(key, val []byte) error      { return w.meta.SetStable(key, val) }
func (w *walStore) Get(key []byte) ([]byte, error) { return w.meta.GetStable(key) }

func (w *walStore) SetUint64(key []byte, val uint64) error {
	return w.meta.SetStable(key, binary.LittleEndian.AppendUint64(nil, val))
}

func (w *walStore) GetUint64(key []byte) (uint64, error) {
	return w.meta.getUint64(key)
}

// reopenIfSealed reopens a log that raft-wal left sealed, at most once per
// reopenInterval unless force; it returns the fault while the log stays
// sealed. wmu must be held.
func (w *walStore) reopenIfSealed(force bool) error {
	if !w.sealed.Load() {
		return nil
	}
	if !force && time.Since(w.lastReopen) < reopenInterval {
		if f := w.LogError(); f != nil {
			return f
		}
	}
	w.lastReopen = time.Now()
	old := w.current()
	oldLast, _ := old.LastIndex()
	wal, err := w.open()
	if err != nil {
		return w.fail(fmt.Errorf("starting a new log segment in %s: %w", w.cfg.dir, err))
	}
	if last, _ := wal.LastIndex(); last != oldLast {
		_ = wal.Close()
		return w.fail(fmt.Errorf("reopening %s: it holds entries up to %d, not %d", w.cfg.dir, last, oldLast))
	}
	w.mu.Lock()
	w.wal = wal
	w.mu.Unlock()
	if err := old.Close(); err != nil {
		w.cfg.log.Debug("closing the sealed log", "error", err)
	}
	w.sealed.Store(false)
	w.cfg.log.Info("log reopened: its next segment is started")
	return nil
}

// fail records err as the log's fault and returns it as an ErrStorage.
func (w *walStore) fail(err error) error {
	if !errors.Is(err, ErrStorage) {
		err = fmt.Errorf("%w: %w", ErrStorage, err)
	}
	w.faultMu.Lock()
	prev := w.fault
	w.fault = err
	w.faultMu.Unlock()
	if prev == nil || prev.Error() != err.Error() {
		w.cfg.log.Error("the log cannot be written: writes fail until it can", "error", err)
	}
	w.poke()
	return err
}

// recovered clears the fault after a write succeeded.
func (w *walStore) recovered() {
	w.faultMu.Lock()
	prev := w.fault
	w.fault = nil
	w.faultMu.Unlock()
	if prev != nil {
		w.cfg.log.Warn("the log is writable again", "after", prev)
	}
}

// LogError returns the last append's failure (an ErrStorage), or nil once
// an append succeeded since, or reopen started a new segment.
func (w *walStore) LogError() error {
	w.faultMu.Lock()
	defer w.faultMu.Unlock()
	return w.fault
}

func (w *walStore) poke() {
	select {
	case w.kick <- struct{}{}:
	default:
	}
}

// run writes storedKey after appends (at most once per storedInterval)
// and retries reopening a sealed log every reopenInterval.
func (w *walStore) run() {
	defer close(w.done)
	for {
		var retry <-chan time.Time
		var rt *time.Timer
		if w.sealed.Load() {
			rt = time.NewTimer(reopenInterval)
			retry = rt.C
		}
		select {
		case <-w.stop:
			return
		case <-w.kick:
			if rt != nil {
				rt.Stop()
			}
			w.persistStored()
			t := time.NewTimer(storedInterval)
			select {
			case <-w.stop:
				t.Stop()
				return
			case <-t.C:
			}
		case <-retry:
			w.wmu.Lock()
			if w.sealed.Load() && w.reopenIfSealed(false) == nil {
				w.recovered()
			}
			w.wmu.Unlock()
		}
	}
}

// persistStored writes stored to storedKey if it changed. A failure (a
// full disk) is retried with the next append.
func (w *walStore) persistStored() {
	w.storedMu.Lock()
	defer w.storedMu.Unlock()
	s := w.stored.Load()
	if s == w.persisted {
		return
	}
	if err := w.meta.SetStable(storedKey, binary.LittleEndian.AppendUint64(nil, s)); err != nil {
		w.cfg.log.Debug("recording the log's last index", "error", err)
		return
	}
	w.persisted = s
}

// lowerStored makes storedKey at most to, durably, before entries above it
// are deleted. wmu must be held.
func (w *walStore) lowerStored(to uint64) error {
	w.storedMu.Lock()
	defer w.storedMu.Unlock()
	w.stored.Store(to)
	if w.persisted <= to {
		return nil
	}
	if err := w.meta.SetStable(storedKey, binary.LittleEndian.AppendUint64(nil, to)); err != nil {
		return w.fail(fmt.Errorf("recording the log's end before truncating it: %w", err))
	}
	w.persisted = to
	return nil
}

// Close records the last index stored, then closes the log and its
// metadata database.
func (w *walStore) Close() error {
	w.closeOnce.Do(func() {
		close(w.stop)
		<-w.done
		w.persistStored()
		w.closeErr = errors.Join(w.current().Close(), w.meta.BoltMetaDB.Close())
	})
	return w.closeErr
}

// checkedMeta is raft-wal's metadata store (a BoltMetaDB) with the log's
// check in Load, which raft-wal calls first when it opens the log. It stays
// open when raft-wal closes: walStore closes it.
type checkedMeta struct {
	*metadb.BoltMetaDB
	dir         string
	segmentSize int
	snapshot    uint64
	log         *slog.Logger
	// checked holds the IDs of sealed segments already checked: they do
	// not change, so a reopen checks only the tail again.
	checked map[uint64]bool
	// stored is storedKey as Load read it.
	stored uint64
}

// Load loads raft-wal's metadata and checks the log (checkLog). It removes
// a tail file whose creation was interrupted, and finishes a rotation
// interrupted after the tail was sealed, so that raft-wal can append.
func (m *checkedMeta) Load(dir string) (types.PersistentState, error) {
	state, err := m.BoltMetaDB.Load(dir)
	if err != nil {
		return state, err
	}
	if m.stored, err = m.getUint64(storedKey); err != nil {
		return state, err
	}
	check := state
	check.Segments = slices.DeleteFunc(slices.Clone(state.Segments), func(s types.SegmentInfo) bool {
		return m.checked[s.ID]
	})
	if len(check.Segments) == 0 && len(state.Segments) > 0 {
		check.Segments = state.Segments[len(state.Segments)-1:]
	}
	res, err := checkLog(check, logCheck{dir: dir, stored: m.stored, snapshot: m.snapshot})
	if err != nil {
		return state, err
	}
	for _, s := range state.Segments {
		if !s.SealTime.IsZero() {
			m.checked[s.ID] = true
		}
	}
	if res.removeTail != "" {
		m.log.Info("removing a log segment whose creation was interrupted", "file", res.removeTail)
		if err := os.Remove(res.removeTail); err != nil {
			return state, err
		}
	}
	if res.sealTail != nil {
		state = m.finishRotation(state, *res.sealTail)
		if err := m.CommitState(state); err != nil {
			return state, err
		}
	}
	return state, nil
}

// finishRotation does what raft-wal's rotation would have: mark the tail
// sealed and start a new one after it.
func (m *checkedMeta) finishRotation(state types.PersistentState, sealed types.SegmentInfo) types.PersistentState {
	now := time.Now()
	sealed.SealTime = now
	next := types.SegmentInfo{
		ID: state.NextSegmentID, BaseIndex: sealed.MaxIndex + 1, MinIndex: sealed.MaxIndex + 1,
		SizeLimit: uint32(m.segmentSize), Codec: raftwal.CodecBinaryV1, CreateTime: now,
	}
	state.Segments = append(slices.Clone(state.Segments[:len(state.Segments)-1]), sealed, next)
	state.NextSegmentID++
	// A file of that name was never listed: a leftover of a failed
	// creation. raft-wal creates the tail afresh.
	path := filepath.Join(m.dir, segmentFileName(next))
	if err := os.Remove(path); err == nil {
		m.log.Info("removing a log segment whose creation was interrupted", "file", path)
	}
	m.log.Warn("finishing a log segment rotation that was interrupted", "sealed_through", sealed.MaxIndex)
	m.checked[sealed.ID] = true
	return state
}

// Close leaves the database open: raft-wal closes its store when it closes,
// and walStore may open raft-wal again on it.
func (m *checkedMeta) Close() error { return nil }

func (m *checkedMeta) getUint64(key []byte) (uint64, error) {
	raw, err := m.GetStable(key)
	if err != nil || len(raw) == 0 {
		return 0, err
	}
	if len(raw) != 8 {
		return 0, fmt.Errorf("consensus: stable key %s holds %d bytes, not 8", key, len(raw))
	}
	return binary.LittleEndian.Uint64(raw), nil
}
