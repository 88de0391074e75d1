package vcluster

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net/http"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/canopy-dev/canopy/test/kubecluster"
	"github.com/canopy-dev/canopy/test/procs"
)

// kubeconfigFor writes a kubeconfig for the served cluster at host.
func kubeconfigFor(t *testing.T, host string) string {
	t.Helper()
	kc := clientcmdapi.NewConfig()
	kc.Clusters["vc"] = &clientcmdapi.Cluster{Server: host}
	kc.AuthInfos["admin"] = &clientcmdapi.AuthInfo{}
	kc.Contexts["vc"] = &clientcmdapi.Context{Cluster: "vc", AuthInfo: "admin", Namespace: "default"}
	kc.CurrentContext = "vc"
	path := filepath.Join(t.TempDir(), "kubeconfig")
	if err := clientcmd.WriteToFile(*kc, path); err != nil {
		t.Fatal(err)
	}
	return path
}

// TestKubectl runs the real kubectl against a served cluster: logs -f,
// exec and port-forward, over WebSockets (kubectl's first choice) and over
// SPDY (its fallback, forced by its environment switches).
func TestKubectl(t *testing.T) {
	_, cs, cfg := servedCluster(t, Options{})
	runningPod(t, cs, webPod("kc"))
	kc, home := kubeconfigFor(t, cfg.Host), t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	kubectl := func(ctx context.Context, env []string, stdin string, args ...string) *exec.Cmd {
		return kubecluster.KubectlCommand(ctx, t, home, kc, stdin, env, args...)
	}
	run := func(env []string, stdin string, args ...string) (string, string, int) {
		t.Helper()
		return kubecluster.KubectlResult(t, home, kc, stdin, env, args...)
	}

	// logs -f: read the start lines and two heartbeats, then go.
	fctx, fcancel := context.WithCancel(ctx)
	cmd := kubectl(fctx, nil, "", "logs", "-f", "kc", "-c", "web")
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	sc := bufio.NewScanner(out)
	var lines []string
	for len(lines) < 7 && sc.Scan() {
		lines = append(lines, sc.Text())
	}
	fcancel()
	_ = cmd.Wait()
	if len(lines) < 7 || !strings.HasPrefix(lines[0], "starting container web of pod default/kc on node ") ||
		lines[4] != "ready" || !strings.Contains(lines[5], "default/kc web: heartbeat") || !strings.Contains(lines[6], "default/kc web: heartbeat") {
		t.Errorf("kubectl logs -f: %q", lines)
	}
	if _, stderr, code := run(nil, "", "logs", "kc", "-c", "web", "--previous"); code != 1 ||
		!strings.Contains(stderr, `previous terminated container "web" in pod "kc" not found`) {
		t.Errorf("kubectl logs --previous: exit %d, %q", code, stderr)
	}
	if _, stderr, code := run(nil, "", "logs", "kc", "-c", "nope"); code != 1 || !strings.Contains(stderr, "container nope is not valid for pod kc") {
		t.Errorf("kubectl logs -c nope: exit %d, %q", code, stderr)
	}

	for proto, env := range map[string][]string{
		"websocket": nil,
		"spdy":      {"KUBECTL_REMOTE_COMMAND_WEBSOCKETS=false", "KUBECTL_PORT_FORWARD_WEBSOCKETS=false"},
	} {
		for _, c := range []struct {
			stdin          string
			args           []string
			stdout, stderr string
			code           int
		}{
			{args: []string{"exec", "kc", "-c", "web", "--", "echo", "hello", "there"}, stdout: "hello there\n"},
			{args: []string{"exec", "kc", "-c", "web", "--", "false"}, stderr: "command terminated with exit code 1", code: 1},
			{args: []string{"exec", "kc", "-c", "web", "--", "nope"}, stderr: "nope: command not found", code: 127},
			{args: []string{"exec", "-i", "kc", "-c", "web", "--", "sh"}, stdin: "hostname\necho hi\nexit 5\n", stdout: "kc\nhi\n", code: 5},
			{args: []string{"exec", "kc", "-c", "nope", "--", "true"}, stderr: "container nope is not valid for pod kc", code: 1},
		} {
			stdout, stderr, code := run(env, c.stdin, c.args...)
			if code != c.code || stdout != c.stdout || !strings.Contains(stderr, c.stderr) {
				t.Errorf("%s kubectl %q: exit %d stdout %q stderr %q; want %d %q %q", proto, c.args, code, stdout, stderr, c.code, c.stdout, c.stderr)
			}
		}

		// port-forward, then HTTP through it.
		forward := func(port int) *exec.Cmd {
			return kubectl(ctx, env, "", "port-forward", "--address", "127.0.0.1", "pod/kc", fmt.Sprintf(":%d", port))
		}
		if body, stderr, err := forwardedGet(t, forward(9090)); body != "hello from default/kc port 9090: GET /x\n" {
			t.Errorf("%s port-forward: got %q, %v (stderr %q)", proto, body, err, stderr)
		}
		// A port the pod does not declare is refused. kubectl prints the
		// kubelet's message only when it arrives before the kubelet resets
		// the streams, a race real kubelets have too, so a few tries.
		var stderrs []string
		refused := false
		for try := 0; try < 5 && !refused; try++ {
			body, stderr, err := forwardedGet(t, forward(7070))
			if err == nil {
				t.Errorf("%s port-forward to a closed port: got %q", proto, body)
			}
			stderrs = append(stderrs, stderr)
			refused = strings.Contains(stderr, "error forwarding port 7070 to pod kc") && strings.Contains(stderr, "connection refused")
		}
		if !refused {
			t.Errorf("%s port-forward never reported the refusal: %q", proto, stderrs)
		}
	}
}

// forwardedGet starts a kubectl port-forward, sends one HTTP request
// through it and stops it. It returns the body, everything kubectl wrote
// to stderr, and the request's error.
func forwardedGet(t *testing.T, cmd *exec.Cmd) (string, string, error) {
	t.Helper()
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	stderr := &procs.Buffer{}
	cmd.Stderr = stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	local := forwardedPort(t, stdout)
	body := ""
	resp, err := http.Get(fmt.Sprintf("http://127.0.0.1:%s/x", local))
	if err == nil {
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		body = string(b)
	}
	_ = cmd.Process.Kill()
	_ = cmd.Wait()
	return body, stderr.String(), err
}

var forwardingRE = regexp.MustCompile(`Forwarding from 127\.0\.0\.1:(\d+) ->`)

// forwardedPort reads kubectl port-forward's output until it names its
// local port.
func forwardedPort(t *testing.T, stdout io.Reader) string {
	t.Helper()
	sc := bufio.NewScanner(stdout)
	for sc.Scan() {
		if m := forwardingRE.FindStringSubmatch(sc.Text()); m != nil {
			go func() { _, _ = io.Copy(io.Discard, stdout) }()
			return m[1]
		}
	}
	t.Fatalf("kubectl port-forward said no port: %v", sc.Err())
	return ""
}
