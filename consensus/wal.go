package consensus

import (
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/raft"
	raftwal "github.com/hashicorp/raft-wal"
	"github.com/hashicorp/raft-wal/metadb"
	"github.com/hashicorp/raft-wal/types"
)

// storedKey is the key, in raft-wal's stable store (its metadata database),
// of the highest log index this log is known to have stored durably. Open
// refuses a log that no longer reaches it (nor a snapshot does): a
// truncated or partly lost log. It is written at most every storedInterval
// after appends, and at Close, so a log stopped cleanly is checked to its
// last entry; it is lowered before raft deletes the end of the log.
var storedKey = []byte("canopy/stored-index")

const storedInterval = 100 * time.Millisecond

// walConfig configures openWAL.
type walConfig struct {
	dir         string
	segmentSize int // 0: raft-wal's 64 MiB
	log         *slog.Logger
	// snapshot is the newest snapshot's last index (0: none): the log may
	// end before what was stored if a snapshot covers it.
	snapshot uint64
}

// walStore is raft's log and stable store: raft-wal in Dir/wal, plus
//   - checkedMeta, which checks every segment before raft-wal opens it
//     (verify.go);
//   - the storedKey record of what was stored.
type walStore struct {
	cfg  walConfig
	meta *checkedMeta

	// wmu serializes what changes the log (StoreLogs, DeleteRange).
	wmu sync.Mutex
	wal *raftwal.WAL

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
		meta: &checkedMeta{BoltMetaDB: &metadb.BoltMetaDB{}, dir: cfg.dir, snapshot: cfg.snapshot, log: cfg.log},
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
	return raftwal.Open(w.cfg.dir, raftwal.WithMetaStore(w.meta),
		raftwal.WithLogger(newHCLogger(w.cfg.log, "raft-wal")),
		raftwal.WithSegmentSize(w.cfg.segmentSize))
}

// FirstIndex implements raft.LogStore.
func (w *walStore) FirstIndex() (uint64, error) {
	return w.wal.FirstIndex()
}

// LastIndex implements raft.LogStore.
func (w *walStore) LastIndex() (uint64, error) {
	return w.wal.LastIndex()
}

// GetLog reads the entry at index, or answers raft.ErrLogNotFound for an
// index below the first one kept. raft-wal drops a compacted range only
// when its whole segment is deleted and serves the rest of the segment
// until then; without this check a leader would send a new follower the
// compacted entries rather than its snapshot (docs/ha.md).
func (w *walStore) GetLog(index uint64, log *raft.Log) error {
	if first, err := w.wal.FirstIndex(); err == nil && index < first {
		return raft.ErrLogNotFound
	}
	return w.wal.GetLog(index, log)
}

// StoreLog implements raft.LogStore.
func (w *walStore) StoreLog(log *raft.Log) error {
	return w.StoreLogs([]*raft.Log{log})
}

// StoreLogs appends logs durably and records their last index.
func (w *walStore) StoreLogs(logs []*raft.Log) error {
	if len(logs) == 0 {
		return nil
	}
	w.wmu.Lock()
	defer w.wmu.Unlock()
	if err := w.wal.StoreLogs(logs); err != nil {
		return err
	}
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
	wal := w.wal
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
// raft-wal's metadata database, as raft-wal does.
func (w *walStore) Set(key, val []byte) error      { return w.meta.SetStable(key, val) }
func (w *walStore) Get(key []byte) ([]byte, error) { return w.meta.GetStable(key) }

func (w *walStore) SetUint64(key []byte, val uint64) error {
	return w.meta.SetStable(key, binary.LittleEndian.AppendUint64(nil, val))
}

func (w *walStore) GetUint64(key []byte) (uint64, error) {
	return w.meta.getUint64(key)
}

func (w *walStore) poke() {
	select {
	case w.kick <- struct{}{}:
	default:
	}
}

// run writes storedKey after appends, at most once per storedInterval.
func (w *walStore) run() {
	defer close(w.done)
	for {
		select {
		case <-w.stop:
			return
		case <-w.kick:
			w.persistStored()
			t := time.NewTimer(storedInterval)
			select {
			case <-w.stop:
				t.Stop()
				return
			case <-t.C:
			}
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
		return fmt.Errorf("consensus: recording the log's end before truncating it: %w", err)
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
		w.closeErr = errors.Join(w.wal.Close(), w.meta.BoltMetaDB.Close())
	})
	return w.closeErr
}

// checkedMeta is raft-wal's metadata store (a BoltMetaDB) with the log's
// check in Load, which raft-wal calls first when it opens the log. It stays
// open when raft-wal closes: walStore closes it.
type checkedMeta struct {
	*metadb.BoltMetaDB
	dir      string
	snapshot uint64
	log      *slog.Logger
	// stored is storedKey as Load read it.
	stored uint64
}

// Load loads raft-wal's metadata and checks the log (checkLog). It removes
// a tail file whose creation was interrupted.
func (m *checkedMeta) Load(dir string) (types.PersistentState, error) {
	state, err := m.BoltMetaDB.Load(dir)
	if err != nil {
		return state, err
	}
	if m.stored, err = m.getUint64(storedKey); err != nil {
		return state, err
	}
	res, err := checkLog(state, logCheck{dir: dir, stored: m.stored, snapshot: m.snapshot})
	if err != nil {
		return state, err
	}
	if res.removeTail != "" {
		m.log.Info("removing a log segment whose creation was interrupted", "file", res.removeTail)
		if err := os.Remove(res.removeTail); err != nil {
			return state, err
		}
	}
	return state, nil
}

// Close leaves the database open: walStore closes it after raft-wal.
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
