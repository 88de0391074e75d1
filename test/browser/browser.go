package browser

import (
	"context"
	"crypto/tls"
	_ "embed"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"software.sslmate.com/src/go-pkcs12"
)

// Path is the Chromium a test runs: $CHROMIUM, or Debian's.
func Path() string {
	if p := os.Getenv("CHROMIUM"); p != "" {
		return p
	}
	return "/usr/bin/chromium"
}

// An Option changes the browser Start starts.
type Option func(*options)

type options struct {
	certPEM, keyPEM []byte
}

// ClientCertificate gives the browser a client certificate: certPEM (its
// first certificate) with its private key keyPEM, as tls.X509KeyPair reads
// them, which it presents, without asking, to every server that asks for
// one. Chromium on Linux reads client certificates from the NSS database in
// $HOME/.pki/nssdb: Start makes one, with Debian's pk12util (apt-get
// install -y libnss3-tools), in a temporary HOME of the browser's own, and
// sets the profile's auto_select_certificate content setting (what the
// AutoSelectCertificateForUrls policy sets, without a policy file) so that
// Chromium picks the certificate instead of opening a dialog nobody
// answers.
func ClientCertificate(certPEM, keyPEM []byte) Option {
	return func(o *options) { o.certPEM, o.keyPEM = certPEM, keyPEM }
}

// Start starts a headless Chromium for t and returns a context of its first
// tab; the browser stops when the test ends. It fails the test when there
// is no Chromium. The browser trusts any server certificate: tests serve
// with certificates of their own throwaway CAs.
func Start(t testing.TB, opt ...Option) context.Context {
	t.Helper()
	path := Path()
	if _, err := os.Stat(path); err != nil {
		t.Fatalf("browser tests need Chromium at %s (apt-get install -y chromium, or set CHROMIUM): %v", path, err)
	}
	var o options
	for _, f := range opt {
		f(&o)
	}
	profile := t.TempDir()
	opts := []chromedp.ExecAllocatorOption{
		chromedp.ExecPath(path),
		chromedp.UserDataDir(profile),
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
	if o.certPEM != nil {
		home := t.TempDir()
		if err := installClientCertificate(home, profile, o.certPEM, o.keyPEM); err != nil {
			t.Fatalf("give Chromium a client certificate: %v", err)
		}
		opts = append(opts, chromedp.Env("HOME="+home))
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

// installClientCertificate puts the certificate certPEM, with its key
// keyPEM, in the NSS database of home (created) and lets the Chromium
// profile in profile present it to any site without asking.
func installClientCertificate(home, profile string, certPEM, keyPEM []byte) error {
	pk12util, err := exec.LookPath("pk12util")
	if err != nil {
		return fmt.Errorf("a client certificate needs NSS's pk12util (apt-get install -y libnss3-tools): %w", err)
	}
	pair, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		return err
	}
	const password = "browser"
	p12, err := pkcs12.Modern.Encode(pair.PrivateKey, pair.Leaf, nil, password)
	if err != nil {
		return err
	}
	file := filepath.Join(home, "client.p12")
	if err := os.WriteFile(file, p12, 0o600); err != nil {
		return err
	}
	db := filepath.Join(home, ".pki", "nssdb")
	if err := os.MkdirAll(db, 0o700); err != nil {
		return err
	}
	// pk12util makes the database, without a password, as it imports.
	if out, err := exec.Command(pk12util, "-i", file, "-d", "sql:"+db, "-W", password).CombinedOutput(); err != nil {
		return fmt.Errorf("pk12util: %w: %s", err, out)
	}
	// Preferences of a new profile: for any site ("*,*"), the first
	// certificate that matches the empty filter, that is any.
	prefs, err := json.Marshal(map[string]any{"profile": map[string]any{"content_settings": map[string]any{"exceptions": map[string]any{
		"auto_select_certificate": map[string]any{"*,*": map[string]any{"setting": map[string]any{"filters": []any{map[string]any{}}}}}}}}})
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Join(profile, "Default"), 0o700); err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(profile, "Default", "Preferences"), prefs, 0o600)
}
