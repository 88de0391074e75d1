package sim

import (
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/canopy-dev/canopy/relay/transport/link/memnet"
	"github.com/canopy-dev/canopy/relay/transport/session"
)

// A scenario acts on the fleet for e.o.Duration, through the root's kube
// API like a user, and injects faults; Run measures around it.
type scenario func(e *env) error

var scenarios = map[string]scenario{
	ScenarioRollout:       rollout,
	ScenarioChurn:         churn,
	ScenarioRegionFailure: regionFailure,
	ScenarioPartition:     partition,
	ScenarioFlakyLinks:    flakyLinks,
	ScenarioFlatVsTree:    rollout,
	ScenarioStatus:        statusWaves,
	ScenarioRootFailover:  rootFailover,
	ScenarioView:          view,
}

// minRounds is the fewest rollout rounds a scenario makes.
const minRounds = 3

// rolloutFor changes the rollout object, waits until every destination has
// the new version, and again, until d has passed (at least least times),
// or exactly e.rounds times when set.
func rolloutFor(e *env, d time.Duration, least int, bar bool) error {
	end := time.Now().Add(d)
	for n := 0; ; n++ {
		if e.rounds > 0 {
			if n >= e.rounds {
				return nil
			}
		} else if n >= least && !time.Now().Before(end) {
			return nil
		}
		if err := e.u.rollout(e.ctx, e.o.RolloutObject); err != nil {
			return err
		}
		e.changes++
		if err := e.t.waitConverged(e.ctx, e.roundTimeout(), fmt.Sprintf("rollout %d at every destination", n+1)); err != nil {
			return err
		}
		if bar {
			e.progressTime(end, n+1)
		}
	}
}

// progressTime moves the bar by elapsed time (or rounds when fixed).
func (e *env) progressTime(end time.Time, rounds int) {
	if e.rounds > 0 {
		e.p.set(rounds * 100 / e.rounds)
		return
	}
	total := end.Sub(e.start)
	if total > 0 {
		e.p.set(min(100, int(100*time.Since(e.start)/total)))
	}
}

// rollout: one object (cm-0, or the Deployment's image) changes, and
// every destination must have it before the next change.
func rollout(e *env) error {
	e.p.phase("rollout", 100)
	return rolloutFor(e, e.o.Duration, minRounds, true)
}

// churn: a stream of changes to the ConfigMaps, at o.ChurnRate writes per
// second, without waiting; destinations may skip versions (state, not
// events), and a version counts as arrived when a newer one does.
func churn(e *env) error {
	e.p.phase("churn", 100)
	end := time.Now().Add(e.o.Duration)
	if err := e.churnUntil(end, true); err != nil {
		return err
	}
	return nil
}

// churnUntil writes random ConfigMaps at the churn rate until end and
// returns how many distinct ones it changed.
func (e *env) churnUntil(end time.Time, bar bool) error {
	every := time.Duration(float64(time.Second) / e.o.ChurnRate)
	tk := time.NewTicker(every)
	defer tk.Stop()
	for time.Now().Before(end) {
		i := e.rng.IntN(len(e.u.configMaps))
		if err := e.u.change(e.ctx, i); err != nil {
			return err
		}
		e.changes++
		if bar {
			e.progressTime(end, 0)
		}
		select {
		case <-e.ctx.Done():
			return e.ctx.Err()
		case <-tk.C:
		}
	}
	return nil
}

