package syncer

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	utiljson "k8s.io/apimachinery/pkg/util/json"
	utilnet "k8s.io/apimachinery/pkg/util/net"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"
)

// informer keeps a cache of the objects of one resource, in one namespace
// or all, that a label selector selects, by list and watch, and calls its
// handler for every change. It is what the syncer needs of a client-go
// shared informer, in one goroutine: no handler queue, no resync timer, no
// separate decoding goroutine, and no buffer held while the watch is idle.
// A cluster with a few watches per destination pays a few KiB for each,
// where a client-go informer costs eight goroutines and tens of KiB.
//
// It lists, then watches from the list's resourceVersion (with
// bookmarks); a watch that ends is resumed from the last resourceVersion
// seen, and one that expired (410 Gone) lists again. Errors back off
// exponentially (800 ms to 30 s, with jitter), as a client-go reflector
// does. Each relist calls the handler for every listed object and for
// every cached object that is gone.
//
// Concurrency: the handler is called from the informer's goroutine, one
// call at a time, after the cache has been updated and never with the
// informer's lock held: the handler may take Syncer.mu, and get, list and
// ownedBy may be called holding it (lock order Syncer.mu, then
// informer.mu). Objects in the cache are shared: read only.
type informer struct {
	gvr      schema.GroupVersionResource
	ns       string // "" : all namespaces
	selector string
	owners   bool // index the cache by owner UID (ownedBy)
	dyn      dynamic.Interface
	rc       rest.Interface // for the watch stream
	on       func(*unstructured.Unstructured)
	log      *slog.Logger

	synced atomic.Bool // the first list is in the cache
	cancel context.CancelFunc

	mu      sync.RWMutex
	objects map[string]*unstructured.Unstructured // by namespace/name
	byOwner map[types.UID]map[string]struct{}     // owner UID → keys
}

// informerConfig is what startInformer needs besides the resource.
type informerConfig struct {
	ns, selector string
	owners       bool
	on           func(*unstructured.Unstructured)
	synced       func()
}

// startInformer runs an informer of gvr until Start's context ends or it
// is stopped. on gets every event; synced runs once it has listed.
func (s *Syncer) startInformer(gvr schema.GroupVersionResource, c informerConfig) *informer {
	ctx, cancel := context.WithCancel(s.runCtx)
	i := &informer{
		gvr: gvr, ns: c.ns, selector: c.selector, owners: c.owners,
		dyn: s.dyn, rc: s.rest, on: c.on, cancel: cancel,
		log:     s.log.With("resource", gvr.GroupResource().String(), "namespace", c.ns),
		objects: map[string]*unstructured.Unstructured{},
	}
	if c.owners {
		i.byOwner = map[types.UID]map[string]struct{}{}
	}
	s.informerWG.Go(func() { i.run(ctx, c.synced) })
	return i
}

func (i *informer) stop() { i.cancel() }

func cacheKey(ns, name string) string {
	if ns == "" {
		return name
	}
	return ns + "/" + name
}

// get returns the cached copy of an object (shared: read only).
func (i *informer) get(ns, name string) (*unstructured.Unstructured, bool) {
	i.mu.RLock()
	defer i.mu.RUnlock()
	u, ok := i.objects[cacheKey(ns, name)]
	return u, ok
}

// list returns every cached object (shared: read only).
func (i *informer) list() []*unstructured.Unstructured {
	i.mu.RLock()
	defer i.mu.RUnlock()
	out := make([]*unstructured.Unstructured, 0, len(i.objects))
	for _, u := range i.objects {
		out = append(out, u)
	}
	return out
}

// ownedBy returns the cached objects that have an ownerReference to uid
// (an informer started with owners).
func (i *informer) ownedBy(uid types.UID) []*unstructured.Unstructured {
	i.mu.RLock()
	defer i.mu.RUnlock()
	keys := i.byOwner[uid]
	out := make([]*unstructured.Unstructured, 0, len(keys))
	for k := range keys {
		out = append(out, i.objects[k])
	}
	return out
}

