package auth

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"

	"golang.org/x/sync/errgroup"
	authorizationv1 "k8s.io/api/authorization/v1"
	"k8s.io/apiserver/pkg/authentication/user"
	"k8s.io/apiserver/pkg/authorization/authorizer"

	"github.com/canopy-dev/canopy/relay/store"
)

// Authorizer decides requests with the RBAC objects of each space, as kube's
// RBAC authorizer does, from an in-memory index that Start keeps up to date.
//
// The store lists one space at a time, so the index of a space is loaded
// (its four RBAC resources listed) the first time the watch delivers an RBAC
// change in that space or, failing that, the first time a decision needs it;
// that decision waits for the list. From then on the watch alone keeps the
// space current and decisions never touch the store. Decisions follow the
// store with the lag of a watch, as kube's informers do.
//
// All methods are safe for concurrent use. mu guards spaces and synced:
// decisions hold it for reading while they walk an index; the watch loop
// holds it for writing while it applies an event, loads a space or resyncs,
// and so does a decision that loads a space. Under mu the Authorizer calls
// only the store's Revision, List and Watch, which never call back.
type Authorizer struct {
	st store.Reader
	// Inert, when set before Start, reports RBAC objects that take no
	// effect in their own space: a workload description space's RBAC
	// objects are workload, stored inert and applied only at the
	// destinations they are placed on (denaturing, DESIGN.md section 5).
	Inert func(obj *store.Object) bool

	mu     sync.RWMutex
	spaces map[string]*rbacIndex
	synced bool
}

// NewAuthorizer returns an Authorizer reading st. It decides nothing but
// system:masters and the built-in grants until Start has opened its watches.
func NewAuthorizer(st store.Reader) *Authorizer {
	return &Authorizer{st: st, spaces: map[string]*rbacIndex{}}
}

// Start follows the RBAC objects of every space until ctx is done, then
// returns nil. It watches the four RBAC resources across all spaces; when a
// watch fails with store.ErrExpired or store.ErrTooSlow it drops the index,
// opens new watches at the current revision and re-lists the spaces it had
// loaded. Other store errors end Start with that error. Call Start once.
func (a *Authorizer) Start(ctx context.Context) error {
	defer func() {
		a.mu.Lock()
		a.spaces, a.synced = map[string]*rbacIndex{}, false
		a.mu.Unlock()
	}()
	for {
		err := a.follow(ctx)
		if ctx.Err() != nil {
			return nil
		}
		if !errors.Is(err, store.ErrExpired) && !errors.Is(err, store.ErrTooSlow) && !errors.Is(err, errWatchEnded) {
			return fmt.Errorf("auth: following RBAC objects: %w", err)
		}
	}
}

// Synced reports whether the Authorizer is following the store (its watches
// are open), so that Authorize and RulesFor can use the RBAC objects of
// spaces. It turns false while watches are reopened and after Start returns.
func (a *Authorizer) Synced() bool {
	a.mu.RLock()
	defer a.mu.RUnlock()
	return a.synced
}

// follow (re)builds the index and applies watch events until a watch ends
// or ctx is done.
func (a *Authorizer) follow(ctx context.Context) error {
	ws, err := a.resync(ctx)
	if err != nil {
		return err
	}
	defer func() {
		for _, w := range ws {
			w.Stop()
		}
	}()
	g, ctx := errgroup.WithContext(ctx)
	for k, w := range ws {
		g.Go(func() error { return a.consume(ctx, kind(k), w) })
	}
	return g.Wait()
}

// resync opens one watch per kind at the current revision and reloads the
// spaces that were loaded, all under the lock, so that no load can happen
// between the two and every list is at or after the watches' start.
func (a *Authorizer) resync(ctx context.Context) ([]store.Watcher, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.synced = false
	ws := make([]store.Watcher, 0, numKinds)
	stop := func() {
		for _, w := range ws {
			w.Stop()
		}
	}
	rev := a.st.Revision()
	for _, res := range kindResources {
		w, err := a.st.Watch(ctx, store.WatchOptions{Resource: res, Since: rev})
		if err != nil {
			stop()
			return nil, fmt.Errorf("watching %s: %w", res, err)
		}
		ws = append(ws, w)
	}
	old := a.spaces
	a.spaces = make(map[string]*rbacIndex, len(old))
	for space := range old {
		ix, err := a.load(space)
		if err != nil {
			stop()
			return nil, err
		}
		a.spaces[space] = ix
	}
	a.synced = true
	return ws, nil
}

// consume applies the events of w, which watches kind k, until w ends or ctx
// is done (then it returns nil).
func (a *Authorizer) consume(ctx context.Context, k kind, w store.Watcher) error {
	for {
		select {
		case <-ctx.Done():
			return nil
		case ev, ok := <-w.Events():
			if !ok {
				if err := w.Err(); err != nil {
					return fmt.Errorf("watching %s: %w", kindResources[k], err)
				}
				if ctx.Err() != nil {
					return nil
				}
				return fmt.Errorf("watching %s: %w", kindResources[k], errWatchEnded)
			}
			if err := a.apply(k, ev); err != nil {
				return err
			}
		}
	}
}

