package sim

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"sync"
	"time"

	"golang.org/x/sync/errgroup"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	corev1client "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/pager"

	"github.com/canopy-dev/canopy/relay/layout"
	"github.com/canopy-dev/canopy/relay/store"
	edgev1alpha1 "github.com/canopy-dev/canopy/topology/api/v1alpha1"
)

// The view scenario (issue 31): every edge's virtual cluster creates
// o.Objects ConfigMaps named reportPrefix<i> in Namespace, labelled
// viewLabel (one of viewPartitions values); the EdgePlacement's upsync
// clause brings them back to the root (runOnce sets user.upsync). The
// user then creates the View ViewName over them, partitioned by that
// label, and, for o.Duration, changes objects at the edges at
// o.ChurnRate writes per second while it lists the whole view through
// the root's kube API, paged as client-go does, again and again, and two
// informers (the whole view and partition viewWatched) take every
// change: edge write → delivered to each.

// The view scenario's names.
const (
	// ViewName is the View of the default space.
	ViewName = "sim-reports"
	// reportPrefix names the ConfigMaps the edges create.
	reportPrefix = "report-"
	// viewLabel partitions the view; object i is in partition
	// "p<i mod viewPartitions>".
	viewLabel      = "provider"
	viewPartitions = 4
	// viewWatched is the partition the partition informer watches.
	viewWatched = "p0"
	// viewListPause is the pause between two full lists of the view.
	viewListPause = 250 * time.Millisecond
	// viewPageSize is what client-go's pager asks for per page.
	viewPageSize = 500
)

// ViewResult is the view scenario's outcome.
type ViewResult struct {
	View string `json:"view"`
	// Objects is what the view must hold (edges × objects per edge);
	// Listed what its last full list held, StatusObjects what the View's
	// status.objects said at the end.
	Objects       int   `json:"objects"`
	Listed        int   `json:"listed"`
	StatusObjects int64 `json:"status_objects"`
	// CreateS is the edges' creates (all of them, 16 at a time); FillS
	// the View's creation → a full list holds every object.
	CreateS float64 `json:"create_s"`
	FillS   float64 `json:"fill_s"`
	// EdgeWrites are the changes made at the edges in the measured loop.
	EdgeWrites int `json:"edge_writes"`
	// List is one full list of the view through the root's kube API,
	// in pages of PageSize (client-go's pager), repeated.
	List     Latency `json:"list"`
	PageSize int     `json:"page_size"`
	// WatchView and WatchPartition are edge write (sent to the virtual
	// cluster) → an informer of the whole view, or of partition
	// Partition, was given that version or a later one. Missed counts
	// the writes the whole view's informer never got by the end.
	WatchView      Latency `json:"watch_view"`
	WatchPartition Latency `json:"watch_partition"`
	Partition      string  `json:"partition"`
	Missed         int     `json:"missed"`
	// Root memory of the view's objects. HeapDeltaMiB is the process's
	// live heap (after a GC) once the view is full, less before the View
	// was created, with every object already upsynced and the reports
	// quiet: what holding the views space costs, in one run with the same
	// fleet (another run's heap would differ by more than the objects).
	// StoreBytes is the JSON of the views space's objects in the root's
	// store (what the objects are, without the store's indexes).
	HeapDeltaMiB        float64 `json:"heap_delta_mib"`
	HeapPerObjectBytes  float64 `json:"heap_per_object_bytes"`
	StoreBytes          int64   `json:"store_bytes"`
	StoreBytesPerObject float64 `json:"store_bytes_per_object"`
	HeapBeforeMiB       float64 `json:"heap_before_mib"`
	HeapAfterMiB        float64 `json:"heap_after_mib"`
}

// viewStamp is one write at an edge: the version written, when.
type viewStamp struct {
	v  int
	at time.Time
}

// viewWatcher measures what one informer of the view is given.
type viewWatcher struct {
	mu      sync.Mutex
	pending map[string][]viewStamp // by name in the view
	h       histogram
}

