package kubeapi

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/canopy-dev/canopy/relay/apiserver/auth"
	"github.com/canopy-dev/canopy/relay/layout"
	"github.com/canopy-dev/canopy/relay/store"
)

// newAuthAPI serves a Server that authenticates with the real
// Authenticator (the admin bearer token adminToken) and authorizes with the
// real Authorizer, over a store holding the default space.
func newAuthAPI(t *testing.T, adminToken string) (*httptest.Server, *store.Store) {
	t.Helper()
	st := store.New(store.Options{Fields: FieldsFor})
	st.SetLog(store.NewMemLog(st))
	t.Cleanup(st.Close)
	authn, err := auth.NewAuthenticator(auth.AuthenticatorConfig{AdminToken: adminToken})
	if err != nil {
		t.Fatal(err)
	}
	s := New(Config{Store: st, Authenticator: authn, Authorizer: auth.NewAuthorizer(st)})
	if err := s.EnsureSpace(context.Background(), layout.DefaultSpace, layout.SpaceKindWDS); err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(s)
	t.Cleanup(hs.Close)
	return hs, st
}

// A request without credentials is answered 401 whether or not its space
// exists, so that it cannot learn which spaces do; with credentials, an
// unknown space is a 404.
func TestUnauthenticatedLearnsNoSpaces(t *testing.T) {
	hs, _ := newAuthAPI(t, "admin-secret")
	for _, c := range []struct {
		path, token string
		want        int
	}{
		{"/spaces/default/api/v1/namespaces/default/configmaps", "", http.StatusUnauthorized},
		{"/spaces/nowhere/api/v1/namespaces/default/configmaps", "", http.StatusUnauthorized},
		{"/spaces/nowhere/api", "", http.StatusUnauthorized},
		{"/spaces/nowhere/api", "wrong", http.StatusUnauthorized},
		{"/spaces/default/api/v1/namespaces/default/configmaps", "admin-secret", http.StatusOK},
		{"/spaces/nowhere/api/v1/namespaces/default/configmaps", "admin-secret", http.StatusNotFound},
	} {
		req, err := http.NewRequest(http.MethodGet, hs.URL+c.path, nil)
		if err != nil {
			t.Fatal(err)
		}
		if c.token != "" {
			req.Header.Set("Authorization", "Bearer "+c.token)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != c.want {
			t.Errorf("GET %s (token %q): %d, want %d", c.path, c.token, resp.StatusCode, c.want)
		}
	}
}
