package placement

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"sort"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/canopy-dev/canopy/relay/layout"
	"github.com/canopy-dev/canopy/relay/store"
	"github.com/canopy-dev/canopy/topology/api/v1alpha1"
	"github.com/canopy-dev/canopy/topology/reports"
	"github.com/canopy-dev/canopy/topology/scheduler"
	"github.com/canopy-dev/canopy/topology/selection"
	"github.com/canopy-dev/canopy/topology/summary"
)

// Config configures a Controller.
type Config struct {
	Store *store.Store
	// Inventory is the space of SyncTargets and Locations; Downsync the
	// space written for the relay tree.
	Inventory, Downsync string
	// Settle is how long a burst of changes is collected before the
	// controller recomputes (0: 20ms): a change that comes within Settle
	// of the last recomputation waits this long. An isolated change (the
	// controller idle for Settle) waits only for the rest of its
	// transaction's events (quickSettle).
	Settle time.Duration
	// ReportWindow bounds how long reports from below must stay quiet
	// before reported state (CombinedStatus, placement status, singleton
	// status) is rewritten (reports.Window), and a stream of them waits at
	// most reports.MaxWaits windows (0: 200ms): the rate limit of those
	// writes.
	ReportWindow time.Duration
	// Reports, when set, returns the store that holds a reports-<child>
	// space instead of Store (whose Space objects still name them), or nil
	// when that child's reports are not at hand: the root keeps reports in
	// memory, out of its log (DESIGN.md section 2). ReportsChanged then
	// receives after they change.
	Reports        func(space string) *store.Store
	ReportsChanged <-chan struct{}
	// Hold, when set, holds reported state back after a restart or an
	// election until the children have reported again, so that statuses
	// are not rewritten from a partial set of reports (summary.Hold).
	Hold *summary.Hold
	// Claims, when set, says which children of Downsync still claim
	// destinations that now reach the root through another child: a
	// child with any is left out of reported state until it drops them,
	// so that no destination is counted twice. It is asked from the
	// controller's loop only, at each report flush. Nil: no child is
	// superseded.
	Claims Claims
	Logger *slog.Logger
}

// Claims is what the controller asks of the relay tree's record of its
// children's claims (relay/transport/mailbox.Mailboxes answers it).
type Claims interface {
	// Superseded returns, per child, the destinations it claims that now
	// reach the root through another child (above: what this relay's
	// parent said had moved away; nil at the root). The answer may be
	// shared: read it, do not change it.
	Superseded(above map[string]int64) (map[string]map[string]int64, error)
}

// Controller runs the placement loop; see the package doc.
type Controller struct {
	cfg Config
	st  *store.Store
	log *slog.Logger

	eng *scheduler.Engine
	// spaces holds the state of every workload description space.
	spaces map[string]*wds
	// targets and locations mirror the inventory.
	targets   map[string]*v1alpha1.SyncTarget
	locations map[string]*v1alpha1.Location

	// dirtyPlacements lists the placements whose slices may have to be
	// rewritten at the next flush.
	dirtyPlacements map[scheduler.PlacementRef]bool
	// touched lists (with their spaces) the workload objects changed
	// since last computed (last); structural says that something else
	// did: placements, the scheduler's answers, namespaces, Customizers,
	// collectors, spaces. Without it, a flush patches last (patch).
	// Together they are what dirty reports.
	touched    map[store.Key]bool
	structural bool
	// reportsDirty says that reports from below changed.
	reportsDirty bool
	// patched and recomputed count the flushes that patched the last
	// outcome and those that computed it whole.
	patched, recomputed int
	// redo is set by a write of the flush that lost a race with another
	// writer and was dropped: the flush is done again.
	redo bool
	last *outcome
	// summary merges the children's reports into reported (its Sink) at
	// each report flush.
	summary  *summary.Summarizer
	reported *reportedState
	// pagers keep each placement's slices stable across recomputations.
	pagers map[scheduler.PlacementRef]*scheduler.Pager
	// wrote remembers, per downsync key (Space empty), what the last
	// flush found or wrote there, so that an entry unchanged since is
	// neither rendered nor compared again (writeDownsync).
	wrote map[store.Key]written
}

