package inventory

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sync/errgroup"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/dynamic"

	"github.com/canopy-dev/canopy/relay/layout"
	"github.com/canopy-dev/canopy/relay/store"
	edgev1alpha1 "github.com/canopy-dev/canopy/topology/api/v1alpha1"
)

var (
	// syncTargetResource is where SyncTargets are kept in the store.
	syncTargetResource = store.Resource{Group: edgev1alpha1.GroupName, Resource: edgev1alpha1.ResourceSyncTargets}
	// crdResource is where CRDs are kept in the store.
	crdResource = store.Resource{Group: "apiextensions.k8s.io", Resource: "customresourcedefinitions"}
)

// retryAfter is how soon SyncTarget or CRD writes that failed are tried
// again.
const retryAfter = time.Second

// NoPath is the status.path of a SyncTarget that no edge relay serves
// (one an admin made before its edge joined, or whose edge its relays no
// longer announce): what kubectl prints for an absent value.
const NoPath = "<none>"

// Destination is one destination of the fleet, as the relay tree
// announces it.
type Destination struct {
	Name   string
	Labels map[string]string
	// Path lists the relays from the root's child down to the edge relay
	// that serves the destination.
	Path []string
	// Connected reports whether the serving edge relay's link is up.
	Connected bool
	// LastSeen is when the destination was last heard from, in unix
	// nanoseconds; 0 if never.
	LastSeen int64
}

// Config is what a Controller needs.
type Config struct {
	// Store is the root's store: the Controller lists and watches the
	// inventory space's SyncTargets and CRDs there (it never writes it).
	Store store.Reader
	// Client is the inventory space of the root's own kube API, as the
	// admin: every write goes through it, like any client's.
	Client dynamic.Interface
	// Root is the root's name, the first element of every SyncTarget's
	// status.path.
	Root string
	// Fleet returns every destination the relay tree announces, and
	// FleetRecords are the resources of the system space whose changes
	// may change its answer (route and link records): the Controller
	// reads Fleet again after each.
	Fleet        func() ([]Destination, error)
	FleetRecords []store.Resource
	// InstallCRDs installs the inventory CRDs (edgev1alpha1.InventoryCRDs)
	// in the inventory space, or puts them back as they were; CRDChanged
	// reports whether a store event of one of them deletes it or changes
	// what InstallCRDs keeps of it, which makes the Controller install
	// them again.
	InstallCRDs func(ctx context.Context) error
	CRDChanged  func(store.Event) bool
	// Installed, when set, is called once the CRDs are first installed.
	Installed func()
	Logger    *slog.Logger
}

// Controller keeps the inventory space: see the package doc.
type Controller struct {
	cfg Config
	log *slog.Logger
}

// New returns a Controller; Start runs it.
func New(cfg Config) *Controller {
	return &Controller{cfg: cfg, log: cmp.Or(cfg.Logger, slog.Default())}
}

// Start installs the inventory CRDs, again at once if one is deleted or
// changed, and keeps the SyncTargets in line with the destinations the
// relay tree announces (Config.Fleet), until ctx is done. It writes only
// what changed: a change in the subtree costs writes for the destinations
// it touched, not for the whole fleet. It returns an error when it cannot
// follow the store.
func (c *Controller) Start(ctx context.Context) error {
	// The watches start first: whatever changes after them is seen.
	changes, names, err := c.watch(ctx)
	if err != nil {
		return err
	}
	if err := c.cfg.InstallCRDs(ctx); err != nil {
		return fmt.Errorf("inventory: installing the inventory CRDs: %w", err)
	}
	if c.cfg.Installed != nil {
		c.cfg.Installed()
	}
	inv := &inventory{targets: c.cfg.Client.Resource(edgev1alpha1.SyncTargetsGVR), rootName: c.cfg.Root, log: c.log,
		names: names, written: map[string]string{}, live: map[string]bool{}, created: map[string]bool{}}
	for {
		crds, targets, ok := changes.take()
		if !ok {
			return errors.New("inventory: a watch of the inventory or of the fleet's records ended")
		}
		var retry <-chan time.Time // set when a write failed: no change may come to retry it
		if crds {
			if err := c.cfg.InstallCRDs(ctx); err != nil {
				if ctx.Err() == nil {
					c.log.Warn("installing the inventory CRDs again", "error", err)
				}
				changes.crdsAgain()
				retry = time.After(retryAfter)
			}
		}
		for name, present := range targets {
			// A SyncTarget made or deleted by anyone else is looked at
			// again: one of a connected destination comes back at once.
			if present && inv.created[name] {
				delete(inv.created, name)
				inv.names[name] = true
				continue
			}
			delete(inv.written, name)
			delete(inv.created, name)
			if present {
				inv.names[name] = true
			} else {
				delete(inv.names, name)
			}
		}
		// Every replica's children, from the replicated records: the
		// leader may not be the replica a child dialed.
		dests, err := c.cfg.Fleet()
		if err != nil {
			return err
		}
		if !inv.sync(ctx, dests) {
			retry = time.After(retryAfter)
		}
		select {
		case <-ctx.Done():
			return nil
		case <-retry:
		case <-changes.wake:
		}
	}
}

