package consensus

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"hash/crc32"
	"hash/crc64"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/hashicorp/raft-wal/types"
)

// ErrDamaged: the log or a snapshot in Config.Dir failed a check when Open
// read it (a checksum, a length, a truncation). Open refuses to start on
// it; errors.As finds the *DamageError that names the file. docs/ha.md,
// "Damaged data", says how to recover.
var ErrDamaged = errors.New("consensus: damaged data")

// DamageError names what Open found damaged: a file and, where the check
// can locate it, the offset where the damage begins.
type DamageError struct {
	File string
	// Offset is the first byte of the damaged range, -1 when the check
	// covers the whole file (a snapshot's CRC-64).
	Offset int64
	Reason string
}

func (e *DamageError) Error() string {
	at := ""
	if e.Offset >= 0 {
		at = fmt.Sprintf(" at offset %d", e.Offset)
	}
	return fmt.Sprintf("consensus: %s is damaged%s: %s; this replica refuses to start (docs/ha.md, \"Damaged data\")", e.File, at, e.Reason)
}

func (e *DamageError) Is(target error) bool { return target == ErrDamaged }

func damaged(file string, offset int64, format string, args ...any) error {
	return &DamageError{File: file, Offset: offset, Reason: fmt.Sprintf(format, args...)}
}

// raft-wal's segment format (segment/format.go of v0.4.1, format version
// 0): a 32-byte file header (magic and version, BaseIndex, segment ID,
// codec; little endian), then frames of an 8-byte header (type, 3 reserved
// bytes, then the payload length, or for a commit frame a CRC-32C) and
// the payload padded to 8 bytes. Each append is a batch of entry frames
// (the segment's last one also holds the index frame) closed by a commit
// frame whose CRC covers every byte since the previous commit frame (the
// file header for the first). raft-wal checks only the last batch of the
// segment it appends to, and treats anything unreadable there as the torn
// end of an interrupted write; scanSegment checks every batch.
const (
	walFileHeaderLen  = 32
	walFrameHeaderLen = 8
	walMagic          = 0x58eb6b0d
	walMaxEntrySize   = 64 << 20

	walFrameInvalid = 0
	walFrameEntry   = 1
	walFrameIndex   = 2
	walFrameCommit  = 3
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// segmentScan is what scanSegment read from one segment file.
type segmentScan struct {
	size int64 // the file's size
	// entries are the offsets of the entry frames of the batches that
	// passed their check, in order: entry BaseIndex+i is at entries[i].
	entries []int64
	// end is the offset just past the last commit frame that passed.
	end int64
	// indexAt is the offset of the index array of an index frame in a
	// batch that passed (0: none), and index its offsets.
	indexAt uint64
	index   []uint32
	// badAt is the offset of the first batch that failed its check, or -1.
	badAt int64
	// badEntries counts the entry frames of that batch.
	badEntries int
	// commitsAfterBad counts commit frames read after that batch: none
	// means it was the last one written (the torn end of an interrupted
	// append, which raft-wal drops).
	commitsAfterBad int
	// stopAt and stop say where and why reading ended.
	stopAt int64
	stop   string
}

// scanSegment reads the segment file at path frame by frame, as raft-wal's
// recovery does, and checks every batch against its commit frame's CRC.
func scanSegment(path string) (*segmentScan, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, err
	}
	s := &segmentScan{size: fi.Size(), badAt: -1, end: -1}
	r := bufio.NewReaderSize(f, 256<<10)
	hdr := make([]byte, walFileHeaderLen)
	if _, err := io.ReadFull(r, hdr); err != nil {
		s.stopAt, s.stop = 0, "the file ends within its header"
		return s, nil
	}
	crc := crc32.Update(0, castagnoli, hdr)
	off := int64(walFileHeaderLen)
	var (
		pending      []int64 // entry frames since the last commit frame
		pendingIndex []uint32
		pendingAt    uint64
		batchStart   int64 // where the current batch began (0: the header)
		fh           [walFrameHeaderLen]byte
	)
	crcw := crcWriter{crc: &crc}
	for {
		if _, err := io.ReadFull(r, fh[:]); err != nil {
			s.stopAt, s.stop = off, "end of file"
			return s, nil
		}
		typ, n := fh[0], binary.LittleEndian.Uint32(fh[4:8])
		if typ == walFrameInvalid {
			s.stopAt, s.stop = off, "end of the data written"
			if fh != [walFrameHeaderLen]byte{} {
				s.stop = "a frame header of type 0 that is not all zeros"
			}
			return s, nil
		}
		if typ == walFrameCommit {
			if crc == n && s.badAt < 0 {
				s.entries = append(s.entries, pending...)
				if pendingIndex != nil {
					s.indexAt, s.index = pendingAt, pendingIndex
				}
				s.end = off + walFrameHeaderLen
			} else if s.badAt < 0 {
				s.badAt, s.badEntries = batchStart, len(pending)
			} else {
				s.commitsAfterBad++
			}
			pending, pendingIndex = pending[:0:0], nil
			crc, batchStart = 0, off+walFrameHeaderLen
			off += walFrameHeaderLen
			continue
		}
		if typ != walFrameEntry && typ != walFrameIndex {
			s.stopAt, s.stop = off, fmt.Sprintf("a frame header of unknown type %d", typ)
			return s, nil
		}
		if n > walMaxEntrySize {
			s.stopAt, s.stop = off, fmt.Sprintf("a frame length of %d bytes", n)
			return s, nil
		}
		padded := int64(n) + int64(padLen(int(n)))
		crc = crc32.Update(crc, castagnoli, fh[:])
		if typ == walFrameIndex {
			buf := make([]byte, padded)
			if _, err := io.ReadFull(r, buf); err != nil {
				s.stopAt, s.stop = off, "an index frame that runs past the end of the file"
				return s, nil
			}
			crc = crc32.Update(crc, castagnoli, buf)
			pendingIndex = make([]uint32, n/4)
			for i := range pendingIndex {
				pendingIndex[i] = binary.LittleEndian.Uint32(buf[4*i:])
			}
			pendingAt = uint64(off + walFrameHeaderLen)
		} else {
			if _, err := io.CopyN(crcw, r, padded); err != nil {
				s.stopAt, s.stop = off, "an entry frame that runs past the end of the file"
				return s, nil
			}
			pending = append(pending, off)
		}
		off += walFrameHeaderLen + padded
	}
}

