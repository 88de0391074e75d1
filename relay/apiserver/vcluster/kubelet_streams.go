package vcluster

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net"
	"net/http"
	"net/url"
	"sort"
	"strconv"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	apiproxy "k8s.io/apimachinery/pkg/util/proxy"
	"k8s.io/apiserver/pkg/util/proxy"
	"k8s.io/cri-streaming/pkg/streaming/portforward"
	"k8s.io/cri-streaming/pkg/streaming/remotecommand"
	"k8s.io/streaming/pkg/httpstream/wsstream"
	utilexec "k8s.io/utils/exec"

	"github.com/canopy-dev/canopy/relay/apiserver/kubeapi"
	"github.com/canopy-dev/canopy/relay/layout"
	"github.com/canopy-dev/canopy/relay/store"
)

// The kubelet's defaults for streams.
const (
	streamIdleTimeout     = 4 * time.Hour
	streamCreationTimeout = remotecommand.DefaultStreamCreationTimeout
	kubeletPort           = "10250"
)

// kubeletStreams is the streaming side of the simulated kubelets: it
// answers the connect subresources (kubeapi.Connector) as a node's
// kubelet, a pod's container ports and kube-apiserver's proxy would. It
// keeps nothing per pod: a stream builds what it needs from the pod when
// it opens and runs in the goroutines of its request until it closes.
type kubeletStreams struct {
	c *Cluster
}

var _ kubeapi.Connector = (*kubeletStreams)(nil)

// Connect implements kubeapi.Connector.
func (k *kubeletStreams) Connect(_ context.Context, req *kubeapi.ConnectRequest) (http.Handler, error) {
	switch o := req.Options.(type) {
	case *corev1.PodLogOptions:
		return k.logs(req.Pod, o)
	case *corev1.PodExecOptions:
		return k.exec(req.Pod, o)
	case *corev1.PodAttachOptions:
		return k.attach(req.Pod, o)
	case *corev1.PodPortForwardOptions:
		return k.portForward(req.Pod)
	case *corev1.PodProxyOptions:
		return k.proxyPod(req, o.Path)
	case *corev1.ServiceProxyOptions:
		return k.proxyService(req, o.Path)
	}
	return nil, apierrors.NewBadRequest(fmt.Sprintf("%s is not served", req.Subresource))
}

func (k *kubeletStreams) container(pod *corev1.Pod, name string) *container {
	return newContainer(pod, name, k.c.opts.LogInterval)
}

// logs answers pods/log as the kubelet's containerLogs: the instance's
// lines since SinceSeconds/SinceTime, the last TailLines of them, cut at
// LimitBytes; with Follow, then every new line, flushed, until the client
// goes or the container stops.
func (k *kubeletStreams) logs(pod *corev1.Pod, o *corev1.PodLogOptions) (http.Handler, error) {
	c := k.container(pod, o.Container)
	inst, err := c.logInstance(o.Previous)
	if err != nil {
		return nil, err
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/plain")
		start := c.startLines()
		now := time.Now()
		total := c.logCount(inst, start, now)
		var since time.Time
		switch {
		case o.SinceSeconds != nil:
			since = now.Add(-time.Duration(*o.SinceSeconds) * time.Second)
		case o.SinceTime != nil:
			since = o.SinceTime.Time
		}
		from := sort.Search(total, func(i int) bool { return !c.line(inst, start, total, i).at.Before(since) })
		if o.TailLines != nil && total-int(*o.TailLines) > from {
			from = total - int(*o.TailLines)
		}
		lw := &logWriter{w: w, timestamps: o.Timestamps, left: math.MaxInt64}
		if o.LimitBytes != nil {
			lw.left = *o.LimitBytes
		}
		for i := from; i < total; i++ {
			if !lw.write(c.line(inst, start, total, i)) {
				return
			}
		}
		http.NewResponseController(w).Flush() //nolint:errcheck // best effort
		if !o.Follow || !inst.finished.IsZero() {
			return
		}
		for i := total; ; i++ {
			l := c.line(inst, start, math.MaxInt, i)
			if !k.waitLine(r.Context(), c, inst, l.at) || !lw.write(l) {
				return
			}
			if http.NewResponseController(w).Flush() != nil {
				return
			}
		}
	}), nil
}