// changes gathers what the Controller's watches saw between two of its
// passes. Safe for concurrent use.
type changes struct {
	wake chan struct{} // signalled (coalesced) at every change

	mu      sync.Mutex
	crds    bool            // an inventory CRD was deleted or changed
	targets map[string]bool // SyncTargets made (true) or deleted (false): the last event of each
	ended   bool            // a watch ended
}

func (c *changes) note(f func()) {
	c.mu.Lock()
	f()
	c.mu.Unlock()
	select {
	case c.wake <- struct{}{}:
	default:
	}
}

// take returns and forgets what changed; ok is false once a watch ended.
func (c *changes) take() (crds bool, targets map[string]bool, ok bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	crds, targets = c.crds, c.targets
	c.crds, c.targets = false, nil
	return crds, targets, !c.ended
}

// crdsAgain asks the next pass to install the CRDs again.
func (c *changes) crdsAgain() {
	c.mu.Lock()
	c.crds = true
	c.mu.Unlock()
}

// watch lists the SyncTargets, then watches from that revision the
// fleet's records (Config.FleetRecords), the SyncTargets and the inventory
// CRDs, until ctx is done.
func (c *Controller) watch(ctx context.Context) (*changes, map[string]bool, error) {
	st := c.cfg.Store
	list, err := st.List(store.ListOptions{Space: layout.InventorySpace, Resource: syncTargetResource})
	if err != nil {
		return nil, nil, err
	}
	names := make(map[string]bool, len(list.Items))
	for _, o := range list.Items {
		names[o.Key.Name] = true
	}
	canopy := map[string]bool{}
	for _, res := range edgev1alpha1.InventoryResources {
		canopy[edgev1alpha1.CRDName(res)] = true
	}
	ch := &changes{wake: make(chan struct{}, 1)}
	since := list.Revision
	type watch struct {
		opts  store.WatchOptions
		event func(store.Event)
	}
	var watches []watch
	for _, res := range c.cfg.FleetRecords {
		watches = append(watches, watch{store.WatchOptions{Resource: res}, func(store.Event) {}})
	}
	watches = append(watches,
		watch{store.WatchOptions{Space: layout.InventorySpace, Resource: syncTargetResource}, func(ev store.Event) {
			if ev.Type == store.Added || ev.Type == store.Deleted {
				if ch.targets == nil {
					ch.targets = map[string]bool{}
				}
				ch.targets[ev.Object.Key.Name] = ev.Type == store.Added
			}
		}},
		watch{store.WatchOptions{Space: layout.InventorySpace, Resource: crdResource}, func(ev store.Event) {
			if canopy[ev.Object.Key.Name] && c.cfg.CRDChanged(ev) {
				ch.crds = true
			}
		}})
	var ws []store.Watcher
	for _, w := range watches {
		w.opts.Since = since
		sw, err := st.Watch(ctx, w.opts)
		if err != nil {
			for _, sw := range ws {
				sw.Stop()
			}
			return nil, nil, err
		}
		ws = append(ws, sw)
	}
	for i, sw := range ws {
		go func() {
			defer sw.Stop()
			for ev := range sw.Events() {
				if ev.Object != nil {
					ch.note(func() { watches[i].event(ev) })
				}
			}
			ch.note(func() { ch.ended = ctx.Err() == nil })
		}()
	}
	return ch, names, nil
}

