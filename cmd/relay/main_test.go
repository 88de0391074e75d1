package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"runtime"
	"runtime/debug"
	"slices"
	"strings"
	"testing"
	"time"

	"k8s.io/client-go/tools/clientcmd"

	"github.com/canopy-dev/canopy/relay/pki"
	"github.com/canopy-dev/canopy/relay/server"
	"github.com/canopy-dev/canopy/relay/transport/session"
)

const (
	testVersion = "v0.0.0-test"
	testCommit  = "0123abcd"
)

// relayBin is the relay binary that TestMain builds.
var relayBin string

func TestMain(m *testing.M) {
	os.Exit(func() int {
		dir, err := os.MkdirTemp("", "relay-test-")
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		defer os.RemoveAll(dir)
		relayBin = filepath.Join(dir, "relay")
		build := exec.Command("go", "build", "-o", relayBin,
			"-ldflags", "-X github.com/canopy-dev/canopy/relay/buildinfo.version="+testVersion+" -X github.com/canopy-dev/canopy/relay/buildinfo.commit="+testCommit, ".")
		build.Stdout, build.Stderr = os.Stderr, os.Stderr
		if err := build.Run(); err != nil {
			fmt.Fprintln(os.Stderr, "building relay:", err)
			return 1
		}
		return m.Run()
	}())
}

// runRelay runs the relay binary in a fresh directory and returns its
// output and exit code.
func runRelay(t *testing.T, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	return runRelayIn(t, "", args...)
}

// runRelayIn is runRelay with stdin (none when it is empty).
func runRelayIn(t *testing.T, stdin string, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	cmd := exec.CommandContext(t.Context(), relayBin, args...)
	cmd.Dir = t.TempDir()
	if stdin != "" {
		cmd.Stdin = strings.NewReader(stdin)
	}
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	err := cmd.Run()
	if exitErr, ok := errors.AsType[*exec.ExitError](err); ok {
		code = exitErr.ExitCode()
	} else if err != nil {
		t.Fatalf("relay %s: %v", strings.Join(args, " "), err)
	}
	return out.String(), errOut.String(), code
}

// wantUsageError checks that a run failed with exit code 2, printing
// nothing on stdout and exactly one line on stderr that starts with
// "relay: " and contains want.
func wantUsageError(t *testing.T, stdout, stderr string, code int, want string) {
	t.Helper()
	if code != exitUsage {
		t.Errorf("exit code %d, want %d", code, exitUsage)
	}
	if stdout != "" {
		t.Errorf("stdout %q, want nothing", stdout)
	}
	if lines := strings.Split(strings.TrimSuffix(stderr, "\n"), "\n"); len(lines) != 1 || !strings.HasSuffix(stderr, "\n") {
		t.Errorf("stderr %q, want exactly one line", stderr)
	}
	if !strings.HasPrefix(stderr, "relay: ") || !strings.Contains(stderr, want) {
		t.Errorf("stderr %q, want \"relay: ...%s...\"", stderr, want)
	}
}

