package vcluster

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/httpstream"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/portforward"
	"k8s.io/client-go/tools/remotecommand"
	"k8s.io/client-go/transport/spdy"
	"k8s.io/client-go/util/exec"
	"k8s.io/utils/ptr"

	"github.com/canopy-dev/canopy/test/poll"
	"github.com/canopy-dev/canopy/test/procs"
)

const testLogInterval = 50 * time.Millisecond

// servedCluster starts a cluster with a short log interval and serves its
// API on 127.0.0.1, as kubectl would reach it through a proxy; it returns
// a client and the config that reaches the listener.
func servedCluster(t *testing.T, opts Options) (*Cluster, kubernetes.Interface, *rest.Config) {
	t.Helper()
	if opts.LogInterval == 0 {
		opts.LogInterval = testLogInterval
	}
	c, _ := startCluster(t, opts)
	srv := httptest.NewServer(c.Handler())
	t.Cleanup(srv.Close)
	cfg := &rest.Config{Host: srv.URL, QPS: 1000, Burst: 1000}
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return c, cs, cfg
}

// webPod is a pod of two containers, the first with two ports and env.
func webPod(name string) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default", Labels: map[string]string{"app": name}},
		Spec: corev1.PodSpec{Containers: []corev1.Container{
			{Name: "web", Image: "nginx:1.27", Env: []corev1.EnvVar{{Name: "GREETING", Value: "hi there"}},
				Ports: []corev1.ContainerPort{{Name: "http", ContainerPort: 8080}, {ContainerPort: 9090}}},
			{Name: "sidecar", Image: "busybox:1.36"},
		}},
	}
}