// waitLine waits until at, and reports whether the container instance
// still runs then (and the client is still there).
func (k *kubeletStreams) waitLine(ctx context.Context, c *container, inst instance, at time.Time) bool {
	t := time.NewTimer(time.Until(at))
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
	}
	obj, err := k.c.store.Get(store.Key{Space: layout.DefaultSpace, Resource: resPods, Namespace: c.pod.Namespace, Name: c.pod.Name})
	if err != nil {
		return false
	}
	var pod corev1.Pod
	if json.Unmarshal(obj.Data, &pod) != nil || pod.UID != c.pod.UID {
		return false
	}
	now, err := newContainer(&pod, c.spec.Name, c.interval).running()
	return err == nil && now.started.Equal(inst.started)
}

// logWriter writes log lines, with timestamps if asked, until left bytes
// are written.
type logWriter struct {
	w          io.Writer
	timestamps bool
	left       int64
}

func (l *logWriter) write(line logLine) bool {
	s := line.text + "\n"
	if l.timestamps {
		s = line.at.UTC().Format(time.RFC3339Nano) + " " + s
	}
	if int64(len(s)) > l.left {
		s = s[:l.left]
	}
	l.left -= int64(len(s))
	_, err := io.WriteString(l.w, s)
	return err == nil && l.left > 0
}

// streamOptions are the streams of an exec or attach, with the kubelet's
// rules: no stderr with a tty, at least one stream.
func streamOptions(stdin, stdout, stderr, tty bool) (*remotecommand.Options, error) {
	o := &remotecommand.Options{Stdin: stdin, Stdout: stdout, Stderr: stderr && !tty, TTY: tty}
	if !o.Stdin && !o.Stdout && !o.Stderr {
		return nil, apierrors.NewBadRequest("you must specify at least 1 of stdin, stdout, stderr")
	}
	return o, nil
}

// exec answers pods/exec: the command runs in the simulated container
// (container.go).
func (k *kubeletStreams) exec(pod *corev1.Pod, o *corev1.PodExecOptions) (http.Handler, error) {
	c := k.container(pod, o.Container)
	if _, err := c.running(); err != nil {
		return nil, err
	}
	if len(o.Command) == 0 {
		return nil, apierrors.NewBadRequest("you must specify at least one command for the container")
	}
	opts, err := streamOptions(o.Stdin, o.Stdout, o.Stderr, o.TTY)
	if err != nil {
		return nil, err
	}
	serve := func(w http.ResponseWriter, r *http.Request) {
		remotecommand.ServeExec(w, r, runtimeShim{c}, pod.Name, string(pod.UID), c.spec.Name, o.Command, opts,
			streamIdleTimeout, streamCreationTimeout, remotecommand.SupportedStreamingProtocols)
	}
	return remoteCommandHandler(pod, "exec", c.spec.Name, opts, serve), nil
}

// attach answers pods/attach: the container's log from now on, and what
// is sent to its stdin echoed back.
func (k *kubeletStreams) attach(pod *corev1.Pod, o *corev1.PodAttachOptions) (http.Handler, error) {
	c := k.container(pod, o.Container)
	inst, err := c.running()
	if err != nil {
		return nil, err
	}
	opts, err := streamOptions(o.Stdin, o.Stdout, o.Stderr, o.TTY)
	if err != nil {
		return nil, err
	}
	serve := func(w http.ResponseWriter, r *http.Request) {
		remotecommand.ServeAttach(w, r, attachShim{k, c, inst}, pod.Name, string(pod.UID), c.spec.Name, opts,
			streamIdleTimeout, streamCreationTimeout, remotecommand.SupportedStreamingProtocols)
	}
	return remoteCommandHandler(pod, "attach", c.spec.Name, opts, serve), nil
}

// remoteCommandHandler serves an exec or attach with serve, the kubelet's
// side (SPDY and WebSocket v4), and turns WebSocket v5, which kubelets
// leave to kube-apiserver, into SPDY toward serve as kube-apiserver does,
// over an in-process pipe.
func remoteCommandHandler(pod *corev1.Pod, sub, container string, opts *remotecommand.Options, serve http.HandlerFunc) http.Handler {
	loc := &url.URL{Scheme: "http", Host: net.JoinHostPort(pod.Spec.NodeName, kubeletPort),
		Path: "/" + sub + "/" + pod.Namespace + "/" + pod.Name + "/" + container}
	transport := pipeTransport(func(string) (http.Handler, error) { return serve, nil })
	translator := proxy.NewStreamTranslatorHandler(loc, transport, 0,
		proxy.Options{Stdin: opts.Stdin, Stdout: opts.Stdout, Stderr: opts.Stderr, Tty: opts.TTY})
	return proxy.NewTranslatingHandler(serve, translator, wsstream.IsWebSocketRequestWithStreamCloseProtocol)
}

