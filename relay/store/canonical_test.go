package store

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
)

// versionsAgree checks that newVersion (which splices the resourceVersion
// into data already in the store's form) stores exactly what decoding and
// encoding again stores, or fails alike; it reports whether the splice
// was taken.
func versionsAgree(t testing.TB, s *Store, data []byte) (spliced bool) {
	t.Helper()
	k := Key{Space: "s", Resource: Resource{Resource: "configmaps"}, Namespace: "ns", Name: "n"}
	want, werr := s.newVersionDecoded(k, data, 42)
	got, gerr := s.newVersion(k, data, 42)
	if (werr == nil) != (gerr == nil) {
		t.Fatalf("%s: error %v, decoding gives %v", data, gerr, werr)
	}
	_, _, spliced = spliceVersion(data, []byte(`"42"`))
	if got, want := WithoutResourceVersion(data), withoutResourceVersionDecoded(data); !bytes.Equal(got, want) {
		t.Fatalf("%s without its resourceVersion:\n cut     %s\n decoded %s", data, got, want)
	}
	if werr != nil {
		return spliced
	}
	if got, want := WithoutResourceVersion(got.Data), withoutResourceVersionDecoded(data); !bytes.Equal(got, want) {
		t.Fatalf("%s stored, without its resourceVersion:\n cut     %s\n decoded %s", data, got, want)
	}
	if !bytes.Equal(got.Data, want.Data) {
		t.Fatalf("%s:\n spliced %s\n decoded %s", data, got.Data, want.Data)
	}
	if got.UID != want.UID || !reflect.DeepEqual(got.Labels, want.Labels) || !reflect.DeepEqual(got.Fields, want.Fields) {
		t.Fatalf("%s: uid, labels or fields differ: %v %v %v, decoding gives %v %v %v", data, got.UID, got.Labels, got.Fields, want.UID, want.Labels, want.Fields)
	}
	return spliced
}

func TestSpliceVersion(t *testing.T) {
	s := newStore(t, Options{Fields: func(_ Resource, o *FieldSource) fields.Set {
		md, _ := o.Object()["metadata"].(map[string]any)
		return fields.Set{"note": o.Annotation("n"), "generation": fmt.Sprint(md["generation"])}
	}})
	for _, c := range []struct {
		in     string
		splice bool
	}{
		{`{"metadata":{}}`, true},
		{`{"metadata":{"name":"a"}}`, true},
		{`{"metadata":{"resourceVersion":"7"}}`, true},
		{`{"metadata":{"a":1,"resourceVersion":"7","z":[]}}`, true},
		{`{"metadata":{"name":"a","uid":"u"}}`, true},
		{`{"metadata":{"annotations":{"n":"x"},"generation":3,"labels":{"a":"b"},"name":"a","uid":"u"}}`, true},
		{`{"metadata":{"resourceVersionX":1}}`, true},
		{`{"metadata":{"resourceVersion":"7","z":1}}`, true},
		{`{"metadata":{"a":1,"resourceVersion":"7"}}`, true},
		{`{"a":{"b":[1,2,{"c":"d\"e"}]},"metadata":{"labels":{"x":"y"}},"z":null}`, true},
		{`{"data":{"k":"a\\u003cb"},"metadata":{"name":"n"}}`, true},
		{`{"data":{"k":"a<b"},"metadata":{"name":"n"}}`, false},      // encoding/json escapes '<'
		{`{"data":{"k":"é"},"metadata":{"name":"n"}}`, false},        // not ASCII
		{`{"metadata":{"name":"a"},"data":{}}`, false},               // out of order
		{`{"metadata": {"name":"a"}}`, false},                        // not compact
		{`{"metadata":{"uid":"u","name":"a"}}`, false},               // metadata out of order
		{`{"metadata":{"name":"a"},"metadata":{"name":"b"}}`, false}, // twice
		{`{"a\u0062":1,"metadata":{}}`, false},                       // an escaped key
		{`{"data":{"b":1,"a":2},"metadata":{}}`, true},               // below metadata, order is kept
		{`{"data":1.50E+3,"metadata":{}}`, true},
		{`{"metadata":1}`, false},
		{`{"metadata":null}`, false},
		{`{}`, false},
		{`[]`, false},
		{`null`, false},
		{`{"metadata":{}`, false},
		{`{"metadata":{}}x`, false},
		{`{"a":tru,"metadata":{}}`, false},
		{`{"a":"x` + "\n" + `","metadata":{}}`, false},
		{``, false},
	} {
		if got := versionsAgree(t, s, []byte(c.in)); got != c.splice {
			t.Errorf("%s: spliced %v, want %v", c.in, got, c.splice)
		}
	}
}

