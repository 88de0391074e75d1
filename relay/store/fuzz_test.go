package store

import (
	"bytes"
	"encoding/json"
	"slices"
	"strconv"
	"testing"
)

// FuzzApply feeds arbitrary commands to Apply: it must return a Result or an
// error, never panic, and a Result must describe valid stored objects.
func FuzzApply(f *testing.F) {
	k := key("ws", pods, "ns", "a")
	f.Add(encodeCommand([]Op{{Type: OpCreate, Key: k, Data: body("u", map[string]string{"a": "b"}, 1)}}))
	f.Add(encodeCommand([]Op{
		{Type: OpCreate, Key: k, Data: []byte(`{"metadata":{}}`)},
		{Type: OpCreate, Key: key("", deploys, "", "b"), Data: []byte(`{"metadata":{"uid":"x"},"spec":[1,2.5e3,null]}`)},
	}))
	f.Add(encodeCommand([]Op{{Type: OpUpdate, Key: k, Data: []byte(`{"metadata":{}}`), ExpectRevision: 3}}))
	f.Add(encodeCommand([]Op{{Type: OpDelete, Key: k, ExpectUID: "u"}}))
	f.Add(encodeCommand([]Op{{Type: OpCreate, Key: k, Data: []byte(`[1]`)}}))
	f.Add(encodeCommand(nil))
	f.Add([]byte{})
	f.Add([]byte{commandVersion, 0xff, 0xff, 0xff, 0xff, 0x0f})
	f.Add([]byte{2, 0})
	f.Add(encodeGroup([]*txnCall{
		{ops: []Op{{Type: OpUpdate, Key: k, Data: []byte(`{"metadata":{}}`)}}},
		{ops: []Op{{Type: OpDelete, Key: k}}}, // overlaps the first: refused
		{ops: []Op{{Type: OpCreate, Key: key("ws", pods, "ns", "b"), Data: []byte(`{"metadata":{}}`)}}},
	}))
	f.Add([]byte{groupVersion, 2, 3, commandVersion, 0, 0})

	f.Fuzz(func(t *testing.T, cmd []byte) {
		s := New(Options{HistorySize: 8, Fields: nodeFields})
		defer s.Close()
		// Seed an object, so updates and deletes can succeed.
		seed := encodeCommand([]Op{{Type: OpCreate, Key: k, Data: body("u", nil, 0)}})
		if _, ok := s.Apply(1, seed).(Result); !ok {
			t.Fatal("seed failed")
		}
		out := s.Apply(2, cmd)
		results := []any{out}
		if group, ok := out.([]any); ok {
			results = group // a group command: one result per Txn
		}
		for _, out := range results {
			switch out := out.(type) {
			case error:
			case Result:
				for _, o := range out.Objects {
					if o == nil {
						t.Fatal("nil object in result")
					}
					var meta struct {
						Metadata struct{ ResourceVersion string }
					}
					if err := json.Unmarshal(o.Data, &meta); err != nil {
						t.Fatalf("stored invalid JSON %q: %v", o.Data, err)
					}
					if o.Revision == 2 && meta.Metadata.ResourceVersion != strconv.Itoa(2) {
						t.Fatalf("resourceVersion %q at revision 2", meta.Metadata.ResourceVersion)
					}
				}
			default:
				t.Fatalf("Apply returned %T", out)
			}
		}
		if s.Revision() != 2 {
			t.Fatalf("revision %d, want 2", s.Revision())
		}
	})
}

// FuzzRestore feeds arbitrary snapshots to Restore: it must fail or restore
// a state that survives a snapshot round trip, and never panic.
func FuzzRestore(f *testing.F) {
	src := New(Options{})
	defer src.Close()
	for i, k := range []Key{key("", pods, "", "a"), key("ws", deploys, "ns", "b")} {
		data := body("u", map[string]string{"i": strconv.Itoa(i)}, i)
		if _, ok := src.Apply(uint64(i+1), encodeCommand([]Op{{Type: OpCreate, Key: k, Data: data}})).(Result); !ok {
			f.Fatal("seed failed")
		}
	}
	f.Add(snapshotBytes(f, src))
	f.Add([]byte(snapshotMagic))
	f.Add([]byte{})

	f.Fuzz(func(t *testing.T, in []byte) {
		s := New(Options{})
		defer s.Close()
		if s.Restore(bytes.NewReader(in)) != nil {
			return
		}
		r := New(Options{})
		defer r.Close()
		if err := r.Restore(bytes.NewReader(snapshotBytes(t, s))); err != nil {
			t.Fatalf("restoring a written snapshot: %v", err)
		}
		if !slices.Equal(dump(t, r, "", "ws"), dump(t, s, "", "ws")) {
			t.Fatal("round trip changed the state")
		}
	})
}
