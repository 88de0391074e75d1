package sim

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/go-logr/logr"
	"golang.org/x/sync/errgroup"
	"k8s.io/klog/v2"

	"github.com/canopy-dev/canopy/relay/layout"
	"github.com/canopy-dev/canopy/relay/server"
	"github.com/canopy-dev/canopy/relay/store"
	"github.com/canopy-dev/canopy/relay/transport/tree"
	"github.com/canopy-dev/canopy/topology/api/v1alpha1"
)

// Summary is the outcome of a simulation: what `relay simulate` prints as
// one line of JSON, and what report.md is written from.
type Summary struct {
	Scenario string `json:"scenario"`
	Topology string `json:"topology"`
	Network  string `json:"network"`
	// Arrival is where a change counts as arrived: "inbox" (the edge
	// relay's inbox) or "cluster" (applied by the edge syncer).
	Arrival   string  `json:"arrival"`
	Seed      uint64  `json:"seed"`
	Regions   int     `json:"regions"`
	Edges     int     `json:"edges"`
	LatencyMs float64 `json:"latency_ms,omitempty"`
	LossPct   float64 `json:"loss_pct,omitempty"`

	StartS float64 `json:"start_s"` // starting every relay, until each is connected
	// LinkedS is the part of StartS until every relay's link to its
	// parent is up; the rest waits for the inventory to show each
	// destination connected.
	LinkedS    float64 `json:"linked_s"`
	PlacementS float64 `json:"placement_s"` // EdgePlacement created → every destination holds the workload
	MeasuredS  float64 `json:"measured_s"`  // the scenario's measured phase
	Changes    int     `json:"changes"`     // writes at the root during the measured phase

	// Propagation is root write → arrival, per destination and change,
	// over the measured phase.
	Propagation Latency `json:"propagation"`
	// Phases splits it by phase of the scenario (and marked subsets).
	Phases []PhaseLatency `json:"phases"`
	// InboxPropagation is the same measured at the inbox when Arrival is
	// "cluster".
	InboxPropagation *Latency `json:"inbox_propagation,omitempty"`
	// APIWrite is how long the measured phase's writes took at the root's
	// kube API (PATCH sent → answered): part of every propagation figure.
	APIWrite Latency `json:"api_write"`
	// FirstHop is root write → the inbox of the root's children (regions),
	// the first hop of Propagation.
	FirstHop *Latency `json:"first_hop,omitempty"`
	// CombinedStatus is root write → reflected in the root's
	// CombinedStatus, per destination and change: null when not measured
	// (CombinedStatusNote says why).
	CombinedStatus     *Latency `json:"combined_status"`
	CombinedStatusNote string   `json:"combined_status_note"`
	// StatusBehind: at the end, some CombinedStatus still did not count
	// every destination at the latest version.
	StatusBehind bool `json:"combined_status_behind,omitempty"`

	RootBytesPerChange float64     `json:"root_bytes_per_change"`
	Tiers              []TierLinks `json:"tiers"` // over the measured phase
	CPUSeconds         float64     `json:"cpu_s"` // process, measured phase
	// CPUByTier splits CPUSeconds by tier (pprof labels); "other" is the
	// runtime (GC), timers and the simulator.
	CPUByTier map[string]float64 `json:"cpu_by_tier_s,omitempty"`
	// CPUPerDestChangeMs is CPUByTier (and, under "all", CPUSeconds) in
	// ms per destination and change: what each part of the fleet spends
	// to bring one change to one destination. A region's figure is also
	// its CPU per child and change when its children are edges.
	CPUPerDestChangeMs map[string]float64 `json:"cpu_per_destination_change_ms,omitempty"`
	RootCPUPerChangeMs float64            `json:"root_cpu_per_change_ms,omitempty"`
	// IdleS is the idle window before the measured phase (--idle):
	// nothing written, the root's CPU profiled. RootIdleCPUMsPerS is the
	// root's CPU per second in it (ms/s): what the root does whatever
	// happens. RootCPUPerChangeMarginalMs is the root's CPU of the
	// measured phase less that rate × MeasuredS, per change, floored at
	// 0: what each change costs. Both are null without an idle window
	// (or a CPU profile), the marginal figure also without changes.
	IdleS                      float64  `json:"idle_s,omitempty"`
	RootIdleCPUMsPerS          *float64 `json:"root_idle_cpu_ms_per_s,omitempty"`
	RootCPUPerChangeMarginalMs *float64 `json:"root_cpu_per_change_marginal_ms,omitempty"`
	// RootReportsPerChange is what the root's children sent up per change
	// (report frames on the tier-1 links' upsync streams),
	// RootReportsPerChild the same per child; RootReportsPerChildPerS is
	// per child and second of the measured phase. A child reports while
	// the status below it moves, at most about once per status window
	// and key, so the rate per second is bounded whatever the
	// destinations below it; per change, it follows how long a change
	// keeps the status moving. RootLogEntriesPerChange is how far the
	// root's Raft log (its store's revision) moved per change: the
	// change and what the root wrote from it (the reports are kept in
	// memory).
	RootReportsPerChange    float64 `json:"root_reports_per_change,omitempty"`
	RootReportsPerChild     float64 `json:"root_reports_per_change_per_child,omitempty"`
	RootReportsPerChildPerS float64 `json:"root_reports_per_child_per_s,omitempty"`
	RootLogEntriesPerChange float64 `json:"root_log_entries_per_change,omitempty"`
	// MemoryBeforeEdges, MemoryAfterPlacement and, when the run
	// completed, MemoryEnd are measured after a GC. HeapPerEdgeEndKiB is
	// HeapPerEdgeKiB at the end: with what the changes left (store
	// history, caches).
	MemoryBeforeEdges    Memory   `json:"memory_before_edges"`
	MemoryAfterPlacement Memory   `json:"memory_after_placement"`
	MemoryEnd            Memory   `json:"memory_end"`
	HeapPerEdgeKiB       float64  `json:"heap_per_edge_kib"`
	HeapPerEdgeEndKiB    float64  `json:"heap_per_edge_end_kib,omitempty"`
	StacksPerEdgeKiB     float64  `json:"stacks_per_edge_kib"`
	GoroutinesPerEdge    float64  `json:"goroutines_per_edge"`
	Reconnects           []uint64 `json:"reconnects_per_tier"`

	Destinations int  `json:"destinations"`
	Converged    int  `json:"converged"` // by content hash, at the end
	OK           bool `json:"ok"`        // every destination converged
	// Unconverged describes the destinations that did not converge: which
	// keys differ between the inbox and what the parent routes.
	Unconverged []string `json:"unconverged,omitempty"`

	Events    []Event          `json:"events,omitempty"`
	Rehome    *RehomeResult    `json:"rehome,omitempty"`
	Partition *PartitionResult `json:"partition,omitempty"`
	// Failover is the root-failover scenario's outcome; its gap_s is the
	// failover gap (leader kill → next acknowledged write).
	Failover   *FailoverResult `json:"failover,omitempty"`
	FlatVsTree *FlatVsTree     `json:"flat_vs_tree,omitempty"`
	// StatusWaves is the status scenario's outcome.
	StatusWaves *StatusWaves `json:"status_waves,omitempty"`
	// View is the view scenario's outcome.
	View   *ViewResult `json:"view,omitempty"`
	Report string      `json:"report,omitempty"`
	// Error says why the simulation stopped early.
	Error string `json:"error,omitempty"`

	// for the report, not the JSON line
	series     []point
	hists      map[string]*histogram
	order      []string
	profile    []byte
	flat       *Summary
	measured   *histogram // every write of the measured phase
	goroutines []byte     // goroutine profile (debug=1) at the end
	// startProfile is the CPU profile of starting the relays (gzipped pprof).
	startProfile []byte
	heap         []byte // heap profile after placement
	heapEnd      []byte // heap profile at the end
	// CombinedStatus latency by phase of the write
	statusOrder []string
	statusHists map[string]*histogram
}

