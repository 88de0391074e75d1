package deploy

import (
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/canopy-dev/canopy/test/kubecluster"
	"github.com/canopy-dev/canopy/test/poll"
	"github.com/canopy-dev/canopy/test/procs"
	"github.com/canopy-dev/canopy/test/relaybin"
)

func TestMain(m *testing.M) { relaybin.Main(m) }

// rootRelay is a root relay process on loopback.
type rootRelay struct {
	*procs.Process
	dir, link string
	home      string // HOME of kubectl, so that it writes no cache elsewhere
}

// startRoot starts a root relay and waits until it answers /readyz.
func startRoot(t testing.TB) *rootRelay {
	t.Helper()
	dir, link := filepath.Join(t.TempDir(), "root"), procs.FreeAddr(t)
	return startRootArgs(t, "root", dir, link, "--role=root", "--name=root", "--data-dir="+dir, "--api-addr="+procs.FreeAddr(t), "--link-addr="+link)
}

// startRootArgs starts a root relay (or a replica) with args, whose data
// directory is dir and link address link, and waits until it answers
// /readyz.
func startRootArgs(t testing.TB, name, dir, link string, args ...string) *rootRelay {
	t.Helper()
	r := &rootRelay{dir: dir, link: link, home: t.TempDir()}
	r.Process = procs.Start(t, name, exec.Command(relaybin.For(t), args...))
	r.ready(t, 60*time.Second)
	return r
}

// ready waits until the root answers /readyz.
func (r *rootRelay) ready(t testing.TB, timeout time.Duration) {
	t.Helper()
	r.Until(t, r.Name()+" ready", func() error {
		_, err := r.kubectl(t, "", "get", "--raw=/readyz")
		return err
	}, poll.For(timeout))
}

// token creates a join token at the root.
func (r *rootRelay) token(t testing.TB) string {
	t.Helper()
	out, err := exec.Command(relaybin.For(t), "token", "create", "--data-dir="+r.dir).Output()
	if err != nil {
		t.Fatalf("relay token create: %v", err)
	}
	return strings.TrimSpace(string(out))
}

// kubectl runs kubectl against the root with its admin kubeconfig.
func (r *rootRelay) kubectl(t testing.TB, stdin string, args ...string) (string, error) {
	t.Helper()
	return kubecluster.RunKubectl(t, r.home, filepath.Join(r.dir, "admin.kubeconfig"), stdin, nil, args...)
}
