package destproxy

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"k8s.io/apiserver/pkg/authentication/user"
	"k8s.io/apiserver/pkg/authorization/authorizer"

	"github.com/canopy-dev/canopy/relay/transport/link"
	"github.com/canopy-dev/canopy/relay/transport/proxy"
)

// refusing is an Opener that refuses every stream with err, and counts.
type refusing struct {
	err    error
	opened int
}

func (o *refusing) OpenProxy(context.Context, string) (link.Stream, error) {
	o.opened++
	return nil, o.err
}

// Every refusal is a kube Status with its code, the ones the root decides
// open nothing, and each authenticated request is an audit line.
func TestRootRefusals(t *testing.T) {
	opener := &refusing{}
	var audit bytes.Buffer
	h := NewRoot(RootConfig{
		Authenticate: func(r *http.Request) (user.Info, error) {
			if r.Header.Get("Authorization") == "" {
				return nil, errors.New("no credentials")
			}
			return &user.DefaultInfo{Name: strings.TrimPrefix(r.Header.Get("Authorization"), "Bearer ")}, nil
		},
		Impersonate: func(_ context.Context, u user.Info, h http.Header) (user.Info, error) {
			if h.Get("Impersonate-User") != "" {
				return nil, errors.New("may not impersonate")
			}
			return u, nil
		},
		Authorize: func(_ context.Context, a authorizer.Attributes) (authorizer.Decision, string, error) {
			if a.GetUser().GetName() == "alice" && a.GetName() == "e1" && a.GetSubresource() == Subresource {
				return authorizer.DecisionAllow, "", nil
			}
			return authorizer.DecisionNoOpinion, "", nil
		},
		Opener: opener, Audit: &audit, MaxBodyBytes: 10,
	})
	for _, c := range []struct {
		name, user, method, path, body, impersonate string
		refuse                                      error
		code                                        int
		says                                        string
	}{
		{name: "no credentials", method: "GET", path: "/destinations/e1/api", code: 401},
		{name: "impersonation refused", user: "alice", method: "GET", path: "/destinations/e1/api", impersonate: "bob", code: 403, says: "may not impersonate"},
		{name: "no rule", user: "mallory", method: "GET", path: "/destinations/e1/api", code: 403, says: "synctargets/proxy"},
		{name: "another destination", user: "alice", method: "GET", path: "/destinations/e2/api", code: 403},
		{name: "not a kube path", user: "alice", method: "GET", path: "/destinations/e1/metrics", code: 404, says: "not a path of a kube API"},
		{name: "body too large", user: "alice", method: "POST", path: "/destinations/e1/api/v1/namespaces", body: strings.Repeat("x", 11), code: 413},
		{name: "unknown destination", user: "alice", method: "GET", path: "/destinations/e1/api", refuse: proxy.Errorf(proxy.NotFound, "destination e1 is not below root"), code: 404, says: "not below root"},
		{name: "disconnected", user: "alice", method: "GET", path: "/destinations/e1/api", refuse: proxy.Errorf(proxy.Unavailable, "destination e1 is disconnected (last seen ...)"), code: 503, says: "last seen"},
		{name: "too many streams", user: "alice", method: "GET", path: "/destinations/e1/api", refuse: proxy.Errorf(proxy.TooManyStreams, "the link to r1 carries 2 proxy streams, its limit"), code: 429, says: "its limit"},
	} {
		opener.err, opener.opened = c.refuse, 0
		req := httptest.NewRequest(c.method, c.path, strings.NewReader(c.body))
		if c.user != "" {
			req.Header.Set("Authorization", "Bearer "+c.user)
		}
		if c.impersonate != "" {
			req.Header.Set("Impersonate-User", c.impersonate)
		}
		w := httptest.NewRecorder()
		h.ServeHTTP(w, req)
		body, _ := io.ReadAll(w.Body)
		var st struct {
			Kind    string `json:"kind"`
			Code    int    `json:"code"`
			Message string `json:"message"`
		}
		if err := json.Unmarshal(body, &st); err != nil || st.Kind != "Status" || st.Code != c.code || w.Code != c.code || !strings.Contains(st.Message, c.says) {
			t.Errorf("%s: %d %s, want a Status %d saying %q", c.name, w.Code, body, c.code, c.says)
		}
		if c.refuse == nil && opener.opened != 0 {
			t.Errorf("%s: the root opened a stream for a request it refused", c.name)
		}
	}
	lines := strings.Split(strings.TrimSpace(audit.String()), "\n")
	if len(lines) != 8 { // all but the unauthenticated request
		t.Fatalf("%d audit lines, want 8:\n%s", len(lines), audit.String())
	}
	var rec AuditRecord
	if err := json.Unmarshal([]byte(lines[1]), &rec); err != nil || rec.User != "mallory" || rec.Destination != "e1" || rec.Status != 403 || rec.Path != "/api" || rec.Verb != "GET" {
		t.Errorf("audit line %s: %+v %v", lines[1], rec, err)
	}
}