// wds is one workload description space.
type wds struct {
	name       string
	placements map[string]*placementState
	// objects are the space's workload objects by key (Space empty).
	objects map[store.Key]*store.Object
	// selected holds, in compareKeys order, the keys of the objects that
	// the clauses of some placement of the space select (whatever its
	// destinations): desired looks at no other object. It is kept up to
	// date object by object (track), and rebuilt (selectedKeys) when
	// selectedStale: after a change of a placement or a Namespace, which
	// can change what is selected.
	selected      []store.Key
	selectedStale bool
	// upsynced holds the keys of the objects labelled v1alpha1.UpsyncedLabel.
	upsynced map[store.Key]bool
	// views are the space's Views, by name.
	views map[string]*viewState
}

func newWDS(name string) *wds {
	return &wds{name: name, placements: map[string]*placementState{}, objects: map[store.Key]*store.Object{}, selectedStale: true,
		upsynced: map[store.Key]bool{}, views: map[string]*viewState{}}
}

// nsLabels returns the labels of the space's Namespace ns (nil when there
// is none), for selection.Selector.Matches.
func (s *wds) nsLabels(ns string) map[string]string {
	if o := s.objects[store.Key{Resource: namespacesRes, Name: ns}]; o != nil {
		return o.Labels
	}
	return nil
}

// selects reports whether the clauses of some placement of s select
// object o at k.
func (s *wds) selects(k store.Key, o *store.Object) bool {
	obj := selection.Object{Group: k.Resource.Group, Resource: k.Resource.Resource, Namespace: k.Namespace, Name: k.Name, Labels: o.Labels}
	for _, ps := range s.placements {
		if _, ok := ps.selector.Matches(obj, s.nsLabels); ok {
			return true
		}
	}
	return false
}

// selectedKeys returns s.selected, rebuilt first if it is stale. The
// slice is valid until the next change of the space.
func (s *wds) selectedKeys() []store.Key {
	if s.selectedStale {
		s.selected = s.selected[:0]
		if len(s.placements) > 0 {
			for k, o := range s.objects {
				if s.selects(k, o) {
					s.selected = append(s.selected, k)
				}
			}
			slices.SortFunc(s.selected, compareKeys)
		}
		s.selectedStale = false
	}
	return s.selected
}

// track brings s.selected up to date with the change of the workload
// object at k (already applied to s.objects) and reports whether the
// change can alter what the controller computes: not when the space has
// no placement, nor when no placement selects the object, before or
// after.
func (s *wds) track(k store.Key) bool {
	if len(s.placements) == 0 {
		// Nothing is selected; the next placement makes selected stale.
		return false
	}
	switch k.Resource {
	case namespacesRes:
		// Its labels may change what namespace selectors select, and
		// it travels with the selected objects it holds.
		s.selectedStale = true
		return true
	case customizersRes, collectorsRes:
		return true // they travel with what uses them, never selected
	}
	if s.selectedStale {
		return true
	}
	i, was := slices.BinarySearchFunc(s.selected, k, compareKeys)
	o := s.objects[k]
	now := o != nil && s.selects(k, o)
	switch {
	case now && !was:
		s.selected = slices.Insert(s.selected, i, k)
	case was && !now:
		s.selected = slices.Delete(s.selected, i, i+1)
	}
	return now || was
}

type placementState struct {
	obj      *v1alpha1.EdgePlacement
	src      *store.Object // its stored version: it travels to its destinations
	selector *selection.Selector
	err      error // the clauses did not compile
}

// New returns a Controller.
func New(cfg Config) *Controller {
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.Settle == 0 {
		cfg.Settle = 20 * time.Millisecond
	}
	if cfg.ReportWindow == 0 {
		cfg.ReportWindow = 200 * time.Millisecond
	}
	c := &Controller{cfg: cfg}
	c.reset()
	return c
}

// reset makes c's state that of a new Controller.
func (c *Controller) reset() {
	*c = Controller{
		cfg: c.cfg, st: c.cfg.Store, log: c.cfg.Logger,
		eng:             scheduler.New(),
		spaces:          map[string]*wds{},
		targets:         map[string]*v1alpha1.SyncTarget{},
		locations:       map[string]*v1alpha1.Location{},
		dirtyPlacements: map[scheduler.PlacementRef]bool{},
		pagers:          map[scheduler.PlacementRef]*scheduler.Pager{},
		wrote:           map[store.Key]written{},
		touched:         map[store.Key]bool{},
	}
	c.reported = &reportedState{c: c}
	c.summary = summary.New(summary.Config{Children: c.reportChildren, Placed: c.st, PlacedSpace: c.cfg.Downsync,
		Sink: c.reported, Hold: c.cfg.Hold})
}

