package e2e

import (
	"context"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/canopy-dev/canopy/relay/server"
	"github.com/canopy-dev/canopy/test/inproc"
	"github.com/canopy-dev/canopy/test/kubecluster"
	"github.com/canopy-dev/canopy/test/poll"
	"github.com/canopy-dev/canopy/test/procs"
)

// root is one in-process root relay for a test.
type root struct {
	*server.Root
	dir        string
	kubeconfig string
}

// startRoot starts a root relay on a random loopback port in a temporary
// data directory and stops it when the test ends.
func startRoot(t testing.TB) *root {
	t.Helper()
	dir := t.TempDir()
	return startRootIn(t, dir)
}

func startRootIn(t testing.TB, dir string) *root {
	t.Helper()
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	if os.Getenv("E2E_LOG") != "" {
		log = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	r := inproc.StartRoot(t, "root", dir, log)
	rt := &root{Root: r, dir: dir, kubeconfig: r.KubeconfigPath()}
	// Wait until authorization caches are synced (readyz).
	poll.Until(t, "the root ready", func() error {
		_, err := rt.kubectl(t, "get", "--raw=/readyz")
		return err
	})
	return rt
}

// restConfig returns a client config for a space (context name).
func (r *root) restConfig(t testing.TB, space string) *rest.Config {
	t.Helper()
	cc := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(
		&clientcmd.ClientConfigLoadingRules{ExplicitPath: r.kubeconfig},
		&clientcmd.ConfigOverrides{CurrentContext: space})
	cfg, err := cc.ClientConfig()
	if err != nil {
		t.Fatalf("client config for space %q: %v", space, err)
	}
	cfg.QPS = -1 // no client-side rate limiting: tests and benchmarks measure the server
	return cfg
}

// kubectl runs the real kubectl against the root with the admin kubeconfig
// and returns stdout; a non-zero exit is an error carrying stderr.
func (r *root) kubectl(t testing.TB, args ...string) (string, error) {
	return r.kubectlIn(t, "", nil, args...)
}

// kubectlIn runs kubectl with stdin and extra environment.
func (r *root) kubectlIn(t testing.TB, stdin string, env []string, args ...string) (string, error) {
	t.Helper()
	return kubecluster.RunKubectl(t, r.home(t), r.kubeconfig, stdin, env, args...)
}

// mustKubectl is kubectl that fails the test on error.
func (r *root) mustKubectl(t testing.TB, args ...string) string {
	t.Helper()
	out, err := r.kubectl(t, args...)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// home is a per-root HOME so kubectl's discovery cache starts empty.
func (r *root) home(t testing.TB) string {
	h := filepath.Join(r.dir, "home")
	_ = os.MkdirAll(h, 0o700)
	return h
}

// clients returns a typed clientset for a space (context name).
func (r *root) clients(t testing.TB, space string) *kubernetes.Clientset {
	t.Helper()
	cs, err := kubernetes.NewForConfig(r.restConfig(t, space))
	if err != nil {
		t.Fatalf("clientset for space %q: %v", space, err)
	}
	return cs
}

// rootTest is one subtest of a test whose subtests share one root.
type rootTest struct {
	name string
	run  func(t *testing.T, r *root, cs *kubernetes.Clientset)
}

// runRootTests runs tests as parallel subtests against r, each given a
// clientset for r's default space.
func runRootTests(t *testing.T, r *root, tests []rootTest) {
	t.Helper()
	cs := r.clients(t, "default")
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			tc.run(t, r, cs)
		})
	}
}

// dynamicClient returns a dynamic client for a space (context name).
func (r *root) dynamicClient(t testing.TB, space string) dynamic.Interface {
	t.Helper()
	dc, err := dynamic.NewForConfig(r.restConfig(t, space))
	if err != nil {
		t.Fatalf("dynamic client for space %q: %v", space, err)
	}
	return dc
}

// kubectlWith runs kubectl with another kubeconfig than the admin's (a
// token-only one, for instance), sharing this root's HOME.
func (r *root) kubectlWith(t testing.TB, kubeconfig string, args ...string) (string, error) {
	t.Helper()
	return kubecluster.RunKubectl(t, r.home(t), kubeconfig, "", nil, args...)
}

// bareKubeconfig writes a kubeconfig for a space with the server and the CA
// of the admin kubeconfig and no credentials at all, and returns its path.
// Callers add credentials on the command line (--token).
func (r *root) bareKubeconfig(t testing.TB, space string) string {
	t.Helper()
	return bareKubeconfigFrom(t, r.kubeconfig, space)
}

// bareKubeconfigFrom is bareKubeconfig for any admin kubeconfig file.
func bareKubeconfigFrom(t testing.TB, adminKubeconfig, space string) string {
	t.Helper()
	admin, err := clientcmd.LoadFromFile(adminKubeconfig)
	if err != nil {
		t.Fatalf("load %s: %v", adminKubeconfig, err)
	}
	ctx, ok := admin.Contexts[space]
	if !ok {
		t.Fatalf("admin kubeconfig has no context %q", space)
	}
	cl := admin.Clusters[ctx.Cluster]
	if cl == nil {
		t.Fatalf("admin kubeconfig has no cluster %q", ctx.Cluster)
	}
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["c"] = &clientcmdapi.Cluster{Server: cl.Server, CertificateAuthorityData: cl.CertificateAuthorityData}
	cfg.AuthInfos["nobody"] = &clientcmdapi.AuthInfo{}
	cfg.Contexts["c"] = &clientcmdapi.Context{Cluster: "c", AuthInfo: "nobody"}
	cfg.CurrentContext = "c"
	path := filepath.Join(t.TempDir(), "bare.kubeconfig")
	if err := clientcmd.WriteToFile(*cfg, path); err != nil {
		t.Fatalf("write %s: %v", path, err)
	}
	return path
}

// createNamespace creates a namespace with client-go.
func createNamespace(t testing.TB, cs kubernetes.Interface, name string) {
	t.Helper()
	_, err := cs.CoreV1().Namespaces().Create(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("create namespace %s: %v", name, err)
	}
}

// kubectlBackground starts a long-running kubectl (get -w, wait) against the
// root and returns the command and its stdout and stderr. The process is
// killed when the test ends if it is still running.
func (r *root) kubectlBackground(t testing.TB, args ...string) (*exec.Cmd, *procs.Buffer, *procs.Buffer) {
	t.Helper()
	cmd := exec.Command(kubecluster.Kubectl(t), append([]string{"--kubeconfig=" + r.kubeconfig}, args...)...)
	cmd.Env = append(os.Environ(), "HOME="+r.home(t))
	out, errb := &procs.Buffer{}, &procs.Buffer{}
	cmd.Stdout, cmd.Stderr = out, errb
	if err := cmd.Start(); err != nil {
		t.Fatalf("start kubectl %s: %v", strings.Join(args, " "), err)
	}
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-done
	})
	return cmd, out, errb
}
