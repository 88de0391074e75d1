package sim

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"sync"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/utils/ptr"

	"github.com/canopy-dev/canopy/relay/layout"
	edgev1alpha1 "github.com/canopy-dev/canopy/topology/api/v1alpha1"
)

// PlacementName is the simulator's EdgePlacement.
const PlacementName = "sim"

// user acts on the root like a user: client-go against its kube API, the
// default space for workloads and placements, the inventory space for
// Locations.
type user struct {
	kube *kubernetes.Clientset // default space
	wds  dynamic.Interface
	inv  dynamic.Interface
	t    *tracker   // the tracker measuring arrivals (writes are stamped on it)
	also []*tracker // other trackers stamped with the same writes

	deployment int   // index of the Deployment in the trackers
	configMaps []int // indexes of the ConfigMaps
	// collectorErr is why the StatusCollector could not be created.
	collectorErr error
	// subset: the EdgePlacement first selects only the Location of the
	// edges labelled subsetLabel (the status scenario; widen selects all).
	subset bool
	// upsync: the EdgePlacement also brings back the ConfigMaps named
	// reportPrefix* that the edges create in Namespace (the view
	// scenario).
	upsync bool

	// fo spreads requests over a replicated root's replicas (nil: one
	// root); a write that fails is then tried again, on the next replica,
	// for up to writeRetryFor.
	fo *failover

	mu      sync.Mutex
	api     histogram // how long each write of the measured phase took at the root's API
	retries int       // failed attempts of writes that were tried again
}

// writeRetryFor bounds how long a write is tried again on a replicated
// root (a leader election takes a few seconds).
const writeRetryFor = 60 * time.Second

// timed runs one write against the root's API and records its latency,
// from the first attempt to the answer of the last one.
func (u *user) timed(ctx context.Context, fn func() error) error {
	t0 := time.Now()
	err := fn()
	for u.fo != nil && retryable(ctx, err) && time.Since(t0) < writeRetryFor {
		u.mu.Lock()
		u.retries++
		u.mu.Unlock()
		if !sleepCtx(ctx, 50*time.Millisecond) {
			break
		}
		err = fn()
	}
	u.mu.Lock()
	u.api.add(time.Since(t0))
	u.mu.Unlock()
	return err
}

// failedAttempts is how many write attempts failed and were tried again.
func (u *user) failedAttempts() int {
	u.mu.Lock()
	defer u.mu.Unlock()
	return u.retries
}

func restConfig(kubeconfig, space string) (*rest.Config, error) {
	cc := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(
		&clientcmd.ClientConfigLoadingRules{ExplicitPath: kubeconfig},
		&clientcmd.ConfigOverrides{CurrentContext: space})
	rc, err := cc.ClientConfig()
	if err != nil {
		return nil, err
	}
	rc.QPS, rc.Burst = 2000, 2000
	rc.UserAgent = "canopy-sim"
	return rc, nil
}

// newUser acts with the kubeconfig of a root. replicas, when not empty,
// are the API addresses (host:port) of a replicated root's replicas, the
// kubeconfig's first: requests go to one at a time, the next when it fails.
func newUser(kubeconfig string, replicas []string, trackers []*tracker) (*user, error) {
	rc, err := restConfig(kubeconfig, layout.DefaultSpace)
	if err != nil {
		return nil, err
	}
	ic, err := restConfig(kubeconfig, layout.InventorySpace)
	if err != nil {
		return nil, err
	}
	u := &user{t: trackers[0], also: trackers[1:]}
	if len(replicas) > 0 {
		u.fo = &failover{addrs: replicas}
		rc.Wrap(u.fo.wrap)
		ic.Wrap(u.fo.wrap)
	}
	if u.kube, err = kubernetes.NewForConfig(rc); err != nil {
		return nil, err
	}
	if u.wds, err = dynamic.NewForConfig(rc); err != nil {
		return nil, err
	}
	if u.inv, err = dynamic.NewForConfig(ic); err != nil {
		return nil, err
	}
	return u, nil
}

