package sim

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime/pprof"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/canopy-dev/canopy/relay/layout"
	"github.com/canopy-dev/canopy/relay/pki"
	"github.com/canopy-dev/canopy/relay/server"
	"github.com/canopy-dev/canopy/relay/store"
	"github.com/canopy-dev/canopy/relay/transport/link"
	"github.com/canopy-dev/canopy/relay/transport/link/memnet"
	"github.com/canopy-dev/canopy/relay/transport/session"
	"github.com/canopy-dev/canopy/relay/transport/tree"
)

// tierLabel is the pprof label every relay's goroutines carry, so that a
// CPU profile of the whole process splits by tier (see profile.go).
const tierLabel = "canopy-tier"

// Labels of the edges, which the scenario's Locations select on.
const (
	groupLabel = "sim.canopy.dev/group" // the region an edge is under in the tree
	fleetLabel = "sim.canopy.dev/fleet"
)

// relay is one region or edge of the fleet, across restarts.
type relay struct {
	name   string
	depth  int    // 1: a child of the root
	group  string // the root's child it is under in the tree ("all" in a flat topology)
	parent *relay // nil: under the root
	// slot is its index among the root's children: a replicated root's
	// children list the replicas starting at a different one.
	slot int
	cfg  server.ChildConfig
	// status scenario: subset is placed in the first wave (labelled
	// subsetLabel); failing refuses the workload (cfg.RejectApply).
	subset, failing bool
	// admission is how long its virtual cluster takes to admit a write
	// (Options.AdmissionDelay).
	admission time.Duration

	mu    sync.Mutex // guards the fields below
	child *server.Child
	stop  func() error // cancels Serve and waits for it
	dead  bool         // stopped for good
	// dialAddr is the memnet endpoint its uplink dials from ("" unknown).
	dialAddr string
	// reconnects and rehomes of earlier incarnations.
	pastReconnects uint64
	rehomes        int
}

func (r *relay) current() *server.Child {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.child
}

func (r *relay) isEdge() bool { return r.cfg.Role == pki.RoleEdge }

// fleet is a whole tree of real relays in this process.
type fleet struct {
	opts    Options
	fan     []int
	dir     string
	log     *slog.Logger // the relays' log
	mn      *memnet.Network
	net     *server.Network
	startMu sync.Mutex // serializes OpenChild, so that nextTr follows server.Network's numbering
	nextTr  int        // transports handed out by net
	linkCfg link.Config

	// rootMu guards root: the replica the simulator reads the root's
	// routing from (root-failover moves it to the new leader).
	rootMu   sync.Mutex
	root     *server.Root
	rootStop func() error
	rootAddr string
	token    string
	// replicas are a replicated root's replicas (root-failover); empty:
	// one root, root.
	replicas []*rootReplica
	nextLink int // link addresses given to restarted replicas
	// leaderChanges counts the replicas' leader changes (countLeaders).
	leaderChanges atomic.Int64
	// pastLinkAddrs are replicas' link addresses before their restart
	// (their packets still count).
	pastLinkAddrs []string

	regions []*relay // every relay that is neither root nor edge
	edges   []*relay
	byName  map[string]*relay

	// onEdge is called each time an edge (re)starts, with its new store;
	// onRegion each time a region of depth 1 does.
	onEdge, onRegion func(r *relay, c *server.Child)

	// lastLinks keeps the latest counters of every parent, so that a dead
	// region's links still count.
	linksMu   sync.Mutex
	lastLinks map[string]parentLinks
}

// parentLinks are one parent's link counters, by child.
type parentLinks struct {
	depth    int // of the parent
	children []session.ChildStatus
}

// fleetShape says how to lay relays out: tree (the topology) or flat
// (the same edges, each under the root).
type fleetShape struct {
	fan  []int
	flat bool
}

