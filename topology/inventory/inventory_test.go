package inventory

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	authorizationv1 "k8s.io/api/authorization/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apiserver/pkg/authentication/user"
	"k8s.io/apiserver/pkg/authorization/authorizer"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/yaml"

	"github.com/canopy-dev/canopy/relay/apiserver/kubeapi"
	"github.com/canopy-dev/canopy/relay/layout"
	"github.com/canopy-dev/canopy/relay/store"
	"github.com/canopy-dev/canopy/test/poll"
	edgev1alpha1 "github.com/canopy-dev/canopy/topology/api/v1alpha1"
)

// admin authenticates every request as the admin and allows everything.
type admin struct{}

func (admin) Authenticate(*http.Request, string) (user.Info, error) {
	return &user.DefaultInfo{Name: "admin", Groups: []string{user.SystemPrivilegedGroup}}, nil
}
func (admin) Authorize(context.Context, string, authorizer.Attributes) (authorizer.Decision, string, error) {
	return authorizer.DecisionAllow, "", nil
}
func (admin) Impersonate(_ context.Context, _ string, u user.Info, _ http.Header) (user.Info, error) {
	return u, nil
}
func (admin) RulesFor(string, user.Info, string) ([]authorizationv1.ResourceRule, []authorizationv1.NonResourceRule, bool) {
	return nil, nil, false
}

// fleet is what a test announces: Fleet's answer, and a record of the
// system space written at every change, which wakes the Controller.
type fleet struct {
	st    *store.Store
	mu    sync.Mutex
	dests []Destination
	n     int
}

var fleetRecords = store.Resource{Group: "test.canopy.dev", Resource: "fleets"}

func (f *fleet) get() ([]Destination, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]Destination(nil), f.dests...), nil
}

func (f *fleet) announce(t *testing.T, dests ...Destination) {
	t.Helper()
	f.mu.Lock()
	f.dests = dests
	f.n++
	n := f.n
	f.mu.Unlock()
	k := store.Key{Resource: fleetRecords, Name: fmt.Sprint("change-", n)}
	if _, err := f.st.Create(context.Background(), k, []byte(`{"metadata":{"name":"`+k.Name+`"}}`)); err != nil {
		t.Fatal(err)
	}
}

// shows reads what a SyncTarget's columns show: PATH, CONNECTED (and
// whether it is set at all) and LAST-SEEN.
func shows(st *unstructured.Unstructured) (path string, connected, hasConnected bool, lastSeen time.Time) {
	path, _, _ = unstructured.NestedString(st.Object, "status", "path")
	connected, hasConnected, _ = unstructured.NestedBool(st.Object, "status", "connected")
	if v, _, _ := unstructured.NestedString(st.Object, "status", "lastSeen"); v != "" {
		lastSeen, _ = time.Parse(time.RFC3339, v)
	}
	return path, connected, hasConnected, lastSeen
}