// padLen is how many zero bytes follow a payload of n bytes to align the
// next frame to 8 bytes.
func padLen(n int) int {
	return (walFrameHeaderLen - n%walFrameHeaderLen) % walFrameHeaderLen
}

type crcWriter struct{ crc *uint32 }

func (w crcWriter) Write(p []byte) (int, error) {
	*w.crc = crc32.Update(*w.crc, castagnoli, p)
	return len(p), nil
}

// checkHeader checks the file header of a segment that holds committed
// data against what raft-wal's metadata says of it.
func checkHeader(path string, info types.SegmentInfo) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	var h [walFileHeaderLen]byte
	if _, err := io.ReadFull(f, h[:]); err != nil {
		return damaged(path, 0, "the file ends within its header")
	}
	switch {
	case binary.LittleEndian.Uint64(h[0:8]) != walMagic:
		return damaged(path, 0, "not a raft-wal segment of format version 0")
	case binary.LittleEndian.Uint64(h[8:16]) != info.BaseIndex:
		return damaged(path, 8, "its header says base index %d, the log's metadata %d", binary.LittleEndian.Uint64(h[8:16]), info.BaseIndex)
	case binary.LittleEndian.Uint64(h[16:24]) != info.ID:
		return damaged(path, 16, "its header says segment %d, the log's metadata %d", binary.LittleEndian.Uint64(h[16:24]), info.ID)
	case binary.LittleEndian.Uint64(h[24:32]) != info.Codec:
		return damaged(path, 24, "its header says codec %d, the log's metadata %d", binary.LittleEndian.Uint64(h[24:32]), info.Codec)
	}
	return nil
}

// segmentFileName is raft-wal's name for a segment (segment.FileName).
func segmentFileName(info types.SegmentInfo) string {
	return fmt.Sprintf("%020d-%016x.wal", info.BaseIndex, info.ID)
}

// logCheck is what checkLog needs besides raft-wal's metadata.
type logCheck struct {
	dir string
	// stored is the highest index this log is known to have stored durably
	// (the storedKey record), 0 if unknown.
	stored uint64
	// snapshot is the last index of the newest snapshot (0: none).
	snapshot uint64
}

