package kubeapi

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	authorizationv1 "k8s.io/api/authorization/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apiserver/pkg/authentication/user"
	"k8s.io/apiserver/pkg/authorization/authorizer"

	"github.com/canopy-dev/canopy/relay/layout"
	"github.com/canopy-dev/canopy/relay/store"
)

// allowAll authenticates every request as an admin and allows everything:
// these tests are about API semantics, not access control (relay/apiserver/auth and
// test/e2e cover that).
type allowAll struct{}

func (allowAll) Authenticate(*http.Request, string) (user.Info, error) {
	return &user.DefaultInfo{Name: "tester", Groups: []string{"system:masters"}}, nil
}
func (allowAll) Authorize(context.Context, string, authorizer.Attributes) (authorizer.Decision, string, error) {
	return authorizer.DecisionAllow, "", nil
}
func (allowAll) Impersonate(_ context.Context, _ string, u user.Info, _ http.Header) (user.Info, error) {
	return u, nil
}
func (allowAll) RulesFor(string, user.Info, string) ([]authorizationv1.ResourceRule, []authorizationv1.NonResourceRule, bool) {
	return nil, nil, false
}

// newTestServer serves a Server over a store with a short history.
func newTestServer(t *testing.T, history int) (*httptest.Server, *store.Store) {
	t.Helper()
	_, hs, st := newTestAPI(t, history)
	return hs, st
}

// newTestAPI is newTestServer, with the Server itself.
func newTestAPI(t *testing.T, history int) (*Server, *httptest.Server, *store.Store) {
	t.Helper()
	st := store.New(store.Options{HistorySize: history, Fields: FieldsFor})
	st.SetLog(store.NewMemLog(st))
	t.Cleanup(st.Close)
	s := New(Config{Store: st, Authenticator: allowAll{}, Authorizer: allowAll{}})
	if err := s.EnsureSpace(context.Background(), layout.DefaultSpace, layout.SpaceKindWDS); err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(s)
	t.Cleanup(hs.Close)
	return s, hs, st
}

func do(t *testing.T, method, url, body string) (*http.Response, []byte) {
	t.Helper()
	req, err := http.NewRequest(method, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var b strings.Builder
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		b.WriteString(sc.Text())
	}
	return resp, []byte(b.String())
}

func createConfigMaps(t *testing.T, url string, n int) {
	t.Helper()
	for i := 0; i < n; i++ {
		resp, body := do(t, "POST", url+"/api/v1/namespaces/default/configmaps",
			fmt.Sprintf(`{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"cm-%d"}}`, i))
		if resp.StatusCode != http.StatusCreated {
			t.Fatalf("create: %d %s", resp.StatusCode, body)
		}
	}
}

