package syncer

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"

	"github.com/canopy-dev/canopy/relay/store"
	"github.com/canopy-dev/canopy/topology/api/v1alpha1"
)

// What the syncer puts on the objects it applies.
const (
	// ManagedLabel, set to "true", marks the objects Canopy manages in a
	// cluster. The syncer deletes only objects that carry it, and watches
	// only those.
	ManagedLabel = v1alpha1.GroupName + "/managed"
	// FieldManager is the server-side apply field manager of every apply.
	FieldManager = "canopy"
)

// DestinationStatusResource is the outbox resource of the destination's
// own report (DestinationStatus), named after the destination.
var DestinationStatusResource = store.Resource{Group: v1alpha1.GroupName, Resource: "destinationstatuses"}

// Defaults of Config.
const (
	DefaultRetryMin         = 200 * time.Millisecond
	DefaultRetryMax         = 30 * time.Second
	DefaultProbeInterval    = 10 * time.Second
	DefaultRequestTimeout   = 30 * time.Second
	DefaultEstablishTimeout = 30 * time.Second
	// DefaultQPS and DefaultBurst replace client-go's defaults (5 and 10)
	// when Cluster leaves them zero: applying a thousand objects must not
	// take minutes.
	DefaultQPS   = 100
	DefaultBurst = 200
	// DefaultStatusWindow is Config.StatusWindow's default.
	DefaultStatusWindow = 200 * time.Millisecond
	// DefaultMaxAssociated is Config.MaxAssociated's default.
	DefaultMaxAssociated = 1000
)

// Sentinel errors. Desired's are wrapped in an ObjectError's Err.
var (
	// ErrInvalidConfig: New was given a Config that Validate rejects.
	ErrInvalidConfig = errors.New("syncer: invalid config")
	// ErrStarted: Start was called twice.
	ErrStarted = errors.New("syncer: already started")
	// ErrCustomizerNotFound: the Customizer an object uses at this
	// destination is not in the inbox.
	ErrCustomizerNotFound = errors.New("syncer: customizer not found")
	// ErrBadCustomizerRef: the object names its Customizer in a form that
	// does not fit it (customize.CustomizerRef).
	ErrBadCustomizerRef = errors.New("syncer: malformed customizer reference")
	// ErrInvalidObject: an inbox object is not a Kubernetes object (no
	// apiVersion, kind or name) or not JSON.
	ErrInvalidObject = errors.New("syncer: invalid object")
)

// Config configures a Syncer. The zero value of every optional field
// selects its default.
type Config struct {
	// Name is the destination's name: its SyncTarget's name, the
	// parameter syncTargetName, and the name of its DestinationStatus.
	// Required.
	Name string
	// Store is the edge relay's store. The syncer reads Inbox, writes
	// Outbox, and keeps its records in the system space ("",
	// AppliedResource). Required.
	Store *store.Store
	// Inbox and Outbox are the spaces of Store the syncer reads and
	// reports into. Required.
	Inbox, Outbox string
	// Cluster reaches the cluster's API (a copy is used; QPS and Burst
	// default to DefaultQPS and DefaultBurst). Required.
	Cluster *rest.Config
	// RetryMin and RetryMax bound the exponential backoff of failed work
	// (a pass, a drift correction).
	RetryMin, RetryMax time.Duration
	// ProbeInterval is how often the cluster's /version is read to notice
	// an unreachable cluster (and its return) while nothing else happens.
	ProbeInterval time.Duration
	// RequestTimeout bounds each request to the cluster but watches.
	RequestTimeout time.Duration
	// EstablishTimeout bounds the wait for an applied CRD to become
	// Established.
	EstablishTimeout time.Duration
	// StatusWindow is the coalescing window of reported state
	// (collectors' partials, placement syncs): an isolated change is
	// evaluated at once, a stream of them at most once per window
	// (reports.Pacer).
	StatusWindow time.Duration
	// MaxAssociated bounds the associated objects a collector sees per
	// object; beyond it the list ends with a TruncatedKind marker.
	MaxAssociated int
	// Logger receives the syncer's logs (default slog.Default()).
	Logger *slog.Logger
}