// put stores u (nil: deletes key) and keeps the owner index; mu held.
func (i *informer) putLocked(key string, u *unstructured.Unstructured) {
	if i.owners {
		if old := i.objects[key]; old != nil {
			for _, r := range old.GetOwnerReferences() {
				if m := i.byOwner[r.UID]; m != nil {
					delete(m, key)
					if len(m) == 0 {
						delete(i.byOwner, r.UID)
					}
				}
			}
		}
		if u != nil {
			for _, r := range u.GetOwnerReferences() {
				m := i.byOwner[r.UID]
				if m == nil {
					m = map[string]struct{}{}
					i.byOwner[r.UID] = m
				}
				m[key] = struct{}{}
			}
		}
	}
	if u == nil {
		delete(i.objects, key)
	} else {
		i.objects[key] = u
	}
}

// Backoff of failed lists and watches, as a client-go reflector's.
const (
	informerBackoffMin = 800 * time.Millisecond
	informerBackoffMax = 30 * time.Second
	// A watch that ends sooner than this without an event is retried
	// only after the backoff: a server that closes every watch at once
	// must not be asked again in a loop.
	informerWatchMinLife = time.Second
	// Watches ask the server to end them after a random time in
	// [informerWatchTimeout, 2·informerWatchTimeout), as a reflector's.
	informerWatchTimeout = 5 * time.Minute
)

// run lists and watches until ctx is done.
func (i *informer) run(ctx context.Context, synced func()) {
	attempt := 0
	wait := func() bool {
		d := informerBackoffMin
		for n := 0; n < attempt && d < informerBackoffMax; n++ {
			d *= 2
		}
		d = min(d, informerBackoffMax)
		d += time.Duration(rand.Int64N(int64(d) + 1)) // jitter, as wait.Jitter(d, 1.0)
		attempt++
		t := time.NewTimer(d)
		defer t.Stop()
		select {
		case <-ctx.Done():
			return false
		case <-t.C:
			return true
		}
	}
	for ctx.Err() == nil {
		rv, err := i.relist(ctx)
		if err != nil {
			if ctx.Err() == nil {
				i.log.Debug("listing failed", "error", err)
			}
			if !wait() {
				return
			}
			continue
		}
		attempt = 0
		if !i.synced.Load() {
			i.synced.Store(true)
			if synced != nil {
				synced()
			}
		}
		for ctx.Err() == nil {
			start := time.Now()
			var events int
			rv, events, err = i.watch(ctx, rv)
			if ctx.Err() != nil {
				return
			}
			if isExpired(err) {
				break // list again, at once
			}
			if err == nil && (events > 0 || time.Since(start) >= informerWatchMinLife) {
				attempt = 0
				continue // resume from rv
			}
			if err != nil {
				i.log.Debug("watch failed", "error", err)
			}
			if !wait() {
				return
			}
			if err != nil && !isWatchRetriable(err) {
				break // list again
			}
		}
	}
}

func isExpired(err error) bool {
	return err != nil && (apierrors.IsResourceExpired(err) || apierrors.IsGone(err))
}

// isWatchRetriable: the watch is asked again from where it was, without a
// list (the server is not there, or asks to slow down).
func isWatchRetriable(err error) bool {
	return utilnet.IsConnectionRefused(err) || apierrors.IsTooManyRequests(err)
}

func (i *informer) resource() dynamic.ResourceInterface {
	if i.ns == "" {
		return i.dyn.Resource(i.gvr)
	}
	return i.dyn.Resource(i.gvr).Namespace(i.ns)
}

