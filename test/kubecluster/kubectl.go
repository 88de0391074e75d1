package kubecluster

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"
)

var (
	kubectlOnce sync.Once
	kubectlPath string
	kubectlErr  error
)

// Kubectl returns the kubectl tests run against a cluster or a relay:
// $KUBECTL, else kubectl on PATH (`make kubectl` builds one into bin/ when
// there is none). A missing kubectl fails the test. It is safe for
// concurrent use, but like any t.Fatal it must run on the test's goroutine.
func Kubectl(t testing.TB) string {
	t.Helper()
	kubectlOnce.Do(func() {
		if p := os.Getenv("KUBECTL"); p != "" {
			kubectlPath = p
			return
		}
		kubectlPath, kubectlErr = exec.LookPath("kubectl")
	})
	if kubectlErr != nil {
		t.Fatalf("kubectl not found: set KUBECTL or put kubectl on PATH (make kubectl builds one into bin/): %v", kubectlErr)
	}
	return kubectlPath
}

// KubectlTimeout bounds one run of RunKubectl.
const KubectlTimeout = 90 * time.Second

// RunKubectl runs Kubectl with --kubeconfig=kubeconfig and args, HOME=home
// (kubectl's cache goes there, not into the user's) and env added to the
// test's environment, and stdin as its input unless it is empty. It
// returns stdout; a non-zero exit, or a run longer than KubectlTimeout, is
// an error that carries stderr.
func RunKubectl(t testing.TB, home, kubeconfig, stdin string, env []string, args ...string) (string, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), KubectlTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, Kubectl(t), append([]string{"--kubeconfig=" + kubeconfig}, args...)...)
	cmd.Env = append(append(os.Environ(), "HOME="+home), env...)
	if stdin != "" {
		cmd.Stdin = strings.NewReader(stdin)
	}
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Run(); err != nil {
		return out.String(), fmt.Errorf("kubectl %s: %v: %s", strings.Join(args, " "), err, strings.TrimSpace(errb.String()))
	}
	return out.String(), nil
}