// regionFailure: a region dies; its children restart under a sibling
// region (re-homing); a change made meanwhile must reach every
// destination, and the root's inventory must show the new paths.
func regionFailure(e *env) error {
	f := e.f
	victim, sibling := f.byName["r0"], f.byName["r1"]
	if victim == nil || sibling == nil || victim.isEdge() || sibling.isEdge() {
		return errorf("region-failure needs regions r0 and r1")
	}
	e.p.phase("region failure", 100)
	e.t.setPhase("before")
	if err := rolloutFor(e, 0, 1, false); err != nil {
		return err
	}
	var children, below []*relay
	for _, r := range append(append([]*relay(nil), f.regions...), f.edges...) {
		if r.parent == victim {
			children = append(children, r)
		}
		if r.isEdge() && under(r, victim) {
			below = append(below, r)
		}
	}
	names := make([]string, len(below))
	for i, r := range below {
		names[i] = r.name
	}
	e.t.mark(names, "re-homed")
	e.t.setPhase("outage")
	killed := time.Now()
	e.event("kill " + victim.name)
	if err := f.kill(victim); err != nil {
		return err
	}
	// A change the dead region's destinations miss until they re-home.
	if err := e.u.rollout(e.ctx, e.o.RolloutObject); err != nil {
		return err
	}
	e.changes++
	// Re-homing starts once the failure shows at the root (the link's
	// idle timeout): what an operator, or automation, would act on.
	if err := waitUntil(e.ctx, 4*f.linkCfg.MaxIdleTimeout, "the root to see "+victim.name+" disconnected", func() bool {
		for _, c := range f.root.Children() {
			if c.Identity.Name == victim.name {
				return !c.Connected
			}
		}
		return true
	}); err != nil {
		return err
	}
	detected := time.Since(killed)
	e.event("the root sees " + victim.name + " disconnected")
	rehomed := time.Now()
	e.event(fmt.Sprintf("re-home %d relays (%d destinations) of %s to %s", len(children), len(below), victim.name, sibling.name))
	var wg sync.WaitGroup
	errs := make(chan error, len(children))
	sem := make(chan struct{}, 16)
	for _, c := range children {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			if err := f.rehome(e.ctx, c, sibling); err != nil {
				errs <- err
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		return err
	}
	if err := e.t.waitConverged(e.ctx, e.roundTimeout(), "every destination after re-homing"); err != nil {
		return err
	}
	res := &RehomeResult{Region: victim.name, Sibling: sibling.name, Moved: len(children), Edges: len(below),
		DetectedS: detected.Seconds(), RehomedS: time.Since(rehomed).Seconds(), ConvergedS: time.Since(killed).Seconds()}
	e.event("every destination converged")
	e.p.set(50)
	// The root's inventory shows the new paths.
	want := "root/" + sibling.name + "/"
	_ = waitUntil(e.ctx, 30*time.Second, "new paths in the inventory", func() bool {
		paths, err := e.u.paths(e.ctx)
		if err != nil {
			return false
		}
		res.PathsUpdated = 0
		for _, r := range below {
			if strings.HasPrefix(paths[r.name], want) {
				res.PathsUpdated++
			}
		}
		return res.PathsUpdated == len(below)
	})
	e.event(fmt.Sprintf("inventory: %d of %d paths under %s", res.PathsUpdated, len(below), sibling.name))
	e.s.Rehome = res
	e.t.setPhase("after")
	return rolloutFor(e, e.o.Duration-time.Since(e.start), 1, false)
}

// under reports whether r is below a.
func under(r, a *relay) bool {
	for p := r.parent; p != nil; p = p.parent {
		if p == a {
			return true
		}
	}
	return false
}

// partition: the link between the root and region r0 is cut for half the
// duration (at least twice the links' idle timeout) while ConfigMaps churn; after it heals, the region's subtree
// catches up with the latest state (what changed, not every event).
func partition(e *env) error {
	f := e.f
	victim := f.byName["r0"]
	if victim == nil || victim.isEdge() {
		return errorf("partition needs a region r0")
	}
	victim.mu.Lock()
	dial := victim.dialAddr
	victim.mu.Unlock()
	if dial == "" {
		return errorf("cannot find %s's endpoint on the in-memory network (relay/server numbers them; has that changed?)", victim.name)
	}
	e.p.phase("partition", 100)
	e.t.setPhase("before")
	if err := rolloutFor(e, 0, 1, false); err != nil {
		return err
	}
	var below []string
	for _, r := range f.edges {
		if under(r, victim) {
			below = append(below, r.name)
		}
	}
	e.t.mark(below, "cut off")
	link := func() session.ChildStatus {
		for _, c := range f.root.Children() {
			if c.Identity.Name == victim.name {
				return c
			}
		}
		return session.ChildStatus{}
	}
	// Longer than the idle timeout: the link drops, and the region
	// resumes from its cursor after the heal.
	cutLen := max(e.o.Duration/2, 2*f.linkCfg.MaxIdleTimeout)
	res := &PartitionResult{Region: victim.name, CutS: cutLen.Seconds(), CatchUpS: -1}
	e.s.Partition = res // filled in as it goes: a failed run shows how far it got
	before := link()
	dropped := before // the root's counters when it saw the link down
	e.t.setPhase("partition")
	e.event(fmt.Sprintf("cut the link root–%s (%d destinations below) for %s", victim.name, len(below), cutLen))
	if err := f.mn.Partition(f.rootAddr, dial); err != nil {
		return err
	}
	n0 := e.changes
	keys := map[int]bool{}
	end := time.Now().Add(cutLen)
	every := time.Duration(float64(time.Second) / e.o.ChurnRate)
	for time.Now().Before(end) {
		i := e.rng.IntN(len(e.u.configMaps))
		keys[i] = true
		if err := e.u.change(e.ctx, i); err != nil {
			return err
		}
		e.changes++
		e.progressTime(e.start.Add(e.o.Duration), 0)
		if l := link(); !l.Connected && !res.LinkDown {
			res.LinkDown, dropped = true, l
			e.event("the root sees the link to " + victim.name + " down")
		}
		time.Sleep(every)
	}
	res.Writes, res.Keys = e.changes-n0, len(keys)
	if l := link(); !l.Connected && !res.LinkDown {
		res.LinkDown, dropped = true, l
	}
	healed := time.Now()
	e.event("heal the link root–" + victim.name)
	if err := f.mn.Heal(f.rootAddr, dial); err != nil {
		return err
	}
	if err := e.t.waitConverged(e.ctx, e.roundTimeout(), "every destination after the partition healed"); err != nil {
		n, of := e.regions.converged()
		return fmt.Errorf("%w (the root's children holding the latest versions: %d of %d; lagging: %v)", err, n, of, e.regions.lagging(5))
	}
	res.CatchUpS = time.Since(healed).Seconds()
	after := link()
	res.Objects, res.Bytes, res.Resyncs = after.Down.Objects-dropped.Down.Objects, after.Down.BytesSent-dropped.Down.BytesSent, after.Down.Resyncs-dropped.Down.Resyncs
	res.CutObjects = dropped.Down.Objects - before.Down.Objects
	for i := range keys {
		cm, err := e.u.kube.CoreV1().ConfigMaps(Namespace).Get(e.ctx, fmt.Sprintf("cm-%d", i), metav1.GetOptions{})
		if err == nil {
			b, _ := json.Marshal(cm)
			res.LatestSize += len(b)
		}
	}
	e.event(fmt.Sprintf("every destination converged; the root sent %s %d objects for %d writes to %d keys", victim.name, res.Objects, res.Writes, res.Keys))
	e.t.setPhase("after")
	return rolloutFor(e, e.o.Duration-time.Since(e.start), 1, false)
}

// flakyLinks: o.Loss of the packets of every link are lost during
// rollouts; the links are clean again at the end.
func flakyLinks(e *env) error {
	e.p.phase("flaky links", 100)
	e.event(fmt.Sprintf("%.1f%% loss on every link", e.o.Loss*100))
	e.f.mn.SetDefault(memnet.Link{Latency: e.o.Latency, Loss: e.o.Loss})
	err := rolloutFor(e, e.o.Duration, minRounds, true)
	e.f.mn.SetDefault(memnet.Link{Latency: e.o.Latency})
	e.event("loss off")
	return err
}

// connectedEdges counts the edges whose uplink is up.
func (f *fleet) connectedEdges() int {
	n := 0
	for _, e := range f.edges {
		e.mu.Lock()
		c, running := e.child, e.stop != nil
		e.mu.Unlock()
		if c != nil && running && c.Uplink().Connected() {
			n++
		}
	}
	return n
}