// PhaseLatency is the propagation of the writes of one phase.
type PhaseLatency struct {
	Phase string `json:"phase"`
	Latency
}

// Event is something the scenario did, at seconds into the measured phase.
type Event struct {
	AtS  float64 `json:"at_s"`
	What string  `json:"what"`
}

// RehomeResult is the region-failure scenario's outcome.
type RehomeResult struct {
	Region       string  `json:"region"`
	Sibling      string  `json:"sibling"`
	Moved        int     `json:"moved"`         // relays restarted under the sibling
	Edges        int     `json:"edges"`         // destinations below them
	DetectedS    float64 `json:"detected_s"`    // kill → the root sees the region disconnected
	RehomedS     float64 `json:"rehomed_s"`     // re-homing starts → every destination converged
	ConvergedS   float64 `json:"converged_s"`   // kill → every destination converged
	PathsUpdated int     `json:"paths_updated"` // SyncTargets whose path shows the sibling
}

// PartitionResult is the partition scenario's outcome.
type PartitionResult struct {
	Region     string  `json:"region"`
	CutS       float64 `json:"cut_s"`
	Writes     int     `json:"writes"` // writes at the root during the cut
	Keys       int     `json:"keys"`   // distinct objects they changed
	LinkDown   bool    `json:"link_dropped"`
	CatchUpS   float64 `json:"catch_up_s"`       // heal → every destination converged
	Objects    uint64  `json:"catch_up_objects"` // the root sent the region from the link's drop to convergence
	CutObjects uint64  `json:"cut_objects"`      // the root sent into the cut link before it dropped
	Bytes      uint64  `json:"catch_up_bytes"`
	Resyncs    uint64  `json:"resyncs"`
	LatestSize int     `json:"latest_bytes"` // size of the latest versions of the changed keys
}

