package wire

import (
	"encoding/binary"
	"errors"
	"fmt"
	"sync"

	"github.com/klauspost/compress/zstd"
)

// The zstd encoder and decoder are shared by the process: EncodeAll and
// DecodeAll are safe for concurrent use and keep their own pools of
// per-call state, so a link costs no codec memory of its own.
var (
	zstdEncoder = sync.OnceValue(func() *zstd.Encoder {
		enc, err := zstd.NewWriter(nil,
			zstd.WithEncoderConcurrency(0), // GOMAXPROCS concurrent EncodeAll calls
			zstd.WithEncoderLevel(zstd.SpeedDefault),
			// Single-segment frames always declare their content size,
			// which decompress requires to bound its output.
			zstd.WithSingleSegment(true),
		)
		if err != nil {
			panic("wire: zstd encoder: " + err.Error()) // options are constant
		}
		return enc
	})
	zstdDecoder = sync.OnceValue(func() *zstd.Decoder {
		dec, err := zstd.NewReader(nil,
			zstd.WithDecoderConcurrency(0),
			// Hard ceilings; the per-frame bound is the capacity of the
			// destination, sized from the declared content size.
			zstd.WithDecoderMaxMemory(MaxFrameSizeLimit),
			zstd.WithDecoderMaxWindow(MaxFrameSizeLimit),
			zstd.WithDecodeAllCapLimit(true),
		)
		if err != nil {
			panic("wire: zstd decoder: " + err.Error())
		}
		return dec
	})
)

// appendObject appends the object field p to b: uvarint length, then the
// bytes, compressed if l says so and it saves space. It reports whether the
// field was compressed.
func appendObject(b []byte, p []byte, l limits) ([]byte, bool) {
	if l.threshold < 0 || len(p) <= l.threshold {
		return appendBytes(b, p), false
	}
	// Compress straight into b, then slide the result up to make room for
	// its length prefix: no intermediate buffer.
	start := len(b)
	b = zstdEncoder().EncodeAll(p, b)
	n := len(b) - start
	if n >= len(p) {
		return appendBytes(b[:start], p), false
	}
	var pre [binary.MaxVarintLen64]byte
	k := binary.PutUvarint(pre[:], uint64(n))
	b = append(b, pre[:k]...)
	copy(b[start+k:], b[start:start+n])
	copy(b[start:], pre[:k])
	return b, true
}

// decompress decodes a compressed object field. The zstd frame must declare
// its content size, which must be at most limit; decoding is bounded by
// that size, so a frame that lies about it fails instead of growing.
func decompress(z []byte, limit int) ([]byte, error) {
	var h zstd.Header
	if err := h.Decode(z); err != nil {
		return nil, &codecError{sentinel: ErrMalformed, msg: "compressed object header", cause: err}
	}
	if h.Skippable || !h.HasFCS {
		return nil, &codecError{sentinel: ErrMalformed, msg: "compressed object does not declare its size"}
	}
	if h.FrameContentSize > uint64(limit) {
		return nil, &codecError{sentinel: ErrObjectTooLarge, msg: fmt.Sprintf("compressed object declares %d bytes, limit %d", h.FrameContentSize, limit)}
	}
	if h.FrameContentSize == 0 {
		return nil, &codecError{sentinel: ErrMalformed, msg: "compressed object is empty"}
	}
	out, err := zstdDecoder().DecodeAll(z, make([]byte, 0, h.FrameContentSize))
	if err != nil {
		if errors.Is(err, zstd.ErrDecoderSizeExceeded) {
			return nil, &codecError{sentinel: ErrObjectTooLarge, msg: fmt.Sprintf("compressed object exceeds its declared %d bytes", h.FrameContentSize)}
		}
		return nil, &codecError{sentinel: ErrMalformed, msg: "compressed object", cause: err}
	}
	if uint64(len(out)) != h.FrameContentSize {
		return nil, &codecError{sentinel: ErrMalformed, msg: fmt.Sprintf("compressed object is %d bytes, declared %d", len(out), h.FrameContentSize)}
	}
	return out, nil
}
