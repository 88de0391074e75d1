package sim

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"sort"
	"strings"
	"time"
)

// Files of a report besides the plots.
const (
	ReportFile  = "report.md"
	SummaryFile = "summary.json"
	ProfileFile = "cpu.pprof"
	// StartProfileFile is the CPU profile of starting every relay.
	StartProfileFile = "start.pprof"
	// GoroutinesFile is the goroutine profile at the end (debug=1: counts
	// by stack), to see what each relay runs.
	GoroutinesFile = "goroutines.txt"
	// HeapFile is the heap profile once every destination holds the
	// workload.
	HeapFile = "heap.pprof"
	// HeapEndFile is the heap profile at the end: against HeapFile, what
	// the measured phase left in memory (history, caches).
	HeapEndFile = "heap-end.pprof"
)

// writeReport writes report.md, summary.json, the plots and the CPU
// profile of the measured phase into o.ReportDir.
func writeReport(o Options, s *Summary) error {
	dir := o.ReportDir
	if err := os.WriteFile(filepath.Join(dir, SummaryFile), append(s.JSON(), '\n'), 0o644); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, ReportFile), markdown(o, s), 0o644); err != nil {
		return err
	}
	if err := writePlots(dir, s); err != nil && s.Error == "" {
		return err
	}
	for name, b := range map[string][]byte{HeapFile: s.heap, HeapEndFile: s.heapEnd} {
		if len(b) == 0 {
			continue
		}
		if err := os.WriteFile(filepath.Join(dir, name), b, 0o644); err != nil {
			return err
		}
	}
	if len(s.goroutines) > 0 {
		if err := os.WriteFile(filepath.Join(dir, GoroutinesFile), s.goroutines, 0o644); err != nil {
			return err
		}
	}
	if len(s.profile) > 0 {
		if err := os.WriteFile(filepath.Join(dir, ProfileFile), s.profile, 0o644); err != nil {
			return err
		}
	}
	return nil
}

func kib(b float64) string { return fmt.Sprintf("%.1f KiB", b/1024) }

