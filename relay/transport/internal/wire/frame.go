package wire

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
)

// Version is the frame format version, the first byte of every frame.
const Version = 1

// ProtocolVersion is the highest protocol version this package implements
// (see "Versioning" in the package doc). A child lists the versions it
// speaks in Hello.Versions (SupportedVersions); the parent picks the
// highest one both speak (Negotiate) in Welcome.Version.
//
//   - 1: Hello, Welcome, JoinRequest, JoinResponse, Announce, Moved,
//     Error; the downsync and upsync messages.
//   - 2: adds Siblings and AnnounceAck (parent → child, control stream).
//     A parent sends them only on a link whose Welcome.Version is at
//     least 2.
//   - 3: adds Register (child → parent) and Registered (parent → child),
//     on the control stream: a region has the root register the relays
//     that join or link below it. Destination.Since is then the
//     generation the root gave the destination (relay/transport/registry), not a
//     child's clock.
//   - 4: adds Renew (child → parent) and Renewed (parent → child), on the
//     control stream: a child renews its certificate over its link.
//   - 5: the parent opens proxy streams (ProxyOpen, ProxyReady, ProxyData,
//     ProxyCredit, ProxyClose; proxy.go) toward a child whose link
//     speaks it: requests from the root to a destination's cluster.
const ProtocolVersion uint32 = 5

// MinProtocolVersion is the lowest protocol version this package still
// speaks: a child or parent of that version interoperates with this one.
const MinProtocolVersion uint32 = 1

// SupportedVersions returns the protocol versions this package speaks,
// highest first: what a child puts in Hello.Versions.
func SupportedVersions() []uint32 {
	out := make([]uint32, 0, ProtocolVersion-MinProtocolVersion+1)
	for v := ProtocolVersion; v >= MinProtocolVersion; v-- {
		out = append(out, v)
	}
	return out
}

// Negotiate returns the highest protocol version among offered (a child's
// Hello.Versions) that this package speaks, or 0 if there is none.
func Negotiate(offered []uint32) uint32 {
	var best uint32
	for _, v := range offered {
		if v >= MinProtocolVersion && v <= ProtocolVersion && v > best {
			best = v
		}
	}
	return best
}

const (
	// DefaultMaxFrameSize is the default Config.MaxFrameSize: 16 MiB.
	DefaultMaxFrameSize = 16 << 20
	// MaxFrameSizeLimit is the largest Config.MaxFrameSize honoured; larger
	// values are lowered to it.
	MaxFrameSizeLimit = 1 << 30
	// DefaultCompressThreshold is the default Config.CompressThreshold.
	DefaultCompressThreshold = 1 << 9
)

// Sentinel errors. Errors returned by this package wrap one of them (or
// io.EOF, io.ErrUnexpectedEOF, or the error of the underlying io.Reader or
// io.Writer) and say more.
var (
	// ErrVersion: a frame's version byte is not Version.
	ErrVersion = errors.New("wire: unsupported frame version")
	// ErrUnknownType: a frame's type is not one this version knows.
	ErrUnknownType = errors.New("wire: unknown frame type")
	// ErrFrameTooLarge: a frame's payload is longer than Config.MaxFrameSize.
	ErrFrameTooLarge = errors.New("wire: frame too large")
	// ErrObjectTooLarge: a compressed object declares (or decompresses to)
	// more than Config.MaxFrameSize bytes.
	ErrObjectTooLarge = errors.New("wire: object too large")
	// ErrMalformed: a payload does not decode (truncated field, bad boolean,
	// unsorted labels, reserved flag set, corrupt compressed data, ...), or
	// a message is invalid to encode.
	ErrMalformed = errors.New("wire: malformed frame")
)

// Flags is the flags byte of a frame header.
type Flags uint8

// FlagCompressed means the object field of the payload (Put.Data,
// Report.Data) is a zstd frame declaring its content size.
const FlagCompressed Flags = 1 << 0

// knownFlags are the flag bits defined in frame version 1.
const knownFlags = FlagCompressed

// Config tunes a Writer or Reader. The zero value (or a nil *Config) means
// the defaults; both ends of a link should use the same MaxFrameSize.
type Config struct {
	// MaxFrameSize bounds the payload length of a frame, on write and on
	// read, and the decompressed size of an object on read. Zero means
	// DefaultMaxFrameSize; values above MaxFrameSizeLimit are lowered to it.
	MaxFrameSize int
	// CompressThreshold: an object (Put.Data, Report.Data) longer than this
	// many bytes is compressed with zstd if that makes it smaller. Zero means
	// DefaultCompressThreshold; a negative value disables compression on
	// write (a Reader always accepts compressed frames).
	CompressThreshold int
}

