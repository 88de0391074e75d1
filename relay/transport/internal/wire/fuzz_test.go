package wire

import (
	"bytes"
	"testing"
)

// FuzzReadFrame feeds arbitrary bytes to a Reader (several frames in a row)
// and to Unmarshal. Decoding must never panic, and every decoded message
// must re-encode and decode to an equal message.
func FuzzReadFrame(f *testing.F) {
	for _, s := range samples() {
		b := mustMarshal(f, s.msg)
		if len(b) > 16<<10 {
			continue // keep the corpus small; compressed Puts are covered below
		}
		f.Add(b)
	}
	// Compressed objects, and two frames in a row.
	f.Add(mustMarshal(f, &Put{Revision: 9, Key: Key{Space: "s", Resource: "r", Name: "n"}, Data: deploymentJSON("z", 3000)}))
	f.Add(mustMarshal(f, &Report{Seq: 9, Key: Key{Space: "s", Name: "n"}, Data: deploymentJSON("z", 1500)}))
	f.Add(append(mustMarshal(f, &Ack{Revision: 1}), mustMarshal(f, &Progress{Revision: 2})...))

	// Re-encode with room to spare: an object the fuzzer decompressed to
	// near the read limit may not compress as well again.
	rcfg := &Config{MaxFrameSize: 1 << 20}
	wcfg := &Config{MaxFrameSize: 4 << 20}
	f.Fuzz(func(t *testing.T, data []byte) {
		if m, err := Unmarshal(data); err == nil {
			checkReencode(t, m, wcfg)
		}
		r := NewReader(bytes.NewReader(data), rcfg)
		for {
			m, err := r.Read()
			if err != nil {
				// A clean end is exactly io.EOF; anything else is an error
				// that says what went wrong, and is sticky.
				if _, err2 := r.Read(); err2 != err {
					t.Fatalf("error not sticky: %v then %v", err, err2)
				}
				return
			}
			checkReencode(t, m, wcfg)
		}
	})
}

func checkReencode(t *testing.T, m Message, cfg *Config) {
	t.Helper()
	var buf bytes.Buffer
	w := NewWriter(&buf, cfg)
	if err := w.Write(m); err != nil {
		t.Fatalf("re-encoding decoded %#v: %v", m, err)
	}
	if err := w.Flush(); err != nil {
		t.Fatal(err)
	}
	m2, err := NewReader(&buf, cfg).Read()
	if err != nil {
		t.Fatalf("decoding re-encoded %T: %v", m, err)
	}
	if !equalMessages(m, m2) {
		t.Fatalf("re-encoded message differs:\n got %#v\nwant %#v", m2, m)
	}
	if !equalMessages(m, canon(m)) {
		t.Fatalf("decoded message is not canonical: %#v", m)
	}
}
