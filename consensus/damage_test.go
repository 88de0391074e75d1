package consensus

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"hash/crc64"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// The damage tests write a log with a node, stop it, damage a copy of its
// directory as a careless operator or a failing disk would, and open the
// copy: Open must refuse it with an error naming the file and the offset,
// while the undamaged original opens with every command.

const (
	damageCommands    = 400
	damageSegmentSize = 32 << 10 // about 120 commands per segment
)

func damageCommand(i int) string {
	return fmt.Sprintf("k%04d-%s", i, strings.Repeat("v", 200))
}

// writeDamageLog proposes damageCommands commands one at a time (so that
// each batch in the log holds one entry) on a node in a new directory,
// runs before(n) if given, closes the node and returns the directory.
func writeDamageLog(t *testing.T, before func(*Node)) string {
	t.Helper()
	dir := t.TempDir()
	n, err := Open(damageConfig(t, dir), newTestFSM())
	if err != nil {
		t.Fatal(err)
	}
	for i := range damageCommands {
		propose(t, n, damageCommand(i))
		if before != nil && i == damageCommands/2 {
			before(n)
		}
	}
	if err := n.Close(); err != nil {
		t.Fatal(err)
	}
	return dir
}

func damageConfig(t *testing.T, dir string) Config {
	return Config{
		Dir: dir, NodeID: "root-0", TrailingLogs: 50,
		Logger: slog.New(slog.NewTextHandler(t.Output(), &slog.HandlerOptions{Level: slog.LevelWarn})),
		tune:   &tuning{walSegmentSize: damageSegmentSize},
	}
}

// copyDir copies the tree at src to a new directory.
func copyDir(t *testing.T, src string) string {
	t.Helper()
	dst := t.TempDir()
	err := filepath.WalkDir(src, func(path string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(src, path)
		to := filepath.Join(dst, rel)
		if d.IsDir() {
			return os.MkdirAll(to, 0o700)
		}
		in, err := os.Open(path)
		if err != nil {
			return err
		}
		defer in.Close()
		out, err := os.Create(to)
		if err != nil {
			return err
		}
		if _, err := io.Copy(out, in); err != nil {
			out.Close()
			return err
		}
		return out.Close()
	})
	if err != nil {
		t.Fatal(err)
	}
	return dst
}

// frame is a frame of a raft-wal segment, as the test reads it on its own.
type frame struct {
	typ byte
	off int64
	len uint32
}

// segmentFiles lists the log's segment files in index order.
func segmentFiles(t *testing.T, dir string) []string {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(dir, "wal", "*.wal"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no segment files in %s (%v)", dir, err)
	}
	slices.Sort(files)
	return files
}

// frames reads the frames of a segment file up to the first zero header.
func frames(t *testing.T, path string) []frame {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var out []frame
	for off := int64(32); off+8 <= int64(len(b)) && b[off] != 0; {
		f := frame{typ: b[off], off: off, len: binary.LittleEndian.Uint32(b[off+4:])}
		out = append(out, f)
		off += 8
		if f.typ != 3 { // a commit frame's second word is its CRC
			off += int64(f.len+7) &^ 7
		}
	}
	return out
}

// entryFrames returns the entry frames of a segment file.
func entryFrames(t *testing.T, path string) []frame {
	var out []frame
	for _, f := range frames(t, path) {
		if f.typ == 1 {
			out = append(out, f)
		}
	}
	if len(out) < 3 {
		t.Fatalf("%s has %d entries", path, len(out))
	}
	return out
}

// xorByte flips the bits of the byte at off of path.
func xorByte(t *testing.T, path string, off int64, mask byte) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var b [1]byte
	if _, err := f.ReadAt(b[:], off); err != nil {
		t.Fatal(err)
	}
	b[0] ^= mask
	if _, err := f.WriteAt(b[:], off); err != nil {
		t.Fatal(err)
	}
}

