package syncer

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"testing/iotest"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"
)

func TestEventStream(t *testing.T) {
	events := []string{
		`{"type":"ADDED","object":{"kind":"ConfigMap","data":{"a":"}{","b":"\"}","c":"\\"}}}`,
		`{"type":"BOOKMARK","object":{"metadata":{"resourceVersion":"12"}}}`,
		`{"type":"MODIFIED","object":{"list":[{"x":[1,2,{"y":"]"}]}],"big":"` + strings.Repeat("z", 40<<10) + `"}}`,
		`{"type":"DELETED","object":{}}`,
	}
	stream := "\n" + strings.Join(events, "\n") + "\r\n \t"
	for _, tc := range []struct {
		name string
		r    func() io.Reader
	}{
		{"whole", func() io.Reader { return strings.NewReader(stream) }},
		{"one-byte", func() io.Reader { return iotest.OneByteReader(strings.NewReader(stream)) }},
		{"half", func() io.Reader { return iotest.HalfReader(strings.NewReader(stream)) }},
		{"data-err", func() io.Reader { return iotest.DataErrReader(strings.NewReader(stream)) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			es := eventStream{r: tc.r()}
			for i, want := range events {
				got, err := es.next()
				if err != nil {
					t.Fatalf("event %d: %v", i, err)
				}
				if string(got) != want {
					t.Fatalf("event %d: got %.80q, want %.80q", i, got, want)
				}
			}
			if _, err := es.next(); err != io.EOF {
				t.Fatalf("after the last event: %v, want io.EOF", err)
			}
			if es.buf != nil {
				t.Fatal("the stream holds a buffer at its end")
			}
		})
	}
}

func TestEventStreamErrors(t *testing.T) {
	for _, tc := range []struct {
		name, stream string
		want         error
	}{
		{"cut", `{"type":"ADDED","object":{"a":`, io.ErrUnexpectedEOF},
		{"garbage", `{"type":"ADDED"} x {}`, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			es := eventStream{r: strings.NewReader(tc.stream)}
			var err error
			for range 3 {
				if _, err = es.next(); err != nil {
					break
				}
			}
			if err == nil || (tc.want != nil && !errors.Is(err, tc.want)) {
				t.Fatalf("error %v, want %v", err, tc.want)
			}
		})
	}
}

// readProbe records, at each read, whether its stream holds a buffer.
type readProbe struct {
	r    io.Reader
	es   *eventStream
	held []bool
}

func (p *readProbe) Read(b []byte) (int, error) {
	p.held = append(p.held, p.es.buf != nil)
	return p.r.Read(b)
}

// A stream waiting for its next event holds no buffer.
func TestEventStreamIdle(t *testing.T) {
	pr, pw := io.Pipe()
	var es eventStream
	probe := &readProbe{r: pr, es: &es}
	es.r = probe
	got := make(chan string)
	go func() {
		defer close(got)
		for {
			b, err := es.next()
			if err != nil {
				return
			}
			got <- string(b)
		}
	}()
	for i := range 3 {
		ev := fmt.Sprintf(`{"type":"ADDED","object":{"n":%d}}`+"\n", i)
		if _, err := io.Copy(pw, bytes.NewBufferString(ev)); err != nil {
			t.Fatal(err)
		}
		if g := <-got; g+"\n" != ev {
			t.Fatalf("got %q, want %q", g, ev)
		}
	}
	pw.Close()
	<-got
	for i, held := range probe.held {
		if held {
			t.Fatalf("read %d of %d waited holding a buffer", i, len(probe.held))
		}
	}
}

// A watch decodes each event once into the cache, with integers as
// int64, follows bookmarks, and ends with the error an ERROR event
// carries.
func TestInformerWatchEvents(t *testing.T) {
	stream := strings.Join([]string{
		`{"type":"ADDED","object":{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"a","namespace":"ns","resourceVersion":"5","managedFields":[{}]},"data":{"n":"1"},"x":7}}`,
		`{"type":"BOOKMARK","object":{"kind":"ConfigMap","metadata":{"resourceVersion":"9"}}}`,
		`{"type":"ERROR","object":{"kind":"Status","apiVersion":"v1","status":"Failure","code":410,"reason":"Expired","message":"too old"}}`,
	}, "\n")
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/api/v1/namespaces/ns/configmaps" || r.URL.Query().Get("watch") != "true" {
			http.NotFound(w, r)
			return
		}
		_, _ = io.WriteString(w, stream)
	}))
	defer srv.Close()
	rc, err := rest.UnversionedRESTClientFor(dynamic.ConfigFor(&rest.Config{Host: srv.URL}))
	if err != nil {
		t.Fatal(err)
	}
	var seen []string
	i := &informer{gvr: gvrCM, ns: "ns", rc: rc, log: quiet, objects: map[string]*unstructured.Unstructured{},
		on: func(u *unstructured.Unstructured) { seen = append(seen, u.GetName()) }}
	rv, events, err := i.watch(t.Context(), "1")
	if !isExpired(err) {
		t.Fatalf("watch ended with %v, want an expired error", err)
	}
	if rv != "9" || events != 3 || !slices.Equal(seen, []string{"a"}) {
		t.Fatalf("rv %q, %d events, handled %v; want 9, 3, [a]", rv, events, seen)
	}
	u, ok := i.get("ns", "a")
	if !ok {
		t.Fatal("ns/a not cached")
	}
	if _, ok := u.Object["x"].(int64); !ok {
		t.Fatalf("x is %T, want int64", u.Object["x"])
	}
	if _, found, _ := unstructured.NestedFieldNoCopy(u.Object, "metadata", "managedFields"); found {
		t.Fatal("managedFields cached")
	}
}