// logCheckResult is what checkLog found.
type logCheckResult struct {
	// last is the last index the checked segments hold (0: none).
	last uint64
	// sealTail, when set, is the tail segment found sealed in its file
	// while the metadata still has it open: a rotation was interrupted
	// (by a crash, or a full disk) after the seal was written. raft-wal
	// would refuse every append after it; checkLog's caller finishes the
	// rotation.
	sealTail *types.SegmentInfo
	// removeTail names an empty tail file shorter than it was to be
	// created (its preallocation was interrupted); raft-wal would append
	// to it unallocated. It is removed, so that raft-wal creates it again.
	removeTail string
}

// checkLog checks every segment raft-wal's metadata lists, before raft-wal
// opens them: each batch against its CRC, each sealed segment's index, each
// file's size, and that the log still reaches c.stored.
func checkLog(state types.PersistentState, c logCheck) (logCheckResult, error) {
	var res logCheckResult
	if len(state.Segments) == 0 {
		names, err := filepath.Glob(filepath.Join(c.dir, "*.wal"))
		if err != nil {
			return res, err
		}
		if len(names) > 0 {
			return res, damaged(filepath.Join(c.dir, "wal-meta.db"), -1, "it lists no segment but %s holds %d segment files (raft-wal would delete them)", c.dir, len(names))
		}
		return res, nil
	}
	for i, info := range state.Segments {
		path := filepath.Join(c.dir, segmentFileName(info))
		tail := i == len(state.Segments)-1 && info.SealTime.IsZero()
		s, err := scanSegment(path)
		if err != nil && !(tail && errors.Is(err, os.ErrNotExist)) {
			if errors.Is(err, os.ErrNotExist) {
				return res, damaged(path, -1, "the file is missing (the log's metadata lists it)")
			}
			return res, fmt.Errorf("consensus: checking the log: %w", err)
		}
		if s != nil && (len(s.entries) > 0 || s.indexAt != 0) {
			if err := checkHeader(path, info); err != nil {
				return res, err
			}
		}
		if !tail {
			if err := checkSealed(path, info, s); err != nil {
				return res, err
			}
			res.last = info.MaxIndex
			continue
		}
		endAt, end := int64(-1), "the file is missing"
		switch {
		case s == nil:
			// Its creation was interrupted: raft-wal creates it.
			res.last = info.BaseIndex - 1
		case s.end < 0 && s.badAt < 0 && s.size < int64(info.SizeLimit):
			// Its creation was interrupted after the file appeared.
			res.removeTail, res.last = path, info.BaseIndex-1
			endAt, end = 0, "the file holds no entry"
		case s.size < int64(info.SizeLimit):
			return res, damaged(path, s.size, "the file is %d bytes, shorter than the %d it was created with: it was truncated", s.size, info.SizeLimit)
		default:
			first := info.BaseIndex + uint64(len(s.entries)) // of a failed batch
			if s.badAt >= 0 && (s.commitsAfterBad > 0 || first <= c.stored) {
				return res, damaged(path, s.badAt, "the batch of entries %d to %d fails its CRC-32C check", first, first+uint64(max(s.badEntries, 1))-1)
			}
			res.last = first - 1
			if s.indexAt != 0 {
				sealed := info
				sealed.MaxIndex, sealed.IndexStart = res.last, s.indexAt
				res.sealTail = &sealed
			}
			// The damage begins where the last batch that passed ends.
			endAt, end = max(s.end, walFileHeaderLen), fmt.Sprintf("then %s at offset %d", s.stop, s.stopAt)
			if s.badAt >= 0 {
				end = "then a batch that fails its CRC-32C check"
			}
		}
		if res.last < c.stored && c.snapshot < c.stored {
			return res, damaged(path, endAt, "the log ends at index %d (%s) but entries up to %d were stored: entries are missing", res.last, end, c.stored)
		}
	}
	return res, nil
}

// checkSealed checks a sealed segment: every batch passed, the index
// frame is where the metadata says and points at the entries read.
func checkSealed(path string, info types.SegmentInfo, s *segmentScan) error {
	if s.badAt >= 0 {
		first := info.BaseIndex + uint64(len(s.entries))
		return damaged(path, s.badAt, "the batch of entries %d to %d fails its CRC-32C check", first, first+uint64(max(s.badEntries, 1))-1)
	}
	if info.MaxIndex < info.BaseIndex {
		return nil // no entry left: nothing to read
	}
	want := info.MaxIndex - info.BaseIndex + 1
	if s.indexAt == 0 || s.indexAt != info.IndexStart || uint64(len(s.entries)) < want {
		at := s.stopAt
		if s.end >= 0 && s.stopAt > s.end {
			at = s.end
		}
		return damaged(path, at, "the sealed segment of entries %d to %d is incomplete (%d entries read, then %s)", info.BaseIndex, info.MaxIndex, len(s.entries), s.stop)
	}
	for i, o := range s.index {
		if i >= len(s.entries) || int64(o) != s.entries[i] {
			return damaged(path, int64(s.indexAt)+4*int64(i), "the segment's index does not point at entry %d", info.BaseIndex+uint64(i))
		}
	}
	if uint64(len(s.index)) < want {
		return damaged(path, int64(s.indexAt), "the segment's index holds %d entries, the log's metadata %d", len(s.index), want)
	}
	return nil
}

