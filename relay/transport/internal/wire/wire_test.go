package wire

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"runtime"
	"strings"
	"testing"

	"github.com/klauspost/compress/zstd"
)

func TestRoundTrip(t *testing.T) {
	for _, s := range samples() {
		t.Run(s.name, func(t *testing.T) {
			b := mustMarshal(t, s.msg)
			if b[0] != Version || Type(b[1]) != s.msg.Type() {
				t.Fatalf("header % x: want version %d type %v", b[:3], Version, s.msg.Type())
			}
			got, err := Unmarshal(b)
			if err != nil {
				t.Fatalf("Unmarshal: %v", err)
			}
			if !equalMessages(got, s.msg) {
				t.Fatalf("round trip:\n got %#v\nwant %#v", got, s.msg)
			}
			if !equalMessages(got, canon(got)) {
				t.Fatalf("decoded message is not canonical: %#v", got)
			}
			// Re-encoding is deterministic (labels are sorted).
			if b2 := mustMarshal(t, got); !bytes.Equal(b, b2) {
				t.Fatalf("re-encoding differs")
			}
		})
	}
}

func TestCompression(t *testing.T) {
	key := Key{Space: "s", Resource: "configmaps", Name: "n"}
	compressible := deploymentJSON("x", 64<<10)
	for _, tc := range []struct {
		name     string
		cfg      *Config
		data     []byte
		wantComp bool
	}{
		{"below-threshold", nil, compressible[:DefaultCompressThreshold], false},
		{"above-threshold", nil, compressible[:DefaultCompressThreshold+1], true},
		{"large", nil, compressible, true},
		{"incompressible", nil, randomBytes(2, 64<<10), false},
		{"disabled", &Config{CompressThreshold: -1}, compressible, false},
		{"low-threshold", &Config{CompressThreshold: 100}, compressible[:200], true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var buf bytes.Buffer
			w := NewWriter(&buf, tc.cfg)
			for _, m := range []Message{&Put{Revision: 1, Key: key, Data: tc.data}, &Report{Seq: 1, Key: key, Data: tc.data}} {
				buf.Reset()
				if err := w.Write(m); err != nil {
					t.Fatal(err)
				}
				if err := w.Flush(); err != nil {
					t.Fatal(err)
				}
				frame := bytes.Clone(buf.Bytes())
				comp := Flags(frame[2])&FlagCompressed != 0
				if comp != tc.wantComp {
					t.Fatalf("%v: compressed=%v, want %v (frame %d bytes, data %d)", m.Type(), comp, tc.wantComp, len(frame), len(tc.data))
				}
				if comp && len(frame) >= len(tc.data) {
					t.Fatalf("%v: compressed frame of %d bytes for %d bytes of data", m.Type(), len(frame), len(tc.data))
				}
				got, err := NewReader(&buf, nil).Read()
				if err != nil {
					t.Fatal(err)
				}
				if !equalMessages(got, m) {
					t.Fatalf("%v: round trip differs", m.Type())
				}
			}
		})
	}
}

// Every strict prefix of a frame is an error, never a panic: through
// Unmarshal, through a Reader, and as a payload re-framed with its shorter
// length (a decoder must notice the missing fields itself).
func TestTruncated(t *testing.T) {
	for _, s := range samples() {
		t.Run(s.name, func(t *testing.T) {
			b := mustMarshal(t, s.msg)
			for i := range len(b) {
				if !cutPoint(i, len(b)) {
					continue
				}
				if _, err := Unmarshal(b[:i]); err == nil {
					t.Fatalf("Unmarshal of %d/%d bytes: no error", i, len(b))
				}
				_, err := NewReader(bytes.NewReader(b[:i]), nil).Read()
				switch {
				case i == 0 && err != io.EOF:
					t.Fatalf("Read of empty stream: %v, want io.EOF", err)
				case i > 0 && !errors.Is(err, io.ErrUnexpectedEOF):
					t.Fatalf("Read of %d/%d bytes: %v, want io.ErrUnexpectedEOF", i, len(b), err)
				}
			}
			hdr := len(b) - payloadLen(b)
			payload := b[hdr:]
			// A Hello ends with fields of protocol version 3 that an
			// older child leaves out: cut right before them, it decodes,
			// without them.
			older := -1
			if h, ok := s.msg.(*Hello); ok {
				older = len(payload) - len(appendBytes(appendVarint(nil, h.Proof.Time), h.Proof.Signature))
			}
			for j := range len(payload) {
				if !cutPoint(j, len(payload)) {
					continue
				}
				if j == older {
					f := rawFrame(b[0], Type(b[1]), Flags(b[2]), payload[:j])
					if m, err := Unmarshal(f); err != nil || m.(*Hello).Proof.Time != 0 || m.(*Hello).Proof.Signature != nil {
						t.Fatalf("a Hello of protocol version 2: %#v, %v; want it without a proof", m, err)
					}
					continue
				}
				f := rawFrame(b[0], Type(b[1]), Flags(b[2]), payload[:j])
				if m, err := Unmarshal(f); err == nil {
					t.Fatalf("payload truncated to %d/%d bytes decoded as %#v", j, len(payload), m)
				} else if !errors.Is(err, ErrMalformed) {
					t.Fatalf("payload truncated to %d/%d bytes: %v, want ErrMalformed", j, len(payload), err)
				}
			}
		})
	}
}