func TestBadFlags(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string // in the one stderr line
	}{
		{[]string{"--bogus"}, "relay: unknown flag: --bogus"},
		{[]string{"-x"}, "unknown shorthand flag"},
		{[]string{"extra"}, `relay: unknown command "extra"`},
		{[]string{"--role=bogus"}, `relay: --role: invalid value "bogus": must be one of root, region, edge`},
		{[]string{"--role"}, "relay: --role: needs a value"},
		{[]string{"--api-addr=nonsense"}, `relay: --api-addr: "nonsense" is not host:port (missing port in address)`},
		{[]string{"--api-addr=127.0.0.1"}, `relay: --api-addr: "127.0.0.1" is not host:port (missing port in address)`},
		{[]string{"--api-addr=127.0.0.1:http"}, `relay: --api-addr: port "http" in "127.0.0.1:http" is not a number from 0 to 65535`},
		{[]string{"--api-addr=127.0.0.1:65536"}, "relay: --api-addr: port"},
		{[]string{"--link-addr=bad_host:7443"}, `relay: --link-addr: host "bad_host" in "bad_host:7443" is neither an IP address nor a DNS name`},
		{[]string{"--link-addr=127.0.0.1:6443"}, "relay: --link-addr: 127.0.0.1:6443 collides with --api-addr=127.0.0.1:6443"},
		{[]string{"--api-addr=0.0.0.0:7443"}, "relay: --api-addr: 0.0.0.0:7443 collides with --link-addr=127.0.0.1:7443"},
		{[]string{"--data-dir="}, "relay: --data-dir: must not be empty"},
		{[]string{"--name=Not_A_Label"}, `relay: --name: "Not_A_Label" is not a DNS label`},
		{[]string{"--parent=root.example.com:7443"}, "relay: --parent: not used with --role=root, only with --role=region or --role=edge"},
		{[]string{"--role=root", "--kubeconfig=/dev/null"}, "relay: --kubeconfig: not used with --role=root, only with --role=edge"},
		{[]string{"--virtual-cluster=maybe"}, `relay: --virtual-cluster: invalid value "maybe": invalid syntax`},
		{[]string{"--log-level=loud"}, "relay: --log-level: invalid value"},
		{[]string{"--log-format=xml"}, "relay: --log-format: invalid value"},
		{[]string{"--pprof=0.0.0.0:6060"}, `relay: --pprof: "0.0.0.0:6060" is not a loopback address`},
		{[]string{"kubeconfig", "--role=root"}, "relay: unknown flag: --role"},
		{[]string{"kubeconfig", "--data-dir="}, "relay: --data-dir: must not be empty"},
		{[]string{"version", "extra"}, `relay: version: unexpected argument "extra"`},
	} {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			t.Parallel()
			stdout, stderr, code := runRelay(t, tc.args...)
			wantUsageError(t, stdout, stderr, code, tc.want)
		})
	}
}

