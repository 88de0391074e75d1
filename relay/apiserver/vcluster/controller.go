package vcluster

import (
	"container/heap"
	"context"
	"encoding/json"
	"errors"
	"hash/fnv"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	appsv1client "k8s.io/client-go/kubernetes/typed/apps/v1"
	batchv1client "k8s.io/client-go/kubernetes/typed/batch/v1"
	corev1client "k8s.io/client-go/kubernetes/typed/core/v1"

	"github.com/canopy-dev/canopy/relay/layout"
	"github.com/canopy-dev/canopy/relay/store"
)

// Resources the simulated control plane acts on.
var (
	resPods         = store.Resource{Resource: "pods"}
	resNodes        = store.Resource{Resource: "nodes"}
	resDeployments  = store.Resource{Group: "apps", Resource: "deployments"}
	resReplicaSets  = store.Resource{Group: "apps", Resource: "replicasets"}
	resStatefulSets = store.Resource{Group: "apps", Resource: "statefulsets"}
	resDaemonSets   = store.Resource{Group: "apps", Resource: "daemonsets"}
	resJobs         = store.Resource{Group: "batch", Resource: "jobs"}
)

// ownerResources maps a controller owner's kind to its resource.
var ownerResources = map[string]store.Resource{
	"Deployment": resDeployments, "ReplicaSet": resReplicaSets, "StatefulSet": resStatefulSets,
	"DaemonSet": resDaemonSets, "Job": resJobs,
}

// retryDelay is how long a failed reconcile waits before it runs again.
const retryDelay = 100 * time.Millisecond

// workKey names an object to reconcile.
type workKey struct {
	res      store.Resource
	ns, name string
}

// controller is one cluster's whole simulated control plane and kubelet:
// the Deployment, ReplicaSet, StatefulSet, DaemonSet and Job controllers,
// the scheduler and the kubelets of all nodes.
//
// It reads the cluster's store directly (the store is the cluster's etcd
// and its watch cache at once: no informer cache duplicates it) through one
// store watch over the whole space, and writes through the cluster's API
// with client-go, so every write gets the API server's semantics (uids,
// generation, defaulting, status subresource, garbage collection).
//
// Concurrency: everything runs in the goroutine of run, plus the store
// watcher's goroutine; the controller's fields are touched only by run.
// Pods wait for ReadyDelay in one timer heap served by one time.Timer.
type controller struct {
	c     *Cluster
	log   *slog.Logger
	st    *store.Store
	space string
	core  corev1client.CoreV1Interface
	apps  appsv1client.AppsV1Interface
	batch batchv1client.BatchV1Interface

	queue  []workKey
	queued map[workKey]struct{}
	timers timerHeap
	timer  *time.Timer
	// armed holds the pods waiting for the kubelet: when they are due.
	armed map[workKey]time.Time

	rnd      *rand.Rand // generated names
	nodes    []string
	nextNode int
	nextIP   uint32
}

func newClients(c *Cluster) (corev1client.CoreV1Interface, appsv1client.AppsV1Interface, batchv1client.BatchV1Interface, error) {
	cfg := c.RESTConfig()
	cfg.QPS = -1 // no client-side throttling for the cluster's own controllers
	cfg.UserAgent = "vcluster-controllers/" + c.opts.Name
	hc := &http.Client{Transport: c.transport}
	core, err := corev1client.NewForConfigAndClient(cfg, hc)
	if err != nil {
		return nil, nil, nil, err
	}
	apps, err := appsv1client.NewForConfigAndClient(cfg, hc)
	if err != nil {
		return nil, nil, nil, err
	}
	batch, err := batchv1client.NewForConfigAndClient(cfg, hc)
	if err != nil {
		return nil, nil, nil, err
	}
	return core, apps, batch, nil
}