// FlatVsTree compares the tree with the same edges each under the root.
type FlatVsTree struct {
	Rounds         int      `json:"rounds"`
	TreeRootBytes  float64  `json:"tree_root_bytes_per_change"`
	FlatRootBytes  float64  `json:"flat_root_bytes_per_change"`
	RootBytesRatio float64  `json:"root_bytes_ratio"` // flat / tree
	TreeRootCPUMs  float64  `json:"tree_root_cpu_per_change_ms"`
	FlatRootCPUMs  float64  `json:"flat_root_cpu_per_change_ms"`
	RootCPURatio   float64  `json:"root_cpu_ratio"` // flat / tree; 0 unknown
	TreeP50        float64  `json:"tree_p50_ms"`
	FlatP50        float64  `json:"flat_p50_ms"`
	TreeP99        float64  `json:"tree_p99_ms"`
	FlatP99        float64  `json:"flat_p99_ms"`
	Flat           *Summary `json:"-"`

	// The idle windows' root CPU per second and the marginal root CPU
	// per change (Summary.RootCPUPerChangeMarginalMs) of each phase:
	// null without idle windows.
	TreeRootIdleCPUMsPerS *float64 `json:"tree_root_idle_cpu_ms_per_s,omitempty"`
	FlatRootIdleCPUMsPerS *float64 `json:"flat_root_idle_cpu_ms_per_s,omitempty"`
	TreeRootMarginalMs    *float64 `json:"tree_root_cpu_per_change_marginal_ms,omitempty"`
	FlatRootMarginalMs    *float64 `json:"flat_root_cpu_per_change_marginal_ms,omitempty"`
	RootMarginalRatio     float64  `json:"root_cpu_marginal_ratio,omitempty"` // flat / tree; 0 unknown or within the noise
	// RootIdleShare is the larger of the two phases' shares of root CPU
	// per change that their idle rate accounts for (1 − marginal /
	// plain). Above MaxIdleShare the marginal figures are the difference
	// of two near numbers, within the profile's sampling error, and
	// RootMarginalRatio is not given.
	RootIdleShare float64 `json:"root_idle_share,omitempty"`
}

// MaxIdleShare is the largest RootIdleShare for which flat-vs-tree gives
// the marginal figures' ratio.
const MaxIdleShare = 0.5

// marginalRatio sets RootIdleShare and, unless it is over MaxIdleShare,
// RootMarginalRatio from both phases' figures.
func (c *FlatVsTree) marginalRatio() {
	c.RootIdleShare = round3(max(IdleShare(c.TreeRootMarginalMs, c.TreeRootCPUMs), IdleShare(c.FlatRootMarginalMs, c.FlatRootCPUMs)))
	if c.TreeRootMarginalMs != nil && c.FlatRootMarginalMs != nil && *c.TreeRootMarginalMs > 0 && c.RootIdleShare <= MaxIdleShare {
		c.RootMarginalRatio = round3(*c.FlatRootMarginalMs / *c.TreeRootMarginalMs)
	}
}

// IdleShare is the share of a phase's root CPU per change that its idle
// rate accounts for; 0 when unknown.
func IdleShare(marginal *float64, plain float64) float64 {
	if marginal == nil || plain <= 0 {
		return 0
	}
	return max(0, 1-*marginal/plain)
}

// point is one sample of convergence over time.
type point struct {
	at        float64 // seconds into the measured phase
	converged int
	connected int
}

// Run runs one simulation and writes its report when opts.ReportDir is
// set. Options errors are *OptionError values (joined).
func Run(ctx context.Context, opts Options) (*Summary, error) {
	o := opts.Complete()
	if errs := o.Validate(openFileLimit()); len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	fan, _ := ParseTopology(o.Topology)
	work := o.Workdir
	if work == "" {
		d, err := os.MkdirTemp("", "canopy-sim-")
		if err != nil {
			return nil, err
		}
		defer os.RemoveAll(d)
		work = d
	}
	relayLog := slog.New(slog.DiscardHandler)
	if o.ReportDir != "" {
		if err := os.MkdirAll(o.ReportDir, 0o755); err != nil {
			return nil, err
		}
		lf, err := os.Create(filepath.Join(o.ReportDir, "relays.log"))
		if err != nil {
			return nil, err
		}
		defer lf.Close()
		level := o.RelayLogLevel
		if level == 0 {
			level = slog.LevelWarn
		}
		relayLog = slog.New(slog.NewTextHandler(lf, &slog.HandlerOptions{Level: level}))
	}
	// client-go logs through klog (the edge syncers' clients, throttling
	// notices): into the relays' log, not the terminal.
	klog.SetLogger(logr.FromSlogHandler(relayLog.Handler()))
	p := &progress{w: o.Progress}
	defer p.done()

	var s *Summary
	var err error
	if o.Scenario == ScenarioFlatVsTree {
		s, err = flatVsTree(ctx, o, fan, work, relayLog, p)
	} else {
		s, err = runOnce(ctx, o, fleetShape{fan: fan}, filepath.Join(work, "tree"), relayLog, p, 0)
	}
	p.done()
	if s != nil && err != nil {
		s.Error, s.OK = err.Error(), false
	}
	if s != nil && err == nil {
		// A status run whose CombinedStatuses were not exact failed.
		if err = s.StatusWaves.err(); err != nil {
			s.Error, s.OK = err.Error(), false
		}
	}
	if s != nil && o.ReportDir != "" {
		s.Report = o.ReportDir
		if werr := writeReport(o, s); werr != nil && err == nil {
			err = werr
		}
	}
	return s, err
}

