package vcluster

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"runtime/pprof"
	"sync/atomic"
	"time"

	"k8s.io/apimachinery/pkg/version"
	"k8s.io/client-go/rest"

	"github.com/canopy-dev/canopy/relay/apiserver/kubeapi"
	"github.com/canopy-dev/canopy/relay/layout"
	"github.com/canopy-dev/canopy/relay/store"
)

// Sentinel errors.
var (
	ErrInvalidOptions = errors.New("vcluster: invalid options")
	ErrStarted        = errors.New("vcluster: already started")
)

// Defaults of Options.
const (
	DefaultReadyDelay  = 2 * time.Second
	DefaultNodes       = 1
	DefaultLogInterval = 2 * time.Second
)

// historySize and historyBytes bound the store events a cluster keeps for
// watch resumption, in number and in the data of their versions. A
// kube-apiserver keeps about five minutes of etcd history; a virtual
// cluster keeps little, because every kept event pins an old object
// version in memory (a pod's status updates alone would fill 512 events
// with versions of a few KiB). A client whose watch falls further behind
// relists, as it would after an etcd compaction.
const (
	historySize  = 512
	historyBytes = 16 << 10
)

// storeOptions are the options of a cluster's store.
func storeOptions() store.Options {
	return store.Options{HistorySize: historySize, HistoryBytes: historyBytes, Fields: kubeapi.FieldsFor}
}

// Options configures a Cluster. The zero value of every field but Name
// selects its default.
type Options struct {
	// Name identifies the cluster; it is the host of RESTConfig
	// (http://vcluster.<Name>) and prefixes its node names. Required.
	Name string
	// ReadyDelay is how long a pod takes to become Running and Ready, or
	// to fail, after it is created (default 2s). Negative means no delay.
	ReadyDelay time.Duration
	// FailureRate is the share of pods, in [0, 1], that fail instead of
	// becoming ready: a pod whose restartPolicy is Always stays Running
	// and not Ready with its containers waiting in CrashLoopBackOff;
	// others (Jobs' pods) end Failed. Which pods fail is a deterministic
	// function of Seed and the pod's namespace and name.
	FailureRate float64
	// Seed makes failures and generated pod names reproducible.
	Seed int64
	// Nodes is the number of Ready nodes registered (default 1).
	Nodes int
	// LogInterval is how often a running container writes a line to its
	// log, after the lines it writes when it starts (default 2s).
	LogInterval time.Duration
	// Logger receives the controllers' warnings (default slog.Default()).
	Logger *slog.Logger
	// Reject, when set, is asked before every create, update and patch
	// (server-side apply included) of an object, not of its subresources:
	// resource is the plural resource with its group, as
	// schema.GroupResource prints it ("configmaps", "deployments.apps"),
	// name is empty for a create that leaves it to generateName. When it
	// returns an error the cluster answers 403 Forbidden with the error's
	// message, as an admission webhook denying the request would, and
	// changes nothing. It is called from many goroutines at once (the
	// cluster's own controllers' writes go through it too). nil accepts
	// every write.
	Reject func(resource, namespace, name string) error
}

