package kubeapi

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/canopy-dev/canopy/relay/layout"
)

// BenchmarkListJSON lists 10 000 ConfigMaps of about 500 bytes as JSON
// over HTTP/2 and TLS, until the body is in (the "body is in" figure of
// the list-10000-json rows of docs/benchmarks.md, without a kube
// client's decoding):
//
//	go test ./relay/apiserver/kubeapi -run '^$' -bench ListJSON -benchtime=200x -count=3
func BenchmarkListJSON(b *testing.B) {
	st := newBenchStore(b)
	srv := New(Config{Store: st, Authenticator: allowAll{}, Authorizer: allowAll{}})
	if err := srv.EnsureSpace(context.Background(), layout.DefaultSpace, layout.SpaceKindWDS); err != nil {
		b.Fatal(err)
	}
	for i := range 10000 {
		body := fmt.Sprintf(`{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"cm-%d","labels":{"app":"bench","seq":"%d"}},"data":{"payload":"%s","seq":"%d"}}`,
			i, i, strings.Repeat("x", 200), i)
		req := httptest.NewRequest("POST", "/api/v1/namespaces/default/configmaps", strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		rec := httptest.NewRecorder()
		srv.ServeHTTP(rec, req)
		if rec.Code != http.StatusCreated {
			b.Fatal(rec.Code, rec.Body)
		}
	}
	ts := httptest.NewUnstartedServer(srv)
	ts.EnableHTTP2 = true
	ts.StartTLS()
	defer ts.Close()
	c := ts.Client()
	var n int64
	for b.Loop() {
		req, _ := http.NewRequest("GET", ts.URL+"/api/v1/namespaces/default/configmaps", nil)
		req.Header.Set("Accept", "application/json")
		resp, err := c.Do(req)
		if err != nil {
			b.Fatal(err)
		}
		n, err = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if err != nil || resp.StatusCode != http.StatusOK || resp.ProtoMajor != 2 {
			b.Fatalf("%s, %d bytes: %v", resp.Status, n, err)
		}
	}
	b.SetBytes(n)
}
