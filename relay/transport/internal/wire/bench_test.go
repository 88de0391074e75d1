package wire

import (
	"bytes"
	"testing"
)

// BenchmarkPut2KiB encodes and decodes a 2 KiB Put (a realistic Deployment
// JSON) through a Writer and a Reader, with and without compression.
// wire-B/op is the frame size on the wire.
//
//	go test -run '^$' -bench Put2KiB -benchmem ./relay/transport/internal/wire/
func BenchmarkPut2KiB(b *testing.B) {
	msg := &Put{
		Revision: 123456789,
		Key:      Key{Space: "mailbox-region-eu", Group: "apps", Resource: "deployments", Namespace: "shop-frontend", Name: "checkout-web"},
		Data:     deploymentJSON("checkout-web", 2048),
	}
	for _, bc := range []struct {
		name string
		cfg  *Config
	}{
		{"zstd", nil},
		{"raw", &Config{CompressThreshold: -1}},
	} {
		b.Run(bc.name, func(b *testing.B) {
			var buf bytes.Buffer
			w := NewWriter(&buf, bc.cfg)
			r := NewReader(&buf, bc.cfg)
			var wire int
			b.SetBytes(int64(len(msg.Data)))
			b.ReportAllocs()
			for b.Loop() {
				if err := w.Write(msg); err != nil {
					b.Fatal(err)
				}
				if err := w.Flush(); err != nil {
					b.Fatal(err)
				}
				wire = buf.Len()
				m, err := r.Read()
				if err != nil {
					b.Fatal(err)
				}
				if len(m.(*Put).Data) != len(msg.Data) {
					b.Fatal("short data")
				}
			}
			b.ReportMetric(float64(wire), "wire-B/op")
		})
	}
}

// BenchmarkMarshalPut2KiB is the single-frame API on the same message.
func BenchmarkMarshalPut2KiB(b *testing.B) {
	msg := &Put{
		Revision: 123456789,
		Key:      Key{Space: "mailbox-region-eu", Group: "apps", Resource: "deployments", Namespace: "shop-frontend", Name: "checkout-web"},
		Data:     deploymentJSON("checkout-web", 2048),
	}
	b.SetBytes(int64(len(msg.Data)))
	b.ReportAllocs()
	for b.Loop() {
		f, err := Marshal(msg)
		if err != nil {
			b.Fatal(err)
		}
		if _, err := Unmarshal(f); err != nil {
			b.Fatal(err)
		}
	}
}
