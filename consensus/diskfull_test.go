package consensus

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/hashicorp/raft"
	"github.com/hashicorp/raft-wal/metadb"
	"github.com/hashicorp/raft-wal/types"

	"github.com/canopy-dev/canopy/test/poll"
)

// fullDisk makes raft-wal's file system full on demand: creating a segment
// fails as fallocate does on a full disk (the file is left empty), and so
// do writes when writes is set too.
type fullDisk struct {
	creates, writes atomic.Bool
}

func (d *fullDisk) wrap(v types.VFS) types.VFS { return &fullVFS{VFS: v, d: d} }

type fullVFS struct {
	types.VFS
	d *fullDisk
}

func (v *fullVFS) Create(dir, name string, size uint64) (types.WritableFile, error) {
	if v.d.creates.Load() {
		path := filepath.Join(dir, name)
		f, err := os.OpenFile(path, os.O_CREATE|os.O_EXCL|os.O_RDWR, 0o644)
		if err != nil {
			return nil, err
		}
		f.Close()
		return nil, &os.PathError{Op: "fallocate", Path: path, Err: syscall.ENOSPC}
	}
	f, err := v.VFS.Create(dir, name, size)
	if err != nil {
		return nil, err
	}
	return &fullFile{WritableFile: f, d: v.d, name: filepath.Join(dir, name)}, nil
}

func (v *fullVFS) OpenWriter(dir, name string) (types.WritableFile, error) {
	f, err := v.VFS.OpenWriter(dir, name)
	if err != nil {
		return nil, err
	}
	return &fullFile{WritableFile: f, d: v.d, name: filepath.Join(dir, name)}, nil
}

type fullFile struct {
	types.WritableFile
	d    *fullDisk
	name string
}

func (f *fullFile) WriteAt(p []byte, off int64) (int, error) {
	if f.d.writes.Load() {
		return 0, &os.PathError{Op: "write", Path: f.name, Err: syscall.ENOSPC}
	}
	return f.WritableFile.WriteAt(p, off)
}

// TestDiskFullRecovers fills the disk under a single node, first where
// raft-wal must start a new segment (the failure of issue 26: "segment is
// sealed", then "not the leader" until a restart), then for every write:
// each write fails with ErrStorage naming ENOSPC, LogError reports it, and
// once space returns the node writes again without a restart. Every
// acknowledged write survives a restart and none refused with ErrStorage
// appears.
func TestDiskFullRecovers(t *testing.T) {
	disk := &fullDisk{}
	dir := t.TempDir()
	cfg := func(c *Config) {
		c.tune = &tuning{walSegmentSize: 16 << 10, vfs: disk.wrap}
		c.Logger = testLogger(t)
	}
	fsm := newTestFSM()
	n, err := Open(func() Config { c := Config{Dir: dir, NodeID: "root-0"}; cfg(&c); return c }(), fsm)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { n.Close() }()
	var acked, failed []string
	write := func(key string) error {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_, err := n.Propose(ctx, []byte(key))
		switch {
		case err == nil:
			acked = append(acked, key)
		case errors.Is(err, ErrStorage): // not written
			failed = append(failed, key)
		default: // while space returns, raft may lose leadership: unknown
			t.Logf("%.30s: %v", key, err)
		}
		return err
	}
	val := strings.Repeat("x", 500)
	for i := range 10 {
		if err := write(fmt.Sprintf("before/%d/%s", i, val)); err != nil {
			t.Fatal(err)
		}
	}

	for _, phase := range []struct {
		name  string
		full  func(bool)
		until int // writes at most until one fails
	}{
		{"new segments", disk.creates.Store, 100},
		{"every write", func(v bool) { disk.creates.Store(v); disk.writes.Store(v) }, 1},
	} {
		phase.full(true)
		var first error
		for i := range phase.until {
			if first = write(fmt.Sprintf("%s/%d/%s", phase.name, i, val)); first != nil {
				break
			}
		}
		if first == nil {
			t.Fatalf("%s: %d writes on a full disk succeeded", phase.name, phase.until)
		}
		for i := range 5 {
			err := first
			if i > 0 {
				err = write(fmt.Sprintf("%s/full/%d", phase.name, i))
			}
			if !errors.Is(err, ErrStorage) || !errors.Is(err, syscall.ENOSPC) || !strings.Contains(err.Error(), "no space left on device") {
				t.Fatalf("%s: write %d on a full disk: %v, want ErrStorage naming ENOSPC", phase.name, i, err)
			}
		}
		if err := n.LogError(); !errors.Is(err, syscall.ENOSPC) {
			t.Fatalf("%s: LogError: %v, want ENOSPC", phase.name, err)
		}

		phase.full(false)
		poll.True(t, "LogError to clear once space returns", func() bool { return n.LogError() == nil })
		poll.True(t, "a write to succeed once space returns", func() bool {
			return write(fmt.Sprintf("%s/after/%d", phase.name, len(acked))) == nil
		})
	}

	if err := n.Close(); err != nil {
		t.Fatal(err)
	}
	fsm = newTestFSM()
	n, err = Open(func() Config { c := Config{Dir: dir, NodeID: "root-0"}; cfg(&c); return c }(), fsm)
	if err != nil {
		t.Fatalf("reopen: %v", err)
	}
	state, _, _ := fsm.snapshot()
	for _, k := range acked {
		if _, ok := state.Keys[k]; !ok {
			t.Errorf("acknowledged %.40q lost", k)
		}
	}
	for _, k := range failed {
		if _, ok := state.Keys[k]; ok {
			t.Errorf("failed %.40q applied", k)
		}
	}
	t.Logf("%d acknowledged, %d failed", len(acked), len(failed))
}