// markdown renders the report.
func markdown(o Options, s *Summary) []byte {
	var b bytes.Buffer
	w := func(format string, args ...any) { fmt.Fprintf(&b, format, args...) }
	verdict := "every destination converged"
	if !s.OK {
		verdict = fmt.Sprintf("**%d of %d destinations converged**", s.Converged, s.Destinations)
	}
	w("# Simulation: %s on %s\n\n", s.Scenario, s.Topology)
	if s.Error != "" {
		w("**The simulation stopped early: %s**\n\n", s.Error)
	}
	w("`relay simulate --topology=%s --scenario=%s --duration=%s --seed=%d --network=%s", o.Topology, o.Scenario, o.Duration, o.Seed, o.Network)
	if o.Idle > 0 {
		w(" --idle=%s", o.Idle)
	}
	if o.Latency > 0 {
		w(" --latency=%s", o.Latency)
	}
	if o.Loss > 0 {
		w(" --loss=%g", o.Loss)
	}
	if o.AdmissionDelay > 0 {
		w(" --admission-delay=%s", o.AdmissionDelay)
	}
	if o.Scenario == ScenarioStatus {
		w(" --failing=%g --status-edges=%d", o.Failing, o.StatusEdges)
	}
	w("`  \n%s, %d CPUs (GOMAXPROCS %d), %s/%s, %s. %s.\n\n", runtime.Version(), runtime.NumCPU(), runtime.GOMAXPROCS(0), runtime.GOOS, runtime.GOARCH,
		time.Now().Format("2006-01-02 15:04"), verdict)

	w("Every relay is real and in this process: the root (`server.Open`, its kube API on loopback HTTPS, placement controller, Raft log on disk), ")
	w("%d regions and %d edges (`server.OpenChild`, in-memory stores), each edge with a virtual cluster; links are QUIC over ", s.Regions, s.Edges)
	if o.Network == NetworkMemnet {
		w("the in-memory packet network (one-way latency %s).\n", o.Latency)
	} else {
		w("loopback UDP, a socket per relay.\n")
	}
	dep, target := " and a Deployment", "ConfigMap cm-0"
	if o.NoDeployment {
		dep = ""
	}
	if o.RolloutObject == RolloutDeployment {
		target = "the Deployment's image (each virtual cluster then rolls out ReplicaSets and pods too)"
	}
	w("The simulator acts like a user, with client-go against the root: one Location per group of edges, a namespace, %d ConfigMaps%s, a StatusCollector, and an EdgePlacement that places them on every Location. A rollout changes %s.\n", o.Objects, dep, target)
	w("A change *arrives* when a destination holds its version (or a later one) %s.\n\n", map[string]string{
		ArrivalInbox:   "in its edge relay's inbox (the edge syncer is not wired, or `--arrival=inbox`)",
		ArrivalCluster: "applied to its virtual cluster by the edge syncer (its applied record)",
	}[s.Arrival])

	w("## Timeline\n\n| phase | seconds |\n|---|---|\n")
	w("| start every relay (join, certificates, links, inventory) | %.1f |\n", s.StartS)
	w("| of which: until every relay's link is up | %.1f |\n", s.LinkedS)
	w("| initial placement: EdgePlacement created → workload at every destination | %.1f |\n", s.PlacementS)
	if s.IdleS > 0 {
		w("| idle window: nothing written, the root's CPU profiled | %.1f |\n", s.IdleS)
	}
	w("| measured phase (%s) | %.1f |\n\n", s.Scenario, s.MeasuredS)
	if len(s.Events) > 0 {
		w("Events (numbered as in the convergence plot):\n\n")
		for i, ev := range s.Events {
			w("%d. at %.1f s: %s\n", i+1, ev.AtS, ev.What)
		}
		w("\n")
	}

	w("## Propagation: root write → arrival, per destination and change\n\n")
	w("| writes of phase | samples | p50 ms | p90 ms | p99 ms | max ms | reflected in CombinedStatus: p50 / p99 / max ms |\n|---|---|---|---|---|---|---|\n")
	statusCol := func(name string) string {
		if h := s.statusHists[name]; h != nil && h.n > 0 {
			l := h.summary()
			return fmt.Sprintf("%.0f / %.0f / %.0f", l.P50, l.P99, l.Max)
		}
		return "not measured"
	}
	for _, ph := range s.Phases {
		w("| %s | %d | %.1f | %.1f | %.1f | %.1f | %s |\n", ph.Phase, ph.Samples, ph.P50, ph.P90, ph.P99, ph.Max, statusCol(ph.Phase))
	}
	if s.InboxPropagation != nil {
		l := s.InboxPropagation
		w("| %s, at the edges' inboxes | %d | %.1f | %.1f | %.1f | %.1f | |\n", s.Scenario, l.Samples, l.P50, l.P90, l.P99, l.Max)
	}
	if l := s.APIWrite; l.Samples > 0 {
		w("| %s, the root's API answering the write | %d | %.1f | %.1f | %.1f | %.1f | |\n", s.Scenario, l.Samples, l.P50, l.P90, l.P99, l.Max)
	}
	if l := s.FirstHop; l != nil {
		w("| %s, first hop: at the regions' inboxes | %d | %.1f | %.1f | %.1f | %.1f | |\n", s.Scenario, l.Samples, l.P50, l.P90, l.P99, l.Max)
	}
	w("\n%d changes in the measured phase. CombinedStatus: %s.\n\n", s.Changes, s.CombinedStatusNote)
	w("![latency CDF](%s)\n\n", PlotLatency)

	w("## Bytes and messages per tier (measured phase)\n\n")
	w("Tier 1 is the root's links, tier 2 the links below them. *Down* is the downsync stream (Put, Delete, Progress), *up* acks and reports; *packets* counts QUIC packets both ways on the network (handshakes, keep-alives, retransmissions).\n\n")
	w("| tier | links | down bytes | down messages | objects sent | up bytes | up messages | of which reports | resyncs | packet bytes | down bytes per change |\n|---|---|---|---|---|---|---|---|---|---|---|\n")
	tierRows(&b, s)
	w("\nRoot bytes per change: **%s** (%d changes).\n\n", kib(s.RootBytesPerChange), s.Changes)
	w("![bytes per tier](%s)\n\n", PlotBytes)

	w("## CPU and memory\n\n")
	w("Process CPU in the measured phase: %.2f s over %.1f s (%.0f%% of %d cores).", s.CPUSeconds, s.MeasuredS, 100*s.CPUSeconds/max(s.MeasuredS, 0.001)/float64(runtime.NumCPU()), runtime.NumCPU())
	if len(s.CPUByTier) > 0 {
		w(" Split by tier from a CPU profile (pprof labels on every relay's goroutines; *edge: virtual-cluster* is the edges' simulated clusters, their API servers included; *other* is the Go runtime's GC, timers and the simulator), and per destination and change:\n\n| tier | CPU s | ms per destination and change |\n|---|---|---|\n")
		for _, t := range sortedTiers(s.CPUByTier) {
			w("| %s | %.2f | %.3f |\n", t, s.CPUByTier[t], s.CPUPerDestChangeMs[t])
		}
		if all, ok := s.CPUPerDestChangeMs["all"]; ok {
			w("| all | %.2f | **%.3f** |\n", s.CPUSeconds, all)
		}
		w("\nRoot CPU per change: **%.2f ms**.", s.RootCPUPerChangeMs)
		if r := s.RootIdleCPUMsPerS; r != nil {
			w(" In the idle window before the measured phase (%.1f s, nothing written) the root used **%.2f ms of CPU per second**: what it does whatever happens (Raft, heartbeats, report merges, link keep-alives).", s.IdleS, *r)
			if m := s.RootCPUPerChangeMarginalMs; m != nil {
				w(" The measured phase's root CPU less that rate over its length, per change (marginal): **%.2f ms**.", *m)
			}
		}
		if s.RootReportsPerChange > 0 {
			w(" The root's children sent up **%.1f reports per change** (%.2f per child), %.2f per child and second: a child reports while the status below it moves, at most about once per status window (`--status-window`) and key, so per change the reports follow how long a change keeps the status moving.", s.RootReportsPerChange, s.RootReportsPerChild, s.RootReportsPerChildPerS)
		}
		if s.RootLogEntriesPerChange > 0 {
			w(" The root's Raft log grew by %.1f entries per change: the change and what the root wrote from it (placement, statuses). The root keeps its children's reports in memory, out of its log.", s.RootLogEntriesPerChange)
		}
		w("\n\n")
	} else {
		w(" (No split by tier: another CPU profile was running.)\n\n")
	}
	w("| memory | heap live MiB | stacks MiB | Go total MiB | RSS MiB | peak RSS MiB | goroutines |\n|---|---|---|---|---|---|---|\n")
	for _, m := range []struct {
		name string
		m    Memory
	}{{"root only", s.MemoryBeforeEdges}, {"after placement", s.MemoryAfterPlacement}, {"end", s.MemoryEnd}} {
		w("| %s | %.0f | %.0f | %.0f | %.0f | %.0f | %d |\n", m.name, m.m.HeapLiveMiB, m.m.StacksMiB, m.m.TotalMiB, m.m.RSSMiB, m.m.PeakRSSMiB, m.m.Goroutines)
	}
	w("\nPer edge (its relay, virtual cluster and inbox; the regions' share included), after placement: **%.0f KiB of heap, %.0f KiB of goroutine stacks, %.0f goroutines**",
		s.HeapPerEdgeKiB, s.StacksPerEdgeKiB, s.GoroutinesPerEdge)
	if s.HeapPerEdgeEndKiB > 0 {
		w("; at the end, **%.0f KiB of heap**", s.HeapPerEdgeEndKiB)
	}
	w(".\n\n")
	w("Reconnects per tier over the whole run: %s.\n\n", joinUints(s.Reconnects))

	w("## Convergence\n\n")
	w("At the end, %d of %d destinations hold exactly what their parent routes to them (content hash of the inbox = routed content hash of the parent's mailbox).\n\n", s.Converged, s.Destinations)
	for _, u := range s.Unconverged {
		w("- not converged: %s\n", u)
	}
	if len(s.Unconverged) > 0 {
		w("\n")
	}
	w("![converged destinations](%s)\n\n", PlotConverged)

	if r := s.Rehome; r != nil {
		w("## Region failure\n\n%s was stopped, and a change made. The root saw it disconnected after %.1f s (a stopped relay closes its links; a crashed one would be noticed after the links' idle timeout); its %d children were then restarted under %s (%d destinations), and held the latest versions %.1f s later: **%.1f s** from the kill to every destination converged. The root's inventory shows %d of %d of them under %s.\n\n",
			r.Region, r.DetectedS, r.Moved, r.Sibling, r.Edges, r.RehomedS, r.ConvergedS, r.PathsUpdated, r.Edges, r.Sibling)
	}
	if r := s.Failover; r != nil {
		w("## Root failover\n\nThe root ran as %d Raft replicas; the root's children were spread over them (each lists all three). The leader %s was killed (server.Root.Crash: its Raft node, store and kube API stop at once; on the in-memory network its links, to %d of the root's children, go silent, as a dead process's would). ", r.Replicas, r.Killed, r.Linked)
		w("%s led %.2f s later (leader changes seen besides the kill: %d before it, %d after; replicas of one busy process miss heartbeats); the user's next write, retried on the next replica (a follower forwards it to the leader), was acknowledged **%.2f s after the kill** (the failover gap; failed attempts before it: %d). ", r.NewLeader, r.ElectedS, r.LeaderChangesBefore, r.LeaderChangesAfter, r.GapS, r.FailedAttempts)
		relinked := "were not all seen re-linked"
		if r.RelinkedS >= 0 {
			relinked = fmt.Sprintf("re-linked to a survivor after %.2f s (the links' idle timeout, then a dial)", r.RelinkedS)
		}
		w("The children linked to it %s; every destination held that write %.2f s after the kill. See the phases *failover* (the write made during the election) and *after* (writes through the two survivors) above.\n\n", relinked, r.ConvergedS)
		if r.RestartS > 0 {
			caught := "**did not catch up** within a minute"
			if r.CaughtUpS >= 0 {
				caught = fmt.Sprintf("caught up (its downsync space hashes as the leader's) %.2f s after the restart", r.CaughtUpS)
			}
			rejoined := "**not** seen matching the leader as a voter after it"
			if r.Rejoined {
				rejoined = "after it, it matched the leader again and was a voter of its configuration"
			}
			w("%s restarted on its data directory in %.2f s and %s; phase *rejoined* is a rollout through the three; %s.\n\n", r.Killed, r.RestartS, caught, rejoined)
		}
	}
	if r := s.Partition; r != nil {
		dropped := "stayed open (QUIC retransmitted)"
		if r.LinkDown {
			dropped = "dropped and was re-dialed (resumed from its cursor)"
		}
		w("## Partition\n\nThe link root–%s was cut for %.1f s while %d writes changed %d keys; the link %s. After the heal, every destination converged in **%.1f s**. The root had sent %d objects into the cut link before it dropped; from the drop to convergence it sent %s **%d objects, %s** (%d resyncs); the latest versions of the changed keys weigh %s.",
			r.Region, r.CutS, r.Writes, r.Keys, dropped, r.CatchUpS, r.CutObjects, r.Region, r.Objects, kib(float64(r.Bytes)), r.Resyncs, kib(float64(r.LatestSize)))
		switch {
		case r.LinkDown && r.Objects <= uint64(r.Keys+2):
			w(" Catch-up cost what changed, not how long the cut lasted (DESIGN.md section 2).\n\n")
		case r.LinkDown:
			w(" **More objects than changed keys**: catch-up did not cost only what changed (DESIGN.md section 2).\n\n")
		default:
			w(" The link outlived the cut, so what the root had sent during it was retransmitted by QUIC: a cut shorter than the idle timeout costs the writes made (bounded by the stream's flow-control window), not only the keys changed.\n\n")
		}
	}
	if c := s.FlatVsTree; c != nil {
		w("## Flat vs tree\n\nThe same %d rollouts, first through the tree (%s), then with the same %d edges each dialing the root (%s).", c.Rounds, s.Topology, s.Edges, c.Flat.Topology)
		if s.IdleS > 0 {
			w(" Each phase starts with an idle window (%.1f s tree, %.1f s flat: nothing written) that measures the root's CPU per second when nothing changes; the *marginal* root CPU per change is the measured phase's root CPU less that rate over the phase's length, per change: what a change costs, apart from the work the root does whatever happens.", s.IdleS, c.Flat.IdleS)
		}
		w("\n\n")
		w("| | tree | flat | flat / tree |\n|---|---|---|---|\n")
		w("| root bytes per change | %s | %s | **%.1f×** |\n", kib(c.TreeRootBytes), kib(c.FlatRootBytes), c.RootBytesRatio)
		if c.RootCPURatio > 0 {
			w("| root CPU per change | %.2f ms | %.2f ms | **%.1f×** |\n", c.TreeRootCPUMs, c.FlatRootCPUMs, c.RootCPURatio)
		}
		if tr, fl := c.TreeRootIdleCPUMsPerS, c.FlatRootIdleCPUMsPerS; tr != nil && fl != nil {
			ratio := "–" // no sample of the tree's root
			if *tr > 0 {
				ratio = fmt.Sprintf("%.1f×", *fl / *tr)
			}
			w("| root CPU per second, idle window | %.2f ms/s | %.2f ms/s | %s |\n", *tr, *fl, ratio)
		}
		if c.TreeRootMarginalMs != nil && c.FlatRootMarginalMs != nil {
			ratio := "–"
			switch {
			case c.RootIdleShare > MaxIdleShare:
				ratio = fmt.Sprintf("– (idle: %.0f %% of a phase's CPU)", 100*c.RootIdleShare)
			case c.RootMarginalRatio > 0:
				ratio = fmt.Sprintf("**%.1f×**", c.RootMarginalRatio)
			}
			w("| root CPU per change, marginal (less the idle rate) | %.2f ms | %.2f ms | %s |\n", *c.TreeRootMarginalMs, *c.FlatRootMarginalMs, ratio)
		}
		w("| p50 propagation | %.1f ms | %.1f ms | |\n| p99 propagation | %.1f ms | %.1f ms | |\n", c.TreeP50, c.FlatP50, c.TreeP99, c.FlatP99)
		w("| start every relay | %.1f s | %.1f s | |\n\n", s.StartS, c.Flat.StartS)
		w("Flat fleet, bytes per tier:\n\n| tier | links | down bytes | down messages | objects sent | up bytes | up messages | of which reports | resyncs | packet bytes | down bytes per change |\n|---|---|---|---|---|---|---|---|---|---|---|\n")
		tierRows(&b, c.Flat)
		w("\n")
	}
	if r := s.StatusWaves; r != nil {
		statusSection(&b, o, s, r)
	}
	if r := s.View; r != nil {
		viewSection(&b, s, r)
	}
	w("## Files\n\n`%s` (this page), `%s` (the JSON line), `%s` (CPU profile of the measured phase: `go tool pprof -tagfocus=%s=root %s`), `%s` (CPU profile of starting every relay), `%s` (heap profile after the initial placement), `%s` (goroutines by stack at the end), `relays.log` (the relays' warnings).\n",
		ReportFile, SummaryFile, ProfileFile, tierLabel, ProfileFile, StartProfileFile, HeapFile, GoroutinesFile)
	return b.Bytes()
}