// waitReady waits for the root's /readyz (its edge.canopy.dev CRDs are
// served) and for a connected SyncTarget per edge in the inventory.
func (u *user) waitReady(ctx context.Context, edges int, timeout time.Duration) error {
	if err := waitUntil(ctx, timeout, "the root's /readyz", func() bool {
		_, err := u.kube.RESTClient().Get().AbsPath("/readyz").DoRaw(ctx)
		return err == nil
	}); err != nil {
		return err
	}
	// The SyncTargets are listed once and then watched: polling a list
	// of 10 000 of them costs the root and the simulator a core.
	deadline := time.Now().Add(timeout)
	var seen connectedTargets
	for {
		done, err := u.watchConnected(ctx, deadline, &seen, edges)
		if done || ctx.Err() != nil {
			return err
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("sim: timed out after %s waiting for %d connected SyncTargets in the inventory (%d seen)", timeout, edges, seen.n)
		}
		if err != nil {
			select { // the root is still starting: list again shortly
			case <-ctx.Done():
				return ctx.Err()
			case <-time.After(100 * time.Millisecond):
			}
		}
	}
}

// connectedTargets is which SyncTargets show connected, by name, and how
// many do.
type connectedTargets struct {
	by map[string]bool
	n  int
}

func (c *connectedTargets) set(name string, connected bool) {
	if c.by[name] {
		c.n--
	}
	c.by[name] = connected
	if connected {
		c.n++
	}
}

func (c *connectedTargets) remove(name string) {
	c.set(name, false)
	delete(c.by, name)
}

// watchConnected lists the SyncTargets into seen, then follows them with
// a watch until edges of them are connected (done), the watch ends or the
// deadline passes.
func (u *user) watchConnected(ctx context.Context, deadline time.Time, seen *connectedTargets, edges int) (done bool, err error) {
	isConnected := func(st *unstructured.Unstructured) bool {
		c, _, _ := unstructured.NestedBool(st.Object, "status", "connected")
		return c
	}
	res := u.inv.Resource(edgev1alpha1.SyncTargetsGVR)
	l, err := res.List(ctx, metav1.ListOptions{})
	if err != nil {
		return false, err
	}
	*seen = connectedTargets{by: make(map[string]bool, len(l.Items))}
	for i := range l.Items {
		seen.set(l.Items[i].GetName(), isConnected(&l.Items[i]))
	}
	if seen.n >= edges {
		return true, nil
	}
	wctx, cancel := context.WithDeadline(ctx, deadline)
	defer cancel()
	w, err := res.Watch(wctx, metav1.ListOptions{ResourceVersion: l.GetResourceVersion()})
	if err != nil {
		return false, err
	}
	defer w.Stop()
	for ev := range w.ResultChan() {
		st, ok := ev.Object.(*unstructured.Unstructured)
		if !ok {
			continue // an error: the watch ends, the caller lists again
		}
		switch ev.Type {
		case watch.Added, watch.Modified:
			seen.set(st.GetName(), isConnected(st))
		case watch.Deleted:
			seen.remove(st.GetName())
		}
		if seen.n >= edges {
			return true, nil
		}
	}
	return false, nil
}

// paths returns the status.path of every SyncTarget, by name.
func (u *user) paths(ctx context.Context) (map[string]string, error) {
	l, err := u.inv.Resource(edgev1alpha1.SyncTargetsGVR).List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, err
	}
	out := make(map[string]string, len(l.Items))
	for _, st := range l.Items {
		p, _, _ := unstructured.NestedString(st.Object, "status", "path")
		out[st.GetName()] = p
	}
	return out, nil
}

func toUnstructured(obj any) (*unstructured.Unstructured, error) {
	data, err := json.Marshal(obj)
	if err != nil {
		return nil, err
	}
	u := &unstructured.Unstructured{}
	return u, u.UnmarshalJSON(data)
}