// inventory is the state of the Controller's passes. Not safe for
// concurrent use, but for the writes of one pass, which share it under mu.
type inventory struct {
	targets  dynamic.NamespaceableResourceInterface
	rootName string
	log      *slog.Logger
	// mu guards written, live and created while a pass writes (sync);
	// between passes only the Controller's goroutine uses them.
	mu sync.Mutex
	// names are the SyncTargets that exist, as the watch last showed.
	names map[string]bool
	// written remembers, by name, the fingerprint of what was last
	// written (or found right) for each SyncTarget.
	written map[string]string
	// live are the SyncTargets this process last showed connected.
	live map[string]bool
	// created are the SyncTargets this process made whose creation the
	// watch has not shown yet.
	created map[string]bool
}

// unservedFP is the fingerprint of a SyncTarget that no relay announces.
const unservedFP = "\x00unserved"

// writers is how many SyncTarget writes a pass has in flight at once:
// each write waits for the root's log (a Raft entry), so one at a time
// would cost a fleet of 10 000 joining edges minutes of round trips that
// the log can batch.
const writers = 32

// sync brings the SyncTargets in line with dests, writing up to writers
// of them at once; it reports whether every write succeeded.
func (inv *inventory) sync(ctx context.Context, dests []Destination) bool {
	// What to write is decided first, the writes then share the maps.
	type upsert struct {
		d  Destination
		fp string
	}
	var upserts []upsert
	announced := make(map[string]bool, len(dests))
	for _, d := range dests {
		announced[d.Name] = true
		if fp := fingerprint(d); inv.written[d.Name] != fp {
			upserts = append(upserts, upsert{d, fp})
		}
	}
	var unannounced []string
	for name := range inv.names {
		if !announced[name] && inv.written[name] != unservedFP {
			unannounced = append(unannounced, name)
		}
	}
	var (
		g      errgroup.Group
		failed atomic.Bool
	)
	g.SetLimit(writers)
	write := func(name, fp string, err error, what string) {
		if err != nil {
			if ctx.Err() == nil {
				inv.log.Warn(what, "syncTarget", name, "error", err)
			}
			failed.Store(true)
			return
		}
		inv.mu.Lock()
		inv.written[name] = fp
		inv.mu.Unlock()
	}
	for _, u := range upserts {
		g.Go(func() error {
			write(u.d.Name, u.fp, inv.upsert(ctx, u.d), "updating a SyncTarget")
			return nil
		})
	}
	for _, name := range unannounced {
		g.Go(func() error {
			write(name, unservedFP, inv.unserved(ctx, name), "updating a SyncTarget that no relay announces")
			return nil
		})
	}
	_ = g.Wait()
	for name := range inv.written {
		if !announced[name] && !inv.names[name] {
			delete(inv.written, name)
			delete(inv.live, name)
		}
	}
	return !failed.Load()
}