func newViewWatcher() *viewWatcher { return &viewWatcher{pending: map[string][]viewStamp{}} }

func (w *viewWatcher) wrote(name string, v int, at time.Time) {
	w.mu.Lock()
	w.pending[name] = append(w.pending[name], viewStamp{v, at})
	w.mu.Unlock()
}

// got takes an object the informer was given: every write of it up to
// its version arrived now (state, not events: versions may be skipped).
func (w *viewWatcher) got(obj any) {
	cm, ok := obj.(*corev1.ConfigMap)
	if !ok {
		return
	}
	v, err := strconv.Atoi(cm.Data["v"])
	if err != nil {
		return
	}
	now := time.Now()
	w.mu.Lock()
	defer w.mu.Unlock()
	ps := w.pending[cm.Name]
	i := 0
	for ; i < len(ps) && ps[i].v <= v; i++ {
		w.h.add(now.Sub(ps[i].at))
	}
	if i == len(ps) {
		delete(w.pending, cm.Name)
	} else {
		w.pending[cm.Name] = ps[i:]
	}
}

func (w *viewWatcher) waiting() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	n := 0
	for _, ps := range w.pending {
		n += len(ps)
	}
	return n
}

func (w *viewWatcher) summary() Latency {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.h.summary()
}

// inform runs an informer of ConfigMaps over c until ctx ends; it
// returns once it has synced.
func (w *viewWatcher) inform(ctx context.Context, c corev1client.CoreV1Interface) error {
	lw := &cache.ListWatch{
		ListFunc: func(o metav1.ListOptions) (runtime.Object, error) { return c.ConfigMaps("").List(ctx, o) },
		WatchFunc: func(o metav1.ListOptions) (watch.Interface, error) {
			return c.ConfigMaps("").Watch(ctx, o)
		},
	}
	inf := cache.NewSharedIndexInformer(lw, &corev1.ConfigMap{}, 0, cache.Indexers{})
	if _, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    w.got,
		UpdateFunc: func(_, o any) { w.got(o) },
	}); err != nil {
		return err
	}
	go inf.Run(ctx.Done())
	if !cache.WaitForCacheSync(ctx.Done(), inf.HasSynced) {
		return errorf("an informer of view %s did not sync", ViewName)
	}
	return nil
}

// viewClient is a client of the View at path below the root's default
// space (views/<view> or views/<view>/partitions/<value>).
func (e *env) viewClient(path string) (corev1client.CoreV1Interface, error) {
	rc, err := restConfig(e.f.currentRoot().KubeconfigPath(), layout.DefaultSpace)
	if err != nil {
		return nil, err
	}
	rc.Host += "/" + path
	return corev1client.NewForConfig(rc)
}

// listView lists the whole view as client-go's pager does and returns
// how many objects it held.
func listView(ctx context.Context, c corev1client.CoreV1Interface) (int, error) {
	p := pager.New(pager.SimplePageFunc(func(o metav1.ListOptions) (runtime.Object, error) {
		return c.ConfigMaps("").List(ctx, o)
	}))
	p.PageSize = viewPageSize
	n := 0
	err := p.EachListItem(ctx, metav1.ListOptions{}, func(runtime.Object) error { n++; return nil })
	return n, err
}

// edgeClients are clients of every edge's virtual cluster, by edge.
func (e *env) edgeClients() ([]corev1client.CoreV1Interface, error) {
	out := make([]corev1client.CoreV1Interface, len(e.f.edges))
	for i, r := range e.f.edges {
		c := r.current()
		if c == nil || c.VirtualCluster() == nil {
			return nil, errorf("edge %s has no virtual cluster", r.name)
		}
		var err error
		if out[i], err = corev1client.NewForConfig(c.VirtualCluster().RESTConfig()); err != nil {
			return nil, err
		}
	}
	return out, nil
}