func openFileLimit() uint64 {
	var rl syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &rl); err != nil {
		return 0
	}
	return rl.Cur
}

// env is what a scenario acts with.
type env struct {
	ctx     context.Context
	o       Options
	f       *fleet
	u       *user
	t       *tracker // measures arrivals
	regions *tracker // arrivals at the root's children
	// edgeTrackers are every tracker of the edges (t among them).
	edgeTrackers []*tracker
	st           *statusTracker // measures the root's CombinedStatuses
	p            *progress
	rng          *rand.Rand
	start        time.Time
	mu           sync.Mutex
	events       []Event
	changes      int
	rounds       int // fixed number of rollout rounds (flat-vs-tree's second run)
	s            *Summary
}

func (e *env) event(what string) {
	e.mu.Lock()
	e.events = append(e.events, Event{AtS: time.Since(e.start).Seconds(), What: what})
	e.s.Events = e.events
	e.mu.Unlock()
	e.o.Logger.Info(what)
}

// syncerGrace is how long, once every inbox holds the workload, Run waits
// for an edge syncer's first applied record before it measures at the
// inbox (--arrival=auto).
const syncerGrace = 1500 * time.Millisecond

// roundTimeout bounds the wait for one change to reach every destination.
func (e *env) roundTimeout() time.Duration {
	if e.o.RoundTimeout > 0 {
		return e.o.RoundTimeout
	}
	return 60*time.Second + time.Duration(len(e.f.edges))*5*time.Millisecond
}