// apply applies one event of kind k. An event in a space not loaded yet
// loads the space instead: the list, made now, already includes the event.
func (a *Authorizer) apply(k kind, ev store.Event) error {
	if ev.Object == nil { // bookmark
		return nil
	}
	space := ev.Object.Key.Space
	a.mu.Lock()
	defer a.mu.Unlock()
	ix := a.spaces[space]
	if ix == nil {
		loaded, err := a.load(space)
		if err != nil {
			return err
		}
		a.spaces[space] = loaded
		return nil
	}
	if ev.Revision <= ix.listed[k] {
		return nil
	}
	if ev.Type == store.Deleted || a.inert(ev.Object) {
		ix.remove(k, ev.Object.Key)
	} else {
		ix.put(k, ev.Object)
	}
	if k == kindClusterRole {
		ix.aggregate()
	}
	return nil
}

func (a *Authorizer) inert(obj *store.Object) bool { return a.Inert != nil && a.Inert(obj) }

// load lists the RBAC objects of space into a new index. It reads only
// the store; a caller that installs the index in spaces holds mu for
// writing.
func (a *Authorizer) load(space string) (*rbacIndex, error) {
	ix := newRBACIndex()
	for k, res := range kindResources {
		l, err := a.st.List(store.ListOptions{Space: space, Resource: res})
		if err != nil {
			return nil, fmt.Errorf("auth: listing %s in space %q: %w", res, space, err)
		}
		for _, obj := range l.Items {
			if !a.inert(obj) {
				ix.put(kind(k), obj)
			}
		}
		ix.listed[k] = l.Revision
	}
	ix.aggregate()
	return ix, nil
}

// read calls fn with the index of space, loading it first if needed. fn
// runs under mu and must not keep what it reads from the index.
func (a *Authorizer) read(space string, fn func(*rbacIndex)) error {
	if loaded, err := a.readLoaded(space, fn); loaded || err != nil {
		return err
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if !a.synced {
		return ErrNotSynced
	}
	ix := a.spaces[space]
	if ix == nil {
		var err error
		if ix, err = a.load(space); err != nil {
			return err
		}
		a.spaces[space] = ix
	}
	fn(ix)
	return nil
}

// readLoaded calls fn with the index of space if it is loaded.
func (a *Authorizer) readLoaded(space string, fn func(*rbacIndex)) (bool, error) {
	a.mu.RLock()
	defer a.mu.RUnlock()
	if !a.synced {
		return false, ErrNotSynced
	}
	ix := a.spaces[space]
	if ix == nil {
		return false, nil
	}
	fn(ix)
	return true, nil
}

// Authorize decides a request made in space, described by attrs (whose
// GetUser must be set), as kube's authorizer chain would: members of
// system:masters may do everything; otherwise the built-in grants and the
// space's RBAC rules are searched for one that allows it. It returns
// DecisionAllow with kube's reason ("RBAC: allowed by ..."), or
// DecisionNoOpinion (RBAC never denies outright) with the reason kube gives,
// empty unless some binding referred to a missing role. Anything but
// DecisionAllow must be refused (see NewForbidden). The error is
// ErrNotSynced when the space's rules are needed and Start is not running,
// or a store error from loading the space.
func (a *Authorizer) Authorize(_ context.Context, space string, attrs authorizer.Attributes) (authorizer.Decision, string, error) {
	u := attrs.GetUser()
	if u == nil {
		return authorizer.DecisionNoOpinion, "", errors.New("auth: request has no user")
	}
	if slices.Contains(u.GetGroups(), user.SystemPrivilegedGroup) {
		return authorizer.DecisionAllow, "", nil
	}
	c := ruleChecker{attrs: attrs}
	if builtin.visit(u, "", c.visit) {
		if err := a.read(space, func(ix *rbacIndex) { ix.visit(u, attrs.GetNamespace(), c.visit) }); err != nil {
			return authorizer.DecisionNoOpinion, "", err
		}
	}
	if c.allowed {
		return authorizer.DecisionAllow, c.reason, nil
	}
	return authorizer.DecisionNoOpinion, c.denyReason(), nil
}

// RulesFor lists what u may do in namespace of space, for a
// SelfSubjectRulesReview: the rules of every binding that applies to u
// (ClusterRoleBindings, then the RoleBindings of namespace), the built-in
// grants, and cluster-admin's rules for system:masters. incomplete is true
// when some binding referred to a missing role, or the space's rules could
// not be read (ErrNotSynced, a store error).
func (a *Authorizer) RulesFor(space string, u user.Info, namespace string) ([]authorizationv1.ResourceRule, []authorizationv1.NonResourceRule, bool) {
	var c ruleCollector
	if slices.Contains(u.GetGroups(), user.SystemPrivilegedGroup) {
		c.add(clusterAdminRules)
	}
	builtin.visit(u, "", c.visit)
	if err := a.read(space, func(ix *rbacIndex) { ix.visit(u, namespace, c.visit) }); err != nil {
		c.incomplete = true
	}
	return c.resource, c.nonResource, c.incomplete
}