// cutPoint says whether TestTruncated cuts an n-byte input at i: at every
// offset of inputs up to 8 KiB; for the large samples (64 and 200 KiB), at
// every offset of the first and last 4 KiB and every 101st in between, to
// keep the test quadratic only in small sizes.
func cutPoint(i, n int) bool {
	return n <= 8<<10 || i < 4<<10 || i >= n-4<<10 || i%101 == 0
}

func payloadLen(frame []byte) int {
	n, k := uvarint(frame[3:])
	if k <= 0 || 3+k+int(n) != len(frame) {
		panic("bad frame")
	}
	return int(n)
}

func uvarint(b []byte) (uint64, int) {
	d := decoder{b: b}
	v := d.uvarint("")
	return v, len(b) - len(d.b)
}

// A later protocol version appends fields; this one ignores them.
func TestTrailingFieldsIgnored(t *testing.T) {
	for _, s := range samples() {
		b := mustMarshal(t, s.msg)
		payload := append(bytes.Clone(b[len(b)-payloadLen(b):]), 0x01, 0x02, 0xff, 0xff, 0xff)
		got, err := Unmarshal(rawFrame(Version, s.msg.Type(), Flags(b[2]), payload))
		if err != nil {
			t.Fatalf("%s: %v", s.name, err)
		}
		if !equalMessages(got, s.msg) {
			t.Fatalf("%s: differs with trailing fields", s.name)
		}
	}
}

func TestWrongVersion(t *testing.T) {
	good := mustMarshal(t, &Ack{Revision: 1})
	for _, v := range []byte{0, 2, 'G', 0x16, 0xff} {
		b := bytes.Clone(good)
		b[0] = v
		_, err := Unmarshal(b)
		if !errors.Is(err, ErrVersion) || !strings.Contains(err.Error(), fmt.Sprintf("version %d", v)) {
			t.Fatalf("version %d: Unmarshal error %v", v, err)
		}
		// The Reader refuses after the first byte, without waiting for more.
		_, err = NewReader(bytes.NewReader(b[:1]), nil).Read()
		if !errors.Is(err, ErrVersion) {
			t.Fatalf("version %d: Read error %v", v, err)
		}
	}
	t.Logf("example: %v", func() error { _, err := Unmarshal([]byte("GET / HTTP/1.1\r\n")); return err }())
}