// runOnce builds a fleet of shape, places the workload, runs the
// scenario and measures it.
func runOnce(ctx context.Context, o Options, shape fleetShape, dir string, relayLog *slog.Logger, p *progress, rounds int) (_ *Summary, err error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	inbox := newTracker(ArrivalInbox)
	trackers := []*tracker{inbox}
	var cluster *tracker
	if o.Arrival != ArrivalInbox {
		cluster = newTracker(ArrivalCluster)
		trackers = append(trackers, cluster)
	}
	mem0 := readMemory(true)
	f, err := newFleet(ctx, o, shape, dir, relayLog)
	if err != nil {
		return nil, err
	}
	defer func() {
		if err := f.close(); err != nil {
			o.Logger.Warn("stopping relays", "error", err)
		}
	}()
	f.onEdge = func(e *relay, c *server.Child) {
		for _, t := range trackers {
			// The status scenario places on its subset first; the other
			// edges count once the placement is widened.
			if o.Scenario != ScenarioStatus || e.subset {
				t.addEdge(e.name, e.group)
			}
			go t.follow(ctx, e.name, c.Store())
		}
	}
	// The root's children's inboxes: the first hop, for comparison.
	regions := newTracker(ArrivalInbox)
	f.onRegion = func(r *relay, c *server.Child) {
		regions.addEdge(r.name, r.group)
		go regions.follow(ctx, r.name, c.Store())
	}
	s := &Summary{Scenario: o.Scenario, Topology: o.Topology, Network: o.Network, Seed: o.Seed,
		Regions: len(f.regions), Edges: len(f.edges), LatencyMs: ms(o.Latency), LossPct: o.Loss * 100,
	}
	if shape.flat {
		s.Topology = "1x" + strconv.Itoa(len(f.edges))
	}
	s.MemoryBeforeEdges = mem0
	defer func() {
		if err != nil {
			// What a failed run got to, for the JSON line and the report.
			s.Error = err.Error()
			s.Destinations = len(f.edges)
			s.Converged, _ = inbox.converged()
			s.Reconnects = f.snap().reconnects
			s.MemoryEnd = readMemory(false)
			s.order, s.hists = inbox.histograms()
		}
	}()

	name := "starting relays"
	if shape.flat {
		name = "starting relays (flat)"
	}
	p.phase(name, len(f.regions)+len(f.edges))
	t0 := time.Now()
	startProf := startProfile()
	defer startProf.stop() // on an early return; a no-op after the stop below
	if err := f.grow(ctx, 48, p.set); err != nil {
		return s, err
	}
	s.LinkedS = time.Since(t0).Seconds()
	u, err := newUser(f.root.KubeconfigPath(), f.apiAddrs(), append(trackers, regions))
	if err != nil {
		return s, err
	}
	if err := u.waitReady(ctx, len(f.edges), 120*time.Second+time.Duration(len(f.edges))*10*time.Millisecond); err != nil {
		return s, err
	}
	s.StartS = time.Since(t0).Seconds()
	_, s.startProfile = startProf.stop()
	if o.ReportDir != "" && len(s.startProfile) > 0 {
		// Written at once: a run too big to finish still shows where its
		// start went.
		if err := os.WriteFile(filepath.Join(o.ReportDir, StartProfileFile), s.startProfile, 0o644); err != nil {
			return s, err
		}
	}

	// Initial placement.
	for _, t := range append(trackers, regions) {
		t.setPhase("placement")
	}
	p.phase("initial placement", len(f.edges))
	t1 := time.Now()
	u.subset = o.Scenario == ScenarioStatus && !shape.flat
	u.upsync = o.Scenario == ScenarioView
	if err := u.place(ctx, groupsOf(f.edges), max(o.Objects, 0), !o.NoDeployment); err != nil {
		return s, err
	}
	// Destinations whose CombinedStatus counts are awaited: placed and
	// not refusing the workload.
	reporting := 0
	for _, e := range f.edges {
		if (!u.subset || e.subset) && !e.failing {
			reporting++
		}
	}
	st := newStatusTracker(inbox, reporting)
	stctx, stopStatus := context.WithCancel(ctx)
	statusDone := make(chan struct{})
	go func() { defer close(statusDone); st.follow(stctx, u) }()
	// Before the relays stop (defers run last first): an open watch would
	// hold the root's API server shutdown for its full grace period.
	defer func() { stopStatus(); <-statusDone }()
	stopBar := watchBar(ctx, p, inbox)
	timeout := 120*time.Second + time.Duration(len(f.edges))*20*time.Millisecond
	err = inbox.waitConverged(ctx, timeout, "the workload in every inbox")
	stopBar()
	if err != nil {
		s.Unconverged = f.explainLag(inbox.lagging(5))
		return s, err
	}
	s.PlacementS = time.Since(t1).Seconds()
	primary := inbox
	s.Arrival = ArrivalInbox
	if cluster != nil {
		switch {
		case o.Arrival == ArrivalCluster:
			primary = cluster
		case waitUntil(ctx, syncerGrace, "", cluster.sawAny) == nil:
			primary = cluster // auto: an edge syncer is wired
		}
		if primary == cluster {
			s.Arrival = ArrivalCluster
			p.phase("applied by the syncers", len(f.edges))
			stopBar := watchBar(ctx, p, cluster)
			err := cluster.waitConverged(ctx, timeout, "the workload applied in every virtual cluster (is the edge syncer wired? --arrival=inbox measures at the inbox)")
			stopBar()
			if err != nil {
				return s, err
			}
			s.PlacementS = time.Since(t1).Seconds()
		}
	}
	s.MemoryAfterPlacement = readMemory(true)
	s.heap = heapProfile()
	if len(f.edges) > 0 {
		n := float64(len(f.edges))
		s.HeapPerEdgeKiB = round3((s.MemoryAfterPlacement.HeapLiveMiB - mem0.HeapLiveMiB) * 1024 / n)
		s.StacksPerEdgeKiB = round3((s.MemoryAfterPlacement.StacksMiB - mem0.StacksMiB) * 1024 / n)
		s.GoroutinesPerEdge = round3(float64(s.MemoryAfterPlacement.Goroutines-mem0.Goroutines) / n)
	}

	if o.Idle > 0 {
		if err := idleWindow(ctx, o, s, st, p); err != nil {
			return s, err
		}
	}

	// The measured phase.
	e := &env{ctx: ctx, o: o, f: f, u: u, t: primary, regions: regions, edgeTrackers: trackers, st: st,
		p: p, rng: rand.New(rand.NewPCG(o.Seed, o.Seed^0x5eed)), rounds: rounds, s: s}
	scenario := scenarios[o.Scenario]
	if shape.flat || o.Scenario == ScenarioFlatVsTree {
		scenario = rollout
	}
	for _, t := range append(trackers, regions) {
		t.setPhase(o.Scenario)
	}
	series := &sampler{t: primary, f: f}
	s0 := f.snap()
	prof := startProfile()
	e.start = time.Now()
	series.start(ctx, e.start, len(f.edges))
	err = scenario(e)
	s1 := f.snap()
	cpuBy, raw := prof.stop()
	s.MeasuredS = time.Since(e.start).Seconds()
	if err != nil {
		series.stop()
		return s, err
	}

	// Every destination must end converged: by version, then by hash.
	p.phase("convergence check", len(f.edges))
	err = primary.waitConverged(ctx, e.roundTimeout(), "every destination to converge at the end")
	series.stop()
	s.series = series.points
	if err != nil {
		return s, err
	}
	s.Converged, s.Unconverged, err = hashCheck(ctx, f, p)
	if err != nil {
		return s, err
	}
	s.Destinations = len(f.edges)
	s.OK = s.Converged == s.Destinations
	if _, _, any := st.histograms(); any {
		// Status travels up after the change arrived: give the last
		// changes' CombinedStatus time to show them.
		if err := waitUntil(ctx, 30*time.Second, "", st.caughtUp); err != nil {
			s.StatusBehind = true
		}
	}
	s.MemoryEnd = readMemory(true)
	s.heapEnd = heapProfile()
	if n := len(f.edges); n > 0 {
		s.HeapPerEdgeEndKiB = round3((s.MemoryEnd.HeapLiveMiB - mem0.HeapLiveMiB) * 1024 / float64(n))
	}
	var gr bytes.Buffer
	if err := pprof.Lookup("goroutine").WriteTo(&gr, 1); err == nil {
		s.goroutines = gr.Bytes()
	}

	s.Changes = e.changes
	s.Events = e.events
	s.Tiers = diffTiers(s0, s1)
	if e.changes > 0 {
		s.RootBytesPerChange = float64(s1.rootBytes()-s0.rootBytes()) / float64(e.changes)
	}
	s.CPUSeconds = (s1.cpu - s0.cpu).Seconds()
	if cpuBy != nil {
		s.CPUByTier = map[string]float64{}
		for k, v := range cpuBy {
			s.CPUByTier[k] = round3(v.Seconds())
		}
		if e.changes > 0 && len(f.edges) > 0 {
			per := func(d time.Duration) float64 {
				return round3(float64(d.Microseconds()) / 1000 / float64(e.changes) / float64(len(f.edges)))
			}
			s.CPUPerDestChangeMs = map[string]float64{"all": per(s1.cpu - s0.cpu)}
			for k, v := range cpuBy {
				s.CPUPerDestChangeMs[k] = per(v)
			}
		}
		if e.changes > 0 {
			s.RootCPUPerChangeMs = round3(float64(cpuBy["root"].Microseconds()) / 1000 / float64(e.changes))
			if s.RootIdleCPUMsPerS != nil {
				m := round3(marginalPerChange(cpuBy["root"], s.MeasuredS, *s.RootIdleCPUMsPerS, e.changes))
				s.RootCPUPerChangeMarginalMs = &m
			}
		}
	}
	s.setReportFigures()
	if e.changes > 0 && s1.rootRev > s0.rootRev {
		s.RootLogEntriesPerChange = round3(float64(s1.rootRev-s0.rootRev) / float64(e.changes))
	}
	s.profile = raw
	s.Reconnects = f.snap().reconnects
	s.order, s.hists = primary.histograms()
	measured := &histogram{}
	for _, name := range s.order {
		if name != "placement" && !strings.Contains(name, " (") {
			measured.merge(s.hists[name])
		}
	}
	s.Propagation = measured.summary()
	s.measured = measured
	for _, name := range s.order {
		s.Phases = append(s.Phases, PhaseLatency{Phase: name, Latency: s.hists[name].summary()})
	}
	s.statusOrder, s.statusHists, _ = st.histograms()
	statusAll := &histogram{}
	for _, name := range s.statusOrder {
		if name != "placement" {
			statusAll.merge(s.statusHists[name])
		}
	}
	switch {
	case u.collectorErr != nil:
		s.CombinedStatusNote = "not measured: the StatusCollector was refused: " + u.collectorErr.Error()
	case statusAll.n == 0:
		s.CombinedStatusNote = "not measured: no CombinedStatus of the workload counted a destination (do the edges evaluate StatusCollectors yet?)"
	default:
		l := statusAll.summary()
		s.CombinedStatus = &l
		s.CombinedStatusNote = "root write → the root's CombinedStatus counts the destination at that version or a later one (StatusCollector " + CollectorName + ")"
	}
	u.mu.Lock()
	s.APIWrite = u.api.summary()
	u.mu.Unlock()
	if len(f.regions) > 0 {
		_, rh := regions.histograms()
		all := &histogram{}
		for name, h := range rh {
			if name != "placement" && !strings.Contains(name, " (") {
				all.merge(h)
			}
		}
		if all.n > 0 {
			l := all.summary()
			s.FirstHop = &l
		}
	}
	if primary != inbox {
		_, ih := inbox.histograms()
		if h := ih[o.Scenario]; h != nil {
			l := h.summary()
			s.InboxPropagation = &l
		}
	}
	return s, nil
}

