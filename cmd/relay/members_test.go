package main

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/canopy-dev/canopy/test/inproc"
	"github.com/canopy-dev/canopy/test/poll"
)

// `relay members` against a single root: one line, the root itself,
// leader, healthy once ready; -o json says the same with its Raft status.
func TestMembers(t *testing.T) {
	dir := t.TempDir()
	r := inproc.StartRoot(t, "solo", dir, nil)

	var lines []string
	poll.Until(t, "relay members to show a healthy root", func() error {
		stdout, stderr, code := runRelay(t, "members", "--data-dir="+dir)
		if code != exitOK {
			t.Fatalf("relay members: exit %d, %s", code, stderr)
		}
		lines = strings.Split(strings.TrimSpace(stdout), "\n")
		if len(lines) != 2 || strings.Fields(lines[1])[6] != "ok" {
			return fmt.Errorf("\n%s", stdout)
		}
		return nil
	})
	if got := strings.Fields(lines[0]); strings.Join(got, " ") != "NAME RAFT API VOTER LEADER ALIVE HEALTH STATE APPLIED" {
		t.Errorf("header %q", lines[0])
	}
	f := strings.Fields(lines[1])
	if len(f) != 9 || f[0] != "solo" || f[2] != r.Server() || f[3] != "yes" || f[4] != "yes" || f[5] != "yes" || f[7] != "Leader" || f[8] == "0" {
		t.Errorf("line %q", lines[1])
	}

	stdout, stderr, code := runRelay(t, "members", "--data-dir="+dir, "-o", "json")
	var view membersView
	if err := json.Unmarshal([]byte(stdout), &view); code != exitOK || err != nil {
		t.Fatalf("-o json: exit %d, %v, %s%s", code, err, stdout, stderr)
	}
	if view.Self != "solo" || view.Leader != "solo" || view.Server != r.Server() || len(view.Members) != 1 {
		t.Fatalf("-o json: %+v", view)
	}
	if m := view.Members[0]; m.Health != "ok" || m.Status == nil || m.Status.State != "Leader" || m.Status.Revision == 0 || m.Status.LastContactSeconds != 0 {
		t.Errorf("-o json member: %+v %+v", m, m.Status)
	}

	// Another server: the same answer through --server, and an error for a
	// replica that does not answer.
	if stdout, stderr, code := runRelay(t, "members", "--data-dir="+dir, "--server="+r.Server()); code != exitOK || !strings.Contains(stdout, "solo") {
		t.Errorf("--server: exit %d, %s%s", code, stdout, stderr)
	}
	_, stderr, code = runRelay(t, "members", "--data-dir="+dir, "--server=https://127.0.0.1:1", "--timeout=2s")
	if code != exitFailure || !strings.HasPrefix(stderr, "relay: asking https://127.0.0.1:1: ") {
		t.Errorf("unreachable --server: exit %d, %q", code, stderr)
	}
}

func TestMembersBadFlags(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"members", "-o", "yaml"}, `--output: must be table or json, not "yaml"`},
		{[]string{"members", "--data-dir="}, "--data-dir: must not be empty"},
		{[]string{"members", "--server=http://127.0.0.1:6443"}, `--server: "http://127.0.0.1:6443" is not an https:// URL`},
		{[]string{"members", "--timeout=0s"}, "--timeout: must be positive, not 0s"},
		{[]string{"members", "extra"}, `members: unexpected argument "extra"`},
	} {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			stdout, stderr, code := runRelay(t, tc.args...)
			wantUsageError(t, stdout, stderr, code, tc.want)
		})
	}
	_, stderr, code := runRelay(t, "members", "--data-dir=/nonexistent/canopy")
	if code != exitFailure || !strings.Contains(stderr, "no admin.kubeconfig in /nonexistent/canopy") {
		t.Errorf("missing data dir: exit %d, %q", code, stderr)
	}
}