func reportName(i int) string { return reportPrefix + strconv.Itoa(i) }

// view runs the view scenario.
func view(e *env) error {
	res := &ViewResult{View: ViewName, Objects: len(e.f.edges) * e.o.Objects, PageSize: viewPageSize, Partition: viewWatched}
	e.s.View = res
	clients, err := e.edgeClients()
	if err != nil {
		return err
	}
	e.p.phase("objects at the edges", len(e.f.edges))
	t0 := time.Now()
	var done sync.Mutex
	n := 0
	g, gctx := errgroup.WithContext(e.ctx)
	g.SetLimit(16)
	for _, c := range clients {
		g.Go(func() error {
			for i := range e.o.Objects {
				cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: reportName(i), Namespace: Namespace,
					Labels: map[string]string{viewLabel: fmt.Sprintf("p%d", i%viewPartitions)}}, Data: map[string]string{"v": "0"}}
				// The namespace may still be on its way to the cluster.
				if err := waitUntil(gctx, time.Minute, "", func() bool {
					_, err := c.ConfigMaps(Namespace).Create(gctx, cm, metav1.CreateOptions{})
					return err == nil || apierrors.IsAlreadyExists(err)
				}); err != nil {
					return fmt.Errorf("sim: creating %s/%s at an edge: %w", Namespace, cm.Name, err)
				}
			}
			done.Lock()
			n++
			e.p.set(n)
			done.Unlock()
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		return err
	}
	res.CreateS = round3(time.Since(t0).Seconds())
	e.event(fmt.Sprintf("%d objects created at the edges", res.Objects))
	// Before the View: every object upsynced, the reports quiet.
	e.p.phase("upsync settles", 100)
	if quiet, err := e.waitQuiet(); err != nil {
		return err
	} else if !quiet {
		e.event(fmt.Sprintf("reports still arriving %s after the creates", quietTimeout))
	}
	before := readMemory(true)

	e.p.phase("view fills", 100)
	v := &edgev1alpha1.View{
		TypeMeta:   metav1.TypeMeta{APIVersion: edgev1alpha1.SchemeGroupVersion.String(), Kind: edgev1alpha1.KindView},
		ObjectMeta: metav1.ObjectMeta{Name: ViewName},
		Spec: edgev1alpha1.ViewSpec{Version: "v1", Resource: "configmaps",
			PartitionKey: &edgev1alpha1.PartitionKey{Label: viewLabel}},
	}
	obj, err := toUnstructured(v)
	if err != nil {
		return err
	}
	t1 := time.Now()
	if _, err := e.u.wds.Resource(edgev1alpha1.ViewsGVR).Create(e.ctx, obj, metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("sim: creating View %s: %w", ViewName, err)
	}
	whole, err := e.viewClient("views/" + ViewName)
	if err != nil {
		return err
	}
	part, err := e.viewClient("views/" + ViewName + "/partitions/" + viewWatched)
	if err != nil {
		return err
	}
	if err := waitEvery(e.ctx, e.roundTimeout(), 200*time.Millisecond, fmt.Sprintf("view %s to list %d objects", ViewName, res.Objects), func() bool {
		res.Listed, err = listView(e.ctx, whole)
		e.p.set(100 * res.Listed / max(res.Objects, 1))
		return err == nil && res.Listed == res.Objects
	}); err != nil {
		return fmt.Errorf("%w (%d listed)", err, res.Listed)
	}
	res.FillS = round3(time.Since(t1).Seconds())
	e.event(fmt.Sprintf("view %s lists every object", ViewName))
	if quiet, err := e.waitQuiet(); err != nil {
		return err
	} else if !quiet {
		e.event(fmt.Sprintf("reports still arriving %s after the view filled", quietTimeout))
	}
	after := readMemory(true)
	res.HeapBeforeMiB, res.HeapAfterMiB = round3(before.HeapLiveMiB), round3(after.HeapLiveMiB)
	res.HeapDeltaMiB = round3(after.HeapLiveMiB - before.HeapLiveMiB)
	if res.Objects > 0 {
		res.HeapPerObjectBytes = round3(res.HeapDeltaMiB * mib / float64(res.Objects))
	}
	lr, err := e.f.currentRoot().Store().List(store.ListOptions{Space: layout.ViewsSpace(layout.DefaultSpace)})
	if err != nil {
		return err
	}
	for _, o := range lr.Items {
		res.StoreBytes += int64(len(o.Data))
	}
	if len(lr.Items) > 0 {
		res.StoreBytesPerObject = round3(float64(res.StoreBytes) / float64(len(lr.Items)))
	}

	// The measured loop: informers, lists, changes at the edges.
	wctx, stop := context.WithCancel(e.ctx)
	defer stop()
	all, p0 := newViewWatcher(), newViewWatcher()
	if err := all.inform(wctx, whole); err != nil {
		return err
	}
	if err := p0.inform(wctx, part); err != nil {
		return err
	}
	var lists histogram
	var listErr error
	listed := make(chan struct{})
	go func() {
		defer close(listed)
		for wctx.Err() == nil {
			t := time.Now()
			n, err := listView(wctx, whole)
			if wctx.Err() != nil {
				return
			}
			if err != nil {
				listErr = err
				return
			}
			lists.add(time.Since(t))
			res.Listed = n
			sleepCtx(wctx, viewListPause)
		}
	}()
	e.p.phase("view: changes at the edges", 100)
	versions := map[[2]int]int{}
	every := time.Duration(float64(time.Second) / e.o.ChurnRate)
	tk := time.NewTicker(every)
	end := time.Now().Add(e.o.Duration)
	for time.Now().Before(end) {
		k := [2]int{e.rng.IntN(len(clients)), e.rng.IntN(e.o.Objects)}
		versions[k]++
		ver := versions[k]
		name := e.f.edges[k[0]].name + "." + reportName(k[1])
		at := time.Now()
		all.wrote(name, ver, at)
		if fmt.Sprintf("p%d", k[1]%viewPartitions) == viewWatched {
			p0.wrote(name, ver, at)
		}
		patch, _ := json.Marshal(map[string]any{"data": map[string]any{"v": strconv.Itoa(ver)}})
		if _, err := clients[k[0]].ConfigMaps(Namespace).Patch(e.ctx, reportName(k[1]), types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
			tk.Stop()
			return fmt.Errorf("sim: changing %s at %s: %w", reportName(k[1]), e.f.edges[k[0]].name, err)
		}
		res.EdgeWrites++
		e.p.set(min(100, int(100*(1-time.Until(end).Seconds()/e.o.Duration.Seconds()))))
		select {
		case <-e.ctx.Done():
			tk.Stop()
			return e.ctx.Err()
		case <-tk.C:
		}
	}
	tk.Stop()
	e.event(fmt.Sprintf("%d changes at the edges", res.EdgeWrites))
	// The last changes travel up a status window or more.
	_ = waitUntil(e.ctx, 30*time.Second, "", func() bool { return all.waiting() == 0 && p0.waiting() == 0 })
	stop()
	<-listed
	res.Missed = all.waiting()
	res.WatchView, res.WatchPartition, res.List = all.summary(), p0.summary(), lists.summary()
	if listErr != nil {
		return fmt.Errorf("sim: listing view %s: %w", ViewName, listErr)
	}
	vo, err := e.u.wds.Resource(edgev1alpha1.ViewsGVR).Get(e.ctx, ViewName, metav1.GetOptions{})
	if err != nil {
		return err
	}
	var got edgev1alpha1.View
	b, _ := vo.MarshalJSON()
	if err := json.Unmarshal(b, &got); err != nil {
		return err
	}
	res.StatusObjects = got.Status.Objects
	return nil
}