// TestSyncTargetStatus: a connected destination gets a SyncTarget with
// its labels and path; once disconnected it shows LAST-SEEN when it was
// last heard from, not when it first connected, and keeps it across a
// restart of the Controller; a disconnected destination never gets one; a
// SyncTarget that an admin made, with no edge, shows PATH <none> and
// CONNECTED False.
func TestSyncTargetStatus(t *testing.T) {
	st := store.New(store.Options{Fields: kubeapi.FieldsFor})
	t.Cleanup(st.Close)
	api := kubeapi.New(kubeapi.Config{Store: st, Authenticator: admin{}, Authorizer: admin{}})
	ctx := context.Background()
	if err := api.EnsureSpace(ctx, layout.InventorySpace, layout.SpaceKindInventory); err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(api)
	t.Cleanup(hs.Close)
	dc, err := dynamic.NewForConfig(&rest.Config{Host: hs.URL + "/spaces/" + layout.InventorySpace, QPS: -1})
	if err != nil {
		t.Fatal(err)
	}
	targets := dc.Resource(edgev1alpha1.SyncTargetsGVR)
	get := func(name string) *unstructured.Unstructured {
		o, _ := targets.Get(ctx, name, metav1.GetOptions{})
		return o
	}
	f := &fleet{st: st}
	var installed atomic.Int32
	start := func() (stop func()) {
		cctx, cancel := context.WithCancel(ctx)
		done := make(chan error, 1)
		c := New(Config{Store: st, Client: dc, Root: "root", Fleet: f.get, FleetRecords: []store.Resource{fleetRecords},
			InstallCRDs: func(ctx context.Context) error { return installCRDs(ctx, dc) },
			CRDChanged:  func(ev store.Event) bool { return ev.Type == store.Deleted },
			Installed:   func() { installed.Add(1) },
			Logger:      slog.New(slog.NewTextHandler(io.Discard, nil))})
		go func() { done <- c.Start(cctx) }()
		return func() {
			cancel()
			if err := <-done; err != nil {
				t.Errorf("Start: %v", err)
			}
		}
	}
	stop := start()

	// An admin makes a SyncTarget before any edge of that name joined.
	poll.True(t, "the inventory CRDs", func() bool { return installed.Load() == 1 })
	if _, err := targets.Create(ctx, &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "edge.canopy.dev/v1alpha1", "kind": "SyncTarget", "metadata": map[string]any{"name": "lonely"}}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	poll.True(t, "the admin's SyncTarget to show PATH <none> and CONNECTED False", func() bool {
		o := get("lonely")
		if o == nil {
			return false
		}
		path, connected, has, _ := shows(o)
		return path == NoPath && has && !connected
	})

	e1 := Destination{Name: "e1", Labels: map[string]string{"zone": "a"}, Path: []string{"r1", "e1"}, Connected: true}
	f.announce(t, e1)
	var created time.Time
	poll.True(t, "e1's SyncTarget, connected", func() bool {
		o := get("e1")
		if o == nil {
			return false
		}
		path, connected, _, _ := shows(o)
		created = o.GetCreationTimestamp().Time
		return connected && path == "root/r1/e1" && o.GetLabels()["zone"] == "a"
	})
	// LAST-SEEN and AGE have a resolution of a second: e1 disconnects in
	// a later second than the one it connected in.
	poll.True(t, "a second after e1 connected", func() bool { return time.Now().Truncate(time.Second).After(created) })
	stoppedAfter := time.Now().Truncate(time.Second)
	e1.Connected = false
	f.announce(t, e1)
	var lastSeen time.Time
	poll.True(t, "e1's SyncTarget, disconnected", func() bool {
		o := get("e1")
		if o == nil {
			return false
		}
		var connected bool
		_, connected, _, lastSeen = shows(o)
		return !connected
	})
	if lastSeen.Before(stoppedAfter) {
		t.Errorf("e1, disconnected after %s, shows LAST-SEEN %s (it connected at %s)", stoppedAfter, lastSeen, created)
	}

	// The Controller restarts, and e1 is announced with when its relays
	// last heard from it, earlier than what its SyncTarget shows: e1's
	// LAST-SEEN stays, and so does the admin's SyncTarget. e2, which
	// connects after, shows the first pass is done; e3, disconnected and
	// never made, gets no SyncTarget.
	stop()
	stop = start()
	defer stop()
	e1.LastSeen = created.UnixNano()
	f.announce(t, e1, Destination{Name: "e2", Path: []string{"r1", "e2"}, Connected: true}, Destination{Name: "e3", Path: []string{"r1", "e3"}})
	poll.True(t, "e2's SyncTarget, connected", func() bool {
		o := get("e2")
		if o == nil {
			return false
		}
		_, connected, _, _ := shows(o)
		return connected
	})
	if o := get("e1"); o == nil {
		t.Error("e1's SyncTarget is gone after the Controller restarted")
	} else if _, connected, _, again := shows(o); connected || !again.Equal(lastSeen) {
		t.Errorf("after the Controller restarted, e1 shows CONNECTED %t, LAST-SEEN %s; want false, %s", connected, again, lastSeen)
	}
	if o := get("lonely"); o == nil {
		t.Error("the admin's SyncTarget is gone after the Controller restarted")
	} else if path, connected, has, _ := shows(o); path != NoPath || !has || connected {
		t.Errorf("after the Controller restarted, the admin's SyncTarget shows PATH %q, CONNECTED %t (set: %t)", path, connected, has)
	}
	if _, err := targets.Get(ctx, "e3", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("e3, never connected: %v, want no SyncTarget", err)
	}
	if n := installed.Load(); n != 2 {
		t.Errorf("Installed called %d times by two Controllers, want 2", n)
	}
}