// newFleet builds the network and the root. Relays below come with grow.
func newFleet(ctx context.Context, o Options, shape fleetShape, dir string, relayLog *slog.Logger) (*fleet, error) {
	f := &fleet{opts: o, fan: shape.fan, dir: dir, log: relayLog, byName: map[string]*relay{}, lastLinks: map[string]parentLinks{}}
	regions, edges := Relays(shape.fan)
	if shape.flat {
		f.fan, regions = []int{1, edges}, 0
	}
	// Keep-alives bound how fast a cut link is noticed; at 10 000 links
	// they are also a steady load.
	f.linkCfg = link.DefaultConfig()
	// Hundreds of relays on 2 cores starve goroutines for seconds at the
	// busiest moments (initial placement), so big fleets get timeouts
	// closer to the defaults (15 s and 45 s).
	switch n := regions + edges; {
	case n > 1000:
		// Thousands of relays on 2 cores: a burst (the initial
		// placement) queues minutes of work, and a link's goroutine may
		// wait a minute for a core, which is no sign of a dead peer
		// (with 45 s, 2 000 edges reconnected 1 600 times and took
		// minutes to recover; with 3 min, none did).
		f.linkCfg.KeepAlivePeriod, f.linkCfg.MaxIdleTimeout = 15*time.Second, 3*time.Minute
	case n > 100:
		f.linkCfg.KeepAlivePeriod, f.linkCfg.MaxIdleTimeout = 3*time.Second, 15*time.Second
	default:
		f.linkCfg.KeepAlivePeriod, f.linkCfg.MaxIdleTimeout = 500*time.Millisecond, 2*time.Second
	}
	rootCfg := server.Config{Name: "root", DataDir: filepath.Join(dir, "root"), APIAddr: "127.0.0.1:0", LinkAddr: "127.0.0.1:0",
		StatusWindow: o.StatusWindow}
	if o.Network == NetworkMemnet {
		labelled(ctx, "network", func() { f.mn = memnet.NewSeeded(o.Seed + 1) })
		f.mn.SetDefault(memnet.Link{Latency: o.Latency})
		f.net = server.NewNetwork(f.mn, f.linkCfg)
		rootCfg.LinkAddr, rootCfg.Network = "127.0.2.1:7443", f.net
	}
	var err error
	if o.Scenario == ScenarioRootFailover && !shape.flat {
		err = f.openReplicas(ctx, rootReplicas)
	} else {
		labelled(ctx, "root", func() { f.root, err = server.Open(rootCfg, relayLog.With("relay", "root")) })
		if err == nil {
			f.rootStop = serve(ctx, "root", f.root.Serve)
			<-f.root.Ready()
		}
	}
	if err != nil {
		f.close()
		return nil, fmt.Errorf("sim: root: %w", err)
	}
	f.rootAddr = f.root.LinkAddr()
	f.token, err = f.root.IssueJoinToken(ctx, pki.JoinLimits{}, 6*time.Hour)
	if err != nil {
		f.close()
		return nil, fmt.Errorf("sim: join token: %w", err)
	}
	f.layout(shape, regions, edges)
	f.spreadAdmission()
	if o.Scenario == ScenarioStatus && !shape.flat {
		f.statusLayout()
	}
	return f, nil
}

// labelled runs fn with the pprof label of tier on this goroutine, so the
// goroutines fn starts carry it too.
func labelled(ctx context.Context, tier string, fn func()) {
	pprof.Do(ctx, pprof.Labels(tierLabel, tier), func(context.Context) { fn() })
}

// serve runs fn(ctx) in a goroutine labelled tier until the returned stop
// cancels it; stop returns what fn returned.
func serve(ctx context.Context, tier string, fn func(context.Context) error) (stop func() error) {
	ctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	done := make(chan error, 1)
	// fn's context carries the label too: parts that label their own
	// goroutines from it (vcluster.ProfileLabel) keep the tier's.
	go pprof.Do(ctx, pprof.Labels(tierLabel, tier), func(ctx context.Context) { done <- fn(ctx) })
	var once sync.Once
	var err error
	return func() error {
		once.Do(func() {
			cancel()
			err = <-done
			if errors.Is(err, context.Canceled) {
				err = nil
			}
		})
		return err
	}
}

// tierName is the pprof tier of a relay at depth (1: the root's children)
// in a tree of depth levels below the root.
func tierName(depth int, edge bool) string {
	if edge {
		return "edge"
	}
	return fmt.Sprintf("region-%d", depth)
}