// statusSection renders the status scenario's waves.
func statusSection(b *bytes.Buffer, o Options, s *Summary, r *StatusWaves) {
	w := func(format string, args ...any) { fmt.Fprintf(b, format, args...) }
	w("## Status waves\n\n")
	subset, all := 0, s.Edges
	if len(r.Waves) > 0 {
		subset = r.Waves[0].Edges
	}
	w("The EdgePlacement first selected %d edges spread evenly over the root's children (a Location over the label `%s`), then every Location (%d edges). ", subset, subsetLabel, all)
	w("The virtual clusters of %.0f%% of the edges (`--failing=%g`, picked with the seed, as many among the first ones) refuse the workload's objects, not its namespace: 403 from an admission webhook, with a reason naming the edge. ", o.Failing*100, o.Failing)
	w("Once the CombinedStatuses were exact and no report arrived any more, one change of %s made every destination report again: a *status wave*. ", r.Object)
	w("*Bytes in* is what arrived over the children's upsync streams (`session.ChildStatus.Up`: reports, progress and resync frames) from the change until nothing more arrived for %s: at the root, and at every region summed.\n\n", quiet)
	w("| wave | edges placed | failing | root bytes in | root messages | region bytes in | region messages | exact after s | CombinedStatus exact |\n|---|---|---|---|---|---|---|---|---|\n")
	for _, wv := range r.Waves {
		exact := "yes"
		if !wv.Exact {
			exact = "**no**: " + wv.Mismatch
		}
		w("| %s | %d | %d | %d | %d | %d | %d | %.1f | %s |\n", wv.Name, wv.Edges, wv.Failing, wv.RootBytes, wv.RootMessages,
			wv.RegionBytes, wv.RegionMessages, wv.ExactS, exact)
	}
	for _, wv := range r.Waves {
		if wv.Diagnosis != "" {
			w("\n%s, below the root: %s\n", wv.Name, wv.Diagnosis)
		}
	}
	if len(r.Waves) >= 2 {
		first, last := r.Waves[0], r.Waves[len(r.Waves)-1]
		w("\nRoot bytes in per wave, %d edges / %d edges: **%.2f×** (edges ×%.1f; region bytes ×%.2f).", last.Edges, first.Edges, r.RootBytesRatio,
			float64(last.Edges)/float64(max(first.Edges, 1)), float64(last.RegionBytes)/float64(max(first.RegionBytes, 1)))
		if r.RootBytesRatio > 0 && r.RootBytesRatio <= 1.25 {
			w(" The root's share of a status wave does not grow with the number of edges.\n\n")
		} else {
			w(" **The root's share grows with the number of edges**: see what was stored below.\n\n")
		}
	}
	w("The CombinedStatus of %s at the end of each wave:\n\n| wave | destinations | at the latest version | failingCount | failing (listed) |\n|---|---|---|---|---|\n", r.Object)
	for _, wv := range r.Waves {
		ob := wv.Observed
		w("| %s | %d | %d | %d | %d: %s |\n", wv.Name, ob.Destinations, ob.AtVersion, ob.FailingCount, len(ob.Failing), abbreviate(ob.Failing))
	}
	if len(r.Waves) > 0 && len(r.Waves[0].Observed.Reasons) > 0 {
		w("\nA reason, as listed: `%s`\n", r.Waves[0].Observed.Reasons[0])
	}
	w("\nReports stored during each wave (`reports-<child>` spaces), by resource: a report is the whole state of its key (state, not events), written again each time a child forwards a new version of it.\n\n| wave | tier | resource | writes | bytes | children | writes per child | bytes per write | first to last write s |\n|---|---|---|---|---|---|---|---|---|\n")
	for _, wv := range r.Waves {
		for _, t := range []struct {
			name string
			by   map[string]ReportWrites
		}{{"root", wv.RootWrites}, {"regions", wv.RegionWrites}} {
			keys := make([]string, 0, len(t.by))
			for k := range t.by {
				keys = append(keys, k)
			}
			sort.Strings(keys)
			for _, k := range keys {
				c := t.by[k]
				w("| %s | %s | %s | %d | %d | %d | %.1f | %.0f | %.2f |\n", wv.Name, t.name, k, c.Writes, c.Bytes, c.Children,
					float64(c.Writes)/float64(max(c.Children, 1)), float64(c.Bytes)/float64(max(c.Writes, 1)), c.SpreadS)
			}
		}
	}
	w("\n")
}