func (o Options) withDefaults() Options {
	if o.ReadyDelay == 0 {
		o.ReadyDelay = DefaultReadyDelay
	}
	if o.ReadyDelay < 0 {
		o.ReadyDelay = 0
	}
	if o.Nodes == 0 {
		o.Nodes = DefaultNodes
	}
	if o.LogInterval == 0 {
		o.LogInterval = DefaultLogInterval
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	return o
}

// Validate lists what is wrong with o.
func (o Options) Validate() []error {
	var errs []error
	if o.Name == "" {
		errs = append(errs, fmt.Errorf("%w: Name is required", ErrInvalidOptions))
	}
	if o.FailureRate < 0 || o.FailureRate > 1 {
		errs = append(errs, fmt.Errorf("%w: FailureRate %v is not in [0, 1]", ErrInvalidOptions, o.FailureRate))
	}
	if o.Nodes < 0 {
		errs = append(errs, fmt.Errorf("%w: Nodes %d is negative", ErrInvalidOptions, o.Nodes))
	}
	if o.LogInterval < 0 {
		errs = append(errs, fmt.Errorf("%w: LogInterval %v is negative", ErrInvalidOptions, o.LogInterval))
	}
	return errs
}

// Cluster is an in-memory Kubernetes cluster: Canopy's kube API server
// (package relay/apiserver/kubeapi) over an in-memory store, reached through an
// in-process transport, with a simulated control plane and kubelet.
//
// All methods are safe for concurrent use. Start runs at most once.
type Cluster struct {
	opts      Options
	store     *store.Store
	api       *kubeapi.Server
	handler   http.Handler // api, behind Options.Reject when set
	transport *InprocTransport
	started   atomic.Bool
	stats     counters
}

// counters are updated by the simulated kubelet.
type counters struct {
	podsReady   atomic.Int64
	podsFailed  atomic.Int64
	podsDone    atomic.Int64
	writes      atomic.Int64
	writeErrors atomic.Int64
}

// Stats describes a cluster.
type Stats struct {
	// Objects is the number of stored objects, system namespaces and
	// default ClusterRoles included.
	Objects int
	// Bytes is the size of the stored objects' JSON.
	Bytes int64
	// Revision is the store's current revision.
	Revision int64
	// Watchers counts open store watches (the controllers' included).
	Watchers int
	// PodsReady counts the times the kubelet made a pod Ready, PodsFailed
	// the times it made one fail (CrashLoopBackOff or Failed), PodsSucceeded
	// the pods it completed (Jobs' pods). Pods deleted later still count.
	PodsReady, PodsFailed, PodsSucceeded int64
	// Writes counts the controllers' and kubelet's API writes, WriteErrors
	// those that failed (conflicts included: they are retried).
	Writes, WriteErrors int64
}

// New builds a cluster with its nodes registered. Nothing runs until Start.
func New(opts Options) (*Cluster, error) {
	if errs := opts.Validate(); len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	opts = opts.withDefaults()
	st := store.New(storeOptions())
	st.SetLog(store.NewMemLog(st))
	streams := &kubeletStreams{}
	api := kubeapi.New(kubeapi.Config{
		Store:           st,
		Authenticator:   allowAll{},
		Authorizer:      allowAll{},
		Logger:          opts.Logger,
		Version:         serverVersion,
		MinWatchTimeout: 30 * time.Minute,
		Connect:         streams,
	})
	var h http.Handler = api
	if opts.Reject != nil {
		h = newRejecter(api, opts.Reject)
	}
	c := &Cluster{opts: opts, store: st, api: api, handler: h, transport: NewInprocTransport(h)}
	streams.c = c
	ctx := context.Background()
	if err := api.EnsureSpace(ctx, layout.DefaultSpace, layout.SpaceKindWDS); err != nil {
		st.Close()
		return nil, fmt.Errorf("vcluster: %s: %w", opts.Name, err)
	}
	if err := c.registerNodes(ctx); err != nil {
		st.Close()
		return nil, fmt.Errorf("vcluster: %s: %w", opts.Name, err)
	}
	return c, nil
}

// serverVersion is what /version answers.
var serverVersion = version.Info{
	Major: "1", Minor: "34", GitVersion: "v1.34.0-canopy-vcluster",
	Platform: "linux/amd64", GoVersion: "go1.26",
}

// Name returns the cluster's name.
func (c *Cluster) Name() string { return c.opts.Name }

// RESTConfig returns a new config that reaches the cluster in-process, as
// its admin. Client-side rate limiting is left at client-go's defaults.
func (c *Cluster) RESTConfig() *rest.Config {
	return &rest.Config{
		Host:      "http://vcluster." + c.opts.Name,
		Transport: c.transport,
		UserAgent: "vcluster/" + c.opts.Name,
	}
}

// Transport returns the in-process transport that serves the cluster's API.
func (c *Cluster) Transport() http.RoundTripper { return c.transport }

// Handler returns the cluster's API as an http.Handler, to serve it on a
// real listener (kubectl against a simulation) if wanted.
func (c *Cluster) Handler() http.Handler { return c.handler }

// Start runs the API server's lifecycle controllers (namespace deletion,
// garbage collection) and the simulated control plane and kubelet until
// ctx is done, then closes the store: a Cluster is not reusable. It
// returns nil when ctx ends.
func (c *Cluster) Start(ctx context.Context) (err error) {
	if !c.started.CompareAndSwap(false, true) {
		return ErrStarted
	}
	pprof.Do(ctx, profileLabels, func(ctx context.Context) { err = c.run(ctx) })
	return err
}

// ProfileLabel is the pprof label every goroutine of a cluster carries
// (its control plane, its controllers, its API server's handlers when
// reached through InprocTransport), with the value ProfileValue, so that
// a CPU profile of a process that runs relays and clusters together (a
// simulation) tells the clusters' share apart.
const (
	ProfileLabel = "canopy-part"
	ProfileValue = "virtual-cluster"
)

var profileLabels = pprof.Labels(ProfileLabel, ProfileValue)

// run is Start once started.
func (c *Cluster) run(ctx context.Context) error {
	defer c.store.Close()
	ctrl, err := newController(c)
	if err != nil {
		return err
	}
	// The simulated control plane runs in the caller's goroutine, the
	// lifecycle controllers in one more: goroutines per cluster are few.
	ctx, cancel := context.WithCancel(ctx)
	apiDone := make(chan error, 1)
	go func() {
		err := c.api.StartControllers(ctx)
		cancel()
		apiDone <- err
	}()
	err = ctrl.run(ctx)
	cancel()
	if apiErr := <-apiDone; err == nil {
		err = apiErr
	}
	return err
}

// Close releases a cluster that was never started. A started cluster is
// released when Start returns.
func (c *Cluster) Close() {
	if !c.started.Load() {
		c.store.Close()
	}
}

// Stats returns the cluster's current figures.
func (c *Cluster) Stats() Stats {
	s := c.store.Stats()
	return Stats{
		Objects: s.Objects, Bytes: s.Bytes, Revision: s.Revision, Watchers: s.Watchers,
		PodsReady: c.stats.podsReady.Load(), PodsFailed: c.stats.podsFailed.Load(), PodsSucceeded: c.stats.podsDone.Load(),
		Writes: c.stats.writes.Load(), WriteErrors: c.stats.writeErrors.Load(),
	}
}