// spreadAdmission gives each edge its virtual cluster's admission delay:
// n even steps up to Options.AdmissionDelay for n edges, in an order
// drawn with the seed.
func (f *fleet) spreadAdmission() {
	d, n := f.opts.AdmissionDelay, len(f.edges)
	if d <= 0 || n == 0 {
		return
	}
	rng := rand.New(rand.NewPCG(f.opts.Seed, f.opts.Seed^0xad417))
	for rank, i := range rng.Perm(n) {
		f.edges[i].admission = time.Duration(float64(d) * float64(rank+1) / float64(n))
	}
}

// admitAfter is an admission webhook that takes d to answer, then asks
// next (nil: admits).
func admitAfter(d time.Duration, next func(resource, namespace, name string) error) func(resource, namespace, name string) error {
	return func(resource, namespace, name string) error {
		time.Sleep(d)
		if next == nil {
			return nil
		}
		return next(resource, namespace, name)
	}
}

// layout names the relays: regions r0, r0-1, ...; edges e0-0, ... In a
// flat fleet the edges keep their tree names and groups.
func (f *fleet) layout(shape fleetShape, _, _ int) {
	var grow func(parent *relay, prefix string, depth int, group string)
	fan := shape.fan
	grow = func(parent *relay, prefix string, depth int, group string) {
		last := depth == len(fan)-1
		for i := range fan[depth] {
			var name string
			switch {
			case prefix == "" && last:
				name = fmt.Sprintf("e%d", i)
			case prefix == "":
				name = fmt.Sprintf("r%d", i)
			case last:
				name = "e" + strings.TrimPrefix(prefix, "r") + fmt.Sprintf("-%d", i)
			default:
				name = fmt.Sprintf("%s-%d", prefix, i)
			}
			g := group
			if depth == 1 && !last {
				g = name
			}
			r := &relay{name: name, depth: depth, group: g, parent: parent, slot: i}
			if last {
				r.cfg = server.ChildConfig{Role: pki.RoleEdge, VirtualCluster: true,
					Labels: map[string]string{groupLabel: g, fleetLabel: "sim"}}
				f.edges = append(f.edges, r)
			} else {
				r.cfg = server.ChildConfig{Role: pki.RoleRegion, LinkAddr: "127.0.0.1:0", StatusWindow: f.opts.StatusWindow}
				if f.net != nil {
					r.cfg.LinkAddr = fmt.Sprintf("127.0.%d.%d:7443", 4+len(f.regions)/250, 1+len(f.regions)%250)
				}
				f.regions = append(f.regions, r)
			}
			r.cfg.Name, r.cfg.DataDir, r.cfg.InMemory, r.cfg.Network = name, filepath.Join(f.dir, name), true, f.net
			f.byName[name] = r
			if !last {
				grow(r, name, depth+1, g)
			}
		}
	}
	grow(nil, "", 1, "all")
	if shape.flat {
		for i, e := range f.edges {
			e.parent, e.depth, e.slot = nil, 1, i
		}
		for _, r := range f.regions {
			delete(f.byName, r.name)
		}
		f.regions = nil
	}
}

// grow starts every region (waiting for each to serve its children), then
// every edge, at most joins edges joining at once; progress is told how
// many relays are up.
func (f *fleet) grow(ctx context.Context, joins int, progress func(int)) error {
	up := 0
	for _, r := range f.regions {
		if err := f.start(ctx, r, nil); err != nil {
			return err
		}
		if err := waitUntil(ctx, 60*time.Second, r.name+" serving its children", func() bool {
			c := r.current()
			return c.Uplink().Connected() && c.LinkAddr() != ""
		}); err != nil {
			return err
		}
		up++
		progress(up)
	}
	// Joining is a TLS handshake and a certificate; on 2 cores busy with
	// thousands of relays one may wait minutes for its turn.
	wait := 120 * time.Second
	if len(f.edges) > 1000 {
		wait = 5 * time.Minute
	}
	sem := make(chan struct{}, joins)
	g, gctx := errgroup.WithContext(ctx)
	var mu sync.Mutex
	for _, e := range f.edges {
		select {
		case sem <- struct{}{}:
		case <-gctx.Done():
			return g.Wait()
		}
		if err := f.start(ctx, e, nil); err != nil {
			return err
		}
		g.Go(func() error {
			defer func() { <-sem }()
			err := waitUntil(gctx, wait, e.name+" connected", func() bool { return e.current().Uplink().Connected() })
			mu.Lock()
			up++
			progress(up)
			mu.Unlock()
			return err
		})
	}
	return g.Wait()
}

