package main

import (
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/canopy-dev/canopy/relay/pki"
)

func TestTokenCreate(t *testing.T) {
	dataDir := t.TempDir()
	ca, err := pki.LoadOrCreateCA(pki.Dir(dataDir))
	if err != nil {
		t.Fatal(err)
	}

	for _, tc := range []struct {
		args []string
		ttl  time.Duration
		role pki.ChildRole
	}{
		{nil, time.Hour, 0},
		{[]string{"--ttl=1m"}, time.Minute, 0},
		{[]string{"--ttl", "24h"}, 24 * time.Hour, 0},
		{[]string{"--ttl=90m", "--role=edge"}, 90 * time.Minute, pki.RoleEdge},
		{[]string{"--role=region"}, time.Hour, pki.RoleRegion},
	} {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			t.Parallel()
			before := time.Now().Truncate(time.Second)
			stdout, stderr, code := runRelay(t, append([]string{"token", "create", "--data-dir=" + dataDir}, tc.args...)...)
			if code != exitOK || stderr != "" {
				t.Fatalf("exit code %d, stderr %q", code, stderr)
			}
			token, ok := strings.CutSuffix(stdout, "\n")
			if !ok || strings.Contains(token, "\n") {
				t.Fatalf("stdout %q, want one line", stdout)
			}
			c, err := pki.VerifyJoinToken(ca.Cert, token, time.Now())
			if err != nil {
				t.Fatal(err)
			}
			if got := c.Expires.Sub(c.IssuedAt); got != tc.ttl || c.IssuedAt.Before(before) {
				t.Errorf("token issued %s for %s, want for %s from %s on", c.IssuedAt, got, tc.ttl, before)
			}
			if c.Role != tc.role {
				t.Errorf("token for role %v, want %v", c.Role, tc.role)
			}
		})
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
		wantUsageError(t, stdout, stderr, code, "relay: token: missing subcommand: create")
	})
	t.Run("unknown subcommand", func(t *testing.T) {
		stdout, stderr, code := runRelay(t, "token", "revoke")
		wantUsageError(t, stdout, stderr, code, `relay: unknown command "revoke"`)
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
