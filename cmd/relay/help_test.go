package main

import (
	"strings"
	"testing"
)

// TestHelpKubeconfig checks that relay --help describes --kubeconfig as
// what it is: the cluster an edge applies its inbox to.
func TestHelpKubeconfig(t *testing.T) {
	stdout, stderr, code := runRelay(t, "--help")
	if code != exitOK || stderr != "" {
		t.Fatalf("exit code %d, stderr %q", code, stderr)
	}
	var flag string
	for line := range strings.Lines(stdout) {
		if strings.Contains(line, "--kubeconfig string") {
			flag = line
		}
	}
	if flag == "" {
		t.Fatalf("relay --help has no --kubeconfig flag:\n%s", stdout)
	}
	if !strings.Contains(flag, "applies its inbox to") {
		t.Errorf("--kubeconfig is described as %q; want the cluster the edge applies its inbox to", strings.TrimSpace(flag))
	}
	// Without it, an edge syncs the cluster it runs in (in-cluster
	// configuration): the help says so.
	if !strings.Contains(flag, "default: the cluster the edge runs in as a pod") {
		t.Errorf("--kubeconfig is described as %q; want its default, the in-cluster configuration", strings.TrimSpace(flag))
	}
	for _, stale := range []string{"not applied", "accepted;", "comes with the edge syncer"} {
		if strings.Contains(stdout, stale) {
			t.Errorf("relay --help says %q:\n%s", stale, stdout)
		}
	}
}
