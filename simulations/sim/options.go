package sim

import (
	"fmt"
	"io"
	"log/slog"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/canopy-dev/canopy/relay/server"
)

// Scenarios, as named by --scenario.
const (
	ScenarioRollout       = "rollout"
	ScenarioChurn         = "churn"
	ScenarioRegionFailure = "region-failure"
	ScenarioPartition     = "partition"
	ScenarioFlakyLinks    = "flaky-links"
	ScenarioFlatVsTree    = "flat-vs-tree"
	// ScenarioRootFailover starts the root as 3 Raft replicas, kills
	// the leader and measures the failover gap (kill → the next
	// acknowledged write) and the propagation of later writes.
	ScenarioRootFailover = "root-failover"
	// ScenarioView measures Views (issue 31): every edge creates
	// --objects ConfigMaps that an upsync clause brings back, a View
	// partitioned by their label serves them at the root, and the edges
	// keep changing them at --churn-rate: the view's full list, watch
	// delivery to the whole view and to a partition, and the root's
	// memory per object.
	ScenarioView = "view"
	// ScenarioStatus measures status waves (issue 6): the workload on a
	// subset of the edges, then on all of them, some of whose virtual
	// clusters refuse it (--failing); one change each time, the bytes it
	// brings up to the root and the regions, and whether the
	// CombinedStatus counts are exact.
	ScenarioStatus = "status"
)

// Scenarios lists the scenarios Run accepts, in the order docs list them.
var Scenarios = []string{ScenarioRollout, ScenarioChurn, ScenarioRegionFailure, ScenarioPartition, ScenarioFlakyLinks, ScenarioFlatVsTree, ScenarioStatus, ScenarioRootFailover, ScenarioView}

// Networks, as named by --network.
const (
	// NetworkMemnet carries every link over one in-memory packet network
	// (relay/transport/link/memnet): latency, loss and partitions, no sockets.
	NetworkMemnet = "memnet"
	// NetworkUDP gives every relay its own loopback UDP socket: real
	// kernel sockets, no faults, and a socket (a file) per relay.
	NetworkUDP = "udp"
)

// Arrival modes, as named by --arrival.
const (
	// ArrivalAuto measures at the virtual cluster when an edge syncer is
	// wired (it writes its applied records into the edge's store), else at
	// the inbox.
	ArrivalAuto = "auto"
	// ArrivalInbox: a change has arrived when the edge's inbox holds it.
	ArrivalInbox = "inbox"
	// ArrivalCluster: a change has arrived when the edge syncer has
	// applied it to the edge's virtual cluster.
	ArrivalCluster = "cluster"
)

// Objects a rollout changes, as named by --rollout-object.
const (
	RolloutConfigMap  = "configmap"
	RolloutDeployment = "deployment"
)

// Defaults of Options.
const (
	DefaultTopology  = "1x10x50"
	DefaultScenario  = ScenarioRollout
	DefaultDuration  = 30 * time.Second
	DefaultFlakyLoss = 0.05
	// DefaultObjects is how many ConfigMaps the workload has besides its
	// Deployment (churn changes them).
	DefaultObjects = 10
	// DefaultChurnRate is the churn scenario's writes per second.
	DefaultChurnRate = 20.0
	// DefaultFailing is the status scenario's share of edges whose
	// virtual clusters refuse the workload.
	DefaultFailing = 0.1
	// DefaultStatusEdges is how many edges the status scenario's first
	// wave places the workload on (at most a fifth of the edges).
	DefaultStatusEdges = 100
	// DefaultFlatVsTreeIdle is the flat-vs-tree scenario's idle window,
	// in each of its two phases: the root's CPU per change is compared
	// net of what the root does when nothing changes.
	DefaultFlatVsTreeIdle = 5 * time.Second
)