var (
	syncTargetsRes = store.Resource{Group: v1alpha1.GroupName, Resource: v1alpha1.ResourceSyncTargets}
	locationsRes   = store.Resource{Group: v1alpha1.GroupName, Resource: v1alpha1.ResourceLocations}
	placementsRes  = store.Resource{Group: v1alpha1.GroupName, Resource: v1alpha1.ResourceEdgePlacements}
	slicesRes      = store.Resource{Group: v1alpha1.GroupName, Resource: v1alpha1.ResourceSinglePlacementSlices}
	customizersRes = store.Resource{Group: v1alpha1.GroupName, Resource: v1alpha1.ResourceCustomizers}
	collectorsRes  = store.Resource{Group: v1alpha1.GroupName, Resource: "statuscollectors"}
	namespacesRes  = store.Resource{Resource: "namespaces"}
)

// Run loads the state, then follows the store until ctx is done.
func (c *Controller) Run(ctx context.Context) error {
	for ctx.Err() == nil {
		err := c.run(ctx)
		if ctx.Err() != nil {
			return nil
		}
		if !errors.Is(err, store.ErrExpired) && !errors.Is(err, store.ErrTooSlow) {
			return err
		}
		c.log.Info("placement: reloading", "reason", err)
	}
	return nil
}

func (c *Controller) run(ctx context.Context) error {
	rev := c.st.Revision()
	if err := c.load(); err != nil {
		return err
	}
	if err := c.flush(ctx); err != nil {
		return err
	}
	w, err := c.st.Watch(ctx, store.WatchOptions{Since: max(rev, 1)})
	if err != nil {
		return err
	}
	defer w.Stop()
	if c.cfg.Reports != nil {
		c.reportsDirty = true // what was reported before the watch began
	}
	timer := time.NewTimer(time.Hour)
	timer.Stop()
	pending := false
	var flushed time.Time // the end of the last flush of changes
	// Reports wait until they are quiet for the burst's gap, at most
	// reports.MaxWaits gaps (reports.Window).
	win := reports.NewWindow(c.cfg.ReportWindow)
	defer win.Stop()
	if c.reportsDirty { // held back by Config.Hold, or reports kept apart
		win.Note()
	}
	for {
		report := false
		select {
		case <-ctx.Done():
			return nil
		case ev, ok := <-w.Events():
			if !ok {
				return w.Err()
			}
			if !c.observe(ev) {
				continue
			}
			report = isReport(ev.Object.Key)
		case <-c.cfg.ReportsChanged:
			c.reportsDirty, report = true, true
		case <-timer.C:
			pending = false
			if err := c.flush(ctx); err != nil {
				return err
			}
			flushed = time.Now()
		case <-win.C():
			win.Fired()
			if err := c.flush(ctx); err != nil {
				return err
			}
		}
		// After a change, or a flush that lost a write to another writer
		// and left itself dirty: flush again once the window has passed.
		if c.dirty() && !pending {
			pending = true
			wait := c.cfg.Settle
			if time.Since(flushed) >= c.cfg.Settle {
				wait = min(wait, quickSettle)
			}
			timer.Reset(wait)
		}
		if report || c.reportsDirty && !win.Pending() {
			win.Note()
		}
	}
}

// quickSettle is how long an isolated change waits: the events of one
// transaction reach the controller one by one, microseconds apart, and
// are best computed together.
const quickSettle = 2 * time.Millisecond

// load rebuilds the in-memory state from the store.
func (c *Controller) load() error {
	c.reset()
	spaces, err := c.st.List(store.ListOptions{Resource: layout.SpaceResource})
	if err != nil {
		return err
	}
	for _, o := range spaces.Items {
		if layout.SpaceKindOf(o) == layout.SpaceKindWDS {
			if err := c.loadSpace(o.Key.Name); err != nil {
				return err
			}
		}
	}
	inv, err := c.st.List(store.ListOptions{Space: c.cfg.Inventory})
	if err != nil {
		return err
	}
	for _, o := range inv.Items {
		c.observeInventory(store.Event{Type: store.Added, Object: o})
	}
	return nil
}

func (c *Controller) loadSpace(name string) error {
	lr, err := c.st.List(store.ListOptions{Space: name})
	if err != nil {
		return err
	}
	s := newWDS(name)
	c.spaces[name] = s
	for _, o := range lr.Items {
		c.observeWDS(s, store.Event{Type: store.Added, Object: o})
	}
	return nil
}