func round3(x float64) float64 { return float64(int64(x*1000+0.5)) / 1000 }

// idleSettle bounds the wait, before the idle window, for the
// CombinedStatuses to count the placement at every destination.
const idleSettle = 10 * time.Second

// idleWindow writes nothing for o.Idle while it profiles the process,
// and sets s.IdleS and s.RootIdleCPUMsPerS: the root's CPU per second
// when nothing changes. It first lets the placement's status reports
// settle (when the CombinedStatuses count destinations), so that the
// window holds the root's steady work, not the end of the placement.
func idleWindow(ctx context.Context, o Options, s *Summary, st *statusTracker, p *progress) error {
	if _, _, any := st.histograms(); any {
		if err := waitUntil(ctx, idleSettle, "", st.caughtUp); err != nil && ctx.Err() != nil {
			return ctx.Err()
		}
	}
	p.phase("idle window", 100)
	prof := startProfile()
	t0 := time.Now()
	tk := time.NewTicker(100 * time.Millisecond)
	for d := time.Duration(0); d < o.Idle && ctx.Err() == nil; d = time.Since(t0) {
		p.set(int(100 * d / o.Idle))
		select {
		case <-ctx.Done():
		case <-tk.C:
		}
	}
	tk.Stop()
	p.set(100)
	by, _ := prof.stop()
	s.IdleS = round3(time.Since(t0).Seconds())
	if err := ctx.Err(); err != nil {
		return err
	}
	if by != nil && s.IdleS > 0 {
		rate := round3(float64(by["root"].Microseconds()) / 1000 / s.IdleS)
		s.RootIdleCPUMsPerS = &rate
	}
	return nil
}