func TestBadChildFlags(t *testing.T) {
	dir := t.TempDir()
	kubeconfig := filepath.Join(dir, "kubeconfig")
	if err := os.WriteFile(kubeconfig, []byte("apiVersion: v1\nkind: Config\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	region := []string{"--role=region", "--name=r1", "--link-addr=127.0.0.1:7444"}
	edge := []string{"--role=edge", "--name=e1", "--parent=127.0.0.1:7443"}
	vc := append(slices.Clone(edge), "--virtual-cluster")
	for _, tc := range []struct {
		args []string
		want string // in the one stderr line
	}{
		{[]string{"--role=region", "--parent=127.0.0.1:7443", "--link-addr=127.0.0.1:7444"}, "relay: --name: required with --role=region"},
		{region, "relay: --parent: required with --role=region"},
		{append(slices.Clone(region), "--parent="), "relay: --parent: required with --role=region"},
		{append(slices.Clone(region), "--parent=nonsense"), `relay: --parent: "nonsense" is not host:port (missing port in address)`},
		{append(slices.Clone(region), "--parent=root:http"), `relay: --parent: port "http" in "root:http" is not a number from 0 to 65535`},
		{append(slices.Clone(region), "--parent=bad_host:7443"), `relay: --parent: host "bad_host" in "bad_host:7443" is neither an IP address nor a DNS name`},
		{append(slices.Clone(region), "--parent=:7443"), `relay: --parent: ":7443" has no host to dial`},
		{append(slices.Clone(region), "--parent=root:0"), `relay: --parent: "root:0" has no port to dial (0)`},
		{append(slices.Clone(region), "--parent=root:7443,root:x"), `relay: --parent: port "x" in "root:x" is not a number`},
		{[]string{"--role=region", "--name=r1", "--parent=127.0.0.1:7443"}, "relay: --link-addr: 127.0.0.1:7443 is the address of --parent=127.0.0.1:7443: a region on the same host as its parent needs its own --link-addr"},
		{append(slices.Clone(region), "--parent=root:7443", "--link-addr=nonsense"), `relay: --link-addr: "nonsense" is not host:port`},
		{append(slices.Clone(region), "--parent=root:7443", "--api-addr=127.0.0.1:6443"), "relay: --api-addr: not used with --role=region, only with --role=root"},
		{append(slices.Clone(region), "--parent=root:7443", "--virtual-cluster"), "relay: --virtual-cluster: not used with --role=region, only with --role=edge"},
		{append(slices.Clone(region), "--parent=root:7443", "--kubeconfig="+kubeconfig), "relay: --kubeconfig: not used with --role=region, only with --role=edge"},
		{append(slices.Clone(region), "--parent=root:7443", "--labels=a=b"), "relay: --labels: not used with --role=region, only with --role=edge"},
		{append(slices.Clone(region), "--parent=root:7443", "--proxy=socks5://proxy:1080"), `relay: --proxy: "socks5://proxy:1080" is not an http:// or https:// URL`},
		{append(slices.Clone(vc), "--kubeconfig="+kubeconfig), "relay: --kubeconfig: give either --kubeconfig or --virtual-cluster, not both"},
		{append(slices.Clone(edge), "--kubeconfig="+filepath.Join(dir, "missing")), "relay: --kubeconfig: cannot read " + filepath.Join(dir, "missing") + ": no such file or directory"},
		{append(slices.Clone(edge), "--kubeconfig="+dir), "relay: --kubeconfig: " + dir + " is a directory, not a kubeconfig file"},
		{append(slices.Clone(vc), "--link-addr=127.0.0.1:7444"), "relay: --link-addr: not used with --role=edge, only with --role=root or --role=region"},
		{append(slices.Clone(vc), "--labels=env"), `relay: --labels: invalid value "env"`},
		{append(slices.Clone(vc), "--labels=a/b/c=x"), `relay: --labels: key "a/b/c" is not a valid label key`},
		{append(slices.Clone(vc), "--labels=env=-prod"), `relay: --labels: value "-prod" of env is not a valid label value`},
		{append(slices.Clone(vc), "--proxy=http://"), `relay: --proxy: "http://" has no host`},
		{append(slices.Clone(vc), "--proxy=proxy.example.com:3128"), `relay: --proxy: "proxy.example.com:3128" is not an http:// or https:// URL`},
		{append(slices.Clone(vc), "--proxy=http://proxy:99999"), `relay: --proxy: port "99999" in "http://proxy:99999" is not a number from 0 to 65535`},
	} {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			t.Parallel()
			stdout, stderr, code := runRelay(t, tc.args...)
			wantUsageError(t, stdout, stderr, code, tc.want)
		})
	}
}

func TestVersion(t *testing.T) {
	stdout, stderr, code := runRelay(t, "version")
	if code != 0 || stderr != "" {
		t.Fatalf("exit code %d, stderr %q", code, stderr)
	}
	// The binary links the same modules as this test, which imports its
	// packages.
	kubeAPI := "unknown"
	if info, ok := debug.ReadBuildInfo(); ok {
		for _, dep := range info.Deps {
			if dep.Path == "k8s.io/api" {
				kubeAPI = dep.Version
			}
		}
	}
	want := fmt.Sprintf("relay version: %s\ngit commit:    %s\ngo version:    %s %s/%s\nk8s.io/api:    %s\n",
		testVersion, testCommit, runtime.Version(), runtime.GOOS, runtime.GOARCH, kubeAPI)
	if stdout != want {
		t.Errorf("relay version printed\n%s\nwant\n%s", stdout, want)
	}
}

