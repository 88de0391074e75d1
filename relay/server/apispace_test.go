package server

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	authorizationv1 "k8s.io/api/authorization/v1"
	"k8s.io/apiserver/pkg/authentication/user"
	"k8s.io/apiserver/pkg/authorization/authorizer"

	"github.com/canopy-dev/canopy/relay/apiserver/kubeapi"
	"github.com/canopy-dev/canopy/relay/layout"
	"github.com/canopy-dev/canopy/relay/store"
)

// asGroups authenticates every request as one user of the given groups
// and allows it everything: only the rules of the spaces refuse.
type asGroups []string

func (g asGroups) Authenticate(*http.Request, string) (user.Info, error) {
	return &user.DefaultInfo{Name: "someone", Groups: g}, nil
}
func (asGroups) Authorize(context.Context, string, authorizer.Attributes) (authorizer.Decision, string, error) {
	return authorizer.DecisionAllow, "", nil
}
func (asGroups) Impersonate(_ context.Context, _ string, u user.Info, _ http.Header) (user.Info, error) {
	return u, nil
}
func (asGroups) RulesFor(string, user.Info, string) ([]authorizationv1.ResourceRule, []authorizationv1.NonResourceRule, bool) {
	return nil, nil, false
}

// The spaces the root's tree keeps are read-only but to the admin, who
// may write into the downsync space; a mailbox is a view of the downsync
// space and a reports space is served from the reports store, and users
// may read both.
func TestMailboxSpacesAreReadOnly(t *testing.T) {
	newStore := func() *store.Store {
		st := store.New(store.Options{Fields: kubeapi.FieldsFor})
		t.Cleanup(st.Close)
		return st
	}
	st, soft := newStore(), newStore()
	mailbox, reports := layout.MailboxSpace("r1"), layout.ReportsSpace("r1")
	spaces := rootSpaces{
		store: st,
		mailbox: func(child string) (func(*store.Object) bool, error) {
			return func(o *store.Object) bool { return strings.HasPrefix(o.Key.Name, child+"-") }, nil
		},
		reports: func(string) *store.Store { return soft },
	}.space
	alice := kubeapi.New(kubeapi.Config{Store: st, Authenticator: asGroups{"system:authenticated"}, Authorizer: asGroups{}, Space: spaces})
	admin := kubeapi.New(kubeapi.Config{Store: st, Authenticator: asGroups{user.SystemPrivilegedGroup}, Authorizer: asGroups{}, Space: spaces})
	ctx := context.Background()
	for space, kind := range map[string]string{layout.DefaultSpace: layout.SpaceKindWDS, layout.DownsyncSpace: layout.SpaceKindDownsync,
		mailbox: layout.SpaceKindMailbox, reports: layout.SpaceKindMailbox} {
		if err := admin.EnsureSpace(ctx, space, kind); err != nil {
			t.Fatal(err)
		}
	}
	reported := store.Key{Space: reports, Resource: store.Resource{Resource: "configmaps"}, Namespace: "default", Name: "reported"}
	if _, err := soft.Create(ctx, reported, []byte(`{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"reported","namespace":"default"}}`)); err != nil {
		t.Fatal(err)
	}
	servers := map[string]*httptest.Server{}
	for name, srv := range map[string]*kubeapi.Server{"alice": alice, "admin": admin} {
		servers[name] = httptest.NewServer(srv)
		t.Cleanup(servers[name].Close)
	}
	call := func(who, method, space, name, body string) (int, string) {
		t.Helper()
		url := servers[who].URL + "/spaces/" + space + "/api/v1/namespaces/default/configmaps" + name
		req, err := http.NewRequest(method, url, strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Content-Type", "application/json")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	cm := func(name string) string {
		return `{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"` + name + `"}}`
	}
	for _, c := range []struct {
		who, space, name string
		want             int
		message          string
	}{
		{"alice", layout.DefaultSpace, "c", http.StatusCreated, ""},
		{"alice", layout.DownsyncSpace, "r1-alice", http.StatusForbidden, `space \"downsync\" is the downsync space maintained by Canopy: it is read-only`},
		{"admin", layout.DownsyncSpace, "r1-admin", http.StatusCreated, ""},
		{"admin", layout.DownsyncSpace, "r2-admin", http.StatusCreated, ""},
		{"alice", mailbox, "r1-c", http.StatusForbidden, `space \"mailbox-r1\" is a mailbox: a view of what the child receives: it is read-only`},
		{"admin", mailbox, "r1-c", http.StatusForbidden, `space \"mailbox-r1\" is a mailbox: a view of what the child receives: it is read-only`},
		{"alice", reports, "c", http.StatusForbidden, `space \"reports-r1\" is a mailbox maintained by Canopy: it is read-only`},
		{"admin", reports, "c", http.StatusForbidden, `space \"reports-r1\" holds what a child reports, kept in memory: it is read-only`},
	} {
		code, body := call(c.who, "POST", c.space, "", cm(c.name))
		if code != c.want || !strings.Contains(body, c.message) {
			t.Errorf("%s creating %s in %s: %d %s, want %d %s", c.who, c.name, c.space, code, body, c.want, c.message)
		}
	}
	if code, body := call("alice", "DELETE", reports, "/reported", ""); code != http.StatusForbidden {
		t.Errorf("alice deleting a report: %d %s, want 403", code, body)
	}
	code, body := call("alice", "GET", mailbox, "", "")
	if code != http.StatusOK || !strings.Contains(body, `"name":"r1-admin"`) || strings.Contains(body, `"name":"r2-admin"`) {
		t.Errorf("alice listing the mailbox of r1: %d %s, want r1-admin alone", code, body)
	}
	if code, body := call("alice", "GET", mailbox, "/r2-admin", ""); code != http.StatusNotFound {
		t.Errorf("alice getting an object of another mailbox: %d %s, want 404", code, body)
	}
	if code, body := call("alice", "GET", reports, "/reported", ""); code != http.StatusOK || !strings.Contains(body, `"name":"reported"`) {
		t.Errorf("alice reading a report: %d %s", code, body)
	}
}
