package main

import (
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/canopy-dev/canopy/relay/pki"
)

// startTokenRoot starts a root relay process in a new data directory and
// returns the directory, once the root serves.
func startTokenRoot(t *testing.T) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "root")
	root := startRelay(t, "root", "--role=root", "--name=root", "--data-dir="+dir, "--api-addr=127.0.0.1:0", "--link-addr=127.0.0.1:0")
	root.waitLog("root relay serving")
	return dir
}

// Tokens are created with their limits and recorded at the root, listed
// with their uses, and revoked by ID.
func TestTokenCreateListRevoke(t *testing.T) {
	dataDir := startTokenRoot(t)
	ca, err := pki.LoadCA(pki.Dir(dataDir))
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, tc := range []struct {
		args  []string
		ttl   time.Duration
		role  pki.ChildRole
		names []string
		uses  int
		rekey bool
	}{
		{nil, time.Hour, 0, nil, 0, false},
		{[]string{"--ttl=1m"}, time.Minute, 0, nil, 0, false},
		{[]string{"--ttl", "24h"}, 24 * time.Hour, 0, nil, 0, false},
		{[]string{"--ttl=90m", "--role=edge"}, 90 * time.Minute, pki.RoleEdge, nil, 0, false},
		{[]string{"--role=region", "--names=r1,r2", "--uses=2"}, time.Hour, pki.RoleRegion, []string{"r1", "r2"}, 2, false},
		{[]string{"--rekey", "--names=e3"}, time.Hour, 0, []string{"e3"}, 0, true},
	} {
		before := time.Now().Truncate(time.Second)
		stdout, stderr, code := runRelay(t, append([]string{"token", "create", "--data-dir=" + dataDir}, tc.args...)...)
		if code != exitOK || stderr != "" {
			t.Fatalf("%v: exit code %d, stderr %q", tc.args, code, stderr)
		}
		token, ok := strings.CutSuffix(stdout, "\n")
		if !ok || strings.Contains(token, "\n") {
			t.Fatalf("%v: stdout %q, want one line", tc.args, stdout)
		}
		c, err := pki.VerifyJoinToken(ca.Cert, token, time.Now())
		if err != nil {
			t.Fatal(err)
		}
		if got := c.Expires.Sub(c.IssuedAt); got != tc.ttl || c.IssuedAt.Before(before) {
			t.Errorf("%v: token issued %s for %s, want for %s from %s on", tc.args, c.IssuedAt, got, tc.ttl, before)
		}
		if c.Role != tc.role || !slices.Equal(c.Names, tc.names) || c.MaxUses != tc.uses || c.Rekey != tc.rekey {
			t.Errorf("%v: claims %+v", tc.args, c)
		}
		ids = append(ids, c.ID)
	}

	stdout, stderr, code := runRelay(t, "token", "list", "--data-dir="+dataDir)
	if code != exitOK || stderr != "" {
		t.Fatalf("token list: exit code %d, stderr %q", code, stderr)
	}
	lines := strings.Split(strings.TrimSpace(stdout), "\n")
	if len(lines) != len(ids)+1 || !strings.HasPrefix(lines[0], "ID") {
		t.Fatalf("token list:\n%s", stdout)
	}
	for _, want := range []string{ids[4] + "  region  r1,r2  0/2", ids[5] + "  any     e3     0", "yes"} {
		if !strings.Contains(stdout, want) {
			t.Errorf("token list lacks %q:\n%s", want, stdout)
		}
	}

	stdout, stderr, code = runRelay(t, "token", "revoke", "--data-dir="+dataDir, ids[0], ids[4])
	if code != exitOK || stderr != "" || strings.Count(stdout, "revoked") != 2 {
		t.Fatalf("token revoke: exit code %d, stdout %q, stderr %q", code, stdout, stderr)
	}
	stdout, _, _ = runRelay(t, "token", "list", "--data-dir="+dataDir)
	if strings.Contains(stdout, ids[0]) || strings.Contains(stdout, ids[4]) || !strings.Contains(stdout, ids[1]) {
		t.Errorf("token list after revoking %s and %s:\n%s", ids[0], ids[4], stdout)
	}
	_, stderr, code = runRelay(t, "token", "revoke", "--data-dir="+dataDir, ids[0])
	if want := "relay: no join token " + ids[0] + " at the root ('relay token list' shows them)\n"; code != exitFailure || stderr != want {
		t.Errorf("revoking it again: exit code %d, stderr %q; want %q", code, stderr, want)
	}
}