func TestBadHeader(t *testing.T) {
	for _, tc := range []struct {
		name  string
		frame []byte
		want  error
	}{
		{"type-zero", rawFrame(Version, 0, 0, nil), ErrUnknownType},
		{"unknown-type", rawFrame(Version, 0x1f, 0, []byte{1}), ErrUnknownType},
		{"proxy-range", rawFrame(Version, 0x7f, 0, nil), ErrUnknownType},
		{"reserved-flag", rawFrame(Version, TypeAck, 0x80, []byte{1}), ErrMalformed},
		{"compressed-ack", rawFrame(Version, TypeAck, FlagCompressed, []byte{1}), ErrMalformed},
		{"length-overflow", []byte{Version, byte(TypeAck), 0, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01}, ErrMalformed},
		{"trailing-frame", append(mustMarshal(t, &Ack{Revision: 1}), 0), ErrMalformed},
		{"bad-bool", rawFrame(Version, TypeWelcome, 0, []byte{0, 1, 2}), ErrMalformed},
		{"uint32-overflow", rawFrame(Version, TypeWelcome, 0, []byte{0, 0x80, 0x80, 0x80, 0x80, 0x10, 0}), ErrMalformed},
		{"count-too-large", rawFrame(Version, TypeHello, 0, []byte{0, 0, 0xff, 0xff, 0xff, 0xff, 0x0f, 1, 1}), ErrMalformed},
		{"announce-count-too-large", rawFrame(Version, TypeAnnounce, 0, []byte{1, 2, 0, 0, 0, 0, 0, 0, 0}), ErrMalformed},
		{"report-deleted-with-data", rawFrame(Version, TypeReport, 0, []byte{1, 0, 0, 0, 0, 0, 1, 1, 'x'}), ErrMalformed},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := Unmarshal(tc.frame); !errors.Is(err, tc.want) {
				t.Fatalf("Unmarshal: %v, want %v", err, tc.want)
			}
			if _, err := NewReader(bytes.NewReader(tc.frame), nil).Read(); !errors.Is(err, tc.want) && tc.name != "trailing-frame" {
				t.Fatalf("Read: %v, want %v", err, tc.want)
			}
		})
	}
}

func TestAnnounceLabelsCanonical(t *testing.T) {
	// Two labels in decreasing key order, then a duplicate.
	for name, labels := range map[string][]string{
		"unsorted":  {"b", "1", "a", "2"},
		"duplicate": {"a", "1", "a", "2"},
	} {
		p := []byte{1, 1, 1, 'd', 2}
		for _, s := range labels {
			p = appendString(p, s)
		}
		p = append(p, 0, 0, 0)
		if _, err := Unmarshal(rawFrame(Version, TypeAnnounce, 0, p)); !errors.Is(err, ErrMalformed) {
			t.Fatalf("%s: %v, want ErrMalformed", name, err)
		}
	}
}

func TestInvalidToEncode(t *testing.T) {
	if _, err := Marshal(nil); !errors.Is(err, ErrMalformed) {
		t.Fatalf("Marshal(nil): %v", err)
	}
	if _, err := Marshal(&Report{Deleted: true, Data: []byte("x")}); !errors.Is(err, ErrMalformed) {
		t.Fatalf("deleted report with data: %v", err)
	}
	// Too large to write: an error, nothing written, the Writer still works.
	var buf bytes.Buffer
	w := NewWriter(&buf, &Config{MaxFrameSize: 1 << 10, CompressThreshold: -1})
	if err := w.Write(&Put{Data: make([]byte, 2<<10)}); !errors.Is(err, ErrFrameTooLarge) {
		t.Fatalf("oversize Put: %v", err)
	}
	if err := w.Write(&Ack{Revision: 3}); err != nil {
		t.Fatal(err)
	}
	if err := w.Flush(); err != nil {
		t.Fatal(err)
	}
	if m, err := NewReader(&buf, nil).Read(); err != nil || m.(*Ack).Revision != 3 {
		t.Fatalf("after refused write: %v %v", m, err)
	}
}

// allocated returns the bytes allocated by f.
func allocated(f func()) uint64 {
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	f()
	runtime.ReadMemStats(&after)
	return after.TotalAlloc - before.TotalAlloc
}