// parentAddrs is where r dials: its parent's link address, or the
// root's: every replica's of a replicated root, from the one of r's slot
// on (so that the root's children spread over the replicas).
func (f *fleet) parentAddrs(r *relay) []string {
	if r.parent != nil {
		return []string{r.parent.current().LinkAddr()}
	}
	if len(f.replicas) == 0 {
		return []string{f.rootAddr}
	}
	out := make([]string, len(f.replicas))
	for i := range out {
		out[i] = f.replicas[(r.slot+i)%len(f.replicas)].linkAddr
	}
	return out
}

// start opens and serves r (again), under newParent when not nil.
func (f *fleet) start(ctx context.Context, r *relay, newParent *relay) error {
	r.mu.Lock()
	if r.stop != nil {
		r.mu.Unlock()
		return fmt.Errorf("sim: %s is running", r.name)
	}
	r.mu.Unlock()
	if newParent != nil {
		r.parent = newParent
		r.depth = newParent.depth + 1
	}
	cfg := r.cfg
	cfg.Parents = f.parentAddrs(r)
	if r.admission > 0 {
		cfg.RejectApply = admitAfter(r.admission, cfg.RejectApply)
	}
	if _, err := os.Stat(filepath.Join(cfg.DataDir, "pki")); err != nil {
		cfg.JoinToken = f.token // first start: join
	}
	f.startMu.Lock()
	c, err := server.OpenChild(cfg, f.log)
	dial := ""
	if err == nil && f.net != nil {
		f.nextTr++
		dial = f.dialAddr(f.nextTr)
	}
	f.startMu.Unlock()
	if err != nil {
		return fmt.Errorf("sim: %s: %w", r.name, err)
	}
	if r.isEdge() && f.onEdge != nil {
		f.onEdge(r, c)
	}
	if !r.isEdge() && r.depth == 1 && f.onRegion != nil {
		f.onRegion(r, c)
	}
	stop := serve(ctx, tierName(r.depth, r.isEdge()), c.Serve)
	r.mu.Lock()
	r.child, r.stop, r.dead, r.dialAddr = c, stop, false, dial
	if newParent != nil {
		r.rehomes++
	}
	r.mu.Unlock()
	return nil
}

// dialAddr returns the memnet address server.Network gave its n-th
// transport, after checking that it is taken (so a change of that
// numbering turns into "unknown", not into cutting the wrong link).
func (f *fleet) dialAddr(n int) string {
	addr := fmt.Sprintf("127.0.3.%d:%d", 1+n/60000, 1024+n%60000)
	c, err := f.mn.Listen(addr)
	if err == nil {
		_ = c.Close()
		return ""
	}
	if !errors.Is(err, memnet.ErrAddrInUse) {
		return ""
	}
	return addr
}

// kill stops r for good (a failed relay).
func (f *fleet) kill(r *relay) error {
	err := f.halt(r)
	r.mu.Lock()
	r.dead = true
	r.mu.Unlock()
	return err
}

// halt stops r's current incarnation.
func (f *fleet) halt(r *relay) error {
	if !r.isEdge() {
		f.recordLinks() // keep its counters as a parent
	}
	r.mu.Lock()
	stop, c := r.stop, r.child
	r.stop = nil
	r.mu.Unlock()
	if stop == nil {
		return nil
	}
	n := c.Uplink().Reconnects()
	err := stop()
	r.mu.Lock()
	r.pastReconnects += n
	r.mu.Unlock()
	return err
}

// rehome restarts edge e under newParent: a child restarted with another
// parent of the same tree is served there with the certificate it has.
func (f *fleet) rehome(ctx context.Context, e, newParent *relay) error {
	if err := f.halt(e); err != nil {
		return err
	}
	return f.start(ctx, e, newParent)
}