// Validate lists what is wrong with c.
func (c Config) Validate() []error {
	var errs []error
	req := func(ok bool, what string) {
		if !ok {
			errs = append(errs, fmt.Errorf("%w: %s is required", ErrInvalidConfig, what))
		}
	}
	req(c.Name != "", "Name")
	req(c.Store != nil, "Store")
	req(c.Inbox != "", "Inbox")
	req(c.Outbox != "", "Outbox")
	req(c.Cluster != nil, "Cluster")
	if c.Inbox != "" && c.Inbox == c.Outbox {
		errs = append(errs, fmt.Errorf("%w: Inbox and Outbox are the same space", ErrInvalidConfig))
	}
	if c.RetryMin < 0 || c.RetryMax < 0 || (c.RetryMax > 0 && c.RetryMin > c.RetryMax) {
		errs = append(errs, fmt.Errorf("%w: RetryMin %v, RetryMax %v", ErrInvalidConfig, c.RetryMin, c.RetryMax))
	}
	return errs
}

func (c Config) withDefaults() Config {
	def := func(d *time.Duration, v time.Duration) {
		if *d <= 0 {
			*d = v
		}
	}
	def(&c.RetryMin, DefaultRetryMin)
	def(&c.RetryMax, max(DefaultRetryMax, c.RetryMin))
	def(&c.ProbeInterval, DefaultProbeInterval)
	def(&c.RequestTimeout, DefaultRequestTimeout)
	def(&c.EstablishTimeout, DefaultEstablishTimeout)
	def(&c.StatusWindow, DefaultStatusWindow)
	if c.MaxAssociated <= 0 {
		c.MaxAssociated = DefaultMaxAssociated
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	return c
}

// Syncer makes one cluster match its destination's inbox and reports what
// the cluster holds (see the package documentation).
//
// Start runs it once. Stats, Describe and Collect are safe for concurrent
// use, before, during and after Start.
type Syncer struct {
	cfg        Config
	log        *slog.Logger
	dyn        dynamic.Interface
	rest       rest.Interface // the dynamic client's, for watch streams
	disco      discovery.DiscoveryInterface
	discoCache discovery.CachedDiscoveryInterface // the upsync clauses'; reset with the mapper
	mapper     *mapper
	queue      *workQueue
	memo       desiredMemo // the worker's alone
	// cursorAt is the inbox cursor last decoded: its store revision and
	// its value (the worker's alone).
	cursorAt struct {
		rev int64
		val uint64
	}

	started atomic.Bool
	runCtx  context.Context // Start's: informers run until it ends
	// informerWG counts the informers' goroutines, which Start waits for.
	informerWG sync.WaitGroup

	// mu guards the fields below. The worker goroutine alone changes
	// records (it holds mu while it does); the informers' handlers, the
	// report flusher and Stats read them under mu. Never held across a
	// request to the cluster or a store write.
	mu        sync.Mutex
	records   map[store.Key]*record // by inbox key
	byRef     map[ref]*record
	informers map[schema.GroupResource]*informer
	st        state
	// report flusher: keys whose live state must be written to the outbox.
	dirty       map[store.Key]struct{}
	statusDirty bool
	wake        chan struct{}
	// written is what the flusher last wrote under each outbox key (its
	// own: no lock).
	written map[store.Key]writtenReport
	// awaits holds the applies whose answer the informers have not shown
	// yet, by inbox key (settle.go).
	awaits map[store.Key]awaited

	// Observed inbox revision bookkeeping (inbox follower and worker,
	// under mu).
	lastObjectEvent int64 // local revision of the newest inbox object event
	passListRev     int64 // local revision the last complete pass listed
	observePending  bool  // inbox changed since observed was last set from a cursor event

	// rep is the reporter's state (partials, placement syncs, the
	// informers of associated and upsynced objects), under mu.
	rep reportState

	applies, deletes, drift, passes atomic.Int64

	metrics metrics
}

// state is what the DestinationStatus reports, but counters.
type state struct {
	reachable    bool
	lastError    string
	inSync       int
	failed       []FailedObject
	observed     int64
	reachableSet bool // reachable has been decided once
}

// New returns a syncer for cfg. It does not contact the cluster.
func New(cfg Config) (*Syncer, error) {
	if errs := cfg.Validate(); len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	cfg = cfg.withDefaults()
	rc := rest.CopyConfig(cfg.Cluster)
	if rc.QPS == 0 {
		rc.QPS, rc.Burst = DefaultQPS, DefaultBurst
	}
	// The dynamic client's REST client also carries the informers' watch
	// streams (see informer.watch).
	dcfg := dynamic.ConfigFor(rc)
	dcfg.GroupVersion, dcfg.APIPath = nil, "/if-you-see-this-search-for-the-break" // as dynamic.NewForConfig
	hc, err := rest.HTTPClientFor(dcfg)
	if err != nil {
		return nil, fmt.Errorf("syncer: %w", err)
	}
	raw, err := rest.UnversionedRESTClientForConfigAndClient(dcfg, hc)
	if err != nil {
		return nil, fmt.Errorf("syncer: %w", err)
	}
	drc := rest.CopyConfig(rc)
	drc.Timeout = cfg.RequestTimeout // discovery takes no context
	disco, err := discovery.NewDiscoveryClientForConfig(drc)
	if err != nil {
		return nil, fmt.Errorf("syncer: %w", err)
	}
	cached := memory.NewMemCacheClient(disco)
	s := &Syncer{
		cfg:        cfg,
		log:        cfg.Logger.With("destination", cfg.Name),
		dyn:        dynamic.New(raw),
		rest:       raw,
		disco:      disco,
		discoCache: cached,
		mapper:     newMapper(disco, cached.Invalidate),
		records:    map[store.Key]*record{},
		byRef:      map[ref]*record{},
		informers:  map[schema.GroupResource]*informer{},
		dirty:      map[store.Key]struct{}{},
		wake:       make(chan struct{}, 1),
		awaits:     map[store.Key]awaited{},
		written:    map[store.Key]writtenReport{},
		rep:        newReportState(),
	}
	s.metrics = newMetrics(cfg.Name)
	return s, nil
}

// Start runs the syncer until ctx is done; it returns nil then, or an
// error that stops it (its records cannot be read).
//
// It runs one worker goroutine (every change to the cluster and to the
// records, and the probe), one that writes the outbox, the reporter
// (which evaluates reported state, in Start's own goroutine), and one
// goroutine per informer: one per resource of managed objects, one per
// (resource, namespace) of associated objects of evaluated objects, and
// one per resolved upsync watch. Timers (the work queue's delays and
// retries) and the inbox's watch (followInbox) need no goroutine.
func (s *Syncer) Start(ctx context.Context) error {
	if !s.started.CompareAndSwap(false, true) {
		return ErrStarted
	}
	recs, err := loadRecords(s.cfg.Store)
	if err != nil {
		return err
	}
	s.mu.Lock()
	for k, r := range recs {
		s.records[k] = r
		s.byRef[r.ref()] = r
	}
	s.observePending = true
	s.mu.Unlock()

	s.queue = newWorkQueue(s.cfg.RetryMin, s.cfg.RetryMax)

	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var wg sync.WaitGroup
	run := func(f func(context.Context)) {
		wg.Add(1)
		go func() { defer wg.Done(); f(ctx) }()
	}
	s.runCtx = ctx
	s.queue.Add(item{op: opProbe})
	s.followInbox(ctx)
	run(s.work)
	run(s.flushReports)
	s.log.Info("syncer started", "managed", len(recs))

	s.report(ctx) // until ctx is done
	s.queue.ShutDown()
	wg.Wait()
	s.mu.Lock()
	for gr, inf := range s.informers {
		inf.stop()
		delete(s.informers, gr)
	}
	for w, inf := range s.rep.assoc {
		inf.stop()
		delete(s.rep.assoc, w)
	}
	for w, inf := range s.rep.upsync {
		inf.stop()
		delete(s.rep.upsync, w)
	}
	s.mu.Unlock()
	s.informerWG.Wait()
	return nil
}

// Stats describes a syncer at one moment.
type Stats struct {
	// Managed counts the objects the syncer manages in the cluster
	// (records), InSync those at their desired version, Failed the inbox
	// objects that the last pass could not expand or apply.
	Managed, InSync, Failed int
	// Applies and Deletes count successful server-side applies and
	// deletions; DriftCorrections the applies that restored an object
	// someone else changed or deleted; Passes the reconcile passes over
	// the whole inbox.
	Applies, Deletes, DriftCorrections, Passes int64
	// Reachable is whether the cluster's API answered last time.
	Reachable bool
	LastError string
	// ObservedInboxRevision is the parent revision (the inbox cursor)
	// the cluster was last brought in line with.
	ObservedInboxRevision int64
	// Partials and PlacementSyncs count the reports the reporter holds;
	// EvalErrors the evaluations where a collector failed; Informers the
	// informers running (managed, associated and upsynced objects).
	Partials, PlacementSyncs int
	EvalErrors               int64
	Informers                int
}

// Stats returns the syncer's current figures.
func (s *Syncer) Stats() Stats {
	s.mu.Lock()
	defer s.mu.Unlock()
	return Stats{
		Managed: len(s.records), InSync: s.st.inSync, Failed: len(s.st.failed),
		Applies: s.applies.Load(), Deletes: s.deletes.Load(), DriftCorrections: s.drift.Load(), Passes: s.passes.Load(),
		Reachable: s.st.reachable, LastError: s.st.lastError, ObservedInboxRevision: s.st.observed,
		Partials: len(s.rep.partials), PlacementSyncs: len(s.rep.syncs), EvalErrors: s.rep.evalErrors,
		Informers: len(s.informers) + len(s.rep.assoc) + len(s.rep.upsync),
	}
}

// metrics are the syncer's Prometheus descriptions.
type metrics struct {
	drift, applies, deletes, managed, failed, reachable *prometheus.Desc
}

func newMetrics(dest string) metrics {
	l := prometheus.Labels{"destination": dest}
	d := func(name, help string) *prometheus.Desc { return prometheus.NewDesc(name, help, nil, l) }
	return metrics{
		drift:     d("canopy_syncer_drift_corrections_total", "Applies that restored a managed object someone else changed or deleted."),
		applies:   d("canopy_syncer_applies_total", "Successful server-side applies."),
		deletes:   d("canopy_syncer_deletes_total", "Managed objects deleted because they left the inbox."),
		managed:   d("canopy_syncer_managed_objects", "Objects the syncer manages in the cluster."),
		failed:    d("canopy_syncer_failed_objects", "Inbox objects the last pass could not expand or apply."),
		reachable: d("canopy_syncer_cluster_reachable", "1 when the cluster's API answered last time."),
	}
}

// Describe implements prometheus.Collector.
func (s *Syncer) Describe(ch chan<- *prometheus.Desc) {
	m := s.metrics
	for _, d := range []*prometheus.Desc{m.drift, m.applies, m.deletes, m.managed, m.failed, m.reachable} {
		ch <- d
	}
}

// Collect implements prometheus.Collector.
func (s *Syncer) Collect(ch chan<- prometheus.Metric) {
	st := s.Stats()
	m := s.metrics
	reachable := 0.0
	if st.Reachable {
		reachable = 1
	}
	ch <- prometheus.MustNewConstMetric(m.drift, prometheus.CounterValue, float64(st.DriftCorrections))
	ch <- prometheus.MustNewConstMetric(m.applies, prometheus.CounterValue, float64(st.Applies))
	ch <- prometheus.MustNewConstMetric(m.deletes, prometheus.CounterValue, float64(st.Deletes))
	ch <- prometheus.MustNewConstMetric(m.managed, prometheus.GaugeValue, float64(st.Managed))
	ch <- prometheus.MustNewConstMetric(m.failed, prometheus.GaugeValue, float64(st.Failed))
	ch <- prometheus.MustNewConstMetric(m.reachable, prometheus.GaugeValue, reachable)
}

var _ prometheus.Collector = (*Syncer)(nil)
