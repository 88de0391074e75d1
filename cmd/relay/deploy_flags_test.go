package main

import (
	"bytes"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/canopy-dev/canopy/relay/pki"
	"github.com/canopy-dev/canopy/relay/server"
)

// The flags that running relays under Kubernetes and systemd relies on:
// --join-token-file (a mounted Secret or a systemd credential), the
// in-cluster configuration of an edge given neither --kubeconfig nor
// --virtual-cluster, and --tls-san.

// TestJoinTokenFileBad: a missing, unreadable, empty or malformed token
// file is one line naming --join-token-file, exit code 2, and nothing is
// written (the data directory is not created).
func TestJoinTokenFileBad(t *testing.T) {
	dir := t.TempDir()
	empty := filepath.Join(dir, "empty")
	blank := filepath.Join(dir, "blank")
	twoLines := filepath.Join(dir, "two")
	big := filepath.Join(dir, "big")
	for name, content := range map[string]string{empty: "", blank: " \n\t\n", twoLines: "cnp1.a\ncnp1.b\n", big: strings.Repeat("x", maxTokenFile+1)} {
		if err := os.WriteFile(name, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	unreadable := filepath.Join(dir, "unreadable")
	if err := os.WriteFile(unreadable, []byte("cnp1.x"), 0o000); err != nil {
		t.Fatal(err)
	}
	missing := filepath.Join(dir, "missing")
	for _, tc := range []struct {
		file, want string
	}{
		{missing, "relay: --join-token-file: cannot read " + missing + ": no such file or directory"},
		{dir, "relay: --join-token-file: cannot read " + dir + ": is a directory"},
		{empty, "relay: --join-token-file: " + empty + " is empty"},
		{blank, "relay: --join-token-file: " + blank + " is empty"},
		{twoLines, "relay: --join-token-file: " + twoLines + " holds more than one line or word"},
		{big, "relay: --join-token-file: " + big + " is larger than 65536 bytes"},
		{unreadable, "relay: --join-token-file: cannot read " + unreadable + ": permission denied"},
	} {
		t.Run(filepath.Base(tc.file), func(t *testing.T) {
			if tc.file == unreadable && os.Geteuid() == 0 {
				// root reads a file of mode 0; a file it cannot read is one
				// whose read fails, as /proc/self/mem's first page does.
				tc.file, tc.want = "/proc/self/mem", "relay: --join-token-file: cannot read /proc/self/mem: input/output error"
			}
			dataDir := filepath.Join(t.TempDir(), "edge")
			stdout, stderr, code := runRelay(t, "--role=edge", "--name=e1", "--parent=127.0.0.1:7443", "--virtual-cluster",
				"--data-dir="+dataDir, "--join-token-file="+tc.file)
			wantUsageError(t, stdout, stderr, code, tc.want)
			if _, err := os.Stat(dataDir); !errors.Is(err, os.ErrNotExist) {
				t.Errorf("data directory %s: %v; want nothing written", dataDir, err)
			}
		})
	}
	t.Run("with --join-token", func(t *testing.T) {
		tok := filepath.Join(t.TempDir(), "token")
		if err := os.WriteFile(tok, []byte("cnp1.x\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		stdout, stderr, code := runRelay(t, "--role=region", "--name=r1", "--parent=root:7443", "--join-token=T", "--join-token-file="+tok)
		wantUsageError(t, stdout, stderr, code, "relay: --join-token-file: give either --join-token or --join-token-file, not both")
	})
	t.Run("root", func(t *testing.T) {
		stdout, stderr, code := runRelay(t, "--join-token-file="+empty)
		wantUsageError(t, stdout, stderr, code, "relay: --join-token-file: not used with --role=root, only with --role=region or --role=edge")
	})
}

// TestJoinTokenFile: the token a file holds, without its trailing newline,
// is the child's join token.
func TestJoinTokenFile(t *testing.T) {
	tok := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(tok, []byte("cnp1.claims.sig\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	got, _ := childConfigOf(t, "--role=edge", "--name=e1", "--parent=region:7443", "--virtual-cluster", "--join-token-file="+tok)
	want := server.ChildConfig{Role: pki.RoleEdge, Name: "e1", DataDir: filepath.Join("data", "e1"),
		Parents: []string{"region:7443"}, JoinToken: "cnp1.claims.sig", VirtualCluster: true}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("config %+v, want %+v", got, want)
	}
}

// TestEdgeOutsideAPod: an edge given neither --kubeconfig nor
// --virtual-cluster uses the in-cluster configuration; outside a pod that
// is one line naming --kubeconfig, exit code 2, nothing written.
func TestEdgeOutsideAPod(t *testing.T) {
	dataDir := filepath.Join(t.TempDir(), "edge")
	cmd := exec.CommandContext(t.Context(), relayBin, "--role=edge", "--name=e1", "--parent=127.0.0.1:7443", "--data-dir="+dataDir)
	cmd.Dir = t.TempDir()
	cmd.Env = slices.DeleteFunc(os.Environ(), func(kv string) bool { return strings.HasPrefix(kv, "KUBERNETES_SERVICE_") })
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	err := cmd.Run()
	code := 0
	if exitErr, ok := errors.AsType[*exec.ExitError](err); ok {
		code = exitErr.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	wantUsageError(t, out.String(), errOut.String(), code,
		"relay: --kubeconfig: not given, and no in-cluster configuration (unable to load in-cluster configuration, KUBERNETES_SERVICE_HOST and KUBERNETES_SERVICE_PORT must be defined): give --kubeconfig=FILE or --virtual-cluster, or run the edge in a pod")
	if _, err := os.Stat(dataDir); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("data directory %s: %v; want nothing written", dataDir, err)
	}
}

// TestTLSSAN: --tls-san names go into the root's configuration; a name
// that is neither a DNS name nor an IP address is refused.
func TestTLSSAN(t *testing.T) {
	got, _ := rootConfigOf(t, "--tls-san=canopy-root.canopy.svc,canopy.example.com", "--tls-san=192.0.2.10")
	if want := []string{"canopy-root.canopy.svc", "canopy.example.com", "192.0.2.10"}; !slices.Equal(got.ServingNames, want) {
		t.Errorf("ServingNames %q, want %q", got.ServingNames, want)
	}
	for _, bad := range []string{"Bad_Name", "canopy..svc", "fe80::1%eth0"} {
		stdout, stderr, code := runRelay(t, "--tls-san="+bad)
		wantUsageError(t, stdout, stderr, code, `relay: --tls-san: "`+bad+`" is neither an IP address nor a lower-case DNS name`)
	}
	stdout, stderr, code := runRelay(t, "--role=region", "--name=r1", "--parent=root:7443", "--tls-san=a.example.com")
	wantUsageError(t, stdout, stderr, code, "relay: --tls-san: not used with --role=region, only with --role=root")
}

// TestPKINewImport: "relay pki new" prints a bundle that "relay pki import
// --bundle" installs, twice without change; its CA is a new one each time.
func TestPKINewImport(t *testing.T) {
	first, stderr, code := runRelay(t, "pki", "new")
	if code != exitOK || stderr != "" {
		t.Fatalf("relay pki new: exit code %d, stderr %q", code, stderr)
	}
	second, _, _ := runRelay(t, "pki", "new")
	if first == second {
		t.Error("two runs of relay pki new printed the same bundle")
	}
	bundle := filepath.Join(t.TempDir(), "bundle.pem")
	if err := os.WriteFile(bundle, []byte(first), 0o600); err != nil {
		t.Fatal(err)
	}
	dataDir := t.TempDir()
	for range 2 {
		if stdout, stderr, code := runRelay(t, "pki", "import", "--data-dir="+dataDir, "--bundle="+bundle); code != exitOK {
			t.Fatalf("relay pki import: exit code %d, stdout %q, stderr %q", code, stdout, stderr)
		}
	}
	exported, stderr, code := runRelay(t, "pki", "export", "--data-dir="+dataDir)
	if code != exitOK || exported != first {
		t.Errorf("relay pki export after import: exit code %d, stderr %q; bundle equal to the imported one: %v", code, stderr, exported == first)
	}
	if _, stderr, code := runRelay(t, "pki", "import", "--data-dir="+t.TempDir(), "--bundle="+filepath.Join(dataDir, "missing")); code != exitFailure || !strings.HasPrefix(stderr, "relay: --bundle: open ") {
		t.Errorf("import of a missing bundle: exit code %d, stderr %q", code, stderr)
	}
}

// TestKubeconfigServer: --server puts every cluster of the admin
// kubeconfig at the address clients reach (a root in a pod listens on
// 0.0.0.0), each keeping its space's path; a server that is not
// https://host[:port] is a usage error naming --server.
func TestKubeconfigServer(t *testing.T) {
	dataDir := t.TempDir()
	cfg := clientcmdapi.NewConfig()
	for _, space := range []string{"default", "inventory"} {
		cfg.Clusters[space] = &clientcmdapi.Cluster{Server: "https://0.0.0.0:6443/spaces/" + space}
		cfg.AuthInfos[space] = &clientcmdapi.AuthInfo{Token: "T"}
		cfg.Contexts[space] = &clientcmdapi.Context{Cluster: space, AuthInfo: space}
	}
	cfg.CurrentContext = "default"
	if err := clientcmd.WriteToFile(*cfg, filepath.Join(dataDir, pki.AdminKubeconfigFile)); err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{nil, {"--space=inventory"}} {
		stdout, stderr, code := runRelay(t, append([]string{"kubeconfig", "--data-dir=" + dataDir, "--server=https://canopy.example.com:443"}, args...)...)
		if code != exitOK || stderr != "" {
			t.Fatalf("exit code %d, stderr %q", code, stderr)
		}
		got, err := clientcmd.Load([]byte(stdout))
		if err != nil {
			t.Fatal(err)
		}
		if len(got.Clusters) == 0 {
			t.Fatalf("no clusters in %s", stdout)
		}
		for name, c := range got.Clusters {
			if want := "https://canopy.example.com:443/spaces/" + name; c.Server != want {
				t.Errorf("%v: cluster %s at %s, want %s", args, name, c.Server, want)
			}
		}
	}
	for _, bad := range []string{"http://canopy.example.com", "canopy.example.com:443", "https://", "https://canopy.example.com/spaces/default"} {
		stdout, stderr, code := runRelay(t, "kubeconfig", "--data-dir="+dataDir, "--server="+bad)
		wantUsageError(t, stdout, stderr, code, "relay: --server: \""+bad+"\"")
	}
}

// TestTreeName: --tree-name names a replicated root in the relay tree (a
// root grown from a single one keeps that one's name); it needs
// --raft-addr and is a DNS label.
func TestTreeName(t *testing.T) {
	got, _ := rootConfigOf(t, "--name=canopy-root-1", "--raft-addr=127.0.0.1:7001", "--peer-addr=127.0.0.1:7002", "--tree-name=canopy-root-0")
	if got.HA.TreeName != "canopy-root-0" || got.Name != "canopy-root-1" {
		t.Errorf("name %q, tree name %q; want canopy-root-1 in the tree canopy-root-0", got.Name, got.HA.TreeName)
	}
	stdout, stderr, code := runRelay(t, "--tree-name=root-a")
	wantUsageError(t, stdout, stderr, code, "relay: --tree-name: only for a replicated root: give --raft-addr too")
	stdout, stderr, code = runRelay(t, "--raft-addr=127.0.0.1:7001", "--peer-addr=127.0.0.1:7002", "--tree-name=Root_A")
	wantUsageError(t, stdout, stderr, code, `relay: --tree-name: "Root_A" is not a DNS label`)
}