// fingerprint is what a SyncTarget shows of a destination: its path,
// connectivity and labels.
func fingerprint(d Destination) string {
	keys := make([]string, 0, len(d.Labels))
	for k := range d.Labels {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var b strings.Builder
	fmt.Fprintf(&b, "%s|%t", strings.Join(d.Path, "/"), d.Connected)
	for _, k := range keys {
		fmt.Fprintf(&b, "|%s=%s", k, d.Labels[k])
	}
	return b.String()
}

// shown is what a SyncTarget's status shows.
type shown struct {
	path      string
	connected bool
	lastSeen  time.Time // zero: never
}

func shownBy(st *unstructured.Unstructured) shown {
	var s shown
	s.path, _, _ = unstructured.NestedString(st.Object, "status", "path")
	s.connected, _, _ = unstructured.NestedBool(st.Object, "status", "connected")
	if v, _, _ := unstructured.NestedString(st.Object, "status", "lastSeen"); v != "" {
		s.lastSeen, _ = time.Parse(time.RFC3339, v)
	}
	return s
}

// status is the status field of s.
func (s shown) status() map[string]any {
	st := map[string]any{"path": s.path, "connected": s.connected}
	if !s.lastSeen.IsZero() {
		st["lastSeen"] = s.lastSeen.UTC().Format(time.RFC3339)
	}
	return st
}

func (s shown) equal(o shown) bool {
	return s.path == o.path && s.connected == o.connected && s.lastSeen.Equal(o.lastSeen)
}

// lastSeen is LAST-SEEN for a SyncTarget that is to show disconnected,
// and showed cur: now if this process showed it connected (it was heard
// from until now), otherwise what it showed or what was announced,
// whichever is later.
func (inv *inventory) lastSeen(name string, cur shown, announced int64) time.Time {
	inv.mu.Lock()
	live := inv.live[name]
	inv.mu.Unlock()
	if cur.connected && live {
		return time.Now().Truncate(time.Second)
	}
	t := cur.lastSeen
	if announced > 0 {
		if a := time.Unix(0, announced).Truncate(time.Second); a.After(t) {
			t = a
		}
	}
	return t
}

// upsert writes one destination's SyncTarget, if it differs: labels from
// the announcement, status from its path and link state. A missing one is
// created only for a connected destination.
func (inv *inventory) upsert(ctx context.Context, d Destination) error {
	labels := map[string]string{}
	for k, v := range d.Labels {
		labels[k] = v
	}
	cur, err := inv.targets.Get(ctx, d.Name, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		if !d.Connected {
			return nil // retired, or never made: only its edge brings it back
		}
		obj := &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": edgev1alpha1.SchemeGroupVersion.String(), "kind": edgev1alpha1.KindSyncTarget,
			"metadata": map[string]any{"name": d.Name},
			"spec":     map[string]any{},
		}}
		obj.SetLabels(labels)
		if cur, err = inv.targets.Create(ctx, obj, metav1.CreateOptions{}); err != nil {
			return err
		}
		inv.mu.Lock()
		inv.created[d.Name] = true
		inv.mu.Unlock()
	case err != nil:
		return err
	case !equality.Semantic.DeepEqual(cur.GetLabels(), labels) && (len(labels) > 0 || len(cur.GetLabels()) > 0):
		cur.SetLabels(labels)
		if cur, err = inv.targets.Update(ctx, cur, metav1.UpdateOptions{}); err != nil {
			return err
		}
	}
	was := shownBy(cur)
	want := shown{path: strings.Join(append([]string{inv.rootName}, d.Path...), "/"), connected: d.Connected}
	switch {
	case d.Connected && was.connected && was.path == want.path && !was.lastSeen.IsZero():
		want.lastSeen = was.lastSeen // still connected: nothing new
	case d.Connected:
		want.lastSeen = time.Now().Truncate(time.Second) // (re)connected
	default:
		want.lastSeen = inv.lastSeen(d.Name, was, d.LastSeen)
	}
	if err := inv.writeStatus(ctx, cur, was, want); err != nil {
		return err
	}
	inv.setLive(d.Name, d.Connected)
	return nil
}

// setLive records whether this process showed name connected.
func (inv *inventory) setLive(name string, live bool) {
	inv.mu.Lock()
	defer inv.mu.Unlock()
	if live {
		inv.live[name] = true
	} else {
		delete(inv.live, name)
	}
}

// unserved writes the status of a SyncTarget that no relay announces.
func (inv *inventory) unserved(ctx context.Context, name string) error {
	cur, err := inv.targets.Get(ctx, name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil // its deletion is on its way
	}
	if err != nil {
		return err
	}
	was := shownBy(cur)
	want := shown{path: NoPath, lastSeen: inv.lastSeen(name, was, 0)}
	if err := inv.writeStatus(ctx, cur, was, want); err != nil {
		return err
	}
	inv.setLive(name, false)
	return nil
}

// writeStatus writes want as cur's status unless it shows that already.
func (inv *inventory) writeStatus(ctx context.Context, cur *unstructured.Unstructured, was, want shown) error {
	if _, has := cur.Object["status"]; has && was.equal(want) {
		return nil
	}
	cur.Object["status"] = want.status()
	_, err := inv.targets.UpdateStatus(ctx, cur, metav1.UpdateOptions{})
	return err
}
