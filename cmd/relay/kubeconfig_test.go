package main

import (
	"github.com/canopy-dev/canopy/test/kubecluster"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"k8s.io/client-go/tools/clientcmd"

	"github.com/canopy-dev/canopy/relay/pki"
)

// TestKubeconfigUnlistedSpace: a child's space that admin.kubeconfig
// does not list (a root lists its first hundred children's) is printed
// only if the root has it; a space of a relay further down, which the
// root never has, is a usage error naming --space, and so is any unlisted
// space while the root cannot be asked.
func TestKubeconfigUnlistedSpace(t *testing.T) {
	if testing.Short() {
		t.Skip("starts relay processes")
	}
	base := t.TempDir()
	rootDir := filepath.Join(base, "root")
	root := startRelay(t, "root", "--role=root", "--name=root", "--data-dir="+rootDir, "--api-addr=127.0.0.1:0", "--link-addr=127.0.0.1:0")
	link, _ := root.waitLog("root relay serving")["link"].(string)
	stdout, stderr, code := runRelay(t, "token", "create", "--data-dir="+rootDir)
	if code != 0 {
		t.Fatalf("relay token create: exit code %d, stderr %q", code, stderr)
	}
	startRelay(t, "edge-1", "--role=edge", "--name=edge-1", "--parent="+link, "--virtual-cluster",
		"--data-dir="+filepath.Join(base, "edge-1"), "--join-token="+strings.TrimSpace(stdout))
	admin := filepath.Join(rootDir, pki.AdminKubeconfigFile)
	waitContext(t, admin, "mailbox-edge-1")

	// A data directory whose admin.kubeconfig lists no child's space, as
	// the root's does for its children after the first hundred.
	listed := filepath.Join(base, "listed")
	cfg, err := clientcmd.LoadFromFile(admin)
	if err != nil {
		t.Fatal(err)
	}
	for name := range cfg.Contexts {
		if name != "default" && name != "inventory" {
			delete(cfg.Contexts, name)
		}
	}
	if err := os.MkdirAll(listed, 0o700); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(listed, pki.AdminKubeconfigFile)
	if err := clientcmd.WriteToFile(*cfg, path); err != nil {
		t.Fatal(err)
	}
	server := strings.TrimSuffix(cfg.Clusters[cfg.Contexts["default"].Cluster].Server, "/spaces/default")

	t.Run("the root has it", func(t *testing.T) {
		stdout, stderr, code := runRelay(t, "kubeconfig", "--data-dir="+listed, "--space=mailbox-edge-1")
		if code != 0 || stderr != "" {
			t.Fatalf("exit code %d, stderr %q", code, stderr)
		}
		out, err := clientcmd.Load([]byte(stdout))
		if err != nil {
			t.Fatal(err)
		}
		rc, err := clientcmd.NewDefaultClientConfig(*out, nil).ClientConfig()
		if err != nil {
			t.Fatal(err)
		}
		if want := server + "/spaces/mailbox-edge-1"; len(out.Contexts) != 1 || out.CurrentContext != "mailbox-edge-1" || rc.Host != want {
			t.Errorf("contexts %v, current %q, host %q; want only mailbox-edge-1 at %s", out.Contexts, out.CurrentContext, rc.Host, want)
		}
	})

	t.Run("a grandchild's space", func(t *testing.T) {
		stdout, stderr, code := runRelay(t, "kubeconfig", "--data-dir="+listed, "--space=mailbox-edge-1-1")
		wantUsageError(t, stdout, stderr, code, `relay: --space: no space "mailbox-edge-1-1" at the root `+server+" ")
	})

	// --destination: a context that reaches the edge's (virtual) cluster
	// through the root, used by the stock kubectl.
	t.Run("destination", func(t *testing.T) {
		stdout, stderr, code := runRelay(t, "kubeconfig", "--data-dir="+rootDir, "--destination=edge-1")
		if code != 0 || stderr != "" {
			t.Fatalf("exit code %d, stderr %q", code, stderr)
		}
		kc := filepath.Join(t.TempDir(), "edge-1.kubeconfig")
		if err := os.WriteFile(kc, []byte(stdout), 0o600); err != nil {
			t.Fatal(err)
		}
		out, err := kubecluster.RunKubectl(t, t.TempDir(), kc, "", nil, "get", "nodes", "-o", "name")
		if err != nil || !strings.Contains(out, "node/edge-1-node-0") {
			t.Fatalf("kubectl get nodes at edge-1 through the root: %v\n%s", err, out)
		}
	})
	t.Run("destination: bad input", func(t *testing.T) {
		stdout, stderr, code := runRelay(t, "kubeconfig", "--data-dir="+rootDir, "--destination=Edge_1")
		wantUsageError(t, stdout, stderr, code, `relay: --destination: "Edge_1" is not a destination name`)
		stdout, stderr, code = runRelay(t, "kubeconfig", "--data-dir="+rootDir, "--destination=edge-1", "--space=default")
		wantUsageError(t, stdout, stderr, code, "relay: --destination: give either --space or --destination, not both")
	})

	t.Run("the root is down", func(t *testing.T) {
		root.stop()
		stdout, stderr, code := runRelay(t, "kubeconfig", "--data-dir="+listed, "--space=mailbox-edge-1-1")
		if code != exitFailure || stdout != "" || strings.Count(stderr, "\n") != 1 ||
			!strings.HasPrefix(stderr, `relay: --space: "mailbox-edge-1-1" is not listed in `+path+" and the root could not say whether it has it") {
			t.Errorf("exit code %d, stdout %q, stderr %q; want %d and one line about --space", code, stdout, stderr, exitFailure)
		}
	})
}