// wantDamage opens dir and wants Open to fail with a one-line
// DamageError naming file at offset (any offset if offset is -2).
func wantDamage(t *testing.T, dir, file string, offset int64) {
	t.Helper()
	fsm := newTestFSM()
	n, err := Open(damageConfig(t, dir), fsm)
	if err == nil {
		state, _, _ := fsm.snapshot()
		n.Close()
		t.Fatalf("Open of a damaged log succeeded: %d commands applied, last index %d", len(state.Keys), state.Last)
	}
	var de *DamageError
	if !errors.As(err, &de) || !errors.Is(err, ErrDamaged) {
		t.Fatalf("Open: %v, want a DamageError", err)
	}
	if de.File != file || (offset != -2 && de.Offset != offset) {
		t.Fatalf("Open: %v\nwant file %s at offset %d", err, file, offset)
	}
	if msg := err.Error(); strings.Contains(msg, "\n") || !strings.Contains(msg, file) {
		t.Fatalf("error is not one line naming the file: %q", msg)
	}
	t.Logf("refused: %v", err)
}

// wantAll opens dir and wants every command of writeDamageLog applied.
func wantAll(t *testing.T, dir string) {
	t.Helper()
	fsm := newTestFSM()
	n, err := Open(damageConfig(t, dir), fsm)
	if err != nil {
		t.Fatalf("Open of the undamaged log: %v", err)
	}
	defer n.Close()
	state, _, _ := fsm.snapshot()
	for i := range damageCommands {
		if _, ok := state.Keys[damageCommand(i)]; !ok {
			t.Fatalf("command %d missing from the undamaged log (%d applied)", i, len(state.Keys))
		}
	}
}

func TestOpenRefusesDamagedLog(t *testing.T) {
	orig := writeDamageLog(t, nil)
	if files := segmentFiles(t, orig); len(files) < 3 {
		t.Fatalf("want at least 3 segments, got %d", len(files))
	}
	cases := []struct {
		name string
		// damage damages dir and returns the file and offset the error
		// must name.
		damage func(t *testing.T, dir string) (string, int64)
	}{
		{"byte in an entry of a sealed segment", func(t *testing.T, dir string) (string, int64) {
			seg := segmentFiles(t, dir)[1]
			e := entryFrames(t, seg)[5]
			xorByte(t, seg, e.off+8+int64(e.len)-10, 0x01)
			return seg, e.off
		}},
		{"byte in an entry in the middle of the last segment", func(t *testing.T, dir string) (string, int64) {
			files := segmentFiles(t, dir)
			seg := files[len(files)-1]
			e := entryFrames(t, seg)[1]
			xorByte(t, seg, e.off+8+int64(e.len)-10, 0x20)
			return seg, e.off
		}},
		{"byte in the last entry written", func(t *testing.T, dir string) (string, int64) {
			files := segmentFiles(t, dir)
			seg := files[len(files)-1]
			es := entryFrames(t, seg)
			e := es[len(es)-1]
			xorByte(t, seg, e.off+8+int64(e.len)-10, 0x20)
			return seg, e.off
		}},
		{"length field of an entry of a sealed segment", func(t *testing.T, dir string) (string, int64) {
			seg := segmentFiles(t, dir)[0]
			e := entryFrames(t, seg)[7]
			xorByte(t, seg, e.off+4, 0x10)
			return seg, e.off
		}},
		{"length field of an entry in the last segment", func(t *testing.T, dir string) (string, int64) {
			files := segmentFiles(t, dir)
			seg := files[len(files)-1]
			e := entryFrames(t, seg)[1]
			xorByte(t, seg, e.off+4, 0x10)
			return seg, e.off
		}},
		{"last segment truncated", func(t *testing.T, dir string) (string, int64) {
			files := segmentFiles(t, dir)
			seg := files[len(files)-1]
			cut := entryFrames(t, seg)[2].off
			if err := os.Truncate(seg, cut); err != nil {
				t.Fatal(err)
			}
			return seg, cut
		}},
		{"last segment cut and zero-filled to its size", func(t *testing.T, dir string) (string, int64) {
			files := segmentFiles(t, dir)
			seg := files[len(files)-1]
			fi, err := os.Stat(seg)
			if err != nil {
				t.Fatal(err)
			}
			cut := entryFrames(t, seg)[2].off
			if err := os.Truncate(seg, cut); err != nil {
				t.Fatal(err)
			}
			if err := os.Truncate(seg, fi.Size()); err != nil {
				t.Fatal(err)
			}
			return seg, cut
		}},
		{"sealed segment truncated", func(t *testing.T, dir string) (string, int64) {
			seg := segmentFiles(t, dir)[1]
			cut := entryFrames(t, seg)[10].off
			if err := os.Truncate(seg, cut); err != nil {
				t.Fatal(err)
			}
			return seg, -2
		}},
		{"last segment removed", func(t *testing.T, dir string) (string, int64) {
			files := segmentFiles(t, dir)
			seg := files[len(files)-1]
			if err := os.Remove(seg); err != nil {
				t.Fatal(err)
			}
			return seg, -1
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			dir := copyDir(t, orig)
			file, off := tc.damage(t, dir)
			wantDamage(t, dir, file, off)
		})
	}
	t.Run("undamaged copy", func(t *testing.T) { wantAll(t, copyDir(t, orig)) })
}

