package kubeapi

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"math/rand/v2"
	"net/http"
	"reflect"
	"slices"
	"strings"
	"testing"
)

func TestWriteWithoutTypeMeta(t *testing.T) {
	for _, c := range []struct{ name, in, want string }{
		{"configmap", `{"apiVersion":"v1","data":{"a":"b"},"kind":"ConfigMap","metadata":{"name":"x"}}`,
			`{"data":{"a":"b"},"metadata":{"name":"x"}}`},
		{"a key before apiVersion", `{"action":"a","apiVersion":"v1","count":1,"kind":"Event","lastTimestamp":null,"metadata":{}}`,
			`{"action":"a","count":1,"lastTimestamp":null,"metadata":{}}`},
		{"kind inside a value", `{"apiVersion":"v1","data":{"kind":"Pod","x":"\"kind\":\"y\",","z":"\\"},"kind":"ConfigMap","metadata":{}}`,
			`{"data":{"kind":"Pod","x":"\"kind\":\"y\",","z":"\\"},"metadata":{}}`},
		{"nested arrays", `{"apiVersion":"v1","binaryData":[[1,{"kind":"a"}],"]"],"kind":"ConfigMap","metadata":{}}`,
			`{"binaryData":[[1,{"kind":"a"}],"]"],"metadata":{}}`},
		{"no kind", `{"apiVersion":"v1","metadata":{}}`, `{"apiVersion":"v1","metadata":{}}`},
		{"no apiVersion", `{"kind":"ConfigMap","metadata":{}}`, `{"kind":"ConfigMap","metadata":{}}`},
		{"kind last", `{"apiVersion":"v1","kind":"ConfigMap"}`, `{"apiVersion":"v1","kind":"ConfigMap"}`},
		{"kind not a string", `{"apiVersion":"v1","kind":1,"metadata":{}}`, `{"apiVersion":"v1","kind":1,"metadata":{}}`},
		{"not compact", `{"apiVersion": "v1", "kind": "ConfigMap", "metadata": {}}`, `{"apiVersion": "v1", "kind": "ConfigMap", "metadata": {}}`},
		{"unterminated", `{"apiVersion":"v1","data":{"a":"b`, `{"apiVersion":"v1","data":{"a":"b`},
		{"not an object", `[1]`, `[1]`},
		{"empty", ``, ``},
	} {
		var b bytes.Buffer
		writeWithoutTypeMeta(&b, []byte(c.in))
		if b.String() != c.want {
			t.Errorf("%s: got %s, want %s", c.name, b.String(), c.want)
		}
	}
}

// TestWriteWithoutTypeMetaRandom checks random objects, encoded as the
// store encodes them (encoding/json: compact, keys sorted), against the
// same objects decoded and without the two members.
func TestWriteWithoutTypeMetaRandom(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	pieces := []string{"kind", "apiVersion", `"`, `\`, `\"`, "{", "}", "[", "]", ",", ":", "a", "é", "\n", "\u2028"}
	str := func() string {
		var sb strings.Builder
		for range rng.IntN(6) {
			sb.WriteString(pieces[rng.IntN(len(pieces))])
		}
		return sb.String()
	}
	var value func(depth int) any
	value = func(depth int) any {
		switch n := rng.IntN(7); {
		case n == 0 || depth > 3:
			return str()
		case n == 1:
			return rng.Float64() * 1000
		case n == 2:
			return rng.IntN(2) == 0
		case n == 3:
			return nil
		case n == 4:
			var l []any
			for range rng.IntN(4) {
				l = append(l, value(depth+1))
			}
			return l
		default:
			m := map[string]any{}
			for range rng.IntN(4) {
				m[str()] = value(depth + 1)
			}
			return m
		}
	}
	keys := []string{"apiVersion", "kind", "metadata", "action", "data", "spec", "zzz", "Kind", "kind2", "apiVersions"}
	stripped := 0
	for i := range 5000 {
		obj := map[string]any{}
		for range 1 + rng.IntN(len(keys)) {
			k := keys[rng.IntN(len(keys))]
			if k == "apiVersion" || k == "kind" {
				obj[k] = str()
				if rng.IntN(10) == 0 {
					obj[k] = value(0) // not always a string
				}
			} else {
				obj[k] = value(0)
			}
		}
		in, err := json.Marshal(obj)
		if err != nil {
			t.Fatal(err)
		}
		var b bytes.Buffer
		writeWithoutTypeMeta(&b, in)
		var want map[string]any // obj as JSON gives it back
		if err := json.Unmarshal(in, &want); err != nil {
			t.Fatal(err)
		}
		sorted := slices.Sorted(maps.Keys(obj))
		_, av := obj["apiVersion"].(string)
		_, kd := obj["kind"].(string)
		if av && kd && sorted[len(sorted)-1] != "kind" {
			delete(want, "apiVersion")
			delete(want, "kind")
			stripped++
		}
		var got map[string]any
		if err := json.Unmarshal(b.Bytes(), &got); err != nil {
			t.Fatalf("object %d: %s → %s: %v", i, in, b.Bytes(), err)
		}
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("object %d: %s → %s, want the members of %v", i, in, b.Bytes(), want)
		}
	}
	if stripped < 500 {
		t.Errorf("only %d of 5000 objects had both members to strip: the test checks too little", stripped)
	}
}

// TestListAcrossChunks lists more ConfigMaps than fit one listChunk: the
// JSON written in pieces is one valid list holding every item once, in
// name order, without its items' apiVersion and kind.
func TestListAcrossChunks(t *testing.T) {
	hs, _ := newTestServer(t, 100)
	const n = 300
	value := strings.Repeat("v", 400) // n items of about 500 bytes: about 2.3 chunks
	for i := range n {
		body := fmt.Sprintf(`{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"cm-%03d"},"data":{"v":%q}}`, i, value)
		if resp, out := do(t, "POST", hs.URL+"/api/v1/namespaces/default/configmaps", body); resp.StatusCode != 201 {
			t.Fatalf("create %d: %d %s", i, resp.StatusCode, out)
		}
	}
	resp, err := http.Get(hs.URL + "/api/v1/namespaces/default/configmaps") // do reads lines of at most 64 KiB
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	out, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != 200 || len(out) < 2*listChunk {
		t.Fatalf("list: %d, %d bytes (want more than %d), %v", resp.StatusCode, len(out), 2*listChunk, err)
	}
	var list struct {
		Kind     string           `json:"kind"`
		Metadata map[string]any   `json:"metadata"`
		Items    []map[string]any `json:"items"`
	}
	if err := json.Unmarshal(out, &list); err != nil {
		t.Fatalf("the list is not one JSON document: %v", err)
	}
	if list.Kind != "ConfigMapList" || list.Metadata["resourceVersion"] == "" || len(list.Items) != n {
		t.Fatalf("kind %q, metadata %v, %d items; want ConfigMapList, a resourceVersion, %d items", list.Kind, list.Metadata, len(list.Items), n)
	}
	for i, it := range list.Items {
		md, _ := it["metadata"].(map[string]any)
		data, _ := it["data"].(map[string]any)
		if name := fmt.Sprintf("cm-%03d", i); md["name"] != name || data["v"] != value {
			t.Fatalf("item %d: name %v, want %s (or its data differs)", i, md["name"], name)
		}
		if _, ok := it["kind"]; ok {
			t.Fatalf("item %d carries kind", i)
		}
		if _, ok := it["apiVersion"]; ok {
			t.Fatalf("item %d carries apiVersion", i)
		}
	}
}