func TestOversizeFrame(t *testing.T) {
	for _, n := range []uint64{DefaultMaxFrameSize + 1, 1 << 40, 1<<64 - 1} {
		frame := appendUvarint([]byte{Version, byte(TypePut), 0}, n)
		var err error
		a := allocated(func() { _, err = Unmarshal(frame) })
		if !errors.Is(err, ErrFrameTooLarge) {
			t.Fatalf("length %d: Unmarshal %v, want ErrFrameTooLarge", n, err)
		}
		a2 := allocated(func() { _, err = NewReader(bytes.NewReader(frame), nil).Read() })
		if !errors.Is(err, ErrFrameTooLarge) {
			t.Fatalf("length %d: Read %v, want ErrFrameTooLarge", n, err)
		}
		if a > 64<<10 || a2 > 64<<10 {
			t.Fatalf("length %d: allocated %d and %d bytes to refuse it", n, a, a2)
		}
	}
	// A smaller limit applies to the Reader.
	frame := mustMarshal(t, &Put{Data: randomBytes(3, 2000)})
	if _, err := NewReader(bytes.NewReader(frame), &Config{MaxFrameSize: 1000}).Read(); !errors.Is(err, ErrFrameTooLarge) {
		t.Fatalf("configured limit: %v", err)
	}
	// A frame within the limit that announces 15 MiB and sends 100 bytes
	// costs what arrived, not what was announced.
	frame = appendUvarint([]byte{Version, byte(TypePut), 0}, 15<<20)
	frame = append(frame, make([]byte, 100)...)
	var err error
	a := allocated(func() { _, err = NewReader(bytes.NewReader(frame), nil).Read() })
	if !errors.Is(err, io.ErrUnexpectedEOF) {
		t.Fatalf("short 15 MiB frame: %v", err)
	}
	if a > 1<<20 {
		t.Fatalf("short 15 MiB frame: allocated %d bytes", a)
	}
}

// putFrame builds a Put frame whose Data field is z, flagged compressed.
func putFrame(z []byte) []byte {
	p := appendUvarint(nil, 1)
	p = appendKey(p, Key{Space: "s", Resource: "r", Name: "bomb"})
	p = appendBytes(p, z)
	return rawFrame(Version, TypePut, FlagCompressed, p)
}

// streamZeros compresses n zero bytes with the streaming encoder, declaring
// size as the content size (-1: none), without holding n bytes in memory.
func streamZeros(t *testing.T, n int64, size int64) []byte {
	t.Helper()
	var out bytes.Buffer
	enc, err := zstd.NewWriter(nil, zstd.WithEncoderConcurrency(1))
	if err != nil {
		t.Fatal(err)
	}
	enc.ResetContentSize(&out, size)
	if _, err := io.CopyN(enc, zeroReader{}, n); err != nil {
		t.Fatal(err)
	}
	if err := enc.Close(); err != nil {
		t.Fatal(err)
	}
	return out.Bytes()
}

type zeroReader struct{}

func (zeroReader) Read(p []byte) (int, error) { clear(p); return len(p), nil }

func TestZstdBomb(t *testing.T) {
	const bomb = 256 << 20 // 256 MiB of zeros, a few KiB compressed
	// Warm up the shared decoder so its one-time state is not counted.
	if _, err := Unmarshal(mustMarshal(t, &Put{Data: deploymentJSON("w", 4096)})); err != nil {
		t.Fatal(err)
	}
	small := zstdEncoder().EncodeAll(make([]byte, 1024), nil)
	for _, tc := range []struct {
		name string
		z    []byte
		want error
	}{
		{"declared-size-too-large", streamZeros(t, bomb, bomb), ErrObjectTooLarge},
		{"no-declared-size", streamZeros(t, bomb, -1), ErrMalformed},
		{"lies-about-size", append(bytes.Clone(small), streamZeros(t, bomb, -1)...), ErrObjectTooLarge},
		{"skippable-frame", []byte{0x50, 0x2a, 0x4d, 0x18, 0, 0, 0, 0}, ErrMalformed},
		{"garbage", []byte("not zstd at all"), ErrMalformed},
		{"corrupt-block", append(bytes.Clone(small[:len(small)-3]), 0xff, 0xff, 0xff), ErrMalformed},
	} {
		t.Run(tc.name, func(t *testing.T) {
			frame := putFrame(tc.z)
			var err error
			a := allocated(func() { _, err = Unmarshal(frame) })
			if !errors.Is(err, tc.want) {
				t.Fatalf("%d-byte compressed field: %v, want %v", len(tc.z), err, tc.want)
			}
			if a > 4<<20 {
				t.Fatalf("allocated %d bytes to refuse a %d-byte compressed field", a, len(tc.z))
			}
			t.Logf("%d-byte field refused after %d bytes allocated: %v", len(tc.z), a, err)
		})
	}
}