func TestOpenRefusesDamagedSnapshot(t *testing.T) {
	orig := writeDamageLog(t, func(n *Node) {
		if err := n.Snapshot(); err != nil {
			t.Fatal(err)
		}
	})
	snapDir := func(t *testing.T, dir string) string {
		snaps, err := filepath.Glob(filepath.Join(dir, "snapshots", "*", "state.bin"))
		if err != nil || len(snaps) != 1 {
			t.Fatalf("want one snapshot, found %v (%v)", snaps, err)
		}
		return filepath.Dir(snaps[0])
	}
	first := func(t *testing.T, dir string) uint64 {
		// The log was compacted behind the snapshot: its first segment
		// no longer starts at index 1.
		name := filepath.Base(segmentFiles(t, dir)[0])
		var base uint64
		if _, err := fmt.Sscanf(name, "%020d-", &base); err != nil {
			t.Fatal(err)
		}
		return base
	}
	if first(t, orig) <= 1 {
		t.Fatalf("the log was not compacted behind the snapshot")
	}
	t.Run("byte in the snapshot's data", func(t *testing.T) {
		dir := copyDir(t, orig)
		state := filepath.Join(snapDir(t, dir), "state.bin")
		xorByte(t, state, 100, 0x04)
		wantDamage(t, dir, state, -1)
	})
	t.Run("snapshot's data truncated", func(t *testing.T) {
		dir := copyDir(t, orig)
		state := filepath.Join(snapDir(t, dir), "state.bin")
		if err := os.Truncate(state, 500); err != nil {
			t.Fatal(err)
		}
		wantDamage(t, dir, state, 500)
	})
	t.Run("byte in the snapshot's metadata", func(t *testing.T) {
		dir := copyDir(t, orig)
		meta := filepath.Join(snapDir(t, dir), "meta.json")
		xorByte(t, meta, 0, 0x40) // '{' becomes ';'
		wantDamage(t, dir, meta, -2)
	})
	t.Run("snapshot removed", func(t *testing.T) {
		dir := copyDir(t, orig)
		if err := os.RemoveAll(snapDir(t, dir)); err != nil {
			t.Fatal(err)
		}
		wantDamage(t, dir, filepath.Join(dir, "snapshots"), -1)
	})
	t.Run("snapshot of a newer format", func(t *testing.T) {
		dir := copyDir(t, orig)
		snap := snapDir(t, dir)
		state, meta := filepath.Join(snap, "state.bin"), filepath.Join(snap, "meta.json")
		xorByte(t, state, 0, snapshotVersion^(snapshotVersion+1))
		data, err := os.ReadFile(state)
		if err != nil {
			t.Fatal(err)
		}
		var m map[string]any
		raw, _ := os.ReadFile(meta)
		if err := json.Unmarshal(raw, &m); err != nil {
			t.Fatal(err)
		}
		h := crc64.New(crc64.MakeTable(crc64.ECMA))
		h.Write(data)
		m["CRC"] = h.Sum(nil)
		if raw, err = json.Marshal(m); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(meta, raw, 0o600); err != nil {
			t.Fatal(err)
		}
		n, err := Open(damageConfig(t, dir), newTestFSM())
		if err == nil {
			n.Close()
			t.Fatal("Open read a snapshot of a newer format")
		}
		if errors.Is(err, ErrDamaged) || !strings.Contains(err.Error(), "snapshot format 2 is newer than this relay reads (1)") || !strings.Contains(err.Error(), state) {
			t.Fatalf("Open: %v; want a refusal naming %s as of a newer format, not as damage", err, state)
		}
	})
	t.Run("undamaged copy", func(t *testing.T) { wantAll(t, copyDir(t, orig)) })
}
