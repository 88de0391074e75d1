package syncer

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"

	"github.com/canopy-dev/canopy/relay/layout"
	"github.com/canopy-dev/canopy/relay/store"
	"github.com/canopy-dev/canopy/test/kubecluster"
	"github.com/canopy-dev/canopy/test/poll"
	"github.com/canopy-dev/canopy/topology/api/v1alpha1"
)

var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

// testCluster is a cluster a test body runs against: a virtual cluster or
// a real kube-apiserver. The test's own client goes straight to it; the
// syncer's goes through a gate the test can close (the API then does not
// answer).
type testCluster struct {
	admin *rest.Config
	// syncerConfig returns the config the syncer uses, through the gate.
	syncerConfig func() *rest.Config
	// setDown closes (true) or opens the gate.
	setDown func(bool)
	// namespaceGC: deleted namespaces go away (a namespace controller
	// runs); otherwise they stay Terminating.
	namespaceGC bool
}

// harness runs one syncer over an in-memory store against a testCluster.
type harness struct {
	t      testing.TB
	c      *testCluster
	self   string
	st     *store.Store
	admin  dynamic.Interface
	reqs   *requestLog
	s      *Syncer
	stop   func()
	cursor uint64
	// tweak, when set, changes the Config of the syncers start runs.
	tweak func(*Config)
}

func newHarness(t testing.TB, c *testCluster, self string) *harness {
	t.Helper()
	return newHarnessStore(t, c, self, store.Options{})
}

// newHarnessStore is newHarness with a store made with opts.
func newHarnessStore(t testing.TB, c *testCluster, self string, opts store.Options) *harness {
	t.Helper()
	st := store.New(opts)
	st.SetLog(store.NewMemLog(st))
	t.Cleanup(st.Close)
	admin, err := dynamic.NewForConfig(c.admin)
	if err != nil {
		t.Fatal(err)
	}
	h := &harness{t: t, c: c, self: self, st: st, admin: admin, reqs: &requestLog{}}
	// This destination's inventory, as the root sends it.
	h.put(
		syncTargetObj(self, "site", map[string]any{"zone": "z-" + self, "replicas": "2"}),
		locationObj("site", map[string]any{"region": "eu"}),
	)
	return h
}

// start runs a new Syncer on the harness's store.
func (h *harness) start() *Syncer {
	h.t.Helper()
	rc := h.c.syncerConfig()
	rc.Wrap(h.reqs.wrap)
	cfg := Config{Name: h.self, Store: h.st, Inbox: "inbox", Outbox: "outbox", Cluster: rc, Logger: quiet,
		RetryMin: 20 * time.Millisecond, RetryMax: 500 * time.Millisecond, ProbeInterval: 200 * time.Millisecond,
		RequestTimeout: 5 * time.Second, StatusWindow: 50 * time.Millisecond}
	if h.tweak != nil {
		h.tweak(&cfg)
	}
	s, err := New(cfg)
	if err != nil {
		h.t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Start(ctx) }()
	var once sync.Once
	h.s = s
	h.stop = func() {
		once.Do(func() {
			cancel()
			if err := <-done; err != nil {
				h.t.Errorf("syncer stopped with: %v", err)
			}
		})
	}
	h.t.Cleanup(h.stop)
	return s
}

// resourceOf maps the kinds the tests use to their inbox resource.
func resourceOf(kind string) store.Resource {
	switch kind {
	case "ConfigMap":
		return resConfigMaps
	case "Namespace":
		return resNamespaces
	case "Deployment":
		return resDeployments
	case "CustomResourceDefinition":
		return store.Resource{Group: "apiextensions.k8s.io", Resource: "customresourcedefinitions"}
	case "Gadget":
		return store.Resource{Group: "test.canopy.dev", Resource: "gadgets"}
	case "SyncTarget":
		return resTargets
	case "Location":
		return resLocations
	case "Customizer":
		return resCustomizers
	case "EdgePlacement":
		return placementsResource
	case "StatusCollector":
		return collectorsResource
	case "Job":
		return store.Resource{Group: "batch", Resource: "jobs"}
	}
	panic("unknown kind " + kind)
}