func TestTokenCreateBadFlags(t *testing.T) {
	dataDir := t.TempDir()
	if _, err := pki.LoadOrCreateCA(pki.Dir(dataDir)); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--ttl=30s"}, "relay: --ttl: must be between 1m and 24h, not 30s"},
		{[]string{"--ttl=25h"}, "relay: --ttl: must be between 1m and 24h, not 25h0m0s"},
		{[]string{"--ttl=0"}, "relay: --ttl: must be between 1m and 24h, not 0s"},
		{[]string{"--ttl=-1h"}, "relay: --ttl: must be between 1m and 24h"},
		{[]string{"--ttl=soon"}, `relay: --ttl: invalid value "soon"`},
		{[]string{"--ttl"}, "relay: --ttl: needs a value"},
		{[]string{"--role=root"}, `relay: --role: must be region or edge, not "root"`},
		{[]string{"--uses=-1"}, "relay: --uses: must not be negative, not -1"},
		{[]string{"--rekey"}, "relay: --rekey: a token that re-keys relays must name them"},
		{[]string{"--names=Bad_Name"}, `relay: --names: relay name "Bad_Name" is not a DNS label`},
		{[]string{"--data-dir="}, "relay: --data-dir: must not be empty"},
		{[]string{"extra"}, `relay: create: unexpected argument "extra"`},
		{[]string{"--space=default"}, "relay: unknown flag: --space"},
	} {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			t.Parallel()
			args := append([]string{"token", "create", "--data-dir=" + dataDir}, tc.args...)
			stdout, stderr, code := runRelay(t, args...)
			wantUsageError(t, stdout, stderr, code, tc.want)
		})
	}
	t.Run("no subcommand", func(t *testing.T) {
		stdout, stderr, code := runRelay(t, "token")
		wantUsageError(t, stdout, stderr, code, "relay: token: missing subcommand: create or list or revoke")
	})
	t.Run("unknown subcommand", func(t *testing.T) {
		stdout, stderr, code := runRelay(t, "token", "rotate")
		wantUsageError(t, stdout, stderr, code, `relay: unknown command "rotate"`)
	})
	t.Run("revoke without IDs", func(t *testing.T) {
		stdout, stderr, code := runRelay(t, "token", "revoke", "--data-dir="+dataDir)
		wantUsageError(t, stdout, stderr, code, "relay: revoke: name the IDs of the tokens to revoke")
	})
}

func TestTokenCreateWithoutRoot(t *testing.T) {
	for name, dataDir := range map[string]string{
		"empty":   t.TempDir(),
		"missing": filepath.Join(t.TempDir(), "nope"),
	} {
		t.Run(name, func(t *testing.T) {
			stdout, stderr, code := runRelay(t, "token", "create", "--data-dir="+dataDir)
			want := "relay: no root CA in " + dataDir + ": start a root with --data-dir=" + dataDir + " first\n"
			if code != exitFailure || stdout != "" || stderr != want {
				t.Errorf("exit code %d, stdout %q, stderr %q; want %d and %q", code, stdout, stderr, exitFailure, want)
			}
			// Reading a root's PKI never creates one.
			if _, err := pki.LoadCA(pki.Dir(dataDir)); err == nil {
				t.Error("token create created a CA")
			}
		})
	}
}
