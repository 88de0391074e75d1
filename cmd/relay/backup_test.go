package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// Bad input to backup and restore is one line naming the flag, and
// changes nothing.
func TestBackupRestoreBadInput(t *testing.T) {
	dir := t.TempDir()
	newDir := filepath.Join(dir, "new")
	missing := filepath.Join(dir, "missing.backup")
	for _, tc := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"backup", "--data-dir=" + dir}, exitUsage, "relay: --out: must not be empty\n"},
		{[]string{"backup", "--out=x", "--server=http://127.0.0.1:1"}, exitUsage, `relay: --server: "http://127.0.0.1:1" is not an https:// URL` + "\n"},
		{[]string{"backup", "--out=x", "--data-dir=" + dir}, exitFailure, "relay: no admin.kubeconfig in " + dir + ": start a root with --data-dir=" + dir + " first, or pass --kubeconfig\n"},
		{[]string{"restore", "--data-dir=" + newDir}, exitUsage, "relay: --from: must not be empty\n"},
		{[]string{"restore", "--from=" + missing}, exitUsage, "relay: --data-dir: must not be empty\n"},
		{[]string{"restore", "--from=" + missing, "--data-dir=" + newDir, "--bump-revision=-1"}, exitUsage, "relay: --bump-revision: must not be negative, not -1\n"},
		{[]string{"restore", "--from=" + missing, "--data-dir=" + newDir, "--pki=" + filepath.Join(dir, "none")}, exitFailure, "relay: --pki: open " + filepath.Join(dir, "none") + ": no such file or directory\n"},
	} {
		_, stderr, code := runRelay(t, tc.args...)
		if code != tc.code || stderr != tc.want {
			t.Errorf("relay %s: exit %d, stderr %q; want %d, %q", strings.Join(tc.args, " "), code, stderr, tc.code, tc.want)
		}
	}
	if _, err := os.Stat(newDir); !os.IsNotExist(err) {
		t.Errorf("bad input wrote %s: %v", newDir, err)
	}
}