func TestStreamOverPipe(t *testing.T) {
	const n = 5000
	msgs := make([]Message, 0, n)
	all := samples()
	for i := range n {
		switch i % 4 {
		case 0:
			msgs = append(msgs, all[i%len(all)].msg)
		case 1:
			msgs = append(msgs, &Put{Revision: uint64(i), Key: Key{Space: "mailbox-e", Resource: "configmaps", Namespace: "ns", Name: fmt.Sprint("cm-", i)}, Data: deploymentJSON(fmt.Sprint("d", i), 700+i%3000)})
		case 2:
			msgs = append(msgs, &Ack{Revision: uint64(i)})
		default:
			msgs = append(msgs, &Report{Seq: uint64(i), Key: Key{Space: "inbox", Name: fmt.Sprint(i)}, Deleted: i%8 == 3})
		}
	}
	pr, pw := io.Pipe()
	errc := make(chan error, 1)
	go func() {
		w := NewWriter(pw, nil)
		for i, m := range msgs {
			if err := w.Write(m); err != nil {
				errc <- err
				return
			}
			if i%37 == 0 {
				if err := w.Flush(); err != nil {
					errc <- err
					return
				}
			}
		}
		errc <- w.Flush()
		pw.Close()
	}()
	r := NewReader(pr, nil)
	for i, want := range msgs {
		got, err := r.Read()
		if err != nil {
			t.Fatalf("message %d: %v", i, err)
		}
		if !equalMessages(got, want) {
			t.Fatalf("message %d: got %#v, want %#v", i, got, want)
		}
	}
	if _, err := r.Read(); err != io.EOF {
		t.Fatalf("after last frame: %v, want io.EOF", err)
	}
	if err := <-errc; err != nil {
		t.Fatalf("writer: %v", err)
	}
}

type failWriter struct{ n int }

func (w *failWriter) Write(p []byte) (int, error) {
	if w.n <= 0 {
		return 0, errors.New("connection reset")
	}
	w.n--
	return len(p), nil
}

func TestWriterStickyError(t *testing.T) {
	w := NewWriter(&failWriter{}, nil)
	if err := w.Write(&Ack{Revision: 1}); err != nil {
		t.Fatal(err) // buffered
	}
	if err := w.Flush(); err == nil || !strings.Contains(err.Error(), "connection reset") {
		t.Fatalf("Flush: %v", err)
	}
	if err := w.Write(&Ack{Revision: 2}); err == nil {
		t.Fatal("Write after a failed Flush succeeded")
	}
}

func TestReaderStickyError(t *testing.T) {
	b := append(mustMarshal(t, &Ack{Revision: 1}), 9, 9, 9)
	b = append(b, mustMarshal(t, &Ack{Revision: 2})...)
	r := NewReader(bytes.NewReader(b), nil)
	if _, err := r.Read(); err != nil {
		t.Fatal(err)
	}
	_, err1 := r.Read()
	_, err2 := r.Read()
	if err1 == nil || err2 != err1 {
		t.Fatalf("errors %v then %v, want the same error twice", err1, err2)
	}
}

func TestTypeStrings(t *testing.T) {
	for typ := range 256 {
		m := newMessage(Type(typ))
		if (m != nil) != (typeNames[Type(typ)] != "") {
			t.Fatalf("type %#02x: message %T, name %q", typ, m, typeNames[Type(typ)])
		}
		if m != nil && m.Type() != Type(typ) {
			t.Fatalf("type %#02x: %T.Type() = %v", typ, m, m.Type())
		}
	}
	if s := Type(0x99).String(); s != "Type(0x99)" {
		t.Fatal(s)
	}
}

func TestNegotiate(t *testing.T) {
	for _, tc := range []struct {
		offered []uint32
		want    uint32
	}{
		{nil, 0},
		{[]uint32{1}, 1},
		{[]uint32{2}, 2},
		{[]uint32{1, 2}, 2},
		{[]uint32{2, 1}, 2},
		{[]uint32{7, 1}, 1},
		{[]uint32{0, 99}, 0},
	} {
		if got := Negotiate(tc.offered); got != tc.want {
			t.Errorf("Negotiate(%v) = %d, want %d", tc.offered, got, tc.want)
		}
	}
	if got := SupportedVersions(); got[0] != ProtocolVersion || got[len(got)-1] != MinProtocolVersion {
		t.Errorf("SupportedVersions() = %v", got)
	}
}