// writeAdminKubeconfig prepares dataDir as a root would and returns the
// admin kubeconfig's path.
func writeAdminKubeconfig(t *testing.T, dataDir string) string {
	t.Helper()
	ca, err := pki.LoadOrCreateCA(pki.Dir(dataDir))
	if err != nil {
		t.Fatal(err)
	}
	token, err := pki.LoadOrCreateToken(filepath.Join(pki.Dir(dataDir), pki.AdminTokenFile))
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := pki.BuildKubeconfig(pki.KubeconfigOptions{
		Server: "https://127.0.0.1:6443", CAPEM: ca.CertPEM, Token: token,
		Spaces: []string{"default", "inventory"},
	})
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dataDir, pki.AdminKubeconfigFile)
	if err := pki.WriteKubeconfig(path, cfg); err != nil {
		t.Fatal(err)
	}
	return path
}

func TestKubeconfig(t *testing.T) {
	dataDir := t.TempDir()
	path := writeAdminKubeconfig(t, dataDir)
	admin, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}

	t.Run("all", func(t *testing.T) {
		stdout, stderr, code := runRelay(t, "kubeconfig", "--data-dir="+dataDir)
		if code != 0 || stderr != "" {
			t.Fatalf("exit code %d, stderr %q", code, stderr)
		}
		if stdout != string(admin) {
			t.Errorf("printed\n%s\nwant admin.kubeconfig\n%s", stdout, admin)
		}
	})

	t.Run("space", func(t *testing.T) {
		stdout, stderr, code := runRelay(t, "kubeconfig", "--data-dir", dataDir, "--space=inventory")
		if code != 0 || stderr != "" {
			t.Fatalf("exit code %d, stderr %q", code, stderr)
		}
		cfg, err := clientcmd.Load([]byte(stdout))
		if err != nil {
			t.Fatal(err)
		}
		if len(cfg.Contexts) != 1 || cfg.CurrentContext != "inventory" {
			t.Fatalf("contexts %v, current %q; want only inventory", cfg.Contexts, cfg.CurrentContext)
		}
		rc, err := clientcmd.NewDefaultClientConfig(*cfg, nil).ClientConfig()
		if err != nil {
			t.Fatal(err)
		}
		if want := "https://127.0.0.1:6443/spaces/inventory"; rc.Host != want {
			t.Errorf("host %q, want %q", rc.Host, want)
		}
	})

	t.Run("unknown space", func(t *testing.T) {
		stdout, stderr, code := runRelay(t, "kubeconfig", "--data-dir="+dataDir, "--space=nope")
		wantUsageError(t, stdout, stderr, code, `relay: --space: no space "nope" in `+path+", which has spaces default, inventory")
	})

	// A child's space the root did not list (it lists its first hundred
	// children) is checked with the root: TestKubeconfigUnlistedSpace.

	t.Run("never started", func(t *testing.T) {
		empty := t.TempDir()
		stdout, stderr, code := runRelay(t, "kubeconfig", "--data-dir="+empty)
		want := "relay: no admin.kubeconfig in " + empty + ": start a root with --data-dir=" + empty + " first\n"
		if code != exitFailure || stdout != "" || stderr != want {
			t.Errorf("exit code %d, stdout %q, stderr %q; want %d and %q", code, stdout, stderr, exitFailure, want)
		}
	})
}

// runInProcess runs the relay command line with runRoot replaced by fake;
// starting a region or edge fails the test.
func runInProcess(t *testing.T, ctx context.Context, fake func(context.Context, server.Config) error, args ...string) (stderr string, code int) {
	t.Helper()
	return runFakes(t, ctx, fake, func(context.Context, server.ChildConfig) error {
		t.Error("runChild called")
		return nil
	}, args...)
}

// runChildInProcess runs the relay command line with runChild replaced by
// fake; starting a root fails the test.
func runChildInProcess(t *testing.T, ctx context.Context, fake func(context.Context, server.ChildConfig) error, args ...string) (stderr string, code int) {
	t.Helper()
	return runFakes(t, ctx, func(context.Context, server.Config) error {
		t.Error("runRoot called")
		return nil
	}, fake, args...)
}

