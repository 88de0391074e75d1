package pki

import (
	"crypto/elliptic"
	"encoding/base64"
	"os"
	"path/filepath"
	"testing"
)

func TestLoadOrCreateToken(t *testing.T) {
	path := filepath.Join(Dir(t.TempDir()), AdminTokenFile)
	token, err := LoadOrCreateToken(path)
	if err != nil {
		t.Fatal(err)
	}
	raw, err := base64.RawURLEncoding.DecodeString(token)
	if err != nil || len(raw) != 32 {
		t.Errorf("token %q is not 32 bytes base64url (%v)", token, err)
	}
	checkMode(t, path, 0o600)
	again, err := LoadOrCreateToken(path)
	if err != nil {
		t.Fatal(err)
	}
	if again != token {
		t.Errorf("reloaded token %q, want %q", again, token)
	}

	empty := filepath.Join(t.TempDir(), "empty")
	if err := os.WriteFile(empty, []byte("\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := LoadOrCreateToken(empty); err == nil {
		t.Error("LoadOrCreateToken accepted an empty token file")
	}
}

func TestLoadOrCreateSigningKey(t *testing.T) {
	path := filepath.Join(Dir(t.TempDir()), SigningKeyFile)
	key, err := LoadOrCreateSigningKey(path)
	if err != nil {
		t.Fatal(err)
	}
	if key.Curve != elliptic.P256() {
		t.Errorf("curve %s, want P-256", key.Curve.Params().Name)
	}
	checkMode(t, path, 0o600)
	again, err := LoadOrCreateSigningKey(path)
	if err != nil {
		t.Fatal(err)
	}
	if !again.Equal(key) {
		t.Error("reloaded signing key differs")
	}

	bad := filepath.Join(t.TempDir(), "bad.key")
	if err := os.WriteFile(bad, []byte("not a key"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := LoadOrCreateSigningKey(bad); err == nil {
		t.Error("LoadOrCreateSigningKey accepted a file without a key")
	}
}