// observe takes one event into the dirty state; it reports whether there
// is work to flush.
func (c *Controller) observe(ev store.Event) bool {
	if ev.Object == nil {
		return false
	}
	if isReport(ev.Object.Key) {
		c.reportsDirty = true
		return true
	}
	return c.observeInput(ev)
}

// isReport says whether k is a report from below or one of the children's
// route records (which of them counts: Config.Claims).
func isReport(k store.Key) bool {
	_, report := layout.ReportsChild(k.Space)
	return report || k.Space == "" && k.Resource == layout.RouteResource
}

// dirty says that placement inputs changed since last computed.
func (c *Controller) dirty() bool { return c.structural || len(c.touched) > 0 }

// observeInput takes one event of the placement inputs (spaces, the
// inventory, workload description spaces).
func (c *Controller) observeInput(ev store.Event) bool {
	k := ev.Object.Key
	if s := c.spaces[k.Space]; s != nil && k.Space != c.cfg.Inventory {
		return c.observeWDS(s, ev)
	}
	work := c.observeStructure(ev)
	c.structural = c.structural || work
	return work
}

// observeStructure takes one event of the spaces or the inventory.
func (c *Controller) observeStructure(ev store.Event) bool {
	k := ev.Object.Key
	switch {
	case k.Space == "" && k.Resource == layout.SpaceResource:
		if ev.Type == store.Deleted {
			if s := c.spaces[k.Name]; s != nil {
				for name := range s.placements {
					ref := scheduler.PlacementRef{Space: k.Name, Name: name}
					c.eng.DeletePlacement(ref)
				}
				delete(c.spaces, k.Name)
			}
			return true
		}
		if layout.SpaceKindOf(ev.Object) == layout.SpaceKindWDS && c.spaces[k.Name] == nil {
			if err := c.loadSpace(k.Name); err != nil {
				c.log.Error("placement: loading a space", "space", k.Name, "error", err)
			}
			return true
		}
		return false
	case k.Space == c.cfg.Inventory:
		return c.observeInventory(ev)
	}
	return false
}

func (c *Controller) observeInventory(ev store.Event) bool {
	o := ev.Object
	switch o.Key.Resource {
	case syncTargetsRes:
		var changed []scheduler.PlacementRef
		if ev.Type == store.Deleted {
			delete(c.targets, o.Key.Name)
			changed = c.eng.DeleteSyncTarget(o.Key.Name)
		} else {
			var st v1alpha1.SyncTarget
			if err := json.Unmarshal(o.Data, &st); err != nil {
				return false
			}
			c.targets[st.Name] = &st
			changed = c.eng.SetSyncTarget(&st)
		}
		c.markPlacements(changed)
		return true
	case locationsRes:
		var changed []scheduler.PlacementRef
		if ev.Type == store.Deleted {
			delete(c.locations, o.Key.Name)
			changed = c.eng.DeleteLocation(o.Key.Name)
		} else {
			var l v1alpha1.Location
			if err := json.Unmarshal(o.Data, &l); err != nil {
				return false
			}
			c.locations[l.Name] = &l
			changed = c.eng.SetLocation(&l)
		}
		c.markPlacements(changed)
		return true
	}
	return false
}

func (c *Controller) markPlacements(refs []scheduler.PlacementRef) {
	for _, r := range refs {
		c.dirtyPlacements[r] = true
	}
}