// A watch from a revision older than the kept history ends with a 410
// Expired ERROR event, which tells client-go's reflector to re-list.
func TestWatchExpired(t *testing.T) {
	hs, _ := newTestServer(t, 5)
	createConfigMaps(t, hs.URL, 20)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, "GET", hs.URL+"/api/v1/namespaces/default/configmaps?watch=true&resourceVersion=2", nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var ev struct {
		Type   string        `json:"type"`
		Object metav1.Status `json:"object"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&ev); err != nil {
		t.Fatal(err)
	}
	if ev.Type != "ERROR" || ev.Object.Code != http.StatusGone || ev.Object.Reason != metav1.StatusReasonExpired {
		t.Fatalf("watch from a compacted revision: %+v, want ERROR 410 Expired", ev)
	}
}

// resourceVersionMatch=Exact is served only at the current revision.
func TestListExactResourceVersion(t *testing.T) {
	hs, st := newTestServer(t, 100)
	createConfigMaps(t, hs.URL, 3)
	cur := st.Revision()
	list := hs.URL + "/api/v1/namespaces/default/configmaps?resourceVersionMatch=Exact&resourceVersion="
	if resp, body := do(t, "GET", fmt.Sprint(list, cur), ""); resp.StatusCode != http.StatusOK {
		t.Fatalf("exact at current revision: %d %s", resp.StatusCode, body)
	}
	if resp, _ := do(t, "GET", fmt.Sprint(list, cur-1), ""); resp.StatusCode != http.StatusGone {
		t.Fatalf("exact at an older revision: %d, want 410", resp.StatusCode)
	}
	if resp, _ := do(t, "GET", hs.URL+"/api/v1/namespaces/default/configmaps?resourceVersionMatch=Exact", ""); resp.StatusCode != http.StatusBadRequest {
		t.Fatalf("match without resourceVersion: %d, want 400", resp.StatusCode)
	}
}

// asUser authenticates every request as one non-admin user, allowed
// everything by authorization: only the mailbox rule can refuse it.
type asUser struct{ allowAll }

func (asUser) Authenticate(*http.Request, string) (user.Info, error) {
	return &user.DefaultInfo{Name: "alice", Groups: []string{"system:authenticated"}}, nil
}

// Mailbox spaces are read-only but to the admin.
func TestMailboxSpacesAreReadOnly(t *testing.T) {
	st := store.New(store.Options{Fields: FieldsFor})
	st.SetLog(store.NewMemLog(st))
	t.Cleanup(st.Close)
	ctx := context.Background()
	admin := New(Config{Store: st, Authenticator: allowAll{}, Authorizer: allowAll{}})
	if err := admin.EnsureSpace(ctx, "mailbox-x", layout.SpaceKindMailbox); err != nil {
		t.Fatal(err)
	}
	if err := admin.EnsureSpace(ctx, layout.DefaultSpace, layout.SpaceKindWDS); err != nil {
		t.Fatal(err)
	}
	alice := New(Config{Store: st, Authenticator: asUser{}, Authorizer: asUser{}})
	cm := `{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"c"}}`
	for _, c := range []struct {
		srv  *Server
		path string
		want int
	}{
		{alice, "/spaces/mailbox-x/api/v1/namespaces/default/configmaps", http.StatusForbidden},
		{admin, "/spaces/mailbox-x/api/v1/namespaces/default/configmaps", http.StatusCreated},
		{alice, "/spaces/default/api/v1/namespaces/default/configmaps", http.StatusCreated},
	} {
		hs := httptest.NewServer(c.srv)
		resp, body := do(t, "POST", hs.URL+c.path, cm)
		hs.Close()
		if resp.StatusCode != c.want {
			t.Errorf("POST %s: %d %s, want %d", c.path, resp.StatusCode, body, c.want)
		}
	}
	hs := httptest.NewServer(alice)
	defer hs.Close()
	if resp, _ := do(t, "GET", hs.URL+"/spaces/mailbox-x/api/v1/namespaces/default/configmaps", ""); resp.StatusCode != http.StatusOK {
		t.Errorf("reading a mailbox as a user: %d, want 200", resp.StatusCode)
	}
}

// A space that does not exist is a 404, unless the server is not ready (a
// replica catching up): then it may not have the space yet, and the answer
// is a 503 that client-go tries again after Retry-After.
func TestMissingSpaceWhileNotReady(t *testing.T) {
	st := store.New(store.Options{})
	st.SetLog(store.NewMemLog(st))
	t.Cleanup(st.Close)
	var ready atomic.Pointer[error]
	s := New(Config{Store: st, Authenticator: allowAll{}, Authorizer: allowAll{}, Ready: func() error {
		if err := ready.Load(); err != nil {
			return *err
		}
		return nil
	}})
	if err := s.EnsureSpace(context.Background(), layout.DefaultSpace, layout.SpaceKindWDS); err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(s)
	t.Cleanup(hs.Close)
	path := hs.URL + "/spaces/later/api/v1/namespaces/default/configmaps"

	resp, body := do(t, http.MethodGet, path, "")
	if resp.StatusCode != http.StatusNotFound || !strings.Contains(string(body), `spaces.canopy.dev \"later\" not found`) {
		t.Errorf("ready: %d %s, want 404 space not found", resp.StatusCode, body)
	}
	catchingUp := errors.New("catching up")
	ready.Store(&catchingUp)
	resp, body = do(t, http.MethodGet, path, "")
	if resp.StatusCode != http.StatusServiceUnavailable || resp.Header.Get("Retry-After") != "1" ||
		!strings.Contains(string(body), "not ready: catching up") || !strings.Contains(string(body), `"reason":"ServiceUnavailable"`) {
		t.Errorf("not ready: %d (Retry-After %q) %s, want 503 with Retry-After 1", resp.StatusCode, resp.Header.Get("Retry-After"), body)
	}
	// A space that exists is served even so.
	if resp, body := do(t, http.MethodGet, hs.URL+"/api/v1/namespaces/default/configmaps", ""); resp.StatusCode != http.StatusOK {
		t.Errorf("default space while not ready: %d %s", resp.StatusCode, body)
	}
}