func runFakes(t *testing.T, ctx context.Context, root func(context.Context, server.Config) error, child func(context.Context, server.ChildConfig) error, args ...string) (stderr string, code int) {
	t.Helper()
	savedRoot, savedChild, savedLog := runRoot, runChild, slog.Default()
	t.Cleanup(func() {
		runRoot, runChild = savedRoot, savedChild
		slog.SetDefault(savedLog)
	})
	runRoot, runChild = root, child
	var stdout, errOut bytes.Buffer
	code = run(ctx, args, &stdout, &errOut)
	if stdout.Len() > 0 {
		t.Errorf("stdout %q, want nothing", stdout.String())
	}
	return errOut.String(), code
}

// rootConfigOf is the root configuration that relay's command line args
// make (the root is not started), and what relay wrote on stderr.
func rootConfigOf(t *testing.T, args ...string) (server.Config, string) {
	t.Helper()
	return configOf(t, runInProcess, args...)
}

// childConfigOf is rootConfigOf for a region or an edge.
func childConfigOf(t *testing.T, args ...string) (server.ChildConfig, string) {
	t.Helper()
	return configOf(t, runChildInProcess, args...)
}

// configOf runs args with run, whose fake keeps the configuration it is
// given, and fails t unless relay exits 0.
func configOf[C any](t *testing.T, run func(*testing.T, context.Context, func(context.Context, C) error, ...string) (string, int), args ...string) (C, string) {
	t.Helper()
	var got C
	stderr, code := run(t, t.Context(), func(_ context.Context, cfg C) error {
		got = cfg
		return nil
	}, args...)
	if code != exitOK {
		t.Fatalf("relay %s: exit code %d, stderr %q", strings.Join(args, " "), code, stderr)
	}
	return got, stderr
}