// marginalPerChange is the root's CPU per change net of its idle rate:
// (measured − idleMsPerS × measuredS) / changes in milliseconds, floored
// at 0 (the idle rate is a sample; a phase of few changes may fall
// below it); 0 without changes.
func marginalPerChange(measured time.Duration, measuredS, idleMsPerS float64, changes int) float64 {
	if changes <= 0 {
		return 0
	}
	ms := float64(measured.Microseconds())/1000 - idleMsPerS*measuredS
	return max(ms, 0) / float64(changes)
}

// setReportFigures sets the figures of the reports reaching the root,
// from Tiers, Changes and MeasuredS.
func (s *Summary) setReportFigures() {
	if len(s.Tiers) == 0 || s.Tiers[0].Tier != 1 || s.Tiers[0].UpReports == 0 {
		return
	}
	t := s.Tiers[0]
	links := float64(max(t.Links, 1))
	if s.MeasuredS > 0 {
		s.RootReportsPerChildPerS = round3(float64(t.UpReports) / links / s.MeasuredS)
	}
	if s.Changes > 0 {
		s.RootReportsPerChange = round3(float64(t.UpReports) / float64(s.Changes))
		s.RootReportsPerChild = round3(s.RootReportsPerChange / links)
	}
}

// watchBar moves the progress bar with t's converged count until stopped.
func watchBar(ctx context.Context, p *progress, t *tracker) (stop func()) {
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		tk := time.NewTicker(100 * time.Millisecond)
		defer tk.Stop()
		for {
			n, _ := t.converged()
			p.set(n)
			select {
			case <-ctx.Done():
				return
			case <-tk.C:
			}
		}
	}()
	return func() { cancel(); <-done; n, _ := t.converged(); p.set(n) }
}

// sampler records converged and connected destinations over time.
type sampler struct {
	t      *tracker
	f      *fleet
	points []point
	cancel context.CancelFunc
	done   chan struct{}
}

func (s *sampler) start(ctx context.Context, t0 time.Time, edges int) {
	every := 100 * time.Millisecond
	if edges > 2000 {
		every = 500 * time.Millisecond
	}
	ctx, s.cancel = context.WithCancel(ctx)
	s.done = make(chan struct{})
	go func() {
		defer close(s.done)
		tk := time.NewTicker(every)
		defer tk.Stop()
		for {
			n, _ := s.t.converged()
			s.points = append(s.points, point{at: time.Since(t0).Seconds(), converged: n, connected: s.f.connectedEdges()})
			select {
			case <-ctx.Done():
				return
			case <-tk.C:
			}
		}
	}()
}

func (s *sampler) stop() {
	if s.cancel != nil {
		s.cancel()
		<-s.done
		s.cancel = nil
	}
}

// hashCheck counts the destinations whose inbox hashes as what their
// parent routes to them; a destination that differs is checked again for
// a while (its parent may have moved on meanwhile).
func hashCheck(ctx context.Context, f *fleet, p *progress) (int, []string, error) {
	var mu sync.Mutex
	done, ok := 0, 0
	var failed []*relay
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(runtime.GOMAXPROCS(0))
	for _, e := range f.edges {
		g.Go(func() error {
			same, err := f.hashConverged(e)
			mu.Lock()
			defer mu.Unlock()
			done++
			p.set(done)
			if err == nil && same {
				ok++
			} else {
				failed = append(failed, e)
			}
			return gctx.Err()
		})
	}
	if err := g.Wait(); err != nil {
		return ok, nil, err
	}
	deadline := time.Now().Add(30 * time.Second)
	for len(failed) > 0 && time.Now().Before(deadline) {
		time.Sleep(200 * time.Millisecond)
		var still []*relay
		for _, e := range failed {
			if same, err := f.hashConverged(e); err == nil && same {
				ok++
			} else {
				still = append(still, e)
			}
		}
		failed = still
	}
	var why []string
	for _, e := range failed {
		why = append(why, f.divergence(e))
	}
	return ok, why, nil
}