// snapshotFileMeta is the part of raft.FileSnapshotStore's meta.json that
// checkSnapshots reads.
type snapshotFileMeta struct {
	Version int
	ID      string
	Index   uint64
	Size    int64
	CRC     []byte
}

// checkSnapshots checks every snapshot raft.FileSnapshotStore keeps in dir
// (Dir/snapshots): its metadata, size, CRC-64 and header. raft would skip
// a damaged one and restore an older snapshot instead, which may lack
// writes the log no longer holds. It returns the newest snapshot's index.
func checkSnapshots(dir string) (uint64, error) {
	ents, err := os.ReadDir(dir)
	if errors.Is(err, os.ErrNotExist) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("consensus: reading snapshots: %w", err)
	}
	var newest uint64
	for _, e := range ents {
		// raft writes a snapshot under NAME.tmp and renames it once
		// complete; a .tmp left by a crash is ignored (and raft removes
		// it).
		if !e.IsDir() || strings.HasSuffix(e.Name(), ".tmp") {
			continue
		}
		meta, err := checkSnapshot(filepath.Join(dir, e.Name()))
		if err != nil {
			return 0, err
		}
		newest = max(newest, meta.Index)
	}
	return newest, nil
}

func checkSnapshot(dir string) (snapshotFileMeta, error) {
	var meta snapshotFileMeta
	metaPath := filepath.Join(dir, "meta.json")
	raw, err := os.ReadFile(metaPath)
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return meta, damaged(metaPath, -1, "the snapshot's metadata is missing")
		}
		return meta, fmt.Errorf("consensus: reading snapshot: %w", err)
	}
	if err := json.Unmarshal(raw, &meta); err != nil {
		var se *json.SyntaxError
		if errors.As(err, &se) {
			return meta, damaged(metaPath, se.Offset, "the snapshot's metadata is not JSON: %v", err)
		}
		return meta, damaged(metaPath, -1, "the snapshot's metadata does not decode: %v", err)
	}
	if len(meta.CRC) == 0 {
		return meta, damaged(metaPath, -1, "the snapshot's metadata has no CRC")
	}
	statePath := filepath.Join(dir, "state.bin")
	f, err := os.Open(statePath)
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return meta, damaged(statePath, -1, "the snapshot's data is missing")
		}
		return meta, fmt.Errorf("consensus: reading snapshot: %w", err)
	}
	defer f.Close()
	h := crc64.New(crc64.MakeTable(crc64.ECMA))
	var hdr [snapshotHeaderLen]byte
	hn, _ := io.ReadFull(f, hdr[:])
	h.Write(hdr[:hn])
	n, err := io.Copy(h, f)
	if err != nil {
		return meta, fmt.Errorf("consensus: reading snapshot: %w", err)
	}
	n += int64(hn)
	switch {
	case n != meta.Size:
		return meta, damaged(statePath, min(n, meta.Size), "the snapshot's data is %d bytes, its metadata says %d", n, meta.Size)
	case !bytes.Equal(h.Sum(nil), meta.CRC):
		return meta, damaged(statePath, -1, "the snapshot's %d bytes fail their CRC-64 check", n)
	case hn == snapshotHeaderLen && hdr[0] > snapshotVersion:
		return meta, fmt.Errorf("consensus: %s: %w", statePath, snapshotVersionError(hdr[0]))
	case hn < snapshotHeaderLen || hdr[0] != snapshotVersion:
		return meta, damaged(statePath, 0, "not a snapshot of version %d", snapshotVersion)
	case binary.BigEndian.Uint64(hdr[1:]) > meta.Index:
		return meta, damaged(statePath, 1, "the snapshot holds command %d, past its log index %d", binary.BigEndian.Uint64(hdr[1:]), meta.Index)
	}
	return meta, nil
}