// close stops every relay, edges first, then the root and the network.
func (f *fleet) close() error {
	var errs []error
	var mu sync.Mutex
	var wg sync.WaitGroup
	stopAll := func(rs []*relay) {
		sem := make(chan struct{}, 64)
		for _, r := range rs {
			wg.Add(1)
			sem <- struct{}{}
			go func() {
				defer wg.Done()
				defer func() { <-sem }()
				if err := f.halt(r); err != nil {
					mu.Lock()
					errs = append(errs, fmt.Errorf("%s: %w", r.name, err))
					mu.Unlock()
				}
			}()
		}
		wg.Wait()
	}
	stopAll(f.edges)
	for i := len(f.regions) - 1; i >= 0; i-- {
		if err := f.halt(f.regions[i]); err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", f.regions[i].name, err))
		}
	}
	if f.rootStop != nil {
		if err := f.rootStop(); err != nil {
			errs = append(errs, fmt.Errorf("root: %w", err))
		}
	}
	errs = append(errs, f.stopReplicas())
	f.closeNet()
	return errors.Join(errs...)
}

func (f *fleet) closeNet() {
	if f.mn != nil {
		_ = f.mn.Close()
	}
}

// recordLinks refreshes lastLinks from every live parent.
func (f *fleet) recordLinks() {
	f.linksMu.Lock()
	defer f.linksMu.Unlock()
	if len(f.replicas) == 0 {
		f.lastLinks["root"] = parentLinks{depth: 0, children: f.root.Children()}
	}
	for _, rr := range f.replicas {
		rr.mu.Lock()
		r, key := rr.root, fmt.Sprintf("%s#%d", rr.name, rr.incarnation)
		if !rr.up {
			r = nil
		}
		rr.mu.Unlock()
		if r != nil { // each incarnation's counters start at zero
			f.lastLinks[key] = parentLinks{depth: 0, children: r.Children()}
		}
	}
	for _, r := range f.regions {
		c := r.current()
		if c == nil {
			continue
		}
		r.mu.Lock()
		running := r.stop != nil
		r.mu.Unlock()
		if !running {
			continue
		}
		if d := c.Downlink(); d != nil {
			f.lastLinks[r.name] = parentLinks{depth: r.depth, children: d.Children()}
		}
	}
}

// routing is how a parent routes to child: the root's downsync space, or
// a region's inbox, indexed by the child's route record.
func (f *fleet) routing(parent *relay, child string) (store.Reader, string, tree.Routing, error) {
	if parent == nil {
		root := f.currentRoot()
		return root.Store(), layout.DownsyncSpace, root.Routing(child), nil
	}
	c := parent.current()
	mb := c.Mailboxes()
	if mb == nil {
		return nil, "", tree.Routing{}, fmt.Errorf("%s does not serve children", parent.name)
	}
	return c.Store(), layout.InboxSpace, mb.Routing(child), nil
}

// hashConverged reports whether e's inbox equals what its parent holds
// for it (tree.RoutedContentHash at the parent, tree.ContentHash of the
// inbox): the design's convergence check.
func (f *fleet) hashConverged(e *relay) (bool, error) {
	st, space, rt, err := f.routing(e.parent, e.name)
	if err != nil {
		return false, err
	}
	want, err := tree.RoutedContentHash(st, space, rt)
	if err != nil {
		return false, err
	}
	got, err := tree.ContentHash(e.current().Store(), layout.InboxSpace)
	if err != nil {
		return false, err
	}
	return got == want, nil
}

// waitUntil polls cond every 20 ms until it holds, ctx ends or timeout.
func waitUntil(ctx context.Context, timeout time.Duration, what string, cond func() bool) error {
	return waitEvery(ctx, timeout, 20*time.Millisecond, what, cond)
}

// waitEvery polls cond every interval until it holds, ctx ends or timeout.
func waitEvery(ctx context.Context, timeout, every time.Duration, what string, cond func() bool) error {
	deadline := time.Now().Add(timeout)
	t := time.NewTicker(every)
	defer t.Stop()
	for !cond() {
		if time.Now().After(deadline) {
			return fmt.Errorf("sim: timed out after %s waiting for %s", timeout, what)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-t.C:
		}
	}
	return nil
}