// relist replaces the cache with a new list and calls the handler for
// every listed object and every cached one that is gone. It returns the
// list's resourceVersion.
func (i *informer) relist(ctx context.Context) (string, error) {
	l, err := i.resource().List(ctx, metav1.ListOptions{LabelSelector: i.selector})
	if err != nil {
		return "", err
	}
	listed := make(map[string]struct{}, len(l.Items))
	changed := make([]*unstructured.Unstructured, 0, len(l.Items))
	i.mu.Lock()
	for n := range l.Items {
		u := &l.Items[n]
		dropManagedFields(u)
		key := cacheKey(u.GetNamespace(), u.GetName())
		listed[key] = struct{}{}
		i.putLocked(key, u)
		changed = append(changed, u)
	}
	for key, u := range i.objects {
		if _, ok := listed[key]; !ok {
			i.putLocked(key, nil)
			changed = append(changed, u)
		}
	}
	i.mu.Unlock()
	for _, u := range changed {
		if ctx.Err() != nil {
			break
		}
		i.on(u)
	}
	return l.GetResourceVersion(), nil
}

// watch follows the resource from rv until the watch ends. It returns
// the last resourceVersion seen and how many events came (bookmarks
// included); a watch the server ended cleanly returns a nil error.
func (i *informer) watch(ctx context.Context, rv string) (string, int, error) {
	timeout := int64((informerWatchTimeout + rand.N(informerWatchTimeout)) / time.Second)
	opts := metav1.ListOptions{
		LabelSelector: i.selector, ResourceVersion: rv, AllowWatchBookmarks: true,
		TimeoutSeconds: &timeout, Watch: true,
	}
	body, err := i.rc.Get().AbsPath(urlSegments(i.gvr, i.ns)...).
		VersionedParams(&opts, metav1.ParameterCodec).
		SetHeader("Accept", "application/json").
		Stream(ctx)
	if err != nil {
		return rv, 0, err
	}
	defer body.Close()
	es := eventStream{r: body}
	defer es.release()
	events := 0
	for {
		raw, err := es.next()
		if err != nil {
			if errors.Is(err, io.EOF) {
				err = nil
			}
			return rv, events, err
		}
		// One decoding of the event, object included, as
		// Unstructured.UnmarshalJSON decodes (integers stay int64): not
		// the event, then its object again.
		var ev struct {
			Type   string         `json:"type"`
			Object map[string]any `json:"object"`
		}
		if err := utiljson.Unmarshal(raw, &ev); err != nil {
			return rv, events, fmt.Errorf("syncer: watch event: %w", err)
		}
		events++
		if ev.Type == "ERROR" {
			var st metav1.Status
			if err := runtime.DefaultUnstructuredConverter.FromUnstructured(ev.Object, &st); err != nil {
				return rv, events, fmt.Errorf("syncer: watch error event: %w", err)
			}
			return rv, events, apierrors.FromObject(&st)
		}
		u := &unstructured.Unstructured{Object: ev.Object}
		if u.GetKind() == "" {
			return rv, events, fmt.Errorf("syncer: watch event object: %w", runtime.NewMissingKindErr(string(raw)))
		}
		if v := u.GetResourceVersion(); v != "" {
			rv = v
		}
		key := cacheKey(u.GetNamespace(), u.GetName())
		switch ev.Type {
		case "ADDED", "MODIFIED":
			dropManagedFields(u)
			i.mu.Lock()
			i.putLocked(key, u)
			i.mu.Unlock()
		case "DELETED":
			i.mu.Lock()
			i.putLocked(key, nil)
			i.mu.Unlock()
		case "BOOKMARK":
			continue
		default:
			return rv, events, fmt.Errorf("syncer: watch event of type %q", ev.Type)
		}
		i.on(u)
	}
}

// urlSegments is the path of a resource's collection, as the dynamic
// client builds it.
func urlSegments(gvr schema.GroupVersionResource, ns string) []string {
	var p []string
	if gvr.Group == "" {
		p = append(p, "api")
	} else {
		p = append(p, "apis", gvr.Group)
	}
	p = append(p, gvr.Version)
	if ns != "" {
		p = append(p, "namespaces", ns)
	}
	return append(p, gvr.Resource)
}

// maxWatchEvent bounds one watch event (a kube object is at most 1.5 MiB
// in etcd).
const maxWatchEvent = 16 << 20