// limits is a Config with defaults applied.
type limits struct {
	maxFrame  int
	threshold int // <0: never compress
}

func (c *Config) limits() limits {
	l := limits{maxFrame: DefaultMaxFrameSize, threshold: DefaultCompressThreshold}
	if c == nil {
		return l
	}
	if c.MaxFrameSize > 0 {
		l.maxFrame = min(c.MaxFrameSize, MaxFrameSizeLimit)
	}
	if c.CompressThreshold != 0 {
		l.threshold = c.CompressThreshold
	}
	return l
}

var defaultLimits = (*Config)(nil).limits()

// maxHeaderLen is the longest frame header: three bytes and a uvarint.
const maxHeaderLen = 3 + binary.MaxVarintLen64

// appendHeader appends a frame header to b.
func appendHeader(b []byte, t Type, f Flags, n int) []byte {
	b = append(b, Version, byte(t), byte(f))
	return binary.AppendUvarint(b, uint64(n))
}

// readHeader reads a frame header. It checks the version before reading
// further, and the type and the length before the payload is read. It
// returns io.EOF only if r was at EOF before the first byte.
func readHeader(r io.ByteReader, l limits) (Type, Flags, int, error) {
	v, err := r.ReadByte()
	if err != nil {
		return 0, 0, 0, err
	}
	if v != Version {
		return 0, 0, 0, fmt.Errorf("%w %d (this end speaks frame version %d)", ErrVersion, v, Version)
	}
	var h [2]byte
	for i := range h {
		if h[i], err = r.ReadByte(); err != nil {
			return 0, 0, 0, fmt.Errorf("wire: reading frame header: %w", noEOF(err))
		}
	}
	t, f := Type(h[0]), Flags(h[1])
	if !t.known() {
		return 0, 0, 0, fmt.Errorf("%w %#02x in frame version %d", ErrUnknownType, byte(t), Version)
	}
	if f&^knownFlags != 0 {
		return 0, 0, 0, fmt.Errorf("%w: %v frame has reserved flag bits %#02x", ErrMalformed, t, byte(f&^knownFlags))
	}
	if f&FlagCompressed != 0 && !t.hasObject() {
		return 0, 0, 0, fmt.Errorf("%w: %v frame cannot be compressed", ErrMalformed, t)
	}
	n, err := binary.ReadUvarint(r)
	if err != nil {
		if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
			return 0, 0, 0, fmt.Errorf("wire: reading frame length: %w", io.ErrUnexpectedEOF)
		}
		return 0, 0, 0, fmt.Errorf("%w: frame length: %v", ErrMalformed, err)
	}
	if n > uint64(l.maxFrame) {
		return 0, 0, 0, fmt.Errorf("%w: %v frame of %d bytes, limit %d", ErrFrameTooLarge, t, n, l.maxFrame)
	}
	return t, f, int(n), nil
}

func noEOF(err error) error {
	if err == io.EOF {
		return io.ErrUnexpectedEOF
	}
	return err
}

// Marshal encodes msg as one frame with the default Config.
func Marshal(msg Message) ([]byte, error) {
	e := getEncoder(defaultLimits)
	defer putEncoder(e)
	if err := e.encode(msg); err != nil {
		return nil, err
	}
	out := make([]byte, 0, maxHeaderLen+len(e.buf))
	out = appendHeader(out, msg.Type(), e.flags, len(e.buf))
	return append(out, e.buf...), nil
}

// Unmarshal decodes exactly one frame, with the default Config. The result
// does not retain b.
func Unmarshal(b []byte) (Message, error) {
	r := bytes.NewReader(b)
	t, f, n, err := readHeader(r, defaultLimits)
	if err == io.EOF {
		return nil, fmt.Errorf("wire: empty frame: %w", io.ErrUnexpectedEOF)
	}
	if err != nil {
		return nil, err
	}
	off := len(b) - r.Len()
	switch {
	case r.Len() < n:
		return nil, fmt.Errorf("wire: %v frame payload: %w", t, io.ErrUnexpectedEOF)
	case r.Len() > n:
		return nil, fmt.Errorf("%w: %d bytes after the frame", ErrMalformed, r.Len()-n)
	}
	return decodePayload(t, f, b[off:], defaultLimits)
}
