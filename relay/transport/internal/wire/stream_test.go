package wire

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"testing"
	"testing/iotest"
)

// writeRecorder records the size of every write.
type writeRecorder struct {
	bytes.Buffer
	writes []int
}

func (w *writeRecorder) Write(p []byte) (int, error) {
	w.writes = append(w.writes, len(p))
	return w.Buffer.Write(p)
}

// mixedMessages returns n messages of every size class: acks, small and
// compressible puts, and (every 50th) a put larger than a Writer's buffer.
func mixedMessages(n int) []Message {
	msgs := make([]Message, 0, n)
	for i := range n {
		switch {
		case i%50 == 49:
			msgs = append(msgs, &Put{Revision: uint64(i), Key: Key{Space: "s", Name: fmt.Sprint("big-", i)}, Data: randomBytes(uint64(i), 40<<10+i)})
		case i%3 == 0:
			msgs = append(msgs, &Ack{Revision: uint64(i)})
		default:
			msgs = append(msgs, &Put{Revision: uint64(i), Key: Key{Space: "s", Name: fmt.Sprint("o-", i)}, Data: deploymentJSON(fmt.Sprint("d", i), 600+i%2000)})
		}
	}
	return msgs
}

func TestWriterCoalescesUntilFlush(t *testing.T) {
	var w writeRecorder
	fw := NewWriter(&w, nil)
	for i := range 20 {
		if err := fw.Write(&Ack{Revision: uint64(i)}); err != nil {
			t.Fatal(err)
		}
	}
	if len(w.writes) != 0 {
		t.Fatalf("%d writes before Flush", len(w.writes))
	}
	if fw.buf == nil {
		t.Fatal("no buffer while frames are pending")
	}
	if err := fw.Flush(); err != nil {
		t.Fatal(err)
	}
	if len(w.writes) != 1 {
		t.Fatalf("20 acks and a Flush: %d writes, want 1", len(w.writes))
	}
	if fw.buf != nil {
		t.Fatal("the Writer keeps a buffer after Flush")
	}
	// More than a buffer's worth goes out in writes of about its size.
	w.writes = nil
	for i := range 200 {
		if err := fw.Write(&Put{Revision: uint64(i), Key: Key{Name: "x"}, Data: randomBytes(uint64(i), 500)}); err != nil {
			t.Fatal(err)
		}
	}
	if err := fw.Flush(); err != nil {
		t.Fatal(err)
	}
	total := 0
	for _, n := range w.writes {
		total += n
	}
	if want := (total + writerBufferSize - 1) / writerBufferSize; len(w.writes) > want {
		t.Fatalf("%d bytes in %d writes, want at most %d", total, len(w.writes), want)
	}
}

func TestStreamMixedSizes(t *testing.T) {
	msgs := mixedMessages(400)
	var w writeRecorder
	fw := NewWriter(&w, nil)
	for i, m := range msgs {
		if err := fw.Write(m); err != nil {
			t.Fatal(err)
		}
		if i%7 == 0 {
			if err := fw.Flush(); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := fw.Flush(); err != nil {
		t.Fatal(err)
	}
	stream := w.Bytes()
	for _, tc := range []struct {
		name string
		r    func() io.Reader
	}{
		{"whole", func() io.Reader { return bytes.NewReader(stream) }},
		{"one-byte", func() io.Reader { return iotest.OneByteReader(bytes.NewReader(stream)) }},
		{"half", func() io.Reader { return iotest.HalfReader(bytes.NewReader(stream)) }},
		{"data-err", func() io.Reader { return iotest.DataErrReader(bytes.NewReader(stream)) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := NewReader(tc.r(), nil)
			for i, want := range msgs {
				got, err := r.Read()
				if err != nil {
					t.Fatalf("message %d: %v", i, err)
				}
				if !equalMessages(got, want) {
					t.Fatalf("message %d: got %v, want %v", i, got.Type(), want.Type())
				}
			}
			if _, err := r.Read(); err != io.EOF {
				t.Fatalf("after the last frame: %v, want io.EOF", err)
			}
			if r.buf != nil {
				t.Fatal("the Reader keeps a buffer at the end of the stream")
			}
		})
	}
}

func TestIdleStreamHoldsNoBuffer(t *testing.T) {
	pr, pw := io.Pipe()
	defer pr.Close()
	w, r := NewWriter(pw, nil), NewReader(pr, nil)
	got := make(chan error, 1)
	go func() {
		for range 3 {
			if _, err := r.Read(); err != nil {
				got <- err
				return
			}
		}
		got <- nil
	}()
	for i := range 3 {
		if err := w.Write(&Put{Revision: uint64(i), Key: Key{Name: "x"}, Data: deploymentJSON("x", 2000)}); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Flush(); err != nil {
		t.Fatal(err)
	}
	if err := <-got; err != nil {
		t.Fatal(err)
	}
	if w.buf != nil || r.buf != nil {
		t.Fatalf("idle stream: writer buffer %v, reader buffer %v", w.buf != nil, r.buf != nil)
	}
}

type errAfter struct {
	r   io.Reader
	err error
}

func (e *errAfter) Read(p []byte) (int, error) {
	n, err := e.r.Read(p)
	if err == io.EOF {
		return n, e.err
	}
	return n, err
}

// An error that comes with the last bytes is returned once they are read.
func TestReaderErrorAfterData(t *testing.T) {
	broken := errors.New("stream reset")
	b := append(mustMarshal(t, &Ack{Revision: 1}), mustMarshal(t, &Ack{Revision: 2})...)
	r := NewReader(iotest.DataErrReader(&errAfter{bytes.NewReader(b), broken}), nil)
	for i := range 2 {
		if _, err := r.Read(); err != nil {
			t.Fatalf("frame %d: %v", i, err)
		}
	}
	if _, err := r.Read(); !errors.Is(err, broken) {
		t.Fatalf("after the frames: %v, want %v", err, broken)
	}
}

// Rest hands over what a Reader read ahead, then the stream: a relay reads
// a proxy stream's first frame and passes the rest on as bytes.
func TestReaderRest(t *testing.T) {
	var b bytes.Buffer
	w := NewWriter(&b, nil)
	if err := w.Write(&ProxyOpen{Destination: "d1"}); err != nil {
		t.Fatal(err)
	}
	if err := w.Flush(); err != nil {
		t.Fatal(err)
	}
	b.WriteString("raw bytes after the frame")
	r := NewReader(&b, nil)
	m, err := r.Read()
	if err != nil || m.(*ProxyOpen).Destination != "d1" {
		t.Fatalf("Read: %v %v", m, err)
	}
	if r.Buffered() == 0 {
		t.Fatal("the Reader read nothing ahead: the test shows nothing")
	}
	rest, err := io.ReadAll(r.Rest())
	if err != nil || string(rest) != "raw bytes after the frame" {
		t.Fatalf("Rest: %q, %v", rest, err)
	}
}
