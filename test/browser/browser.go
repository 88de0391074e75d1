package browser

import (
	"context"
	_ "embed"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
)

// Path is the Chromium a test runs: $CHROMIUM, or Debian's.
func Path() string {
	if p := os.Getenv("CHROMIUM"); p != "" {
		return p
	}
	return "/usr/bin/chromium"
}

// Start starts a headless Chromium for t and returns a context of its first
// tab; the browser stops when the test ends. It fails the test when there
// is no Chromium. The browser trusts any server certificate: tests serve
// with certificates of their own throwaway CAs.
func Start(t testing.TB) context.Context {
	t.Helper()
	path := Path()
	if _, err := os.Stat(path); err != nil {
		t.Fatalf("browser tests need Chromium at %s (apt-get install -y chromium, or set CHROMIUM): %v", path, err)
	}
	opts := []chromedp.ExecAllocatorOption{
		chromedp.ExecPath(path),
		chromedp.UserDataDir(t.TempDir()),
		chromedp.Flag("headless", true),
		chromedp.Flag("no-sandbox", true),
		chromedp.Flag("disable-gpu", true),
		chromedp.Flag("disable-quic", true),
		chromedp.Flag("no-first-run", true),
		chromedp.Flag("no-default-browser-check", true),
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.Flag("disable-dev-shm-usage", true),
		chromedp.Flag("ignore-certificate-errors", true),
		chromedp.WindowSize(1280, 860),
	}
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancel := chromedp.NewContext(actx, chromedp.WithLogf(t.Logf))
	t.Cleanup(func() {
		cancel()
		cancelAlloc()
	})
	if err := chromedp.Do(ctx); err != nil {
		t.Fatalf("start %s: %v", path, err)
	}
	return ctx
}

// ArtifactDir is where t keeps its screenshots: $CANOPY_ARTIFACTS/<test>
// when set, else a directory of the test's own (logged).
func ArtifactDir(t testing.TB) string {
	t.Helper()
	base := os.Getenv("CANOPY_ARTIFACTS")
	if base == "" {
		d := t.TempDir()
		t.Logf("screenshots in %s (set CANOPY_ARTIFACTS to keep them)", d)
		return d
	}
	d := filepath.Join(base, regexp.MustCompile(`[^A-Za-z0-9_.-]+`).ReplaceAllString(t.Name(), "_"))
	if err := os.MkdirAll(d, 0o755); err != nil {
		t.Fatal(err)
	}
	return d
}

// Screenshot writes the page of ctx, whole, to dir/name.png and returns
// the file's path.
func Screenshot(t testing.TB, ctx context.Context, dir, name string) string {
	t.Helper()
	png, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
	if err != nil {
		t.Fatalf("screenshot %s: %v", name, err)
	}
	p := filepath.Join(dir, name+".png")
	if err := os.WriteFile(p, png, 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// WaitJS waits, for at most timeout, until expr (JavaScript) is true in
// the page, and fails the test with what it waited for otherwise.
func WaitJS(t testing.TB, ctx context.Context, what, expr string, timeout time.Duration) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	var last error
	for {
		ok, err := chromedp.Run(ctx, chromedp.Evaluate[bool](expr))
		if err == nil && ok {
			return
		}
		last = err
		if time.Now().After(deadline) {
			body, _ := chromedp.Run(ctx, chromedp.Evaluate[string](`document.body ? document.body.innerText.slice(0, 2000) : ""`))
			t.Fatalf("waited %v for %s (%s): last error %v; the page shows:\n%s", timeout, what, expr, last, body)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

//go:embed audit.js
var auditJS string

// Accessibility checks the page of ctx: every visible control (links,
// buttons, inputs, selects, trees and their items, anything focusable) has
// an accessible name, and every visible text has a contrast ratio of at
// least 4.5:1 with its background (WCAG 2 AA), both from the computed
// styles. It fails the test with each problem found.
func Accessibility(t testing.TB, ctx context.Context) {
	t.Helper()
	problems, err := chromedp.Run(ctx, chromedp.Evaluate[[]string](auditJS))
	if err != nil {
		t.Fatalf("accessibility audit: %v", err)
	}
	if len(problems) > 0 {
		t.Errorf("accessibility: %d problems:\n%s", len(problems), strings.Join(problems, "\n"))
	}
}

// Eval returns the value of expr (JavaScript) in the page.
func Eval[T any](t testing.TB, ctx context.Context, expr string) T {
	t.Helper()
	v, err := chromedp.Run(ctx, chromedp.Evaluate[T](expr))
	if err != nil {
		t.Fatalf("evaluate %s: %v", expr, err)
	}
	return v
}

// Do runs chromedp steps and fails the test, saying what they did, on error.
func Do(t testing.TB, ctx context.Context, what string, steps ...chromedp.Action[chromedp.Void]) {
	t.Helper()
	if err := chromedp.Do(ctx, steps...); err != nil {
		t.Fatalf("%s: %v", what, err)
	}
}
