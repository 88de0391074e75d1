package kubeapi

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	authorizationv1 "k8s.io/api/authorization/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
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

// Config.Space serves a space's resource requests from the Space it
// returns: a read-only one refuses writes first (a 403 with its reason, or
// its kube Status as it is), a View shows its source's matching objects,
// and nil is the store's own space.
func TestSpaceHook(t *testing.T) {
	st := store.New(store.Options{Fields: FieldsFor})
	st.SetLog(store.NewMemLog(st))
	t.Cleanup(st.Close)
	ctx := context.Background()
	gone := apierrors.NewGone("this space is gone")
	var mu sync.Mutex
	var asked []string
	s := New(Config{Store: st, Authenticator: allowAll{}, Authorizer: allowAll{},
		Space: func(space, kind string, _ schema.GroupResource, u user.Info) (store.Space, error) {
			mu.Lock()
			asked = append(asked, space+"/"+kind+"/"+u.GetName())
			mu.Unlock()
			switch space {
			case "frozen":
				return store.ReadOnly(st.Space(space), errors.New(`space "frozen" is frozen`)), nil
			case "gone":
				return store.ReadOnly(st.Space(space), gone), nil
			case "view":
				return store.View(st.Space(layout.DefaultSpace), func(o *store.Object) bool { return o.Labels["seen"] == "yes" }), nil
			}
			return nil, nil
		}})
	for _, sp := range []string{layout.DefaultSpace, "frozen", "gone", "view"} {
		if err := s.EnsureSpace(ctx, sp, layout.SpaceKindWDS); err != nil {
			t.Fatal(err)
		}
	}
	hs := httptest.NewServer(s)
	t.Cleanup(hs.Close)
	cm := func(name, seen string) string {
		return `{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"` + name + `","labels":{"seen":"` + seen + `"}}}`
	}
	for _, c := range []struct {
		space, body string
		want        int
		message     string
	}{
		{layout.DefaultSpace, cm("shown", "yes"), http.StatusCreated, ""},
		{layout.DefaultSpace, cm("hidden", "no"), http.StatusCreated, ""},
		{"frozen", cm("c", "yes"), http.StatusForbidden, `"message":"space \"frozen\" is frozen","reason":"Forbidden"`},
		{"gone", cm("c", "yes"), http.StatusGone, `"message":"this space is gone"`},
		{"view", cm("c", "yes"), http.StatusForbidden, `"message":"store: read-only space","reason":"Forbidden"`},
		{"view", "not even JSON", http.StatusForbidden, `"reason":"Forbidden"`},
	} {
		resp, body := do(t, "POST", hs.URL+"/spaces/"+c.space+"/api/v1/namespaces/default/configmaps", c.body)
		if resp.StatusCode != c.want || !strings.Contains(string(body), c.message) {
			t.Errorf("POST into %s: %d %s, want %d with %s", c.space, resp.StatusCode, body, c.want, c.message)
		}
	}
	if resp, body := do(t, "GET", hs.URL+"/spaces/frozen/api/v1/namespaces/default/configmaps", ""); resp.StatusCode != http.StatusOK {
		t.Errorf("reading a read-only space: %d %s", resp.StatusCode, body)
	}
	views := hs.URL + "/spaces/view/api/v1/namespaces/default/configmaps"
	resp, body := do(t, "GET", views, "")
	if resp.StatusCode != http.StatusOK || !strings.Contains(string(body), `"name":"shown"`) || strings.Contains(string(body), `"name":"hidden"`) {
		t.Errorf("listing the view: %d %s, want shown and not hidden", resp.StatusCode, body)
	}
	if resp, _ := do(t, "GET", views+"/hidden", ""); resp.StatusCode != http.StatusNotFound {
		t.Errorf("getting an object outside the view: %d, want 404", resp.StatusCode)
	}
	if resp, _ := do(t, "GET", views+"/shown", ""); resp.StatusCode != http.StatusOK {
		t.Errorf("getting an object in the view: %d, want 200", resp.StatusCode)
	}
	mu.Lock()
	defer mu.Unlock()
	if !slices.Contains(asked, "view/"+layout.SpaceKindWDS+"/tester") {
		t.Errorf("the hook was asked %v, want view/%s/tester among them", asked, layout.SpaceKindWDS)
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