func TestRootConfig(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want server.Config
	}{
		{nil, server.Config{Name: "root", DataDir: filepath.Join("data", "root"), APIAddr: "127.0.0.1:6443", LinkAddr: "127.0.0.1:7443"}},
		{[]string{"--role=root", "--name=r1"}, server.Config{Name: "r1", DataDir: filepath.Join("data", "r1"), APIAddr: "127.0.0.1:6443", LinkAddr: "127.0.0.1:7443"}},
		{
			[]string{"--name=r1", "--data-dir=/var/lib/canopy", "--api-addr=:6443", "--link-addr=[::1]:7443", "--log-level=debug", "--log-format=json"},
			server.Config{Name: "r1", DataDir: "/var/lib/canopy", APIAddr: ":6443", LinkAddr: "[::1]:7443"},
		},
		// Port 0 picks a free port, so both listeners may ask for it.
		{[]string{"--api-addr=127.0.0.1:0", "--link-addr=127.0.0.1:0"}, server.Config{Name: "root", DataDir: filepath.Join("data", "root"), APIAddr: "127.0.0.1:0", LinkAddr: "127.0.0.1:0"}},
		// A replica of a replicated root (docs/ha.md).
		{
			[]string{"--name=root-a", "--raft-addr=10.0.0.1:7001", "--peer-addr=10.0.0.1:7002", "--join=10.0.0.2:7002,10.0.0.3:7002", "--bootstrap-expect=3", "--cluster-id=prod"},
			server.Config{Name: "root-a", DataDir: filepath.Join("data", "root-a"), APIAddr: "127.0.0.1:6443", LinkAddr: "127.0.0.1:7443",
				HA: server.Replication{RaftAddr: "10.0.0.1:7001", PeerAddr: "10.0.0.1:7002", Join: []string{"10.0.0.2:7002", "10.0.0.3:7002"}, BootstrapExpect: 3, ClusterID: "prod",
					SnapshotThreshold: 8192, SnapshotInterval: 30 * time.Second, TrailingLogs: 10240, RaftMultiplier: 1}},
		},
		{
			[]string{"--raft-addr=127.0.0.1:7001", "--peer-addr=127.0.0.1:7002"},
			server.Config{Name: "root", DataDir: filepath.Join("data", "root"), APIAddr: "127.0.0.1:6443", LinkAddr: "127.0.0.1:7443",
				HA: server.Replication{RaftAddr: "127.0.0.1:7001", PeerAddr: "127.0.0.1:7002", BootstrapExpect: 1,
					SnapshotThreshold: 8192, SnapshotInterval: 30 * time.Second, TrailingLogs: 10240, RaftMultiplier: 1}},
		},
		{
			[]string{"--raft-addr=127.0.0.1:7001", "--peer-addr=127.0.0.1:7002", "--snapshot-threshold=64", "--snapshot-interval=500ms", "--trailing-logs=16"},
			server.Config{Name: "root", DataDir: filepath.Join("data", "root"), APIAddr: "127.0.0.1:6443", LinkAddr: "127.0.0.1:7443",
				HA: server.Replication{RaftAddr: "127.0.0.1:7001", PeerAddr: "127.0.0.1:7002", BootstrapExpect: 1,
					SnapshotThreshold: 64, SnapshotInterval: 500 * time.Millisecond, TrailingLogs: 16, RaftMultiplier: 1}},
		},
		{
			[]string{"--status-window=500ms"},
			server.Config{Name: "root", DataDir: filepath.Join("data", "root"), APIAddr: "127.0.0.1:6443", LinkAddr: "127.0.0.1:7443",
				StatusWindow: 500 * time.Millisecond},
		},
		{
			[]string{"--raft-addr=127.0.0.1:7001", "--peer-addr=127.0.0.1:7002", "--snapshot-threshold=64", "--snapshot-interval=500ms", "--trailing-logs=16", "--raft-multiplier=3"},
			server.Config{Name: "root", DataDir: filepath.Join("data", "root"), APIAddr: "127.0.0.1:6443", LinkAddr: "127.0.0.1:7443",
				HA: server.Replication{RaftAddr: "127.0.0.1:7001", PeerAddr: "127.0.0.1:7002", BootstrapExpect: 1,
					SnapshotThreshold: 64, SnapshotInterval: 500 * time.Millisecond, TrailingLogs: 16, RaftMultiplier: 3}},
		},
	} {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			got, _ := rootConfigOf(t, tc.args...)
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("config %+v, want %+v", got, tc.want)
			}
		})
	}
}

func TestRootStops(t *testing.T) {
	t.Run("failure", func(t *testing.T) {
		stderr, code := runInProcess(t, t.Context(), func(context.Context, server.Config) error {
			return errors.New("server: --api-addr: address already in use")
		})
		if code != exitFailure || !strings.HasSuffix(stderr, "relay: server: --api-addr: address already in use\n") {
			t.Errorf("exit code %d, stderr %q", code, stderr)
		}
	})
	t.Run("canceled", func(t *testing.T) {
		ctx, cancel := context.WithCancel(t.Context())
		stderr, code := runInProcess(t, ctx, func(ctx context.Context, _ server.Config) error {
			cancel() // as a signal would
			<-ctx.Done()
			return ctx.Err()
		}, "--log-level=error")
		if code != exitOK || stderr != "" {
			t.Errorf("exit code %d, stderr %q; want a clean stop", code, stderr)
		}
	})
}