// runtimeShim is the container runtime behind exec.
type runtimeShim struct{ c *container }

func (r runtimeShim) ExecInContainer(ctx context.Context, _, _, _ string, cmd []string, in io.Reader, out, errw io.WriteCloser, tty bool, resize <-chan remotecommand.TerminalSize, _ time.Duration) error {
	if code := r.c.exec(ctx, cmd, in, writerOrNil(out), writerOrNil(errw), tty, resize); code != 0 {
		return utilexec.CodeExitError{Err: fmt.Errorf("command terminated with exit code %d", code), Code: code}
	}
	return nil
}

// writerOrNil keeps a nil stream nil through the interface conversion.
func writerOrNil(w io.WriteCloser) io.Writer {
	if w == nil {
		return nil
	}
	return w
}

// attachShim is the container runtime behind attach.
type attachShim struct {
	k    *kubeletStreams
	c    *container
	inst instance
}

func (a attachShim) AttachContainer(ctx context.Context, _, _, _ string, in io.Reader, out, errw io.WriteCloser, tty bool, resize <-chan remotecommand.TerminalSize) error {
	var w io.Writer = io.Discard
	if out != nil {
		w = out
	} else if errw != nil {
		w = errw
	}
	if tty {
		w = crlf{w}
	}
	sw := &syncWriter{w: w}
	if resize != nil {
		go func() {
			for range resize {
			}
		}()
	}
	if in != nil {
		go func() {
			lines := newLineReader(in, tty, sw)
			for {
				line, err := lines.next()
				if err != nil {
					return
				}
				if !tty {
					fmt.Fprintln(sw, line)
				}
			}
		}()
	}
	start := a.c.startLines()
	for i := a.c.logCount(a.inst, start, time.Now()); ; i++ {
		l := a.c.line(a.inst, start, math.MaxInt, i)
		if !a.k.waitLine(ctx, a.c, a.inst, l.at) {
			return nil
		}
		if _, err := fmt.Fprintln(sw, l.text); err != nil {
			return nil
		}
	}
}

// syncWriter serializes writes from attach's two writers.
type syncWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (s *syncWriter) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.w.Write(p)
}

// portForward answers pods/portforward: every container port the pod
// declares is its tiny HTTP server (portserver.go). SPDY is served as the
// kubelet does; WebSocket tunneling (kubectl 1.31+) is carried over
// WebSocket as kube-apiserver does, toward the same kubelet side through
// an in-process pipe.
func (k *kubeletStreams) portForward(pod *corev1.Pod) (http.Handler, error) {
	if pod.Status.Phase != corev1.PodRunning {
		return nil, apierrors.NewBadRequest(fmt.Sprintf("pod %s is not running (phase %s)", pod.Name, phaseOf(pod)))
	}
	kubelet := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		opts, err := portforward.NewV4Options(r)
		if err != nil {
			writeStatus(w, http.StatusBadRequest, metav1.StatusReasonBadRequest, err.Error(), nil)
			return
		}
		portforward.ServePortForward(w, r, portForwarder{pod}, pod.Name, string(pod.UID), opts,
			streamIdleTimeout, streamCreationTimeout, portforward.SupportedProtocols)
	})
	loc := &url.URL{Scheme: "http", Host: net.JoinHostPort(pod.Spec.NodeName, kubeletPort), Path: "/portForward/" + pod.Namespace + "/" + pod.Name}
	upstream := apiproxy.NewUpgradeAwareHandler(loc, pipeTransport(func(string) (http.Handler, error) { return kubelet, nil }), false, true, statusResponder{})
	return proxy.NewTranslatingHandler(kubelet, proxy.NewTunnelingHandler(upstream), wsstream.IsWebSocketRequestWithTunnelingProtocol), nil
}

func phaseOf(pod *corev1.Pod) corev1.PodPhase {
	if pod.Status.Phase == "" {
		return corev1.PodPending
	}
	return pod.Status.Phase
}

type portForwarder struct{ pod *corev1.Pod }

func (p portForwarder) PortForward(_ context.Context, _, _ string, port int32, stream io.ReadWriteCloser) error {
	return forwardPort(p.pod, port, stream)
}