// TestInterruptedRotationIsFinished: raft-wal seals a full segment in the
// file, then records the seal and the next segment in its metadata. If that
// second step does not happen (a crash, or a metadata database that cannot
// be written on a full disk), raft-wal opens the sealed segment as its tail
// and refuses every append ("segment is sealed"), even after a restart.
// openWAL finishes the rotation.
func TestInterruptedRotationIsFinished(t *testing.T) {
	dir := t.TempDir()
	logger := testLogger(t)
	w, err := openWAL(walConfig{dir: dir, segmentSize: 8 << 10, log: logger})
	if err != nil {
		t.Fatal(err)
	}
	entry := func(i uint64) *raft.Log {
		return &raft.Log{Index: i, Term: 1, Type: raft.LogCommand, Data: []byte(fmt.Sprintf("%d-%s", i, strings.Repeat("x", 500)))}
	}
	rawState := func() types.PersistentState {
		st, err := w.meta.BoltMetaDB.Load(dir)
		if err != nil {
			t.Fatal(err)
		}
		return st
	}
	var last uint64
	first := filepath.Join(dir, segmentFileName(rawState().Segments[0]))
	for sealed := false; !sealed; {
		s, err := scanSegment(first)
		if err != nil {
			t.Fatal(err)
		}
		if sealed = s.indexAt != 0; sealed {
			break
		}
		last++
		if err := w.StoreLogs([]*raft.Log{entry(last)}); err != nil {
			t.Fatal(err)
		}
		if last > 100 {
			t.Fatal("no rotation after 100 entries of 8 KiB segments")
		}
	}
	// The rotation ran in the background: wait until its new tail exists.
	poll.True(t, "the new segment", func() bool {
		st := rawState()
		_, err := os.Stat(filepath.Join(dir, segmentFileName(st.Segments[len(st.Segments)-1])))
		return len(st.Segments) == 2 && err == nil
	})
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}

	// Undo the rotation in the metadata: the first segment is the tail
	// again, sealed only in its file.
	meta := &metadb.BoltMetaDB{}
	st, err := meta.Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	next := st.Segments[1]
	st.Segments = st.Segments[:1]
	st.Segments[0].SealTime, st.Segments[0].MaxIndex, st.Segments[0].IndexStart = time.Time{}, 0, 0
	st.NextSegmentID--
	if err := meta.CommitState(st); err != nil {
		t.Fatal(err)
	}
	if err := meta.Close(); err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(filepath.Join(dir, segmentFileName(next))); err != nil {
		t.Fatal(err)
	}

	w, err = openWAL(walConfig{dir: dir, segmentSize: 8 << 10, log: logger})
	if err != nil {
		t.Fatal(err)
	}
	for range 30 { // past the next rotation too
		last++
		if err := w.StoreLogs([]*raft.Log{entry(last)}); err != nil {
			t.Fatalf("append %d after the interrupted rotation: %v", last, err)
		}
	}
	for i := uint64(1); i <= last; i++ {
		var got raft.Log
		if err := w.GetLog(i, &got); err != nil || string(got.Data) != string(entry(i).Data) {
			t.Fatalf("entry %d: %v, %.20q", i, err, got.Data)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	w, err = openWAL(walConfig{dir: dir, segmentSize: 8 << 10, log: logger})
	if err != nil {
		t.Fatalf("reopen: %v", err)
	}
	if got, _ := w.LastIndex(); got != last {
		t.Fatalf("last index %d after reopening, want %d", got, last)
	}
	w.Close()
}