// place creates one Location per group of edges (labelled for the
// placement), the workload (a Namespace, objects ConfigMaps and, with
// withDeployment, a Deployment) and the EdgePlacement that puts the workload on every
// Location, in that order; the initial placement is measured from the
// EdgePlacement's creation.
func (u *user) place(ctx context.Context, groups []string, objects int, withDeployment bool) error {
	for _, g := range groups {
		loc := &edgev1alpha1.Location{
			TypeMeta:   metav1.TypeMeta{APIVersion: edgev1alpha1.SchemeGroupVersion.String(), Kind: "Location"},
			ObjectMeta: metav1.ObjectMeta{Name: "loc-" + g, Labels: map[string]string{fleetLabel: "sim"}},
			Spec: edgev1alpha1.LocationSpec{InstanceSelector: metav1.LabelSelector{
				MatchLabels: map[string]string{groupLabel: g}}},
		}
		obj, err := toUnstructured(loc)
		if err != nil {
			return err
		}
		if _, err := u.inv.Resource(edgev1alpha1.LocationsGVR).Create(ctx, obj, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("sim: creating Location %s: %w", loc.Name, err)
		}
	}
	if u.subset {
		loc := &edgev1alpha1.Location{
			TypeMeta:   metav1.TypeMeta{APIVersion: edgev1alpha1.SchemeGroupVersion.String(), Kind: "Location"},
			ObjectMeta: metav1.ObjectMeta{Name: subsetLocation, Labels: map[string]string{scopeLabel: "subset"}},
			Spec: edgev1alpha1.LocationSpec{InstanceSelector: metav1.LabelSelector{
				MatchLabels: map[string]string{subsetLabel: "true"}}},
		}
		obj, err := toUnstructured(loc)
		if err != nil {
			return err
		}
		if _, err := u.inv.Resource(edgev1alpha1.LocationsGVR).Create(ctx, obj, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("sim: creating Location %s: %w", loc.Name, err)
		}
	}
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: Namespace}}
	if _, err := u.kube.CoreV1().Namespaces().Create(ctx, ns, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("sim: creating namespace %s: %w", Namespace, err)
	}
	u.configMaps = nil
	for i := range objects {
		name := fmt.Sprintf("cm-%d", i)
		idx := u.register(objRef{"configmaps", name})
		u.configMaps = append(u.configMaps, idx)
		v := u.begin(idx)
		cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: Namespace,
			Annotations: map[string]string{VersionAnnotation: fmt.Sprint(v)}}, Data: map[string]string{"v": fmt.Sprint(v)}}
		if _, err := u.kube.CoreV1().ConfigMaps(Namespace).Create(ctx, cm, metav1.CreateOptions{}); err != nil {
			return fmt.Errorf("sim: creating ConfigMap %s: %w", name, err)
		}
	}
	u.deployment = -1
	if !withDeployment {
		return u.placement(ctx)
	}
	u.deployment = u.register(objRef{"deployments", "web"})
	v := u.begin(u.deployment)
	labels := map[string]string{"app": "web"}
	dep := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: Namespace, Annotations: map[string]string{VersionAnnotation: fmt.Sprint(v)}},
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To[int32](1),
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "web", Image: image(v)}}},
			},
		},
	}
	if _, err := u.kube.AppsV1().Deployments(Namespace).Create(ctx, dep, metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("sim: creating Deployment web: %w", err)
	}
	return u.placement(ctx)
}

