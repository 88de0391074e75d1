package kubecluster

import (
	"bytes"
	"context"
	"errors"
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

// KubectlCommand returns, not started, Kubectl with --kubeconfig=kubeconfig
// and args, HOME=home (kubectl's cache goes there, not into the user's)
// and env added to the test's environment, and stdin as its input unless
// it is empty.
func KubectlCommand(ctx context.Context, t testing.TB, home, kubeconfig, stdin string, env []string, args ...string) *exec.Cmd {
	t.Helper()
	cmd := exec.CommandContext(ctx, Kubectl(t), append([]string{"--kubeconfig=" + kubeconfig}, args...)...)
	cmd.Env = append(append(os.Environ(), "HOME="+home), env...)
	if stdin != "" {
		cmd.Stdin = strings.NewReader(stdin)
	}
	return cmd
}

// RunKubectl runs KubectlCommand and returns stdout; a non-zero exit, or a
// run longer than KubectlTimeout, is an error that carries stderr.
func RunKubectl(t testing.TB, home, kubeconfig, stdin string, env []string, args ...string) (string, error) {
	t.Helper()
	stdout, stderr, code := KubectlResult(t, home, kubeconfig, stdin, env, args...)
	if code != 0 {
		return stdout, fmt.Errorf("kubectl %s: exit status %d: %s", strings.Join(args, " "), code, strings.TrimSpace(stderr))
	}
	return stdout, nil
}

// KubectlResult runs KubectlCommand, bounded by KubectlTimeout, and
// returns its output and exit code (-1 when it ran too long); a kubectl
// that cannot start fails the test.
func KubectlResult(t testing.TB, home, kubeconfig, stdin string, env []string, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), KubectlTimeout)
	defer cancel()
	cmd := KubectlCommand(ctx, t, home, kubeconfig, stdin, env, args...)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	var ee *exec.ExitError
	switch {
	case ctx.Err() != nil:
		return out.String(), fmt.Sprintf("%s(killed: it ran longer than %v)", errb.String(), KubectlTimeout), -1
	case errors.As(err, &ee):
		return out.String(), errb.String(), ee.ExitCode()
	case err != nil:
		t.Fatalf("kubectl %s: %v", strings.Join(args, " "), err)
	}
	return out.String(), errb.String(), 0
}