func keyOf(obj map[string]any) store.Key {
	u := unstructured.Unstructured{Object: obj}
	return store.Key{Space: "inbox", Resource: resourceOf(u.GetKind()), Namespace: u.GetNamespace(), Name: u.GetName()}
}

// put writes objects into the inbox in one Txn, annotated for this
// destination as the root annotates them, and moves the cursor, as the
// tree's Receiver does.
func (h *harness) put(objs ...map[string]any) {
	h.t.Helper()
	var ops []store.Op
	for _, obj := range objs {
		u := unstructured.Unstructured{Object: obj}
		ann := u.GetAnnotations()
		if ann == nil {
			ann = map[string]string{}
		}
		ann[v1alpha1.DestinationsAnnotation] = h.self
		ann[v1alpha1.SourceAnnotation] = "default"
		u.SetAnnotations(ann)
		data, err := json.Marshal(obj)
		if err != nil {
			h.t.Fatal(err)
		}
		k := keyOf(obj)
		op := store.Op{Type: store.OpCreate, Key: k, Data: data}
		if _, err := h.st.Get(k); err == nil {
			op.Type = store.OpUpdate
		}
		ops = append(ops, op)
	}
	h.txn(ops)
}

// remove deletes objects from the inbox in one Txn.
func (h *harness) remove(objs ...map[string]any) {
	h.t.Helper()
	var ops []store.Op
	for _, obj := range objs {
		ops = append(ops, store.Op{Type: store.OpDelete, Key: keyOf(obj)})
	}
	h.txn(ops)
}

func (h *harness) txn(ops []store.Op) {
	h.t.Helper()
	h.cursor++
	ck := layout.DownsyncCursor("inbox")
	data, _ := json.Marshal(layout.Cursor{APIVersion: "tree.canopy.dev/v1alpha1", Kind: "Cursor",
		Metadata: map[string]any{"name": ck.Name}, Revision: h.cursor})
	op := store.Op{Type: store.OpCreate, Key: ck, Data: data}
	if _, err := h.st.Get(ck); err == nil {
		op.Type = store.OpUpdate
	}
	if _, err := h.st.Txn(context.Background(), append(ops, op)...); err != nil {
		h.t.Fatal(err)
	}
}

// status reads the DestinationStatus from the outbox.
func (h *harness) status() (DestinationStatus, error) {
	var ds DestinationStatus
	o, err := h.st.Get(store.Key{Space: "outbox", Resource: DestinationStatusResource, Name: h.self})
	if err != nil {
		return ds, err
	}
	return ds, json.Unmarshal(o.Data, &ds)
}

// outboxKeys lists the outbox's objects but the status, as KeyStrings.
func (h *harness) outboxKeys() []string {
	lr, _ := h.st.List(store.ListOptions{Space: "outbox"})
	var out []string
	for _, o := range lr.Items {
		if o.Key.Resource != DestinationStatusResource {
			k := o.Key
			k.Space = ""
			out = append(out, KeyString(k))
		}
	}
	return out
}

// waitStatus waits until the DestinationStatus satisfies ok.
func (h *harness) waitStatus(what string, ok func(DestinationState) bool) DestinationState {
	h.t.Helper()
	var ds DestinationStatus
	poll.Until(h.t, what, func() error {
		var err error
		if ds, err = h.status(); err != nil {
			return err
		}
		if !ok(ds.Status) {
			return fmt.Errorf("status %+v", ds.Status)
		}
		return nil
	})
	return ds.Status
}

func (h *harness) get(gvr schema.GroupVersionResource, ns, name string) (*unstructured.Unstructured, error) {
	return h.admin.Resource(gvr).Namespace(ns).Get(context.Background(), name, metav1.GetOptions{})
}

// gone waits until an object is deleted (or, for a namespace without a
// namespace controller, being deleted).
func (h *harness) gone(gvr schema.GroupVersionResource, ns, name string) {
	h.t.Helper()
	poll.Until(h.t, fmt.Sprintf("%s %s/%s deleted", gvr.Resource, ns, name), func() error {
		u, err := h.get(gvr, ns, name)
		switch {
		case apierrors.IsNotFound(err):
			return nil
		case err != nil:
			return err
		case u.GetDeletionTimestamp() != nil && (!h.c.namespaceGC || gvr.Resource != "namespaces"):
			return nil
		}
		return errors.New("still there")
	})
}

