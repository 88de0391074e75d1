package tree

import (
	"testing"

	"io"

	"github.com/canopy-dev/canopy/relay/transport/internal/wire"
)

var reportMsg = wire.Report{Seq: 1, Key: wire.Key{Resource: "configmaps", Name: "x"}, Data: []byte(`{"metadata":{}}`)}

type testWriter struct{ w *wire.Writer }

func newTestWriter(w io.Writer) *testWriter { return &testWriter{wire.NewWriter(w, nil)} }

func (t *testWriter) send(m wire.Message) {
	if t.w.Write(m) == nil {
		_ = t.w.Flush()
	}
}

// readError reads frames from r until an Error frame and returns its code.
func readError(t testing.TB, r io.Reader) wire.ErrorCode {
	t.Helper()
	wr := wire.NewReader(r, nil)
	for {
		m, err := wr.Read()
		if err != nil {
			t.Fatalf("no Error frame: %v", err)
		}
		if e, ok := m.(*wire.Error); ok {
			return e.Code
		}
	}
}