// placement creates the StatusCollector and the EdgePlacement.
func (u *user) placement(ctx context.Context) error {

	// The StatusCollector that CombinedStatus latency is measured with;
	// without it the placement still places (collectorErr says why).
	u.collectorErr = nil
	if obj, err := toUnstructured(versionCollector()); err != nil {
		u.collectorErr = err
	} else if _, err := u.wds.Resource(statusCollectorsGVR).Create(ctx, obj, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		u.collectorErr = err
	}
	var collectors []string
	if u.collectorErr == nil {
		collectors = []string{CollectorName}
	}

	core, apps := "", "apps"
	selector := map[string]string{fleetLabel: "sim"}
	if u.subset {
		selector = map[string]string{scopeLabel: "subset"}
	}
	ep := &edgev1alpha1.EdgePlacement{
		TypeMeta:   metav1.TypeMeta{APIVersion: edgev1alpha1.SchemeGroupVersion.String(), Kind: "EdgePlacement"},
		ObjectMeta: metav1.ObjectMeta{Name: PlacementName},
		Spec: edgev1alpha1.EdgePlacementSpec{
			LocationSelectors: []metav1.LabelSelector{{MatchLabels: selector}},
			Downsync: []edgev1alpha1.DownsyncClause{
				{APIGroup: &core, Resources: []string{"configmaps"}, Namespaces: []string{Namespace}},
				{APIGroup: &apps, Resources: []string{"deployments"}, Namespaces: []string{Namespace}},
			},
			StatusCollectors: collectors,
		},
	}
	if u.upsync {
		ep.Spec.Upsync = []edgev1alpha1.UpsyncClause{{APIGroup: &core, Resources: []string{"configmaps"},
			Namespaces: []string{Namespace}, Names: []string{reportPrefix + "*"}}}
	}
	obj, err := toUnstructured(ep)
	if err != nil {
		return err
	}
	at := time.Now()
	if _, err := u.wds.Resource(edgev1alpha1.EdgePlacementsGVR).Create(ctx, obj, metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("sim: creating EdgePlacement: %w", err)
	}
	for _, t := range u.trackers() {
		t.restamp(at)
	}
	return nil
}

func (u *user) trackers() []*tracker { return append([]*tracker{u.t}, u.also...) }

func (u *user) register(o objRef) int {
	i := u.t.addObject(o)
	for _, t := range u.also {
		if j := t.addObject(o); j != i {
			panic("sim: trackers disagree on object indexes")
		}
	}
	return i
}

func (u *user) begin(i int) int {
	now := time.Now()
	v := u.t.begin(i, now)
	for _, t := range u.also {
		t.begin(i, now)
	}
	return v
}

func image(v int) string { return fmt.Sprintf("registry.example/web:v%d", v) }

// rollout changes the rollout object: cm-0, or the Deployment.
func (u *user) rollout(ctx context.Context, object string) error {
	if object == RolloutConfigMap {
		return u.change(ctx, 0)
	}
	return u.rolloutDeployment(ctx)
}

// rolloutDeployment changes the Deployment's image (a new version) with
// a merge patch, as `kubectl set image` would.
func (u *user) rolloutDeployment(ctx context.Context) error {
	v := u.begin(u.deployment)
	patch := map[string]any{
		"metadata": map[string]any{"annotations": map[string]any{VersionAnnotation: fmt.Sprint(v)}},
		"spec": map[string]any{"template": map[string]any{"spec": map[string]any{
			"containers": []any{map[string]any{"name": "web", "image": image(v)}}}}},
	}
	data, _ := json.Marshal(patch)
	if err := u.timed(ctx, func() error {
		_, err := u.kube.AppsV1().Deployments(Namespace).Patch(ctx, "web", types.MergePatchType, data, metav1.PatchOptions{})
		return err
	}); err != nil {
		return fmt.Errorf("sim: rollout of version %d: %w", v, err)
	}
	return nil
}

// change writes a new version of ConfigMap i (of the workload's).
func (u *user) change(ctx context.Context, i int) error {
	idx := u.configMaps[i]
	v := u.begin(idx)
	patch := map[string]any{
		"metadata": map[string]any{"annotations": map[string]any{VersionAnnotation: fmt.Sprint(v)}},
		"data":     map[string]any{"v": fmt.Sprint(v)},
	}
	data, _ := json.Marshal(patch)
	name := fmt.Sprintf("cm-%d", i)
	if err := u.timed(ctx, func() error {
		_, err := u.kube.CoreV1().ConfigMaps(Namespace).Patch(ctx, name, types.MergePatchType, data, metav1.PatchOptions{})
		return err
	}); err != nil {
		return fmt.Errorf("sim: change of %s to version %d: %w", name, v, err)
	}
	return nil
}

// groupsOf lists the edges' groups, sorted.
func groupsOf(edges []*relay) []string {
	var gs []string
	for _, e := range edges {
		if !slices.Contains(gs, e.group) {
			gs = append(gs, e.group)
		}
	}
	slices.Sort(gs)
	return gs
}
