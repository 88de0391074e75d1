package backup

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"hash"
	"io"
	"time"

	"github.com/canopy-dev/canopy/relay/store"
)

// Version is the format version this package writes, and the newest it
// reads.
const Version = 1

const (
	magic = "CANOPY-BACKUP\n"
	// maxHeader bounds the header, so a damaged length cannot make a
	// reader allocate without end.
	maxHeader = 1 << 20
)

// Sentinel errors. Test them with errors.Is.
var (
	// ErrNotBackup: the file does not begin as a backup does.
	ErrNotBackup = errors.New("backup: not a Canopy backup")
	// ErrNewerFormat: the file was written in a format newer than Version,
	// by a newer relay, which can read it.
	ErrNewerFormat = errors.New("backup: written in a newer format")
	// ErrDamaged: the file fails its checksum, is cut short, or does not
	// decode.
	ErrDamaged = errors.New("backup: damaged or truncated")
)

// Header describes a backup. It is written in clear before the state, so
// that a reader can tell what a file holds before checking all of it.
type Header struct {
	// Revision is the revision of the store the backup holds.
	Revision int64 `json:"revision"`
	// Relay is the name of the root replica that wrote it.
	Relay string `json:"relay"`
	// Created is when the snapshot was taken.
	Created time.Time `json:"created"`
	// Commit is the source revision of the relay that wrote it, when its
	// build recorded one.
	Commit string `json:"commit,omitempty"`
}

// Write writes a backup of snap to w and returns its size in bytes.
// h.Revision is set from snap. w sees the bytes as they are produced: if
// Write fails midway, what w holds is refused by every reader.
func Write(w io.Writer, h Header, snap store.Snapshot) (int64, error) {
	h.Revision = snap.Revision()
	hdr, err := json.Marshal(h)
	if err != nil {
		return 0, fmt.Errorf("backup: %w", err)
	}
	sum := sha256.New()
	bw := bufio.NewWriterSize(io.MultiWriter(w, sum), 64<<10)
	pre := append([]byte(magic), binary.AppendUvarint(nil, Version)...)
	pre = binary.AppendUvarint(pre, uint64(len(hdr)))
	pre = append(pre, hdr...)
	var n int64
	if _, err = bw.Write(pre); err == nil {
		n, err = snap.WriteTo(bw)
	}
	if err == nil {
		err = bw.Flush()
	}
	if err == nil {
		_, err = w.Write(sum.Sum(nil))
	}
	if err != nil {
		return 0, fmt.Errorf("backup: writing: %w", err)
	}
	return int64(len(pre)) + n + sha256.Size, nil
}

// Check reads a whole backup from r and checks it (its magic, format,
// header and checksum) without decoding the state, and returns its header.
func Check(r io.Reader) (Header, error) {
	return read(r, func(state io.Reader) error {
		_, err := io.Copy(io.Discard, state)
		return err
	})
}

// Load reads a whole backup from r, checks it and decodes its state into a
// new store (with opts), which holds it at the backup's revision. Nothing
// is returned from a backup that fails any check.
func Load(r io.Reader, opts store.Options) (Header, *store.Store, error) {
	st := store.New(opts)
	h, err := read(r, st.Restore)
	if err != nil {
		st.Close()
		return Header{}, nil, err
	}
	if st.Revision() != h.Revision {
		st.Close()
		return Header{}, nil, fmt.Errorf("%w: the header says revision %d, the state is at %d", ErrDamaged, h.Revision, st.Revision())
	}
	return h, st, nil
}

// read reads the magic, version and header from r, hands the state to
// state (which must read it to its end), then checks the checksum, which
// covers everything: an error of state on a damaged file is reported as
// the checksum failure it is.
func read(r io.Reader, state func(io.Reader) error) (Header, error) {
	sr := newSumReader(r)
	br := bufio.NewReader(sr)
	m := make([]byte, len(magic))
	if _, err := io.ReadFull(br, m); err != nil || string(m) != magic {
		if err != nil && !errors.Is(err, io.EOF) && !errors.Is(err, io.ErrUnexpectedEOF) {
			return Header{}, fmt.Errorf("backup: reading: %w", err)
		}
		return Header{}, ErrNotBackup
	}
	v, err := binary.ReadUvarint(br)
	if err != nil {
		return Header{}, damagedErr(err)
	}
	if v > Version {
		return Header{}, fmt.Errorf("%w: format %d, this relay reads format %d: restore it with a newer relay", ErrNewerFormat, v, Version)
	}
	if v == 0 {
		return Header{}, fmt.Errorf("%w: format 0", ErrDamaged)
	}
	n, err := binary.ReadUvarint(br)
	if err != nil {
		return Header{}, damagedErr(err)
	}
	if n > maxHeader {
		return Header{}, fmt.Errorf("%w: a header of %d bytes", ErrDamaged, n)
	}
	raw := make([]byte, n)
	if _, err := io.ReadFull(br, raw); err != nil {
		return Header{}, damagedErr(err)
	}
	var h Header
	// The header is checked by the checksum below, like the rest; a
	// header that does not decode is damage all the same.
	hdrErr := json.Unmarshal(raw, &h)
	stateErr := state(br)
	// Whatever state left unread counts too: a backup ends with its
	// checksum.
	if _, err := io.Copy(io.Discard, br); err != nil {
		return Header{}, fmt.Errorf("backup: reading: %w", err)
	}
	if err := sr.check(); err != nil {
		return Header{}, err
	}
	if hdrErr != nil {
		return Header{}, fmt.Errorf("%w: header: %v", ErrDamaged, hdrErr)
	}
	if stateErr != nil {
		return Header{}, fmt.Errorf("%w: state: %v", ErrDamaged, stateErr)
	}
	return h, nil
}

func damagedErr(err error) error {
	if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
		return fmt.Errorf("%w: the file ends early", ErrDamaged)
	}
	return fmt.Errorf("%w: %v", ErrDamaged, err)
}

// sumReader reads r and hashes every byte it passes on, holding back the
// last sha256.Size bytes read, which are the checksum of the others.
type sumReader struct {
	r    io.Reader
	sum  hash.Hash
	tail []byte // the last bytes read, not passed on (at most sha256.Size)
	buf  []byte
	eof  bool
	err  error // a read error other than io.EOF
}

func newSumReader(r io.Reader) *sumReader {
	return &sumReader{r: r, sum: sha256.New(), buf: make([]byte, 64<<10)}
}

func (s *sumReader) Read(p []byte) (int, error) {
	for {
		// Pass on what is certain not to be part of the checksum.
		if out := len(s.tail) - sha256.Size; out > 0 {
			n := copy(p, s.tail[:out])
			s.sum.Write(p[:n])
			s.tail = s.tail[n:]
			return n, nil
		}
		if s.eof {
			return 0, io.EOF
		}
		if s.err != nil {
			return 0, s.err
		}
		n, err := s.r.Read(s.buf)
		s.tail = append(s.tail, s.buf[:n]...)
		if errors.Is(err, io.EOF) {
			s.eof = true
		} else if err != nil {
			s.err = err
		}
	}
}

// check reports whether the bytes held back are the checksum of the bytes
// passed on; call it once Read returned io.EOF.
func (s *sumReader) check() error {
	if len(s.tail) < sha256.Size {
		return fmt.Errorf("%w: the file ends early", ErrDamaged)
	}
	if !bytes.Equal(s.tail, s.sum.Sum(nil)) {
		return fmt.Errorf("%w: the SHA-256 checksum does not match", ErrDamaged)
	}
	return nil
}