func (c *Controller) observeWDS(s *wds, ev store.Event) bool {
	o := ev.Object
	key := o.Key
	key.Space = ""
	switch {
	case key.Resource == placementsRes:
		ref := scheduler.PlacementRef{Space: s.name, Name: key.Name}
		if ev.Type == store.Deleted {
			c.structural = true
			delete(s.placements, key.Name)
			s.selectedStale = true
			c.markPlacements(c.eng.DeletePlacement(ref))
			c.dirtyPlacements[ref] = true
			return true
		}
		var p v1alpha1.EdgePlacement
		if err := json.Unmarshal(o.Data, &p); err != nil {
			return false
		}
		ps := s.placements[key.Name]
		if ps != nil && ps.obj.Generation == p.Generation && ps.obj.UID == p.UID && ps.obj.DeletionTimestamp.Equal(p.DeletionTimestamp) {
			ps.obj, ps.src = &p, o // a status write: nothing to redo
			return false
		}
		if ps == nil {
			ps = &placementState{}
			s.placements[key.Name] = ps
		}
		ps.obj, ps.src = &p, o
		c.structural = true
		ps.selector, ps.err = selection.Compile(p.Spec.Downsync)
		s.selectedStale = true
		c.markPlacements(c.eng.SetPlacement(ref, &p))
		c.dirtyPlacements[ref] = true
		return true
	case key.Resource == viewsRes:
		return c.observeView(s, ev)
	case key.Resource.Group == v1alpha1.GroupName && key.Resource != customizersRes && key.Resource != collectorsRes:
		return false // slices and the like are Canopy's, never placed
	}
	if ev.Type == store.Deleted || deleting(o) {
		delete(s.objects, key)
		delete(s.upsynced, key)
	} else {
		s.objects[key] = o
		if o.Labels[v1alpha1.UpsyncedLabel] == "true" {
			s.upsynced[key] = true
		} else {
			delete(s.upsynced, key)
		}
	}
	if !s.track(key) {
		return false
	}
	switch key.Resource {
	case namespacesRes, customizersRes, collectorsRes:
		// They travel with what they hold or customize.
		c.structural = true
	default:
		c.touched[o.Key] = true
	}
	return true
}

func deleting(o *store.Object) bool {
	var m struct {
		Metadata struct {
			DeletionTimestamp *string `json:"deletionTimestamp"`
		} `json:"metadata"`
	}
	_ = json.Unmarshal(o.Data, &m)
	return m.Metadata.DeletionTimestamp != nil
}

// flush recomputes and writes the differences: the dirty placements'
// slices, the downsync space and placement statuses.
//
// When only workload objects changed, and their placements and
// Customizers did not, the last outcome is patched (patch) and only their
// entries are written: the common case of a rollout, whose cost does not
// depend on the destinations. Otherwise the downsync content is
// recomputed whole (the objects some placement selects × placements, plus
// the destinations of each match: wds.selected keeps those objects, so a
// space's other objects cost nothing here, and their changes no flush at
// all); only what differs from the store is written, so the tree sees
// only real changes. Scheduling itself is incremental
// (topology/scheduler).
func (c *Controller) flush(ctx context.Context) error {
	c.redo = false
	patched := false
	if c.last != nil && !c.structural && len(c.touched) > 0 && len(c.dirtyPlacements) == 0 {
		var keys []store.Key
		if keys, patched = c.patch(c.last, c.touched); patched {
			if err := c.writeDownsyncKeys(ctx, c.last, keys); err != nil {
				return err
			}
			clear(c.touched)
			c.patched++
			if c.redo {
				// Redone whole from the store at the next flush.
				c.structural, c.redo = true, false
			}
		}
	}
	if !patched && (c.dirty() || c.last == nil) {
		placements := maps.Clone(c.dirtyPlacements)
		if err := c.writeSlices(ctx); err != nil {
			return err
		}
		clear(c.dirtyPlacements)
		d := c.desired()
		if err := c.writeDownsync(ctx, d); err != nil {
			return err
		}
		c.last, c.structural = d, false
		c.recomputed++
		clear(c.touched)
		if c.redo {
			// Redone from the store at the next flush.
			c.structural = true
			maps.Copy(c.dirtyPlacements, placements)
			c.redo = false
		}
	}
	// Reported state (CombinedStatuses, singleton statuses, placement
	// statuses) is one Txn: one log entry per flush. It is merged here,
	// not apart, because it is written against this flush's outcome
	// (reportedState). It waits while the children have not reported
	// since a restart (Config.Hold): reportsDirty stays set, so the window
	// looks again.
	wrote, err := c.summary.Flush(ctx)
	switch {
	case errors.Is(err, summary.ErrReportsMoved):
		c.reportsDirty = true
		return nil
	case err != nil:
		return err
	case wrote:
		c.reportsDirty = c.redo
	}
	return nil
}

// jsonMap decodes an object's JSON.
func jsonMap(o *store.Object) map[string]any {
	var m map[string]any
	_ = json.Unmarshal(o.Data, &m)
	return m
}

func sortedKeys[V any](m map[string]V) []string {
	out := slices.Collect(maps.Keys(m))
	sort.Strings(out)
	return out
}

// now is the time written into conditions and new objects.
var now = func() metav1.Time { return metav1.NewTime(time.Now().UTC().Truncate(time.Second)) }

func errorf(format string, args ...any) error { return fmt.Errorf("placement: "+format, args...) }
