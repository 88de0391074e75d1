package console

import (
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"testing"
)

func get(t *testing.T, h http.Handler, method, path string) *httptest.ResponseRecorder {
	t.Helper()
	w := httptest.NewRecorder()
	h.ServeHTTP(w, httptest.NewRequest(method, path, nil))
	return w
}

// The page and every asset it names are served, with the policy that keeps
// the page on its origin; the assets' names change with their content and
// are cached for good, the page is not.
func TestServesThePageAndItsAssets(t *testing.T) {
	h := Handler()
	w := get(t, h, http.MethodGet, Prefix)
	if w.Code != http.StatusOK || !strings.Contains(w.Body.String(), `<div id="app">`) {
		t.Fatalf("GET %s: %d %q", Prefix, w.Code, w.Body.String())
	}
	if csp := w.Header().Get("Content-Security-Policy"); !strings.Contains(csp, "default-src 'none'") || !strings.Contains(csp, "connect-src 'self'") {
		t.Errorf("Content-Security-Policy %q", csp)
	}
	if cc := w.Header().Get("Cache-Control"); cc != "no-cache" {
		t.Errorf("the page's Cache-Control %q, want no-cache", cc)
	}
	assets := regexp.MustCompile(`(?:src|href)="(/console/assets/[^"]+)"`).FindAllStringSubmatch(w.Body.String(), -1)
	if len(assets) < 2 {
		t.Fatalf("the page names %d assets, want a script and a stylesheet: %s", len(assets), w.Body.String())
	}
	for _, a := range assets {
		aw := get(t, h, http.MethodGet, a[1])
		if aw.Code != http.StatusOK || aw.Body.Len() == 0 {
			t.Errorf("GET %s: %d, %d bytes", a[1], aw.Code, aw.Body.Len())
		}
		if cc := aw.Header().Get("Cache-Control"); !strings.Contains(cc, "immutable") {
			t.Errorf("%s: Cache-Control %q", a[1], cc)
		}
		// Nothing is fetched from elsewhere.
		if strings.Contains(aw.Body.String(), "https://fonts.") || strings.Contains(aw.Body.String(), "cdn.") {
			t.Errorf("%s refers to another origin", a[1])
		}
	}
}

func TestRedirectsAndRefuses(t *testing.T) {
	h := Handler()
	if w := get(t, h, http.MethodGet, "/console"); w.Code != http.StatusMovedPermanently || w.Header().Get("Location") != Prefix {
		t.Errorf("GET /console: %d to %q", w.Code, w.Header().Get("Location"))
	}
	if w := get(t, h, http.MethodPost, Prefix); w.Code != http.StatusMethodNotAllowed {
		t.Errorf("POST %s: %d, want 405", Prefix, w.Code)
	}
	if w := get(t, h, http.MethodGet, Prefix+"assets/missing.js"); w.Code != http.StatusNotFound {
		t.Errorf("a missing asset: %d, want 404", w.Code)
	}
}