// runningPod creates pod and waits until it runs.
func runningPod(t *testing.T, cs kubernetes.Interface, pod *corev1.Pod) *corev1.Pod {
	t.Helper()
	ctx := context.Background()
	if _, err := cs.CoreV1().Pods(pod.Namespace).Create(ctx, pod, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	var got *corev1.Pod
	poll.Until(t, "pod "+pod.Name+" running", func() error {
		p, err := cs.CoreV1().Pods(pod.Namespace).Get(ctx, pod.Name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if p.Status.Phase != corev1.PodRunning {
			return fmt.Errorf("phase %q", p.Status.Phase)
		}
		got = p
		return nil
	})
	return got
}

// wantStatus checks that err is a kube Status with code and a message
// containing msg.
func wantStatus(t *testing.T, what string, err error, code int32, msg string) {
	t.Helper()
	var st apierrors.APIStatus
	if !errors.As(err, &st) {
		t.Fatalf("%s: got %v, want a %d Status", what, err, code)
	}
	if s := st.Status(); s.Code != code || !strings.Contains(s.Message, msg) {
		t.Fatalf("%s: got %d %q, want %d with %q", what, s.Code, s.Message, code, msg)
	}
}

func TestPodLogs(t *testing.T) {
	_, cs, _ := servedCluster(t, Options{})
	pod := runningPod(t, cs, webPod("logs"))
	ctx := context.Background()
	pods := cs.CoreV1().Pods("default")

	// -f: the start lines, then a heartbeat every interval, until the
	// client goes.
	fctx, cancel := context.WithCancel(ctx)
	rc, err := pods.GetLogs("logs", &corev1.PodLogOptions{Container: "web", Follow: true}).Stream(fctx)
	if err != nil {
		t.Fatal(err)
	}
	sc := bufio.NewScanner(rc)
	want := []string{
		"starting container web of pod default/logs on node " + pod.Spec.NodeName,
		"image nginx:1.27", "serving HTTP on port 8080", "serving HTTP on port 9090", "ready",
	}
	var got []string
	for len(got) < len(want)+3 && sc.Scan() {
		got = append(got, sc.Text())
	}
	cancel()
	rc.Close()
	if len(got) < len(want)+3 {
		t.Fatalf("followed log ended after %q: %v", got, sc.Err())
	}
	for i, w := range want {
		if got[i] != w {
			t.Fatalf("line %d: got %q, want %q", i, got[i], w)
		}
	}
	first := len(got) - 3
	var n int
	if _, err := fmt.Sscanf(got[first], "default/logs web: heartbeat %d", &n); err != nil {
		t.Fatalf("line %d: %q: %v", first, got[first], err)
	}
	for i := 1; i < 3; i++ {
		if w := fmt.Sprintf("default/logs web: heartbeat %d", n+i); got[first+i] != w {
			t.Fatalf("line %d: got %q, want %q", first+i, got[first+i], w)
		}
	}

	// --tail, --timestamps, --limit-bytes.
	b, err := doRaw(ctx, pods.GetLogs("logs", &corev1.PodLogOptions{Container: "web", TailLines: ptr.To[int64](2), Timestamps: true}))
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSuffix(string(b), "\n"), "\n")
	if len(lines) != 2 {
		t.Fatalf("--tail 2: %q", b)
	}
	for _, l := range lines {
		ts, text, _ := strings.Cut(l, " ")
		if _, err := time.Parse(time.RFC3339Nano, ts); err != nil || !strings.Contains(text, "heartbeat") {
			t.Fatalf("--timestamps line %q: %v", l, err)
		}
	}
	b, err = doRaw(ctx, pods.GetLogs("logs", &corev1.PodLogOptions{Container: "sidecar", LimitBytes: ptr.To[int64](10)}))
	if err != nil || string(b) != "starting c" {
		t.Fatalf("--limit-bytes 10: %q, %v", b, err)
	}

	// Errors: as kube-apiserver and the kubelet answer.
	_, err = doRaw(ctx, pods.GetLogs("logs", &corev1.PodLogOptions{}))
	wantStatus(t, "no container", err, 400, "a container name must be specified for pod logs, choose one of: [web sidecar]")
	_, err = doRaw(ctx, pods.GetLogs("logs", &corev1.PodLogOptions{Container: "nope"}))
	wantStatus(t, "unknown container", err, 400, "container nope is not valid for pod logs")
	_, err = doRaw(ctx, pods.GetLogs("logs", &corev1.PodLogOptions{Container: "web", Previous: true}))
	wantStatus(t, "--previous", err, 400, `previous terminated container "web" in pod "logs" not found`)
	_, err = doRaw(ctx, pods.GetLogs("logs", &corev1.PodLogOptions{Container: "web", TailLines: ptr.To[int64](-1)}))
	wantStatus(t, "--tail -1", err, 422, "tailLines")
	_, err = doRaw(ctx, pods.GetLogs("gone", &corev1.PodLogOptions{}))
	wantStatus(t, "missing pod", err, 404, `pods "gone" not found`)
}

// executors are the two protocols kubectl speaks to exec: WebSocket v5
// first, SPDY as its fallback (and older clients).
func executors(t *testing.T, cfg *rest.Config, cs kubernetes.Interface, pod string, opts *corev1.PodExecOptions) map[string]remotecommand.Executor {
	t.Helper()
	return streamExecutors(t, cfg, cs, pod, "exec", opts)
}

// streamExecutors are executors of an exec or attach (opts).
func streamExecutors(t *testing.T, cfg *rest.Config, cs kubernetes.Interface, pod, sub string, opts runtime.Object) map[string]remotecommand.Executor {
	t.Helper()
	u := cs.CoreV1().RESTClient().Post().Resource("pods").Namespace("default").Name(pod).SubResource(sub).
		VersionedParams(opts, scheme.ParameterCodec).URL()
	ws, err := remotecommand.NewWebSocketExecutor(cfg, "GET", u.String())
	if err != nil {
		t.Fatal(err)
	}
	sp, err := remotecommand.NewSPDYExecutor(cfg, "POST", u)
	if err != nil {
		t.Fatal(err)
	}
	return map[string]remotecommand.Executor{"websocket": ws, "spdy": sp}
}

// execIn runs cmd in the pod's web container over both protocols and
// checks its output and exit code.
func TestPodExec(t *testing.T) {
	_, cs, cfg := servedCluster(t, Options{})
	runningPod(t, cs, webPod("exec"))
	ctx := context.Background()
	cases := []struct {
		cmd            []string
		stdin          string
		tty            bool
		stdout, stderr string
		code           int
	}{
		{cmd: []string{"echo", "hello", "world"}, stdout: "hello world\n"},
		{cmd: []string{"hostname"}, stdout: "exec\n"},
		{cmd: []string{"cat", "/etc/hostname"}, stdout: "exec\n"},
		{cmd: []string{"env"}, stdout: "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin\nHOSTNAME=exec\nGREETING=hi there\nHOME=/root\n"},
		{cmd: []string{"true"}},
		{cmd: []string{"false"}, code: 1},
		{cmd: []string{"sleep", "0.05"}},
		{cmd: []string{"nope", "x"}, stderr: "nope: command not found\n", code: 127},
		{cmd: []string{"sh", "-c", "echo a; exit 4"}, stdout: "a\n", code: 4},
		{cmd: []string{"cat"}, stdin: "piped\n", stdout: "piped\n"},
		{cmd: []string{"sh"}, stdin: "echo 'one two'\nhostname\nexit 3\necho never\n", stdout: "one two\nexec\n", code: 3},
		{cmd: []string{"sh"}, stdin: "nope\n", stderr: "nope: command not found\n", code: 127},
		{cmd: []string{"bash"}, stdin: "echo hi\rexit\r", tty: true, stdout: "root@exec:/# echo hi\r\nhi\r\nroot@exec:/# exit\r\n"},
	}
	for _, tc := range cases {
		opts := &corev1.PodExecOptions{Container: "web", Command: tc.cmd, Stdin: tc.stdin != "", Stdout: true, Stderr: !tc.tty, TTY: tc.tty}
		for proto, ex := range executors(t, cfg, cs, "exec", opts) {
			var stdout, stderr bytes.Buffer
			so := remotecommand.StreamOptions{Stdout: &stdout, Tty: tc.tty}
			if !tc.tty {
				so.Stderr = &stderr
			}
			if tc.stdin != "" {
				so.Stdin = strings.NewReader(tc.stdin)
			}
			err := ex.StreamWithContext(ctx, so)
			code := 0
			var ce exec.CodeExitError
			if errors.As(err, &ce) {
				code = ce.Code
			} else if err != nil {
				t.Fatalf("%s %q: %v", proto, tc.cmd, err)
			}
			if code != tc.code || stdout.String() != tc.stdout || stderr.String() != tc.stderr {
				t.Errorf("%s %q: got code %d stdout %q stderr %q, want %d %q %q", proto, tc.cmd, code, stdout.String(), stderr.String(), tc.code, tc.stdout, tc.stderr)
			}
		}
	}

	// A terminal's size reaches the container, and resizing does no harm.
	opts := &corev1.PodExecOptions{Container: "web", Command: []string{"sh"}, Stdin: true, Stdout: true, TTY: true}
	for proto, ex := range executors(t, cfg, cs, "exec", opts) {
		sizes := &sizeQueue{ch: make(chan *remotecommand.TerminalSize, 2)}
		sizes.ch <- &remotecommand.TerminalSize{Width: 100, Height: 30}
		in, inw := io.Pipe()
		out := &procs.Buffer{}
		done := make(chan error, 1)
		go func() {
			done <- ex.StreamWithContext(ctx, remotecommand.StreamOptions{Stdin: in, Stdout: out, Tty: true, TerminalSizeQueue: sizes})
		}()
		poll.True(t, proto+" prompt", func() bool { return strings.Contains(out.String(), "# ") })
		// The size is read by the container's side as it arrives: ask
		// until it has.
		poll.Until(t, proto+" stty size", func() error {
			fmt.Fprint(inw, "stty size\r")
			if s := out.String(); !strings.Contains(s, "30 100\r\n") {
				return fmt.Errorf("output %q", s)
			}
			return nil
		})
		sizes.ch <- &remotecommand.TerminalSize{Width: 120, Height: 40}
		poll.Until(t, proto+" resized", func() error {
			fmt.Fprint(inw, "stty size\r")
			if s := out.String(); !strings.Contains(s, "40 120\r\n") {
				return fmt.Errorf("output %q", s)
			}
			return nil
		})
		fmt.Fprint(inw, "exit 0\r")
		if err := <-done; err != nil {
			t.Fatalf("%s tty shell: %v", proto, err)
		}
		close(sizes.ch)
		inw.Close()
	}

	// Errors before the upgrade are kube Statuses.
	for _, tc := range []struct {
		opts *corev1.PodExecOptions
		msg  string
	}{
		{&corev1.PodExecOptions{Container: "nope", Command: []string{"true"}, Stdout: true}, "container nope is not valid for pod exec"},
		{&corev1.PodExecOptions{Command: []string{"true"}, Stdout: true}, "a container name must be specified for pod exec"},
	} {
		for proto, ex := range executors(t, cfg, cs, "exec", tc.opts) {
			err := ex.StreamWithContext(ctx, remotecommand.StreamOptions{Stdout: io.Discard})
			if err == nil || !strings.Contains(err.Error(), tc.msg) {
				t.Errorf("%s: got %v, want %q", proto, err, tc.msg)
			}
		}
	}
}

type sizeQueue struct {
	ch chan *remotecommand.TerminalSize
}

func (q *sizeQueue) Next() *remotecommand.TerminalSize { return <-q.ch }

func TestPodAttach(t *testing.T) {
	_, cs, cfg := servedCluster(t, Options{})
	runningPod(t, cs, webPod("attach"))
	opts := &corev1.PodAttachOptions{Container: "web", Stdin: true, Stdout: true, Stderr: true}
	for proto, ex := range streamExecutors(t, cfg, cs, "attach", "attach", opts) {
		ctx, cancel := context.WithCancel(context.Background())
		in, inw := io.Pipe()
		out := &procs.Buffer{}
		done := make(chan error, 1)
		go func() {
			done <- ex.StreamWithContext(ctx, remotecommand.StreamOptions{Stdin: in, Stdout: out, Stderr: io.Discard})
		}()
		go fmt.Fprint(inw, "typed line\n")
		poll.True(t, proto+" attach output", func() bool {
			s := out.String()
			return strings.Contains(s, "typed line\n") && strings.Count(s, "default/attach web: heartbeat") >= 2
		})
		cancel()
		inw.Close()
		<-done
	}
}

// forwarders are the two ways kubectl port-forwards: WebSocket tunneling
// first (1.31+), SPDY as its fallback.
func forwarders(t *testing.T, cfg *rest.Config, cs kubernetes.Interface, pod string) map[string]func() (httpstream.Dialer, error) {
	t.Helper()
	u := cs.CoreV1().RESTClient().Post().Resource("pods").Namespace("default").Name(pod).SubResource("portforward").URL()
	return map[string]func() (httpstream.Dialer, error){
		"spdy": func() (httpstream.Dialer, error) {
			tr, up, err := spdy.RoundTripperFor(cfg)
			if err != nil {
				return nil, err
			}
			return spdy.NewDialer(up, &http.Client{Transport: tr}, "POST", u), nil
		},
		"websocket": func() (httpstream.Dialer, error) {
			return portforward.NewSPDYOverWebsocketDialer(u, cfg)
		},
	}
}

// forward runs a port-forward from a free local port to remote and
// returns the local port; it stops when the test ends.
func forward(t *testing.T, dialer httpstream.Dialer, remote int) uint16 {
	t.Helper()
	stop, ready := make(chan struct{}), make(chan struct{})
	fw, err := portforward.NewOnAddresses(dialer, []string{"127.0.0.1"}, []string{fmt.Sprintf("0:%d", remote)}, stop, ready, io.Discard, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- fw.ForwardPorts() }()
	t.Cleanup(func() {
		close(stop)
		<-done
	})
	select {
	case <-ready:
	case err := <-done:
		t.Fatalf("port-forward: %v", err)
	}
	ports, err := fw.GetPorts()
	if err != nil {
		t.Fatal(err)
	}
	return ports[0].Local
}

func TestPodPortForward(t *testing.T) {
	_, cs, cfg := servedCluster(t, Options{})
	runningPod(t, cs, webPod("pf"))
	for proto, dial := range forwarders(t, cfg, cs, "pf") {
		d, err := dial()
		if err != nil {
			t.Fatal(err)
		}
		local := forward(t, d, 9090)
		for _, path := range []string{"/x", "/y?z=1"} {
			body := httpGet(t, fmt.Sprintf("http://127.0.0.1:%d%s", local, path))
			if want := "hello from default/pf port 9090: GET " + path + "\n"; body != want {
				t.Errorf("%s GET %s: got %q, want %q", proto, path, body, want)
			}
		}

		// A port the pod does not declare: the kubelet's refusal.
		d, err = dial()
		if err != nil {
			t.Fatal(err)
		}
		// (client-go logs the kubelet's error; TestKubectl checks its words.)
		local = forward(t, d, 7070)
		if resp, err := http.Get(fmt.Sprintf("http://127.0.0.1:%d/", local)); err == nil {
			resp.Body.Close()
			t.Errorf("%s GET through a closed port: got %s", proto, resp.Status)
		}
	}
}

// doRaw sends r and returns its body, and its error as a kube Status
// when it is one.
func doRaw(ctx context.Context, r *rest.Request) ([]byte, error) {
	res := r.Do(ctx)
	b, _ := res.Raw()
	return b, res.Error()
}

func httpGet(t *testing.T, u string) string {
	t.Helper()
	resp, err := http.Get(u)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func TestProxy(t *testing.T) {
	_, cs, _ := servedCluster(t, Options{})
	runningPod(t, cs, webPod("px"))
	ctx := context.Background()
	svc := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "default"},
		Spec: corev1.ServiceSpec{Selector: map[string]string{"app": "px"}, Ports: []corev1.ServicePort{
			{Name: "http", Port: 80, TargetPort: intstr.FromString("http")},
			{Name: "metrics", Port: 91, TargetPort: intstr.FromInt32(9090)},
		}},
	}
	if _, err := cs.CoreV1().Services("default").Create(ctx, svc, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	raw := func(path string) (string, error) {
		b, err := doRaw(ctx, cs.CoreV1().RESTClient().Get().AbsPath(path).Param("q", "1"))
		return string(b), err
	}
	for path, want := range map[string]string{
		"/api/v1/namespaces/default/pods/px/proxy/a/b":         "hello from default/px port 8080: GET /a/b?q=1\n",
		"/api/v1/namespaces/default/pods/px:9090/proxy/":       "hello from default/px port 9090: GET /?q=1\n",
		"/api/v1/namespaces/default/services/web/proxy/x":      "",
		"/api/v1/namespaces/default/services/web:http/proxy/x": "hello from default/px port 8080: GET /x?q=1\n",
		"/api/v1/namespaces/default/services/web:91/proxy/m":   "hello from default/px port 9090: GET /m?q=1\n",
	} {
		got, err := raw(path)
		if want == "" {
			// Two named ports: the URL must name one, as with kube.
			wantStatus(t, path, err, 503, `no endpoints available for service "web"`)
			continue
		}
		if err != nil || got != want {
			t.Errorf("GET %s: got %q, %v; want %q", path, got, err, want)
		}
	}
	_, err := raw("/api/v1/namespaces/default/pods/px:7070/proxy/")
	wantStatus(t, "closed port", err, 503, "error trying to reach service: dial tcp")
	_, err = raw("/api/v1/namespaces/default/services/web:99/proxy/")
	wantStatus(t, "unknown service port", err, 503, `no service port 99 found for service "web"`)

	// Other methods reach the pod too.
	b, err := doRaw(ctx, cs.CoreV1().RESTClient().Post().AbsPath("/api/v1/namespaces/default/pods/px/proxy/p").Body([]byte("x")))
	if string(b) != "hello from default/px port 8080: POST /p\n" || err != nil {
		t.Errorf("POST through proxy: %q, %v", b, err)
	}
}

// TestNotRunning checks the answers about a pod that has a node but has
// not started (kubeapi's tests cover a pod without a node).
func TestNotRunning(t *testing.T) {
	_, cs, cfg := servedCluster(t, Options{ReadyDelay: time.Hour})
	ctx := context.Background()
	pods := cs.CoreV1().Pods("default")
	pending := webPod("pending")
	if _, err := pods.Create(ctx, pending, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	poll.Until(t, "pending scheduled", func() error {
		p, err := pods.Get(ctx, "pending", metav1.GetOptions{})
		if err == nil && p.Spec.NodeName == "" {
			err = errors.New("not scheduled")
		}
		return err
	})
	_, err := doRaw(ctx, pods.GetLogs("pending", &corev1.PodLogOptions{Container: "web"}))
	wantStatus(t, "logs", err, 400, `container "web" in pod "pending" is waiting to start: ContainerCreating`)
	opts := &corev1.PodExecOptions{Container: "web", Command: []string{"true"}, Stdout: true}
	for proto, ex := range executors(t, cfg, cs, "pending", opts) {
		err := ex.StreamWithContext(ctx, remotecommand.StreamOptions{Stdout: io.Discard})
		if err == nil || !strings.Contains(err.Error(), `container "web" in pod "pending" is waiting to start`) {
			t.Errorf("%s exec: got %v", proto, err)
		}
	}
	_, err = doRaw(ctx, cs.CoreV1().RESTClient().Get().AbsPath("/api/v1/namespaces/default/pods/pending/proxy/"))
	wantStatus(t, "proxy", err, 400, "address not allowed")

}

// TestStreamsThroughTransport carries the streams through the cluster's
// in-process transport behind a reverse proxy, as a proxy in front of
// many virtual clusters would: upgrades pass through InprocTransport.
func TestStreamsThroughTransport(t *testing.T) {
	c, _ := startCluster(t, Options{LogInterval: testLogInterval})
	target, _ := url.Parse(c.RESTConfig().Host)
	rp := httputil.NewSingleHostReverseProxy(target)
	rp.Transport = c.Transport()
	srv := httptest.NewServer(rp)
	t.Cleanup(srv.Close)
	cfg := &rest.Config{Host: srv.URL}
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	runningPod(t, cs, webPod("tr"))
	ctx := context.Background()

	opts := &corev1.PodExecOptions{Container: "web", Command: []string{"sh"}, Stdin: true, Stdout: true, Stderr: true}
	for proto, ex := range executors(t, cfg, cs, "tr", opts) {
		var stdout, stderr bytes.Buffer
		err := ex.StreamWithContext(ctx, remotecommand.StreamOptions{Stdin: strings.NewReader("hostname\nnope\nexit 7\n"), Stdout: &stdout, Stderr: &stderr})
		var ce exec.CodeExitError
		if !errors.As(err, &ce) || ce.Code != 7 || stdout.String() != "tr\n" || stderr.String() != "nope: command not found\n" {
			t.Errorf("%s exec through the transport: %v, %q, %q", proto, err, stdout.String(), stderr.String())
		}
	}
	for proto, dial := range forwarders(t, cfg, cs, "tr") {
		d, err := dial()
		if err != nil {
			t.Fatal(err)
		}
		local := forward(t, d, 8080)
		if body := httpGet(t, fmt.Sprintf("http://127.0.0.1:%d/t", local)); body != "hello from default/tr port 8080: GET /t\n" {
			t.Errorf("%s port-forward through the transport: %q", proto, body)
		}
	}
	rc, err := cs.CoreV1().Pods("default").GetLogs("tr", &corev1.PodLogOptions{Container: "web", Follow: true, TailLines: ptr.To[int64](0)}).Stream(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	sc := bufio.NewScanner(rc)
	if !sc.Scan() || !strings.Contains(sc.Text(), "default/tr web: heartbeat") {
		t.Errorf("followed log through the transport: %q, %v", sc.Text(), sc.Err())
	}
}