// Options configure one simulation. cmd/relay fills them from the flags of
// `relay simulate`; the zero value of a field selects its default.
type Options struct {
	// Topology is the fan-out per tier ("1x10x50": a root, 10 regions, 50
	// edges under each; "1x100": 100 edges under the root). The first
	// tier is the root's and must be 1.
	Topology string
	// Scenario is one of Scenarios.
	Scenario string
	// Duration bounds the measured phase of the scenario.
	Duration time.Duration
	// Idle is the idle window before the measured phase: once the
	// placement converged, nothing is written for this long while the
	// root's CPU is profiled, to tell what the root does whatever
	// happens (Raft, heartbeats, report merges, link keep-alives) from
	// what each change costs. Zero selects the scenario's default
	// (DefaultFlatVsTreeIdle for flat-vs-tree, none otherwise);
	// negative: none.
	Idle time.Duration
	// StatusWindow is every region's and the root's --status-window: how
	// long reports from below must stay quiet before they are merged and
	// sent on, at most reports.MaxWaits windows (zero:
	// server.DefaultStatusWindow).
	StatusWindow time.Duration
	// Seed seeds the network's loss and jitter and the scenarios' choices.
	Seed uint64
	// ReportDir, when set, receives report.md, the PNG plots, the JSON
	// summary and the relays' warnings.
	ReportDir string
	// Network is NetworkMemnet (default) or NetworkUDP.
	Network string
	// Latency is the one-way delay of every link (memnet only).
	Latency time.Duration
	// Loss is the share of packets lost on every link, 0..1 (memnet
	// only); the flaky-links scenario uses DefaultFlakyLoss when zero.
	Loss float64
	// AdmissionDelay makes the virtual clusters slow to take writes, as an
	// admission webhook would: each edge's cluster answers every create,
	// update and patch of an object after a delay of its own, in even
	// steps up to AdmissionDelay over the edges, in an order drawn with
	// Seed (so every region has fast and slow ones). A change's status
	// then keeps moving for about AdmissionDelay whatever the fleet's size.
	AdmissionDelay time.Duration
	// Arrival is ArrivalAuto (default), ArrivalInbox or ArrivalCluster.
	Arrival string
	// Objects is how many ConfigMaps the workload has besides its
	// Deployment (0: DefaultObjects; negative: none); ChurnRate the churn
	// and partition scenarios' writes per second.
	Objects   int
	ChurnRate float64
	// NoDeployment leaves the Deployment out of the workload.
	NoDeployment bool
	// RoundTimeout bounds how long a round (a rollout, a fault's recovery)
	// waits for every destination (0: 60 s plus 5 ms per edge).
	RoundTimeout time.Duration
	// RolloutObject is what a rollout changes: RolloutConfigMap (default:
	// cm-0, what Canopy carries) or RolloutDeployment (the Deployment's
	// image: every virtual cluster then also runs a rollout of its own,
	// ReplicaSets and pods, on the same 2 cores).
	RolloutObject string
	// Progress receives a progress bar (nil: none).
	Progress io.Writer
	// Logger receives the simulator's own messages (nil: discarded). The
	// relays log warnings to ReportDir/relays.log when ReportDir is set.
	Logger *slog.Logger
	// RelayLogLevel is the level of the relays' log in
	// ReportDir/relays.log (default warn).
	RelayLogLevel slog.Level
	// Workdir holds the relays' data directories (PKI, the root's log);
	// empty: a temporary directory removed at the end.
	Workdir string
	// Failing is the share of edges, in [0, 1), whose virtual clusters
	// refuse the workload's objects (403, as an admission webhook would;
	// not its namespace), picked with Seed; status scenario only. Zero
	// selects DefaultFailing for the status scenario; negative: none.
	Failing float64
	// StatusEdges is how many edges the status scenario places the
	// workload on first, spread evenly over the root's children (0:
	// DefaultStatusEdges, at most a fifth of the edges, at least 1); it
	// must be fewer than the edges, which the second wave covers.
	StatusEdges int
}

// OptionError is a problem with one option, named as its flag.
type OptionError struct {
	Flag string
	Err  error
}

func (e *OptionError) Error() string { return "--" + e.Flag + ": " + e.Err.Error() }
func (e *OptionError) Unwrap() error { return e.Err }

func optErr(flag, format string, args ...any) error {
	return &OptionError{Flag: flag, Err: fmt.Errorf(format, args...)}
}

// ParseTopology parses "1x10x50" into [1 10 50].
func ParseTopology(s string) ([]int, error) {
	parts := strings.Split(s, "x")
	if len(parts) < 2 {
		return nil, fmt.Errorf("%q is not a fan-out per tier such as 1x10x50 (a root and at least one tier below it)", s)
	}
	out := make([]int, len(parts))
	for i, p := range parts {
		n, err := strconv.Atoi(p)
		if err != nil || n < 1 {
			return nil, fmt.Errorf("%q is not a fan-out per tier such as 1x10x50: %q is not a positive number", s, p)
		}
		out[i] = n
	}
	if out[0] != 1 {
		return nil, fmt.Errorf("%q starts with %d roots: the simulator runs one root relay (write 1x...)", s, out[0])
	}
	return out, nil
}

// Relays counts the relays of a topology below the root and its edges.
func Relays(fanout []int) (regions, edges int) {
	n := 1
	for i, f := range fanout[1:] {
		n *= f
		if i == len(fanout)-2 {
			edges = n
		} else {
			regions += n
		}
	}
	return regions, edges
}

// MaxRelays bounds a simulation's size: 2 cores and 24 GiB hold about
// 10 000 edges (DESIGN.md section 8); past that, setup alone takes minutes.
const MaxRelays = 20000