// divergence says how e's inbox differs from what its parent routes to
// it: the keys missing, extra, or held at another version.
func (f *fleet) divergence(e *relay) string {
	st, space, rt, err := f.routing(e.parent, e.name)
	if err != nil {
		return e.name + ": " + err.Error()
	}
	want, err := tree.RoutedObjects(st, space, rt)
	if err != nil {
		return e.name + ": " + err.Error()
	}
	lr, err := e.current().Store().List(store.ListOptions{Space: layout.InboxSpace})
	if err != nil {
		return e.name + ": " + err.Error()
	}
	name := func(k store.Key) string { return k.Resource.Resource + "/" + k.Namespace + "/" + k.Name }
	have := map[string]*store.Object{}
	for _, o := range lr.Items {
		have[name(o.Key)] = o
	}
	var diffs []string
	for _, o := range want {
		n := name(o.Key)
		h, ok := have[n]
		delete(have, n)
		switch {
		case !ok:
			diffs = append(diffs, "missing "+n)
		default:
			a, _ := tree.HashObjects([]*store.Object{{Key: o.Key, Data: o.Data}})
			b, _ := tree.HashObjects([]*store.Object{{Key: o.Key, Data: h.Data}})
			if a != b {
				diffs = append(diffs, fmt.Sprintf("differs %s (parent revision %d)", n, o.Revision))
			}
		}
	}
	for n := range have {
		diffs = append(diffs, "extra "+n)
	}
	slices.Sort(diffs)
	parent := "root"
	if e.parent != nil {
		parent = e.parent.name
	}
	if len(diffs) == 0 {
		// The parent routes it nothing newer: the placement may leave it out.
		diffs = []string{"holds what its parent routes to it"}
	}
	return fmt.Sprintf("%s under %s: %s", e.name, parent, strings.Join(diffs, ", "))
}

// explainLag describes edges that miss a latest version: how their inbox
// differs from what their parent routes to them, and their SyncTarget at
// the root (without one, no placement counts them).
func (f *fleet) explainLag(names []string) []string {
	var out []string
	for _, n := range names {
		e := f.byName[n]
		if e == nil {
			continue
		}
		why := f.divergence(e)
		if r := f.currentRoot(); r != nil {
			k := store.Key{Space: layout.InventorySpace, Resource: store.Resource{Group: v1alpha1.GroupName, Resource: v1alpha1.ResourceSyncTargets}, Name: n}
			switch o, err := r.Store().Get(k); {
			case errors.Is(err, store.ErrNotFound):
				why += "; no SyncTarget at the root"
			case err != nil:
				why += "; SyncTarget: " + err.Error()
			default:
				var st v1alpha1.SyncTarget
				_ = json.Unmarshal(o.Data, &st)
				why += fmt.Sprintf("; SyncTarget at the root: connected %v, path %s", st.Status.Connected, st.Status.Path)
			}
		}
		out = append(out, why)
	}
	return out
}

// flatVsTree runs the rollout on the tree, then the same number of
// changes with every edge under the root, and compares the root's work.
func flatVsTree(ctx context.Context, o Options, fan []int, work string, relayLog *slog.Logger, p *progress) (*Summary, error) {
	half := o
	half.Duration = o.Duration / 2
	tree, err := runOnce(ctx, half, fleetShape{fan: fan}, filepath.Join(work, "tree"), relayLog, p, 0)
	if err != nil {
		return tree, err
	}
	runtime.GC()
	flat, err := runOnce(ctx, half, fleetShape{fan: fan, flat: true}, filepath.Join(work, "flat"), relayLog, p, tree.Changes)
	if err != nil {
		if flat != nil {
			tree.addFlatUnconverged(flat)
		}
		return tree, err
	}
	c := &FlatVsTree{Rounds: tree.Changes,
		TreeRootBytes: tree.RootBytesPerChange, FlatRootBytes: flat.RootBytesPerChange,
		TreeRootCPUMs: tree.RootCPUPerChangeMs, FlatRootCPUMs: flat.RootCPUPerChangeMs,
		TreeP50: tree.Propagation.P50, FlatP50: flat.Propagation.P50, TreeP99: tree.Propagation.P99, FlatP99: flat.Propagation.P99,
		Flat: flat}
	if c.TreeRootBytes > 0 {
		c.RootBytesRatio = round3(c.FlatRootBytes / c.TreeRootBytes)
	}
	if c.TreeRootCPUMs > 0 {
		c.RootCPURatio = round3(c.FlatRootCPUMs / c.TreeRootCPUMs)
	}
	c.TreeRootIdleCPUMsPerS, c.FlatRootIdleCPUMsPerS = tree.RootIdleCPUMsPerS, flat.RootIdleCPUMsPerS
	c.TreeRootMarginalMs, c.FlatRootMarginalMs = tree.RootCPUPerChangeMarginalMs, flat.RootCPUPerChangeMarginalMs
	c.marginalRatio()
	tree.FlatVsTree = c
	tree.flat = flat
	if !flat.OK {
		tree.OK = false
		tree.Error = fmt.Sprintf("flat phase: %d of %d destinations converged", flat.Converged, flat.Destinations)
		tree.addFlatUnconverged(flat)
	}
	tree.MeasuredS += flat.MeasuredS
	return tree, nil
}

// addFlatUnconverged adds the flat phase's unconverged destinations to
// the tree phase's summary, marked as the flat phase's.
func (s *Summary) addFlatUnconverged(flat *Summary) {
	for _, u := range flat.Unconverged {
		s.Unconverged = append(s.Unconverged, "flat: "+u)
	}
}

// JSON returns the summary as one line of JSON.
func (s *Summary) JSON() []byte {
	b, _ := json.Marshal(s)
	return b
}

// sortedTiers returns tier names of a CPU split in a stable order.
func sortedTiers(m map[string]float64) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
