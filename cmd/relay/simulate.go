package main

import (
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/canopy-dev/canopy/relay/server"
	"github.com/canopy-dev/canopy/simulations/sim"
)

const simulateLong = `simulate runs a whole Canopy tree in this process and measures it: a root,
the regions and edges of --topology (fan-out per tier: 1x10x50 is a root, 10
regions and 50 edges under each; 1x100 puts 100 edges under the root), every
relay real, each edge with a virtual cluster, links over an in-memory packet
network (--network=memnet, with --latency and --loss) or loopback UDP.

It acts on the root with client-go like a user (Locations, an EdgePlacement,
ConfigMaps and a Deployment), runs --scenario for --duration:

  rollout         change one object (--rollout-object); wait for every
                  destination; again
  churn           a stream of changes to many ConfigMaps
  region-failure  stop region r0; its edges re-home to r1
  partition       cut the link root–r0 for half the duration, then heal
  flaky-links     --loss (default 5%) on every link
  flat-vs-tree    the rollout through the tree, then with every edge under
                  the root: the ratio of root bytes and root CPU
  status          the workload on --status-edges edges, then on all, with
                  --failing of the edges refusing it; one change each time
                  (a status wave): bytes arriving at the root and regions,
                  and whether the CombinedStatus counts are exact
  root-failover   the root as 3 Raft replicas; kill the leader and keep
                  rolling out: the failover gap (kill → next acknowledged
                  write), propagation after it; the killed replica restarts
  view            every edge creates --objects ConfigMaps that come back
                  through an upsync clause; a View partitioned by their
                  label serves them; the edges change them at
                  --churn-rate: the view's full list, edge write → its
                  watchers, root memory per object

and measures root write → arrival per destination (p50, p90, p99, max),
bytes and messages per tier, CPU, memory, reconnects and convergence. A
progress bar goes to stderr, one line of JSON to stdout at the end; with
--report=DIR, report.md and PNG plots go to DIR.

Exit status: 0 when every destination converged (and, for status, every
CombinedStatus was exact), 1 otherwise or on failure, 2 on a usage error.`