// installCRDs creates the inventory CRDs that are missing.
func installCRDs(ctx context.Context, dc dynamic.Interface) error {
	manifests, err := edgev1alpha1.InventoryCRDs()
	if err != nil {
		return err
	}
	crds := dc.Resource(schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"})
	for _, m := range manifests {
		var u unstructured.Unstructured
		if err := yaml.Unmarshal(m, &u.Object); err != nil {
			return err
		}
		if _, err := crds.Create(ctx, &u, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
			return err
		}
	}
	return nil
}

// TestWritesInParallel: the SyncTargets of destinations that join together
// are written several at a time, not one after another (each write waits
// for the root's log). Every create is held until writers of them are in
// flight at once, which only parallel writes reach.
func TestWritesInParallel(t *testing.T) {
	st := store.New(store.Options{Fields: kubeapi.FieldsFor})
	t.Cleanup(st.Close)
	api := kubeapi.New(kubeapi.Config{Store: st, Authenticator: admin{}, Authorizer: admin{}})
	ctx, cancel := context.WithTimeout(context.Background(), 2*poll.Timeout)
	defer cancel()
	if err := api.EnsureSpace(ctx, layout.InventorySpace, layout.SpaceKindInventory); err != nil {
		t.Fatal(err)
	}
	var (
		inFlight, most atomic.Int32
		all            = make(chan struct{})
		allOnce        sync.Once
	)
	release := func() { allOnce.Do(func() { close(all) }) }
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPost && strings.HasSuffix(r.URL.Path, "/synctargets") {
			n := inFlight.Add(1)
			for m := most.Load(); n > m && !most.CompareAndSwap(m, n); m = most.Load() {
			}
			if n >= writers {
				release()
			}
			<-all
			defer inFlight.Add(-1)
		}
		api.ServeHTTP(w, r)
	}))
	t.Cleanup(hs.Close)
	dc, err := dynamic.NewForConfig(&rest.Config{Host: hs.URL + "/spaces/" + layout.InventorySpace, QPS: -1})
	if err != nil {
		t.Fatal(err)
	}
	f := &fleet{st: st}
	var dests []Destination
	for i := range 2 * writers {
		name := fmt.Sprintf("edge-%03d", i)
		dests = append(dests, Destination{Name: name, Path: []string{"region", name}, Connected: true})
	}
	f.announce(t, dests...)
	cctx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	c := New(Config{Store: st, Client: dc, Root: "root", Fleet: f.get, FleetRecords: []store.Resource{fleetRecords},
		InstallCRDs: func(ctx context.Context) error { return installCRDs(ctx, dc) },
		CRDChanged:  func(ev store.Event) bool { return ev.Type == store.Deleted },
		Logger:      slog.New(slog.NewTextHandler(io.Discard, nil))})
	go func() { done <- c.Start(cctx) }()
	defer func() {
		release() // creates held by a failing test
		stop()
		if err := <-done; err != nil {
			t.Errorf("Start: %v", err)
		}
	}()
	targets := dc.Resource(edgev1alpha1.SyncTargetsGVR)
	poll.Until(t, "every destination's SyncTarget connected", func() error {
		l, err := targets.List(ctx, metav1.ListOptions{})
		if err != nil {
			return err
		}
		n := 0
		for _, o := range l.Items {
			if _, connected, _, _ := shows(&o); connected {
				n++
			}
		}
		if n != len(dests) {
			return fmt.Errorf("%d of %d connected", n, len(dests))
		}
		return nil
	})
	if got := most.Load(); got < writers {
		t.Fatalf("at most %d creates in flight at once, want %d", got, writers)
	}
}
