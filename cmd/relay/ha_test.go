package main

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/canopy-dev/canopy/relay/pki"
)

// Inconsistent replica flags: one line naming the flag, exit 2.
func TestReplicaFlagErrors(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--peer-addr=127.0.0.1:7002"}, "--peer-addr: only for a replicated root: give --raft-addr too"},
		{[]string{"--join=127.0.0.1:7002"}, "--join: only for a replicated root"},
		{[]string{"--bootstrap-expect=3"}, "--bootstrap-expect: only for a replicated root"},
		{[]string{"--cluster-id=prod"}, "--cluster-id: only for a replicated root"},
		{[]string{"--raft-addr=127.0.0.1:7001"}, "--peer-addr: required with --raft-addr"},
		{[]string{"--raft-addr=127.0.0.1", "--peer-addr=127.0.0.1:7002"}, "--raft-addr: "},
		{[]string{"--raft-addr=0.0.0.0:7001", "--peer-addr=127.0.0.1:7002"}, "--raft-addr: \"0.0.0.0:7001\" listens on every interface"},
		{[]string{"--raft-addr=127.0.0.1:7001", "--peer-addr=127.0.0.1:7001"}, "--peer-addr: 127.0.0.1:7001 collides with --raft-addr"},
		{[]string{"--raft-addr=127.0.0.1:6443", "--peer-addr=127.0.0.1:7002"}, "--raft-addr: 127.0.0.1:6443 collides with --api-addr"},
		{[]string{"--raft-addr=127.0.0.1:7001", "--peer-addr=127.0.0.1:7002", "--join=nohost"}, "--join: "},
		{[]string{"--raft-addr=127.0.0.1:7001", "--peer-addr=127.0.0.1:7002", "--bootstrap-expect=0"}, "--bootstrap-expect: must be at least 1, not 0"},
		{[]string{"--raft-addr=127.0.0.1:7001", "--peer-addr=127.0.0.1:7002", "--bootstrap-expect=3"}, "--bootstrap-expect: 3 replicas cannot find each other without --join"},
		{[]string{"--raft-addr=127.0.0.1:7001", "--peer-addr=127.0.0.1:7002", "--bootstrap-expect=x"}, "--bootstrap-expect: invalid value \"x\""},
		{[]string{"--raft-addr=127.0.0.1:7001", "--peer-addr=127.0.0.1:7002", "--cluster-id=Not_A_Label"}, "--cluster-id: \"Not_A_Label\" is not a DNS label"},
		{[]string{"--role=edge", "--name=e", "--parent=127.0.0.1:7443", "--virtual-cluster", "--raft-addr=127.0.0.1:7001"}, "--raft-addr: not used with --role=edge"},
		{[]string{"--snapshot-threshold=100"}, "--snapshot-threshold: only for a replicated root"},
		{[]string{"--snapshot-interval=1s"}, "--snapshot-interval: only for a replicated root"},
		{[]string{"--trailing-logs=100"}, "--trailing-logs: only for a replicated root"},
		{[]string{"--raft-multiplier=5"}, "--raft-multiplier: only for a replicated root"},
		{[]string{"--raft-addr=127.0.0.1:7001", "--peer-addr=127.0.0.1:7002", "--raft-multiplier=11"}, "--raft-multiplier: must be from 1 to 10, not 11"},
		{[]string{"--raft-addr=127.0.0.1:7001", "--peer-addr=127.0.0.1:7002", "--snapshot-threshold=0"}, "--snapshot-threshold: must be at least 1, not 0"},
		{[]string{"--raft-addr=127.0.0.1:7001", "--peer-addr=127.0.0.1:7002", "--snapshot-threshold=-5"}, "--snapshot-threshold: invalid value \"-5\""},
		{[]string{"--raft-addr=127.0.0.1:7001", "--peer-addr=127.0.0.1:7002", "--snapshot-threshold=many"}, "--snapshot-threshold: invalid value \"many\""},
		{[]string{"--raft-addr=127.0.0.1:7001", "--peer-addr=127.0.0.1:7002", "--snapshot-interval=1ms"}, "--snapshot-interval: must be at least 5ms, not 1ms"},
		{[]string{"--raft-addr=127.0.0.1:7001", "--peer-addr=127.0.0.1:7002", "--snapshot-interval=soon"}, "--snapshot-interval: invalid value \"soon\""},
		{[]string{"--raft-addr=127.0.0.1:7001", "--peer-addr=127.0.0.1:7002", "--trailing-logs=0"}, "--trailing-logs: must be at least 1, not 0"},
		{[]string{"--role=region", "--name=r", "--parent=127.0.0.1:7443", "--link-addr=127.0.0.1:7444", "--snapshot-threshold=10"}, "--snapshot-threshold: not used with --role=region"},
	} {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			stdout, stderr, code := runRelay(t, tc.args...)
			wantUsageError(t, stdout, stderr, code, tc.want)
		})
	}
}

// "relay pki export | relay pki import" gives a second data directory the
// same CA, token and ServiceAccount key; a second import of another
// bundle is refused.
func TestPKIExportImport(t *testing.T) {
	src, dst, other := t.TempDir(), t.TempDir(), t.TempDir()
	for _, d := range []string{src, other} {
		if _, err := pki.LoadOrCreateCA(pki.Dir(d)); err != nil {
			t.Fatal(err)
		}
		if _, err := pki.LoadOrCreateToken(filepath.Join(pki.Dir(d), pki.AdminTokenFile)); err != nil {
			t.Fatal(err)
		}
		if _, err := pki.LoadOrCreateSigningKey(filepath.Join(pki.Dir(d), pki.SigningKeyFile)); err != nil {
			t.Fatal(err)
		}
	}
	bundle, stderr, code := runRelay(t, "pki", "export", "--data-dir="+src)
	if code != exitOK || !strings.Contains(bundle, "CANOPY PKI FILE") {
		t.Fatalf("export: exit %d, stderr %q", code, stderr)
	}
	imp := func(dir string) (string, int) {
		_, stderr, code := runRelayIn(t, bundle, "pki", "import", "--data-dir="+dir)
		return stderr, code
	}
	// A second import of the same bundle changes nothing.
	for range 2 {
		if stderr, code := imp(dst); code != exitOK {
			t.Fatalf("import: exit %d, %s", code, stderr)
		}
	}
	a, err := pki.LoadCA(pki.Dir(src))
	if err != nil {
		t.Fatal(err)
	}
	b, err := pki.LoadCA(pki.Dir(dst))
	if err != nil || a.ClusterID() != b.ClusterID() {
		t.Fatalf("imported CA: %v", err)
	}
	if again, stderr, code := runRelay(t, "pki", "export", "--data-dir="+dst); code != exitOK || again != bundle {
		t.Errorf("export of the imported directory: exit %d, %q; want the imported bundle", code, stderr)
	}
	if stderr, code := imp(other); code != exitFailure || !strings.Contains(stderr, "already has other credentials") {
		t.Fatalf("import over other credentials: exit %d, %q", code, stderr)
	}
	_, stderr, code = runRelay(t, "pki", "import")
	wantUsageError(t, "", stderr, code, "--data-dir: must not be empty")
	stdout, stderr, code := runRelay(t, "pki")
	wantUsageError(t, stdout, stderr, code, "pki: missing subcommand: new or export or import")
}