func tierRows(b *bytes.Buffer, s *Summary) {
	for _, t := range s.Tiers {
		per := 0.0
		if s.Changes > 0 {
			per = float64(t.DownBytes) / float64(s.Changes)
		}
		fmt.Fprintf(b, "| %d | %d | %d | %d | %d | %d | %d | %d | %d | %d | %s |\n", t.Tier, t.Links, t.DownBytes, t.DownMessages, t.DownObjects, t.UpBytes, t.UpMessages, t.UpReports, t.Resyncs, t.PacketBytes, kib(per))
	}
}

func joinUints(xs []uint64) string {
	var parts []string
	for i, x := range xs {
		parts = append(parts, fmt.Sprintf("tier %d: %d", i+1, x))
	}
	if len(parts) == 0 {
		return "none"
	}
	return strings.Join(parts, ", ")
}

// viewSection renders the view scenario's figures.
func viewSection(b *bytes.Buffer, s *Summary, r *ViewResult) {
	w := func(format string, args ...any) { fmt.Fprintf(b, format, args...) }
	w("## View\n\nEvery edge's virtual cluster created its ConfigMaps (%d in all, in %.1f s); an upsync clause brought them back, and the View `%s`, partitioned by `%s`, listed every one of them %.1f s after its creation (its status counts %d). Then %d changes at the edges, while the whole view was listed again and again and two informers took the changes.\n\n",
		r.Objects, r.CreateS, r.View, viewLabel, r.FillS, r.StatusObjects, r.EdgeWrites)
	w("| | samples | p50 | p99 | max |\n|---|---|---|---|---|\n")
	w("| full list through the root's kube API (pages of %d; %d objects) | %d | %.1f ms | %.1f ms | %.1f ms |\n", r.PageSize, r.Listed, r.List.Samples, r.List.P50, r.List.P99, r.List.Max)
	w("| edge write → informer of the whole view | %d | %.1f ms | %.1f ms | %.1f ms |\n", r.WatchView.Samples, r.WatchView.P50, r.WatchView.P99, r.WatchView.Max)
	w("| edge write → informer of partition %s | %d | %.1f ms | %.1f ms | %.1f ms |\n\n", r.Partition, r.WatchPartition.Samples, r.WatchPartition.P50, r.WatchPartition.P99, r.WatchPartition.Max)
	if r.Missed > 0 {
		w("**%d writes never reached the whole view's informer.**\n\n", r.Missed)
	}
	w("Root memory per view object: the live heap grew by %.1f MiB (%.1f → %.1f MiB, after a GC, before the View and once it was full, the reports quiet both times): **%.0f bytes per object**; the views space's objects weigh %.0f bytes each as JSON in the root's store (%s in all).\n\n",
		r.HeapDeltaMiB, r.HeapBeforeMiB, r.HeapAfterMiB, r.HeapPerObjectBytes, r.StoreBytesPerObject, kib(float64(r.StoreBytes)))
}