// udpFilesPerRelay: a relay on loopback UDP holds its dial socket, its data
// directory lock and, for a parent, a UDP and a TCP listener.
const udpFilesPerRelay = 3

// Complete fills defaults.
func (o Options) Complete() Options {
	if o.Topology == "" {
		o.Topology = DefaultTopology
	}
	if o.Scenario == "" {
		o.Scenario = DefaultScenario
	}
	if o.Duration == 0 {
		o.Duration = DefaultDuration
	}
	if o.Network == "" {
		o.Network = NetworkMemnet
	}
	if o.Arrival == "" {
		o.Arrival = ArrivalAuto
	}
	if o.RolloutObject == "" {
		o.RolloutObject = RolloutConfigMap
	}
	if o.Objects == 0 {
		o.Objects = DefaultObjects
	}
	if o.Objects < 0 {
		o.Objects = 0 // only the Deployment
	}
	if o.ChurnRate == 0 {
		o.ChurnRate = DefaultChurnRate
	}
	if o.Scenario == ScenarioFlakyLinks && o.Loss == 0 {
		o.Loss = DefaultFlakyLoss
	}
	if o.Scenario == ScenarioStatus {
		if o.Failing == 0 {
			o.Failing = DefaultFailing
		}
		// Failing edges never apply the workload: arrival is measured
		// at the inboxes.
		if o.Arrival == ArrivalAuto {
			o.Arrival = ArrivalInbox
		}
		if o.StatusEdges == 0 {
			if fan, err := ParseTopology(o.Topology); err == nil {
				_, edges := Relays(fan)
				o.StatusEdges = max(1, min(DefaultStatusEdges, edges/5))
			}
		}
	}
	if o.Failing < 0 {
		o.Failing = 0
	}
	if o.Idle == 0 && o.Scenario == ScenarioFlatVsTree {
		o.Idle = DefaultFlatVsTreeIdle
	}
	if o.Idle < 0 {
		o.Idle = 0 // none
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	return o
}

// Validate lists what is wrong with completed options, one error per
// problem, each an *OptionError naming its flag. openFiles is the
// process's open-file limit (0: unknown), which bounds --network=udp.
func (o Options) Validate(openFiles uint64) []error {
	var errs []error
	if w := o.StatusWindow; w != 0 && (w < server.MinStatusWindow || w > server.MaxStatusWindow) {
		errs = append(errs, optErr("status-window", "must be from %s to %s, not %s", server.MinStatusWindow, server.MaxStatusWindow, w))
	}
	fan, err := ParseTopology(o.Topology)
	if err != nil {
		errs = append(errs, &OptionError{Flag: "topology", Err: err})
	}
	var regions, edges int
	if fan != nil {
		regions, edges = Relays(fan)
		if regions+edges > MaxRelays {
			errs = append(errs, optErr("topology", "%s has %d relays; at most %d fit on this machine", o.Topology, regions+edges, MaxRelays))
		}
	}
	switch {
	case !slices.Contains(Scenarios, o.Scenario):
		errs = append(errs, optErr("scenario", "invalid value %q: must be one of %s", o.Scenario, strings.Join(Scenarios, ", ")))
	case fan != nil && (o.Scenario == ScenarioRegionFailure || o.Scenario == ScenarioPartition) && len(fan) < 3:
		errs = append(errs, optErr("scenario", "%s needs regions: a topology of at least 3 tiers such as 1x2x3, not %s", o.Scenario, o.Topology))
	case fan != nil && o.Scenario == ScenarioRegionFailure && fan[1] < 2:
		errs = append(errs, optErr("scenario", "%s needs a sibling region to re-home to: at least 2 regions under the root, not %s", o.Scenario, o.Topology))
	case fan != nil && o.Scenario == ScenarioFlatVsTree && len(fan) < 3:
		errs = append(errs, optErr("scenario", "%s compares a tree with the flat fleet of its edges: give a tree of at least 3 tiers such as 1x10x50, not %s", o.Scenario, o.Topology))
	case fan != nil && o.Scenario == ScenarioStatus && len(fan) < 3:
		errs = append(errs, optErr("scenario", "%s measures what reaches the root through regions: give a tree of at least 3 tiers such as 1x10x50, not %s", o.Scenario, o.Topology))
	case fan != nil && o.Scenario == ScenarioStatus && (o.StatusEdges < 1 || o.StatusEdges >= edges):
		errs = append(errs, optErr("status-edges", "must be from 1 to %d (fewer than the %d edges of %s, which the second wave covers), not %d", edges-1, edges, o.Topology, o.StatusEdges))
	}
	switch {
	case !(o.Failing >= 0 && o.Failing < 1): // NaN too
		errs = append(errs, optErr("failing", "must be a share from 0 to below 1 (0.1 is 10%% of the edges), not %v", o.Failing))
	case o.Failing > 0 && o.Scenario != ScenarioStatus:
		errs = append(errs, optErr("failing", "only the %s scenario has failing edges (its convergence checks allow for them), not %s", ScenarioStatus, o.Scenario))
	}
	if o.StatusEdges != 0 && o.Scenario != ScenarioStatus {
		errs = append(errs, optErr("status-edges", "only the %s scenario places on a subset of the edges, not %s", ScenarioStatus, o.Scenario))
	}
	if o.Scenario == ScenarioStatus && o.Arrival == ArrivalCluster {
		errs = append(errs, optErr("arrival", "the %s scenario measures at the inboxes: its failing edges never apply the workload (give inbox or auto)", ScenarioStatus))
	}
	if o.Duration < 0 {
		errs = append(errs, optErr("duration", "must not be negative, not %s", o.Duration))
	}
	switch o.Network {
	case NetworkMemnet:
	case NetworkUDP:
		if o.Latency != 0 {
			errs = append(errs, optErr("latency", "needs --network=memnet: loopback UDP has no way to add delay here (no netem)"))
		}
		if o.Loss != 0 && o.Scenario != ScenarioFlakyLinks {
			errs = append(errs, optErr("loss", "needs --network=memnet: loopback UDP has no way to drop packets here (no netem)"))
		}
		if o.Scenario == ScenarioPartition || o.Scenario == ScenarioFlakyLinks {
			errs = append(errs, optErr("network", "udp cannot cut or degrade links (no netem): run %s with --network=memnet", o.Scenario))
		}
		if need := uint64(regions+edges+1) * udpFilesPerRelay; openFiles > 0 && fan != nil && need+256 > openFiles {
			errs = append(errs, optErr("network", "udp needs about %d sockets and files for %d relays, over the open-file limit %d: use --network=memnet (DESIGN.md section 8)", need, regions+edges+1, openFiles))
		}
	default:
		errs = append(errs, optErr("network", "invalid value %q: must be memnet or udp", o.Network))
	}
	if o.Latency < 0 || o.Latency > 10*time.Second {
		errs = append(errs, optErr("latency", "must be from 0 to 10s, not %s", o.Latency))
	}
	if o.AdmissionDelay < 0 || o.AdmissionDelay > time.Minute {
		errs = append(errs, optErr("admission-delay", "must be from 0 to 1m, not %s", o.AdmissionDelay))
	}
	if o.Loss < 0 || o.Loss >= 1 {
		errs = append(errs, optErr("loss", "must be a share from 0 to below 1 (0.05 is 5%%), not %v", o.Loss))
	}
	switch o.Arrival {
	case ArrivalAuto, ArrivalInbox, ArrivalCluster:
	default:
		errs = append(errs, optErr("arrival", "invalid value %q: must be auto, inbox or cluster", o.Arrival))
	}
	if o.Objects > 1000 {
		errs = append(errs, optErr("objects", "must be at most 1000, not %d", o.Objects))
	}
	switch {
	case o.Objects <= 0 && o.Scenario == ScenarioView:
		errs = append(errs, optErr("objects", "%s has every edge create that many ConfigMaps: give at least 1", o.Scenario))
	case o.Objects <= 0 && (o.Scenario == ScenarioChurn || o.Scenario == ScenarioPartition):
		errs = append(errs, optErr("objects", "%s changes ConfigMaps: give at least 1", o.Scenario))
	case o.Objects <= 0 && o.RolloutObject == RolloutConfigMap:
		errs = append(errs, optErr("objects", "a rollout of a ConfigMap needs at least 1 (or --rollout-object=deployment)"))
	case o.Objects <= 0 && o.NoDeployment:
		errs = append(errs, optErr("objects", "the workload would be empty: give at least 1, or keep the Deployment"))
	}
	switch o.RolloutObject {
	case RolloutConfigMap:
	case RolloutDeployment:
		if o.NoDeployment {
			errs = append(errs, optErr("rollout-object", "deployment needs the Deployment in the workload (--deployment)"))
		}
	default:
		errs = append(errs, optErr("rollout-object", "invalid value %q: must be configmap or deployment", o.RolloutObject))
	}
	if o.RoundTimeout < 0 {
		errs = append(errs, optErr("round-timeout", "must not be negative, not %v", o.RoundTimeout))
	}
	if o.ChurnRate <= 0 || o.ChurnRate > 10000 {
		errs = append(errs, optErr("churn-rate", "must be above 0 and at most 10000 writes per second, not %v", o.ChurnRate))
	}
	return errs
}