func newController(c *Cluster) (*controller, error) {
	core, apps, batch, err := newClients(c)
	if err != nil {
		return nil, err
	}
	h := fnv.New64a()
	h.Write([]byte(c.opts.Name))
	t := time.NewTimer(time.Hour)
	t.Stop()
	return &controller{
		c: c, log: c.opts.Logger.With("vcluster", c.opts.Name), st: c.store, space: layout.DefaultSpace,
		core: core, apps: apps, batch: batch,
		queued: map[workKey]struct{}{},
		timer:  t,
		armed:  map[workKey]time.Time{},
		rnd:    rand.New(rand.NewPCG(uint64(c.opts.Seed), h.Sum64())),
		nodes:  nodeNames(c.opts),
	}, nil
}

// run follows the store until ctx is done, starting over (with a fresh
// list) when the watch ends early.
func (k *controller) run(ctx context.Context) error {
	for {
		err := k.follow(ctx)
		if ctx.Err() != nil {
			return nil
		}
		k.log.Warn("vcluster controllers restarting", "error", err)
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(retryDelay):
		}
	}
}

var errWatchClosed = errors.New("vcluster: store watch closed")

func (k *controller) follow(ctx context.Context) error {
	list, err := k.st.List(store.ListOptions{Space: k.space})
	if err != nil {
		return err
	}
	for _, obj := range list.Items {
		k.observe(obj, false)
	}
	w, err := k.st.Watch(ctx, store.WatchOptions{Space: k.space, Since: list.Revision})
	if err != nil {
		return err
	}
	defer w.Stop()
	events := w.Events()
	handle := func(ev store.Event, ok bool) error {
		if !ok {
			if err := w.Err(); err != nil {
				return err
			}
			return errWatchClosed
		}
		if ev.Object != nil {
			k.observe(ev.Object, ev.Type == store.Deleted)
		}
		return nil
	}
	for {
		// Take in everything that happened before acting, so that a burst
		// of events about one object costs one reconcile.
		for drained := false; !drained; {
			select {
			case ev, ok := <-events:
				if err := handle(ev, ok); err != nil {
					return err
				}
			case <-k.timer.C:
				k.fire()
			default:
				drained = true
			}
		}
		if key, ok := k.pop(); ok {
			if err := k.reconcile(ctx, key); err != nil {
				if ctx.Err() != nil {
					return ctx.Err()
				}
				k.after(key, retryDelay)
			}
			continue
		}
		select {
		case ev, ok := <-events:
			if err := handle(ev, ok); err != nil {
				return err
			}
		case <-k.timer.C:
			k.fire()
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// objectMeta is the part of an object observe needs.
type objectMeta struct {
	Metadata struct {
		OwnerReferences []metav1.OwnerReference `json:"ownerReferences"`
	} `json:"metadata"`
}

// observe queues the work an object's change implies.
func (k *controller) observe(obj *store.Object, deleted bool) {
	key := workKey{res: obj.Key.Resource, ns: obj.Key.Namespace, name: obj.Key.Name}
	switch obj.Key.Resource {
	case resDeployments, resStatefulSets, resDaemonSets, resJobs:
		k.enqueue(key)
	case resReplicaSets, resPods:
		if key.res == resPods {
			if deleted {
				delete(k.armed, key)
			} else {
				k.enqueue(key)
			}
		} else {
			k.enqueue(key)
		}
		var m objectMeta
		if json.Unmarshal(obj.Data, &m) != nil {
			return
		}
		for _, ref := range m.Metadata.OwnerReferences {
			if ref.Controller == nil || !*ref.Controller {
				continue
			}
			if res, ok := ownerResources[ref.Kind]; ok {
				k.enqueue(workKey{res: res, ns: key.ns, name: ref.Name})
			}
		}
	case resNodes:
		list, err := k.st.List(store.ListOptions{Space: k.space, Resource: resDaemonSets})
		if err != nil {
			return
		}
		for _, ds := range list.Items {
			k.enqueue(workKey{res: resDaemonSets, ns: ds.Key.Namespace, name: ds.Key.Name})
		}
	}
}

func (k *controller) reconcile(ctx context.Context, key workKey) error {
	switch key.res {
	case resDeployments:
		return k.syncDeployment(ctx, key)
	case resReplicaSets:
		return k.syncReplicaSet(ctx, key)
	case resStatefulSets:
		return k.syncStatefulSet(ctx, key)
	case resDaemonSets:
		return k.syncDaemonSet(ctx, key)
	case resJobs:
		return k.syncJob(ctx, key)
	case resPods:
		return k.syncPod(ctx, key)
	}
	return nil
}

// enqueue adds key to the work queue unless it is there already.
func (k *controller) enqueue(key workKey) {
	if _, ok := k.queued[key]; ok {
		return
	}
	k.queued[key] = struct{}{}
	k.queue = append(k.queue, key)
}

func (k *controller) pop() (workKey, bool) {
	if len(k.queue) == 0 {
		if cap(k.queue) > 64 {
			k.queue = nil // give back what a burst grew
		}
		return workKey{}, false
	}
	key := k.queue[0]
	k.queue[0] = workKey{}
	k.queue = k.queue[1:]
	delete(k.queued, key)
	return key, true
}

// after queues key again once d has passed.
func (k *controller) after(key workKey, d time.Duration) {
	at := time.Now().Add(d)
	heap.Push(&k.timers, timerEntry{at: at, key: key})
	if k.timers[0].at.Equal(at) {
		k.timer.Reset(d)
	}
}

// fire queues every key that is due and rearms the timer.
func (k *controller) fire() {
	now := time.Now()
	for len(k.timers) > 0 && !k.timers[0].at.After(now) {
		k.enqueue(heap.Pop(&k.timers).(timerEntry).key)
	}
	if len(k.timers) > 0 {
		k.timer.Reset(k.timers[0].at.Sub(now))
	} else if cap(k.timers) > 64 {
		k.timers = nil
	}
}

type timerEntry struct {
	at  time.Time
	key workKey
}

// timerHeap orders timers by due time.
type timerHeap []timerEntry

func (h timerHeap) Len() int           { return len(h) }
func (h timerHeap) Less(i, j int) bool { return h[i].at.Before(h[j].at) }
func (h timerHeap) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *timerHeap) Push(x any)        { *h = append(*h, x.(timerEntry)) }
func (h *timerHeap) Pop() any {
	old := *h
	e := old[len(old)-1]
	old[len(old)-1] = timerEntry{}
	*h = old[:len(old)-1]
	return e
}

// get decodes the stored object at key into into; ok is false when it does
// not exist.
func (k *controller) get(key workKey, into any) (bool, error) {
	obj, err := k.st.Get(store.Key{Space: k.space, Resource: key.res, Namespace: key.ns, Name: key.name})
	if errors.Is(err, store.ErrNotFound) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	return true, json.Unmarshal(obj.Data, into)
}

// list decodes the objects of res in ns that sel selects (nil: all) and
// that owner controls (empty: any).
func list[T any, PT interface {
	*T
	GetOwnerReferences() []metav1.OwnerReference
}](k *controller, res store.Resource, ns string, sel labels.Selector, owner string) ([]*T, error) {
	l, err := k.st.List(store.ListOptions{Space: k.space, Resource: res, Namespace: ns, Label: sel})
	if err != nil {
		return nil, err
	}
	out := make([]*T, 0, len(l.Items))
	for _, obj := range l.Items {
		v := new(T)
		if err := json.Unmarshal(obj.Data, v); err != nil {
			return nil, err
		}
		if owner != "" && !controlledBy(PT(v).GetOwnerReferences(), owner) {
			continue
		}
		out = append(out, v)
	}
	return out, nil
}

func controlledBy(refs []metav1.OwnerReference, uid string) bool {
	for _, r := range refs {
		if r.Controller != nil && *r.Controller && string(r.UID) == uid {
			return true
		}
	}
	return false
}

// wrote counts a write and its outcome.
func (k *controller) wrote(err error) error {
	k.c.stats.writes.Add(1)
	if err != nil {
		k.c.stats.writeErrors.Add(1)
	}
	return err
}

// suffix returns a random name suffix in kube's alphabet.
func (k *controller) suffix(n int) string {
	const alphabet = "bcdfghjklmnpqrstvwxz2456789"
	b := make([]byte, n)
	for i := range b {
		b[i] = alphabet[k.rnd.IntN(len(alphabet))]
	}
	return string(b)
}