// eventPool holds the buffers of watch streams: a stream holds one only
// while part of an event has arrived.
var eventPool = sync.Pool{New: func() any { return &eventBuffer{b: make([]byte, 0, 8<<10)} }}

type eventBuffer struct{ b []byte }

// eventStream splits a watch response (JSON, one event object after the
// other) into its events. While it waits for an event with nothing
// pending it holds no buffer.
type eventStream struct {
	r        io.Reader
	buf      *eventBuffer // buf.b[off:end] is pending; nil when nothing is
	off, end int
	// Scanner state: buf.b[off:off+scanned] is scanned, at depth, in a
	// string, after a backslash.
	scanned    int
	depth      int
	inStr, esc bool
	first      [64]byte // the first bytes of an event, read while no buffer is held
	pendingErr error    // returned by the stream with bytes still to scan
}

// release gives the buffer back to the pool.
func (e *eventStream) release() {
	if e.buf != nil && cap(e.buf.b) <= 64<<10 {
		eventPool.Put(e.buf)
	}
	e.buf, e.off, e.end = nil, 0, 0
}

// next returns the next event's bytes, valid until the next call.
func (e *eventStream) next() ([]byte, error) {
	for empty := 0; ; {
		if v, err := e.scan(); v != nil || err != nil {
			return v, err
		}
		if e.off == e.end {
			// The last event has been used, and what followed it was
			// blank: wait without a buffer.
			e.release()
		}
		if e.pendingErr != nil {
			if e.pendingErr == io.EOF && e.end > e.off {
				return nil, io.ErrUnexpectedEOF
			}
			return nil, e.pendingErr
		}
		var n int
		var err error
		if e.buf == nil {
			if n, err = e.r.Read(e.first[:]); n > 0 {
				e.buf = eventPool.Get().(*eventBuffer)
				e.buf.b = append(e.buf.b[:0], e.first[:n]...)
				e.off, e.end = 0, n
			}
		} else {
			b := e.buf.b[:cap(e.buf.b)]
			if e.end == len(b) {
				// Full: move the pending bytes to the front, or to a
				// buffer twice as large if they fill half of it.
				pending := e.end - e.off
				if pending >= maxWatchEvent {
					return nil, fmt.Errorf("syncer: watch event larger than %d bytes", maxWatchEvent)
				}
				if pending <= len(b)/2 {
					copy(b, b[e.off:e.end])
				} else {
					nb := make([]byte, 2*len(b))
					copy(nb, b[e.off:e.end])
					e.release()
					e.buf, b = &eventBuffer{}, nb
				}
				e.off, e.end = 0, pending
			}
			n, err = e.r.Read(b[e.end:])
			e.end += n
			e.buf.b = b
		}
		switch {
		case err != nil:
			e.pendingErr = err
		case n == 0:
			if empty++; empty == 100 {
				e.pendingErr = io.ErrNoProgress
			}
		default:
			empty = 0
		}
	}
}

// scan looks for the end of the event that starts at off; it returns the
// event once it is complete.
func (e *eventStream) scan() ([]byte, error) {
	if e.buf == nil {
		return nil, nil
	}
	b := e.buf.b
	for i := e.off + e.scanned; i < e.end; i++ {
		c := b[i]
		switch {
		case e.depth == 0:
			switch c {
			case ' ', '\t', '\r', '\n':
				e.off++ // between events
				continue
			case '{':
				e.depth = 1
			default:
				return nil, fmt.Errorf("syncer: watch stream: %q between events", c)
			}
		case e.inStr:
			switch {
			case e.esc:
				e.esc = false
			case c == '\\':
				e.esc = true
			case c == '"':
				e.inStr = false
			}
		case c == '"':
			e.inStr = true
		case c == '{' || c == '[':
			e.depth++
		case c == '}' || c == ']':
			if e.depth--; e.depth == 0 {
				v := b[e.off : i+1]
				e.off, e.scanned = i+1, 0
				return v, nil
			}
		}
		e.scanned = i + 1 - e.off
	}
	return nil, nil
}