// requestLog records the syncer's requests but watches, lists and gets:
// "PATCH /apis/apps/v1/namespaces/shop/deployments/web 200".
type requestLog struct {
	mu      sync.Mutex
	entries []string
}

func (l *requestLog) wrap(rt http.RoundTripper) http.RoundTripper {
	return roundTripper(func(req *http.Request) (*http.Response, error) {
		resp, err := rt.RoundTrip(req)
		if req.Method != http.MethodGet {
			code := "error"
			if err == nil {
				code = fmt.Sprint(resp.StatusCode)
			}
			l.mu.Lock()
			l.entries = append(l.entries, req.Method+" "+req.URL.Path+" "+code)
			l.mu.Unlock()
		}
		return resp, err
	})
}

// writes returns the logged requests of method (all if empty).
func (l *requestLog) writes(method string) []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []string
	for _, e := range l.entries {
		if method == "" || strings.HasPrefix(e, method+" ") {
			out = append(out, e)
		}
	}
	return out
}

type roundTripper func(*http.Request) (*http.Response, error)

func (f roundTripper) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// gateTransport fails every request while down, as an unreachable
// in-process cluster would.
type gateTransport struct {
	base http.RoundTripper
	down *atomic.Bool
}

func (g gateTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	if g.down.Load() {
		if r.Body != nil {
			r.Body.Close()
		}
		return nil, &net.OpError{Op: "dial", Net: "tcp", Err: errors.New("connection refused (gate closed)")}
	}
	return g.base.RoundTrip(r)
}

// gatedCluster is the real cluster kc, which the syncer reaches through
// a gate of its own (testCluster.setDown closes it); namespaceGC says
// whether kc runs a namespace controller (it is not Minimal).
func gatedCluster(t testing.TB, kc *kubecluster.Cluster, namespaceGC bool) *testCluster {
	t.Helper()
	u, err := url.Parse(kc.Host)
	if err != nil {
		t.Fatal(err)
	}
	gate := newTCPGate(t, u.Host)
	return &testCluster{
		admin: kc.RESTConfig(),
		syncerConfig: func() *rest.Config {
			rc := kc.RESTConfig()
			rc.Host = "https://" + gate.addr
			return rc
		},
		setDown:     gate.set,
		namespaceGC: namespaceGC,
	}
}

// tcpGate is a TCP proxy in front of a real API server: closed, it
// refuses connections and cuts those open, as a dead port would.
type tcpGate struct {
	target string
	addr   string
	mu     sync.Mutex
	ln     net.Listener
	conns  map[net.Conn]struct{}
}

func newTCPGate(t testing.TB, target string) *tcpGate {
	g := &tcpGate{target: target, conns: map[net.Conn]struct{}{}}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	g.addr = ln.Addr().String()
	g.serve(ln)
	t.Cleanup(func() { g.set(true) })
	return g
}

func (g *tcpGate) serve(ln net.Listener) {
	g.ln = ln
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go g.pipe(c)
		}
	}()
}

func (g *tcpGate) pipe(c net.Conn) {
	up, err := net.Dial("tcp", g.target)
	if err != nil {
		c.Close()
		return
	}
	g.mu.Lock()
	if g.ln == nil {
		g.mu.Unlock()
		c.Close()
		up.Close()
		return
	}
	g.conns[c], g.conns[up] = struct{}{}, struct{}{}
	g.mu.Unlock()
	done := make(chan struct{}, 2)
	go func() { _, _ = io.Copy(up, c); done <- struct{}{} }()
	go func() { _, _ = io.Copy(c, up); done <- struct{}{} }()
	<-done
	c.Close()
	up.Close()
	g.mu.Lock()
	delete(g.conns, c)
	delete(g.conns, up)
	g.mu.Unlock()
}

// set closes (down) or reopens the gate on the same address.
func (g *tcpGate) set(down bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if down {
		if g.ln != nil {
			g.ln.Close()
			g.ln = nil
		}
		for c := range g.conns {
			c.Close()
		}
		return
	}
	if g.ln != nil {
		return
	}
	ln, err := net.Listen("tcp", g.addr)
	if err != nil {
		panic(fmt.Sprintf("reopening the gate on %s: %v", g.addr, err))
	}
	g.serve(ln)
}
