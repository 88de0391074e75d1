package store

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"hash"
	"hash/crc32"
	"io"

	"github.com/google/btree"
)

// Snapshot format, version 1:
//
//	magic "CNPS", version byte 1, varint revision
//	per object: uvarint record length (> 0), record: key (space, group,
//	    resource, namespace, name as length-prefixed strings), varint create
//	    revision, varint revision, length-prefixed data
//	uvarint 0
//	CRC-32C (Castagnoli) of everything above, 4 bytes big-endian
const (
	snapshotMagic   = "CNPS"
	snapshotVersion = 1
	// maxRecord bounds one record, so that a corrupt length cannot make
	// Restore read without end.
	maxRecord = 1 << 30
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// Snapshot implements FSM: it returns the current state in O(1) (the trees
// are cloned lazily, copy-on-write). The Snapshot's WriteTo may run
// concurrently with later Applies.
func (s *Store) Snapshot() (Snapshot, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil, ErrClosed
	}
	// From now on, the tables the snapshot shares are never modified:
	// writable clones them.
	s.gen++
	return &snapshot{rev: s.rev, tables: s.tables.Clone()}, nil
}

// SnapshotAt is Snapshot labelled with revision rev instead of the store's
// own, which rev must not be below: restored from it, a store is at rev,
// its history starts there and its next write is past it. A root restored
// from a backup starts so, past every revision the backed-up root may have
// issued since the backup (relay restore --bump-revision), so that no
// client or child takes a later revision of the old root for one of the
// restored root.
func (s *Store) SnapshotAt(rev int64) (Snapshot, error) {
	snap, err := s.Snapshot()
	if err != nil {
		return nil, err
	}
	p := snap.(*snapshot)
	if rev < p.rev {
		p.Release()
		return nil, fmt.Errorf("%w: snapshot at revision %d, below the store's %d", ErrInvalid, rev, p.rev)
	}
	p.rev = rev
	return p, nil
}

// snapshot implements Snapshot.
type snapshot struct {
	rev    int64
	tables *btree.BTreeG[tableRef] // nil once released
}

// WriteTo writes the snapshot in the format above. It may be called more
// than once, until Release.
func (p *snapshot) WriteTo(w io.Writer) (int64, error) {
	if p.tables == nil {
		return 0, errors.New("store: snapshot released")
	}
	cw := &countingWriter{w: w}
	crc := crc32.New(castagnoli)
	bw := bufio.NewWriterSize(io.MultiWriter(cw, crc), 64<<10)

	var e encoder
	e.buf = append(e.buf, snapshotMagic...)
	e.byte(snapshotVersion)
	e.varint(p.rev)
	_, err := bw.Write(e.buf)

	var rec encoder
	p.tables.Ascend(func(ref tableRef) bool {
		ref.t.objs.Ascend(func(en entry) bool {
			o := en.obj
			rec.buf = rec.buf[:0]
			rec.key(o.Key)
			rec.varint(o.CreateRevision)
			rec.varint(o.Revision)
			rec.bytes(o.Data)
			e.buf = binary.AppendUvarint(e.buf[:0], uint64(len(rec.buf)))
			if _, err = bw.Write(e.buf); err == nil {
				_, err = bw.Write(rec.buf)
			}
			return err == nil
		})
		return err == nil
	})
	if err == nil {
		_, err = bw.Write([]byte{0})
	}
	if err == nil {
		err = bw.Flush()
	}
	if err == nil {
		_, err = cw.Write(binary.BigEndian.AppendUint32(nil, crc.Sum32()))
	}
	return cw.n, err
}

// Revision is the revision the snapshot holds (and WriteTo writes).
func (p *snapshot) Revision() int64 { return p.rev }

// Release drops the snapshot's hold on the state.
func (p *snapshot) Release() { p.tables = nil }

type countingWriter struct {
	w io.Writer
	n int64
}

func (c *countingWriter) Write(b []byte) (int, error) {
	n, err := c.w.Write(b)
	c.n += int64(n)
	return n, err
}

// Restore implements FSM: it replaces the whole state with a snapshot
// written by WriteTo, all or nothing. The history and the states retained
// for paged lists are dropped: every watcher ends with ErrExpired, and so do
// the continue tokens issued before (unless of the restored revision), so
// consumers list again. The revision becomes the snapshot's. Restore must not run
// concurrently with Apply or Snapshot.
func (s *Store) Restore(r io.Reader) error {
	// A List retaining a state meanwhile bumps gen again: the new tables
	// then count as shared and are cloned on their first write, which is
	// only wasteful.
	s.mu.RLock()
	s.pagesMu.Lock()
	gen := s.gen
	s.pagesMu.Unlock()
	s.mu.RUnlock()
	st, err := s.readSnapshot(r, gen)
	if err != nil {
		return fmt.Errorf("store: restore: %w", err)
	}

	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return ErrClosed
	}
	s.state = st
	s.revision.Store(st.rev)
	s.hist.reset(st.rev)
	s.dropPages()
	s.wakeWaiters()
	s.fanMu.Lock()
	s.endWatchers(ErrExpired)
	s.fanRev = st.rev
	s.fanMu.Unlock()
	return nil
}