func TestChildConfig(t *testing.T) {
	kubeconfig := filepath.Join(t.TempDir(), "kubeconfig")
	if err := os.WriteFile(kubeconfig, []byte("apiVersion: v1\nkind: Config\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		args []string
		want server.ChildConfig
	}{
		{
			[]string{"--role=region", "--name=region-1", "--parent=root.example.com:7443", "--link-addr=127.0.0.1:7444", "--join-token=T"},
			server.ChildConfig{Role: pki.RoleRegion, Name: "region-1", DataDir: filepath.Join("data", "region-1"),
				Parents: []string{"root.example.com:7443"}, JoinToken: "T", LinkAddr: "127.0.0.1:7444"},
		},
		// The default --link-addr is fine when the parent is elsewhere.
		{
			[]string{"--role=region", "--name=r2", "--parent=10.0.0.1:7443,10.0.0.2:7443", "--data-dir=/var/lib/r2", "--proxy=http://proxy.example.com:3128"},
			server.ChildConfig{Role: pki.RoleRegion, Name: "r2", DataDir: "/var/lib/r2",
				Parents: []string{"10.0.0.1:7443", "10.0.0.2:7443"}, LinkAddr: "127.0.0.1:7443",
				Proxy: &url.URL{Scheme: "http", Host: "proxy.example.com:3128"}},
		},
		{
			[]string{"--role=edge", "--name=edge-1", "--parent=127.0.0.1:7444", "--parent=[::1]:7444", "--virtual-cluster", "--join-token=T", "--labels=env=prod,topology.kubernetes.io/zone=eu-1"},
			server.ChildConfig{Role: pki.RoleEdge, Name: "edge-1", DataDir: filepath.Join("data", "edge-1"),
				Parents: []string{"127.0.0.1:7444", "[::1]:7444"}, JoinToken: "T", VirtualCluster: true,
				Labels: map[string]string{"env": "prod", "topology.kubernetes.io/zone": "eu-1"}},
		},
		{
			[]string{"--role=edge", "--name=e2", "--parent=region:7443", "--kubeconfig=" + kubeconfig, "--proxy=https://user:pw@proxy:443"},
			server.ChildConfig{Role: pki.RoleEdge, Name: "e2", DataDir: filepath.Join("data", "e2"),
				Parents: []string{"region:7443"}, Kubeconfig: kubeconfig,
				Proxy: &url.URL{Scheme: "https", User: url.UserPassword("user", "pw"), Host: "proxy:443"}},
		},
	} {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			got, stderr := childConfigOf(t, tc.args...)
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("config %+v, want %+v", got, tc.want)
			}
			// An edge applies its inbox to the cluster of --kubeconfig:
			// nothing warns that it does not.
			if strings.Contains(stderr, "kubeconfig") {
				t.Errorf("stderr %q: want no warning about --kubeconfig", stderr)
			}
		})
	}
}

func TestChildStops(t *testing.T) {
	args := []string{"--role=edge", "--name=e1", "--parent=127.0.0.1:7444", "--virtual-cluster", "--data-dir=/var/lib/e1"}
	t.Run("no token", func(t *testing.T) {
		stderr, code := runChildInProcess(t, t.Context(), func(context.Context, server.ChildConfig) error {
			return session.ErrNoToken
		}, append(args, "--log-level=error")...)
		want := "relay: e1 has not joined its parent yet (no certificate in /var/lib/e1): pass --join-token=TOKEN from 'relay token create' at the root\n"
		if code != exitFailure || stderr != want {
			t.Errorf("exit code %d, stderr %q; want %d and %q", code, stderr, exitFailure, want)
		}
	})
	t.Run("failure", func(t *testing.T) {
		stderr, code := runChildInProcess(t, t.Context(), func(context.Context, server.ChildConfig) error {
			return errors.New("server: data dir: permission denied")
		}, args...)
		if code != exitFailure || !strings.HasSuffix(stderr, "relay: server: data dir: permission denied\n") {
			t.Errorf("exit code %d, stderr %q", code, stderr)
		}
	})
	t.Run("canceled", func(t *testing.T) {
		ctx, cancel := context.WithCancel(t.Context())
		stderr, code := runChildInProcess(t, ctx, func(ctx context.Context, _ server.ChildConfig) error {
			cancel() // as a signal would
			<-ctx.Done()
			return ctx.Err()
		}, append(args, "--log-level=error")...)
		if code != exitOK || stderr != "" {
			t.Errorf("exit code %d, stderr %q; want a clean stop", code, stderr)
		}
	})
}
