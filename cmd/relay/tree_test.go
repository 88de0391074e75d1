package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"k8s.io/client-go/tools/clientcmd"

	"github.com/canopy-dev/canopy/relay/pki"
	"github.com/canopy-dev/canopy/test/kubecluster"
	"github.com/canopy-dev/canopy/test/poll"
	"github.com/canopy-dev/canopy/test/procs"
)

// relayProc is a relay binary running in the background with JSON logs.
type relayProc struct {
	*procs.Process
	t *testing.T
}

// startRelay starts the relay binary with args and --log-format=json, in
// a directory of its own.
func startRelay(t *testing.T, name string, args ...string) *relayProc {
	t.Helper()
	cmd := exec.Command(relayBin, append(args, "--log-format=json")...)
	cmd.Dir = t.TempDir()
	return &relayProc{Process: procs.Start(t, name, cmd), t: t}
}

// waitLog waits until a log line has message msg and returns it.
func (p *relayProc) waitLog(msg string) map[string]any {
	p.t.Helper()
	var line map[string]any
	p.Until(p.t, fmt.Sprintf("%s to log %q", p.Name(), msg), func() error {
		for l := range strings.Lines(p.Output()) {
			var m map[string]any
			if json.Unmarshal([]byte(l), &m) == nil && m["msg"] == msg {
				line = m
				return nil
			}
		}
		return errors.New("not logged")
	})
	return line
}

// stop sends SIGTERM and checks that the relay exits with code 0.
func (p *relayProc) stop() {
	p.t.Helper()
	if err := p.Stop(p.t); err != nil {
		p.t.Fatalf("%s: %v after SIGTERM, want exit status 0\n%s", p.Name(), err, p.Output())
	}
}

// waitContext waits until the kubeconfig at path has context name.
func waitContext(t *testing.T, path, name string) {
	t.Helper()
	poll.Until(t, fmt.Sprintf("context %q in %s", name, path), func() error {
		cfg, err := clientcmd.LoadFromFile(path)
		if err != nil {
			return err
		}
		if cfg.Contexts[name] == nil {
			return fmt.Errorf("contexts %v", slices.Sorted(maps.Keys(cfg.Contexts)))
		}
		return nil
	})
}

// TestTree runs a root and an edge as processes: the edge joins with a
// token, the root shows its mailbox, and after a restart the edge
// reconnects with its certificate alone.
func TestTree(t *testing.T) {
	if testing.Short() {
		t.Skip("starts relay processes")
	}
	kubectl := kubecluster.Kubectl(t)
	base := t.TempDir()
	rootDir, edgeDir := filepath.Join(base, "root"), filepath.Join(base, "edge-1")
	rootArgs := []string{"--role=root", "--name=root", "--data-dir=" + rootDir, "--api-addr=127.0.0.1:0", "--link-addr=127.0.0.1:0"}

	root := startRelay(t, "root", rootArgs...)
	link, _ := root.waitLog("root relay serving")["link"].(string)
	if link == "" {
		t.Fatalf("root logged no link address:\n%s", root.Output())
	}
	stdout, stderr, code := runRelay(t, "token", "create", "--data-dir="+rootDir)
	if code != 0 {
		t.Fatalf("relay token create: exit code %d, stderr %q", code, stderr)
	}
	token := strings.TrimSpace(stdout)

	edgeArgs := []string{"--role=edge", "--name=edge-1", "--parent=" + link, "--virtual-cluster", "--data-dir=" + edgeDir}
	edge := startRelay(t, "edge-1", append(edgeArgs, "--join-token="+token)...)
	kubeconfig := filepath.Join(rootDir, pki.AdminKubeconfigFile)
	waitContext(t, kubeconfig, "mailbox-edge-1")
	out, err := exec.CommandContext(t.Context(), kubectl, "--kubeconfig="+kubeconfig, "--context=mailbox-edge-1", "get", "ns").CombinedOutput()
	if err != nil {
		t.Fatalf("kubectl --context=mailbox-edge-1 get ns: %v\n%s", err, out)
	}
	edge.waitLog("connected to parent")
	edge.stop()
	root.stop()

	// Both restart from their data directories; the edge has no token now.
	root = startRelay(t, "root", rootArgs...)
	link, _ = root.waitLog("root relay serving")["link"].(string)
	edgeArgs[2] = "--parent=" + link
	edge = startRelay(t, "edge-1", edgeArgs...)
	edge.waitLog("connected to parent")
	poll.Holds(t, "the edge running after reconnecting", 2*time.Second, edge.Exited)
	edge.stop()
	root.stop()
}

// TestEdgeWithoutToken: an edge that never joined and has no token stops
// with one clear line and exit code 1.
func TestEdgeWithoutToken(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "edge-1")
	stdout, stderr, code := runRelay(t, "--role=edge", "--name=edge-1", "--parent=127.0.0.1:7443", "--virtual-cluster", "--data-dir="+dir, "--log-level=error")
	want := "relay: edge-1 has not joined its parent yet (no certificate in " + dir + "): pass --join-token=TOKEN from 'relay token create' at the root\n"
	if code != exitFailure || stdout != "" || stderr != want {
		t.Errorf("exit code %d, stdout %q, stderr %q; want %d and %q", code, stdout, stderr, exitFailure, want)
	}
}