func newSimulateCommand() *cobra.Command {
	var (
		o          sim.Options
		relayLevel string
		objects    int
		deployment bool
		quiet      bool
		logLevel   string
		failing    float64
		idle       time.Duration
		pprofAddr  string
	)
	cmd := &cobra.Command{
		Use:   "simulate [--topology=1x10x50] [--scenario=rollout] [--duration=30s] [--seed=N] [--report=DIR]",
		Short: "Simulate a tree of relays with virtual clusters, measure it and report",
		Long:  simulateLong,
		Args:  noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			switch {
			case objects < 0:
				return usageError{flagErrorf("objects", "must be from 0 to 1000, not %d", objects)}
			case objects == 0:
				o.Objects = -1 // only the Deployment
			default:
				o.Objects = objects
			}
			o.NoDeployment = !deployment
			if cmd.Flags().Changed("failing") {
				switch {
				case failing < 0:
					return usageError{flagErrorf("failing", "must be a share from 0 to below 1 (0.1 is 10%% of the edges), not %v", failing)}
				case failing == 0:
					o.Failing = -1 // none
				default:
					o.Failing = failing
				}
			}
			if cmd.Flags().Changed("idle") {
				switch {
				case idle < 0:
					return usageError{flagErrorf("idle", "must not be negative, not %s", idle)}
				case idle == 0:
					o.Idle = -1 // none, flat-vs-tree too
				default:
					o.Idle = idle
				}
			}
			if errs := o.Complete().Validate(openFiles()); len(errs) > 0 {
				return usageError{optionErrors(errs)}
			}
			level := slog.LevelWarn
			if err := level.UnmarshalText([]byte(logLevel)); err != nil {
				return usageError{flagErrorf("log-level", "invalid value %q: must be debug, info, warn or error", logLevel)}
			}
			if err := o.RelayLogLevel.UnmarshalText([]byte(relayLevel)); err != nil {
				return usageError{flagErrorf("relay-log-level", "invalid value %q: must be debug, info, warn or error", relayLevel)}
			}
			if o.RelayLogLevel == slog.LevelInfo {
				o.RelayLogLevel = slog.LevelInfo - 1 // Options: 0 means warn
			}
			o.Logger = slog.New(slog.NewTextHandler(cmd.ErrOrStderr(), &slog.HandlerOptions{Level: level}))
			if pprofAddr != "" {
				stop, err := servePprof(pprofAddr, o.Logger)
				if err != nil {
					return usageError{flagErrorf("pprof", "%v", err)}
				}
				defer stop()
			}
			if !quiet {
				o.Progress = cmd.ErrOrStderr()
			}
			s, err := sim.Run(cmd.Context(), o)
			if s != nil {
				if _, werr := fmt.Fprintf(cmd.OutOrStdout(), "%s\n", s.JSON()); werr != nil && err == nil {
					err = werr
				}
			}
			if err != nil {
				if _, ok := errors.AsType[*sim.OptionError](err); ok {
					return usageError{optionError(err)}
				}
				return err
			}
			if !s.OK {
				if s.Error != "" {
					return fmt.Errorf("simulate: %s", s.Error)
				}
				return fmt.Errorf("simulate: %d of %d destinations converged", s.Converged, s.Destinations)
			}
			return nil
		},
	}
	fs := cmd.Flags()
	fs.StringVar(&o.Topology, "topology", sim.DefaultTopology, "fan-out per tier, from the root: 1x10x50, 1x100, 1x100x100")
	fs.StringVar(&o.Scenario, "scenario", sim.DefaultScenario, "one of "+strings.Join(sim.Scenarios, ", "))
	fs.DurationVar(&o.Duration, "duration", sim.DefaultDuration, "length of the measured phase")
	fs.DurationVar(&o.StatusWindow, "status-window", server.DefaultStatusWindow, "every region's and the root's --status-window: the longest that reports from below must stay quiet before they are merged and sent on (at most 5 windows under a stream)")
	fs.DurationVar(&idle, "idle", 0, "idle window before the measured phase: nothing written while the root's CPU per second is measured, to report the root's marginal CPU per change (0: none; flat-vs-tree defaults to "+sim.DefaultFlatVsTreeIdle.String()+" in each of its phases)")
	fs.Uint64Var(&o.Seed, "seed", 1, "seed of the network's loss and of the scenario's choices")
	fs.StringVar(&o.ReportDir, "report", "", "write report.md, PNG plots, summary.json and a CPU profile into this directory")
	fs.StringVar(&o.Network, "network", sim.NetworkMemnet, "memnet (in-memory packets: latency, loss, partitions) or udp (a loopback socket per relay)")
	fs.DurationVar(&o.Latency, "latency", 0, "one-way latency of every link (memnet)")
	fs.DurationVar(&o.AdmissionDelay, "admission-delay", 0, "virtual clusters slow to admit writes, as behind an admission webhook: each edge's takes its own delay, in even steps up to this over the edges (0: none)")
	fs.Float64Var(&o.Loss, "loss", 0, "share of packets lost on every link, 0 to below 1 (memnet; flaky-links defaults to 0.05)")
	fs.StringVar(&o.Arrival, "arrival", sim.ArrivalAuto, "where a change counts as arrived: inbox, cluster (applied by the edge syncer) or auto (cluster when a syncer is wired)")
	fs.IntVar(&objects, "objects", sim.DefaultObjects, "ConfigMaps in the workload, besides its Deployment (0 to 1000); the view scenario: also those each edge creates")
	fs.BoolVar(&deployment, "deployment", true, "put a Deployment in the workload (each virtual cluster runs its pods)")
	fs.StringVar(&o.RolloutObject, "rollout-object", sim.RolloutConfigMap, "what a rollout changes: configmap (cm-0) or deployment (its image; every virtual cluster then rolls out pods on the same cores)")
	fs.Float64Var(&o.ChurnRate, "churn-rate", sim.DefaultChurnRate, "writes per second of the churn and partition scenarios (at the root) and of the view scenario (at the edges)")
	fs.DurationVar(&o.RoundTimeout, "round-timeout", 0, "how long a round waits for every destination (0: 60s plus 5ms per edge)")
	fs.Float64Var(&failing, "failing", sim.DefaultFailing, "status scenario: share of the edges, 0 to below 1, whose virtual clusters refuse the workload")
	fs.IntVar(&o.StatusEdges, "status-edges", 0, "status scenario: edges of the first wave, spread over the regions (default a fifth of the edges, at most 100)")
	fs.BoolVar(&quiet, "quiet", false, "no progress bar")
	fs.StringVar(&pprofAddr, "pprof", "", "serve net/http/pprof on this loopback address while the simulation runs (127.0.0.1:6060), to profile a long run as it goes")
	fs.StringVar(&logLevel, "log-level", "warn", "level of the simulator's own messages on stderr: debug, info, warn or error")
	fs.StringVar(&relayLevel, "relay-log-level", "warn", "level of the relays' log in DIR/relays.log: debug, info, warn or error")
	return cmd
}

// optionErrors turns the simulator's option errors into flag errors, one
// line each.
func optionErrors(errs []error) error {
	out := make([]error, len(errs))
	for i, err := range errs {
		out[i] = optionError(err)
	}
	return errors.Join(out...)
}

// optionError turns a simulator's option error into a flag error; it
// returns any other error as it is.
func optionError(err error) error {
	if oe, ok := errors.AsType[*sim.OptionError](err); ok {
		return flagErrorf(oe.Flag, "%v", oe.Err)
	}
	return err
}

func openFiles() uint64 {
	var rl syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &rl); err != nil {
		return 0
	}
	return rl.Cur
}