// readSnapshot reads a snapshot into a new state whose tables belong to
// generation gen.
func (s *Store) readSnapshot(r io.Reader, gen uint64) (state, error) {
	br := bufio.NewReaderSize(r, 64<<10)
	cr := &crcReader{r: br, crc: crc32.New(castagnoli)}
	hdr := make([]byte, len(snapshotMagic)+1)
	if _, err := io.ReadFull(cr, hdr); err != nil {
		return state{}, noEOF(err)
	}
	if string(hdr[:len(snapshotMagic)]) != snapshotMagic {
		return state{}, fmt.Errorf("%w: not a store snapshot", ErrInvalid)
	}
	if v := hdr[len(snapshotMagic)]; v > snapshotVersion {
		return state{}, fmt.Errorf("%w: snapshot format %d is newer than this relay reads (%d)", ErrInvalid, v, snapshotVersion)
	} else if v != snapshotVersion {
		return state{}, fmt.Errorf("%w: snapshot version %d", ErrInvalid, v)
	}
	rev, err := binary.ReadVarint(cr)
	if err != nil {
		return state{}, noEOF(err)
	}
	if rev < 0 {
		return state{}, fmt.Errorf("%w: snapshot revision %d", ErrInvalid, rev)
	}

	st := state{rev: rev, tables: newTables()}
	var cur tableRef // the table of the previous record
	var buf bytes.Buffer
	for {
		n, err := binary.ReadUvarint(cr)
		if err != nil {
			return state{}, noEOF(err)
		}
		if n == 0 {
			break
		}
		if n > maxRecord {
			return state{}, fmt.Errorf("%w: snapshot record of %d bytes", ErrInvalid, n)
		}
		buf.Reset()
		if _, err := io.CopyN(&buf, cr, int64(n)); err != nil {
			return state{}, noEOF(err)
		}
		o, err := s.decodeRecord(buf.Bytes(), rev)
		if err != nil {
			return state{}, err
		}
		k := o.Key
		if cur.t == nil || cur.space != k.Space || cur.res != k.Resource {
			var ok bool
			if cur, ok = st.tables.Get(tableRef{space: k.Space, res: k.Resource}); !ok {
				cur = tableRef{space: k.Space, res: k.Resource, t: &table{gen: gen, objs: btree.NewG(treeDegree, entryLess)}}
				st.tables.ReplaceOrInsert(cur)
			}
		}
		if _, dup := cur.t.objs.ReplaceOrInsert(entry{ns: k.Namespace, name: k.Name, obj: o}); dup {
			return state{}, fmt.Errorf("%w: %s appears twice in the snapshot", ErrInvalid, k)
		}
		st.objects++
		st.bytes += int64(len(o.Data))
	}

	sum := cr.crc.Sum32()
	var trailer [4]byte
	if _, err := io.ReadFull(br, trailer[:]); err != nil {
		return state{}, noEOF(err)
	}
	if binary.BigEndian.Uint32(trailer[:]) != sum {
		return state{}, fmt.Errorf("%w: snapshot checksum mismatch", ErrInvalid)
	}
	if _, err := br.ReadByte(); err != io.EOF {
		return state{}, fmt.Errorf("%w: data after the snapshot", ErrInvalid)
	}
	return st, nil
}

// decodeRecord decodes one object record of a snapshot at revision rev.
func (s *Store) decodeRecord(rec []byte, rev int64) (*Object, error) {
	d := decoder{buf: rec}
	k := d.key()
	createRev, objRev := d.varint(), d.varint()
	data := bytes.Clone(d.bytes())
	if d.err == nil && len(d.buf) > 0 {
		d.fail()
	}
	if d.err != nil {
		return nil, fmt.Errorf("%w: snapshot record: %v", ErrInvalid, d.err)
	}
	if k.Resource.Resource == "" || k.Name == "" || createRev <= 0 || createRev > objRev || objRev > rev {
		return nil, fmt.Errorf("%w: snapshot record of %s at revision %d (created at %d)", ErrInvalid, k, objRev, createRev)
	}
	_, meta, err := parseObject(data)
	if err != nil {
		return nil, err
	}
	return s.newObject(k, objRev, createRev, data, meta)
}

// noEOF turns a premature io.EOF into io.ErrUnexpectedEOF.
func noEOF(err error) error {
	if err == io.EOF {
		return io.ErrUnexpectedEOF
	}
	return err
}

// crcReader reads from r, adding every byte read to crc.
type crcReader struct {
	r   *bufio.Reader
	crc hash.Hash32
	one [1]byte
}

func (c *crcReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.crc.Write(p[:n])
	return n, err
}

func (c *crcReader) ReadByte() (byte, error) {
	b, err := c.r.ReadByte()
	if err == nil {
		c.one[0] = b
		c.crc.Write(c.one[:])
	}
	return b, err
}