// unmarshalLabels and unmarshalPlain decode as encoding/json does, or
// fail alike.
func TestUnmarshalPlainAgrees(t *testing.T) {
	for _, in := range []string{
		`{}`, `null`, `{"a":"b"}`, `{"a":"","b":"c"}`, `{"b":"1","a":"2"}`, `{"a":"b","a":"c"}`,
		`{"a":"\u00e9"}`, `{"a":"é"}`, `{"a":"x\"y"}`, `{ "a":"b"}`, `{"a":1}`, `{"a":null}`,
		`{"a\u0062":"c"}`, `[]`, `"s"`, `{"a":"b"`,
	} {
		var got, want labels.Set
		gerr, werr := unmarshalLabels([]byte(in), &got), json.Unmarshal([]byte(in), &want)
		if (gerr == nil) != (werr == nil) || gerr == nil && !reflect.DeepEqual(got, want) {
			t.Errorf("labels %s: %v (%v), encoding/json gives %v (%v)", in, got, gerr, want, werr)
		}
	}
	for _, in := range []string{`"u"`, `""`, `"\u0041"`, `"é"`, `"a\"b"`, `1`, `null`, `"x`} {
		var got, want string
		gerr, werr := unmarshalPlain([]byte(in), &got), json.Unmarshal([]byte(in), &want)
		if (gerr == nil) != (werr == nil) || got != want {
			t.Errorf("string %s: %q (%v), encoding/json gives %q (%v)", in, got, gerr, want, werr)
		}
	}
}

// TestSpliceVersionRandom checks random objects, encoded as the store and
// the kube API encode them (encoding/json), and the same objects indented
// or with a member moved.
func TestSpliceVersionRandom(t *testing.T) {
	s := newStore(t, Options{})
	rng := rand.New(rand.NewPCG(3, 4))
	words := []string{"a", "name", "namespace", "uid", "labels", "resourceVersion", "resourceVersio", "resourceVersionZ", "z", "<", "é", `"`, `\`, "\u2028"}
	var value func(depth int) any
	value = func(depth int) any {
		switch n := rng.IntN(8); {
		case depth > 3 || n == 0:
			return words[rng.IntN(len(words))] + words[rng.IntN(len(words))]
		case n == 1:
			return rng.Float64() * 1e6
		case n == 2:
			return rng.IntN(3) == 0
		case n == 3:
			return nil
		case n == 4:
			a := make([]any, rng.IntN(3))
			for i := range a {
				a[i] = value(depth + 1)
			}
			return a
		default:
			m := map[string]any{}
			for range rng.IntN(4) {
				m[words[rng.IntN(len(words))]] = value(depth + 1)
			}
			return m
		}
	}
	spliced := 0
	for i := range 3000 {
		obj := map[string]any{"metadata": map[string]any{}}
		for range rng.IntN(4) {
			obj[words[rng.IntN(len(words))]] = value(1)
		}
		md := map[string]any{}
		for range rng.IntN(5) {
			md[words[rng.IntN(len(words))]] = value(2)
		}
		obj["metadata"] = md
		data, err := json.Marshal(obj)
		if err != nil {
			t.Fatal(err)
		}
		if versionsAgree(t, s, data) {
			spliced++
		} else if !bytes.ContainsAny(data, `<>&\`) && !strings.ContainsFunc(string(data), func(r rune) bool { return r >= 0x80 }) {
			// (A backslash may be in a key, which takes the slow path.)
			t.Fatalf("%d: %s is in the store's form and was not spliced", i, data)
		}
		indented, _ := json.MarshalIndent(obj, "", " ")
		if versionsAgree(t, s, indented) && !bytes.Equal(indented, data) {
			t.Fatalf("%d: indented %s was spliced", i, indented)
		}
	}
	t.Logf("%d of 3000 spliced", spliced)
	if spliced < 300 {
		t.Fatalf("only %d of 3000 objects in the store's form were spliced", spliced)
	}
}

func FuzzSpliceVersion(f *testing.F) {
	for _, seed := range []string{`{"metadata":{}}`, `{"a":[1,{"b":"c"}],"metadata":{"name":"x","resourceVersion":"1"}}`,
		`{"metadata":{"z":1}}`, `{"metadata": {}}`, `{"b":1,"a":2,"metadata":{}}`} {
		f.Add([]byte(seed))
	}
	s := newStore(f, Options{})
	f.Fuzz(func(t *testing.T, data []byte) { versionsAgree(t, s, data) })
}