// proxyPod answers pods/proxy as kube-apiserver does, toward the pod's IP
// and the port named in the URL (by default its first declared one),
// where its tiny HTTP server answers.
func (k *kubeletStreams) proxyPod(req *kubeapi.ConnectRequest, path string) (http.Handler, error) {
	pod := req.Pod
	port := req.Port
	if port == "" {
		for _, c := range pod.Spec.Containers {
			if len(c.Ports) > 0 {
				port = strconv.Itoa(int(c.Ports[0].ContainerPort))
				break
			}
		}
	}
	if port == "" {
		port = "80"
	}
	return proxyTo(pod, req.Scheme, port, path)
}

// proxyService answers services/proxy as kube-apiserver does, toward a
// Ready pod the service selects (the first by name, where kube picks one
// of its endpoints), on the service port's target port.
func (k *kubeletStreams) proxyService(req *kubeapi.ConnectRequest, path string) (http.Handler, error) {
	svc := req.Service
	portName := req.Port
	if n, err := strconv.Atoi(portName); err == nil {
		found := false
		for _, p := range svc.Spec.Ports {
			if int(p.Port) == n {
				portName, found = p.Name, true
				break
			}
		}
		if !found {
			return nil, apierrors.NewServiceUnavailable(fmt.Sprintf("no service port %d found for service %q", n, svc.Name))
		}
	}
	noEndpoints := apierrors.NewServiceUnavailable(fmt.Sprintf("no endpoints available for service %q", svc.Name))
	var sp *corev1.ServicePort
	for i := range svc.Spec.Ports {
		if svc.Spec.Ports[i].Name == portName {
			sp = &svc.Spec.Ports[i]
		}
	}
	if sp == nil || len(svc.Spec.Selector) == 0 {
		return nil, noEndpoints
	}
	l, err := k.c.store.List(store.ListOptions{Space: layout.DefaultSpace, Resource: resPods, Namespace: svc.Namespace, Label: labels.SelectorFromSet(svc.Spec.Selector)})
	if err != nil {
		return nil, err
	}
	for _, obj := range l.Items {
		var pod corev1.Pod
		if err := json.Unmarshal(obj.Data, &pod); err != nil || !podReady(&pod) || pod.DeletionTimestamp != nil {
			continue
		}
		if port, ok := targetPort(&pod, sp); ok {
			return proxyTo(&pod, req.Scheme, strconv.Itoa(int(port)), path)
		}
	}
	return nil, noEndpoints
}

// targetPort resolves a service port's target port on pod.
func targetPort(pod *corev1.Pod, sp *corev1.ServicePort) (int32, bool) {
	switch {
	case sp.TargetPort.StrVal != "":
		for _, c := range pod.Spec.Containers {
			for _, p := range c.Ports {
				if p.Name == sp.TargetPort.StrVal {
					return p.ContainerPort, true
				}
			}
		}
		return 0, false
	case sp.TargetPort.IntVal != 0:
		return sp.TargetPort.IntVal, true
	}
	return sp.Port, true
}

// proxyTo proxies to pod's IP and port, as kube-apiserver's pod proxy
// does (errors reaching it are a 503), over an in-process pipe to the
// pod's tiny HTTP server on that port; a port it does not declare refuses
// the connection.
func proxyTo(pod *corev1.Pod, scheme, port, path string) (http.Handler, error) {
	ip := pod.Status.PodIP
	if ip == "" {
		return nil, apierrors.NewBadRequest("address not allowed")
	}
	if scheme == "" {
		scheme = "http"
	}
	loc := &url.URL{Scheme: scheme, Host: net.JoinHostPort(ip, port), Path: path}
	transport := pipeTransport(func(addr string) (http.Handler, error) {
		_, p, _ := net.SplitHostPort(addr)
		n, err := strconv.ParseInt(p, 10, 32)
		if err != nil || !declaresPort(pod, int32(n)) {
			return nil, refused("dial", "tcp", addr)
		}
		return portHandler(pod, int32(n)), nil
	})
	return apiproxy.NewUpgradeAwareHandler(loc, transport, true, false, statusResponder{}), nil
}

// statusResponder answers a proxy's error as a kube Status.
type statusResponder struct{}

func (statusResponder) Error(w http.ResponseWriter, _ *http.Request, err error) {
	var st apierrors.APIStatus
	if !errors.As(err, &st) {
		st = apierrors.NewInternalError(err)
	}
	s := st.Status()
	writeStatus(w, int(s.Code), s.Reason, s.Message, s.Details)
}
