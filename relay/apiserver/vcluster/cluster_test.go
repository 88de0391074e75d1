package vcluster

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/restmapper"
	"k8s.io/utils/ptr"

	"github.com/canopy-dev/canopy/test/poll"
)

const testTimeout = 15 * time.Second

// startCluster builds and starts a cluster and returns it with a typed
// client; the cluster stops when the test ends.
func startCluster(t *testing.T, opts Options) (*Cluster, kubernetes.Interface) {
	t.Helper()
	if opts.Name == "" {
		opts.Name = "test"
	}
	if opts.ReadyDelay == 0 {
		opts.ReadyDelay = 20 * time.Millisecond
	}
	c, err := New(opts)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- c.Start(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Start: %v", err)
		}
	})
	cfg := c.RESTConfig()
	cfg.QPS, cfg.Burst = 1000, 1000
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return c, cs
}

func labelsFor(name string) map[string]string { return map[string]string{"app": name} }

func podTemplate(name string, restart corev1.RestartPolicy) corev1.PodTemplateSpec {
	return corev1.PodTemplateSpec{
		ObjectMeta: metav1.ObjectMeta{Labels: labelsFor(name)},
		Spec:       corev1.PodSpec{RestartPolicy: restart, Containers: []corev1.Container{{Name: "main", Image: "nginx:1.27"}}},
	}
}

func newDeployment(name string, replicas int32) *appsv1.Deployment {
	return &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default"},
		Spec: appsv1.DeploymentSpec{
			Replicas: &replicas,
			Selector: &metav1.LabelSelector{MatchLabels: labelsFor(name)},
			Template: podTemplate(name, corev1.RestartPolicyAlways),
		},
	}
}

func condition(d *appsv1.Deployment, t appsv1.DeploymentConditionType) *appsv1.DeploymentCondition {
	for i := range d.Status.Conditions {
		if d.Status.Conditions[i].Type == t {
			return &d.Status.Conditions[i]
		}
	}
	return nil
}

// deploymentSettled checks a deployment's status against n ready replicas
// and its pods against n Running, Ready pods owned by its ReplicaSet.
func deploymentSettled(ctx context.Context, cs kubernetes.Interface, name string, n int32) error {
	d, err := cs.AppsV1().Deployments("default").Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return err
	}
	s := d.Status
	if s.ObservedGeneration != d.Generation || s.Replicas != n || s.ReadyReplicas != n || s.AvailableReplicas != n || s.UpdatedReplicas != n {
		return fmt.Errorf("deployment status %+v, want %d replicas at generation %d", s, n, d.Generation)
	}
	if c := condition(d, appsv1.DeploymentAvailable); c == nil || c.Status != corev1.ConditionTrue {
		return fmt.Errorf("Available condition %+v", c)
	}
	if c := condition(d, appsv1.DeploymentProgressing); c == nil || c.Status != corev1.ConditionTrue || c.Reason != "NewReplicaSetAvailable" {
		return fmt.Errorf("Progressing condition %+v", c)
	}
	rss, err := cs.AppsV1().ReplicaSets("default").List(ctx, metav1.ListOptions{LabelSelector: "app=" + name})
	if err != nil {
		return err
	}
	owned := map[string]bool{}
	for _, rs := range rss.Items {
		if metav1.IsControlledBy(&rs, d) && rs.Labels[appsv1.DefaultDeploymentUniqueLabelKey] != "" && *rs.Spec.Replicas > 0 {
			owned[rs.Name] = true
		}
	}
	if len(owned) != 1 {
		return fmt.Errorf("%d scaled-up ReplicaSets owned by the deployment, want 1", len(owned))
	}
	pods, err := cs.CoreV1().Pods("default").List(ctx, metav1.ListOptions{LabelSelector: "app=" + name})
	if err != nil {
		return err
	}
	if len(pods.Items) != int(n) {
		return fmt.Errorf("%d pods, want %d", len(pods.Items), n)
	}
	for _, p := range pods.Items {
		ref := metav1.GetControllerOf(&p)
		if ref == nil || ref.Kind != "ReplicaSet" || !owned[ref.Name] {
			return fmt.Errorf("pod %s controlled by %+v", p.Name, ref)
		}
		if p.Status.Phase != corev1.PodRunning || !podReady(&p) || p.Spec.NodeName == "" ||
			len(p.Status.ContainerStatuses) != 1 || !p.Status.ContainerStatuses[0].Ready {
			return fmt.Errorf("pod %s not running and ready: %+v", p.Name, p.Status)
		}
	}
	return nil
}

func TestDeploymentScaleAndDelete(t *testing.T) {
	ctx := context.Background()
	c, cs := startCluster(t, Options{Nodes: 2})
	deps := cs.AppsV1().Deployments("default")
	if _, err := deps.Create(ctx, newDeployment("web", 3), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	poll.Until(t, "web at 3 replicas", func() error { return deploymentSettled(ctx, cs, "web", 3) })
	t.Logf("3 ready after %v", time.Since(start))

	for _, n := range []int32{5, 1} {
		sc, err := deps.GetScale(ctx, "web", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		sc.Spec.Replicas = n
		if _, err := deps.UpdateScale(ctx, "web", sc, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
		poll.Until(t, fmt.Sprintf("web at %d replicas", n), func() error { return deploymentSettled(ctx, cs, "web", n) })
	}

	if err := deps.Delete(ctx, "web", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	poll.Until(t, "web's pods and ReplicaSets gone", func() error {
		pods, err := cs.CoreV1().Pods("default").List(ctx, metav1.ListOptions{})
		if err != nil {
			return err
		}
		rss, err := cs.AppsV1().ReplicaSets("default").List(ctx, metav1.ListOptions{})
		if err != nil {
			return err
		}
		if len(pods.Items)+len(rss.Items) > 0 {
			return fmt.Errorf("%d pods and %d ReplicaSets left", len(pods.Items), len(rss.Items))
		}
		return nil
	})
	s := c.Stats()
	t.Logf("stats %+v", s)
	if s.PodsReady < 5 || s.PodsFailed != 0 {
		t.Errorf("stats %+v", s)
	}
}

// A new template rolls out to a new ReplicaSet and the old one is scaled
// to zero.
func TestDeploymentRollout(t *testing.T) {
	ctx := context.Background()
	_, cs := startCluster(t, Options{})
	deps := cs.AppsV1().Deployments("default")
	d, err := deps.Create(ctx, newDeployment("api", 2), metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	poll.Until(t, "api at 2 replicas", func() error { return deploymentSettled(ctx, cs, "api", 2) })
	d, err = deps.Get(ctx, "api", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	d.Spec.Template.Spec.Containers[0].Image = "nginx:1.28"
	if _, err := deps.Update(ctx, d, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	poll.Until(t, "api rolled out to nginx:1.28", func() error {
		if err := deploymentSettled(ctx, cs, "api", 2); err != nil {
			return err
		}
		pods, _ := cs.CoreV1().Pods("default").List(ctx, metav1.ListOptions{})
		for _, p := range pods.Items {
			if p.Spec.Containers[0].Image != "nginx:1.28" {
				return fmt.Errorf("old pod %s left", p.Name)
			}
		}
		rss, _ := cs.AppsV1().ReplicaSets("default").List(ctx, metav1.ListOptions{})
		if len(rss.Items) != 2 {
			return fmt.Errorf("%d ReplicaSets, want the old and the new", len(rss.Items))
		}
		return nil
	})
}

func TestFailureRateOne(t *testing.T) {
	ctx := context.Background()
	c, cs := startCluster(t, Options{FailureRate: 1})
	if _, err := cs.AppsV1().Deployments("default").Create(ctx, newDeployment("bad", 3), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	poll.Until(t, "bad's pods failed", func() error {
		if s := c.Stats(); s.PodsFailed < 3 {
			return fmt.Errorf("%d pods failed", s.PodsFailed)
		}
		d, err := cs.AppsV1().Deployments("default").Get(ctx, "bad", metav1.GetOptions{})
		if err != nil {
			return err
		}
		if d.Status.Replicas != 3 || d.Status.ReadyReplicas != 0 {
			return fmt.Errorf("status %+v", d.Status)
		}
		if c := condition(d, appsv1.DeploymentAvailable); c == nil || c.Status != corev1.ConditionFalse {
			return fmt.Errorf("Available condition %+v", c)
		}
		return nil
	})
	pods, err := cs.CoreV1().Pods("default").List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range pods.Items {
		w := p.Status.ContainerStatuses[0].State.Waiting
		if podReady(&p) || w == nil || w.Reason != "CrashLoopBackOff" {
			t.Errorf("pod %s: %+v", p.Name, p.Status)
		}
	}
	if s := c.Stats(); s.PodsReady != 0 {
		t.Errorf("stats %+v: no pod may become ready", s)
	}
}

// Failures are a function of Seed and pod names: about FailureRate of
// them fail, and the same ones for the same seed.
func TestFailureRateDeterministic(t *testing.T) {
	k := &controller{c: &Cluster{opts: Options{FailureRate: 0.3, Seed: 7}}}
	k2 := &controller{c: &Cluster{opts: Options{FailureRate: 0.3, Seed: 7}}}
	n := 0
	for i := range 10000 {
		name := fmt.Sprintf("pod-%d", i)
		f := k.fails("default", name)
		if f != k2.fails("default", name) {
			t.Fatal("not deterministic")
		}
		if f {
			n++
		}
	}
	if n < 2800 || n > 3200 {
		t.Errorf("%d of 10000 failed, want about 3000", n)
	}
}

func newJob(name string, completions int32, backoff int32) *batchv1.Job {
	return &batchv1.Job{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default"},
		Spec: batchv1.JobSpec{
			Completions: &completions, BackoffLimit: &backoff,
			Template: podTemplate(name, corev1.RestartPolicyNever),
		},
	}
}

func jobCondition(j *batchv1.Job, t batchv1.JobConditionType) bool {
	for _, c := range j.Status.Conditions {
		if c.Type == t && c.Status == corev1.ConditionTrue {
			return true
		}
	}
	return false
}

func TestJob(t *testing.T) {
	ctx := context.Background()
	_, cs := startCluster(t, Options{})
	jobs := cs.BatchV1().Jobs("default")
	if _, err := jobs.Create(ctx, newJob("batch", 2, 6), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	poll.Until(t, "job batch complete", func() error {
		j, err := jobs.Get(ctx, "batch", metav1.GetOptions{})
		if err != nil {
			return err
		}
		if !jobCondition(j, batchv1.JobComplete) || j.Status.Succeeded != 2 || j.Status.CompletionTime == nil || j.Status.Active != 0 {
			return fmt.Errorf("job status %+v", j.Status)
		}
		return nil
	})
	pods, err := cs.CoreV1().Pods("default").List(ctx, metav1.ListOptions{LabelSelector: batchv1.JobNameLabel + "=batch"})
	if err != nil {
		t.Fatal(err)
	}
	if len(pods.Items) != 2 {
		t.Fatalf("%d pods, want 2", len(pods.Items))
	}
	for _, p := range pods.Items {
		if p.Status.Phase != corev1.PodSucceeded {
			t.Errorf("pod %s phase %s", p.Name, p.Status.Phase)
		}
	}
}

func TestJobFails(t *testing.T) {
	ctx := context.Background()
	_, cs := startCluster(t, Options{FailureRate: 1})
	jobs := cs.BatchV1().Jobs("default")
	if _, err := jobs.Create(ctx, newJob("doomed", 1, 1), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	poll.Until(t, "job doomed failed", func() error {
		j, err := jobs.Get(ctx, "doomed", metav1.GetOptions{})
		if err != nil {
			return err
		}
		if !jobCondition(j, batchv1.JobFailed) || j.Status.Failed != 2 || j.Status.Succeeded != 0 {
			return fmt.Errorf("job status %+v", j.Status)
		}
		return nil
	})
}

func TestStatefulSetAndDaemonSet(t *testing.T) {
	ctx := context.Background()
	_, cs := startCluster(t, Options{Nodes: 3})
	sts := &appsv1.StatefulSet{
		ObjectMeta: metav1.ObjectMeta{Name: "db", Namespace: "default"},
		Spec: appsv1.StatefulSetSpec{
			Replicas: ptr.To[int32](3), ServiceName: "db",
			Selector: &metav1.LabelSelector{MatchLabels: labelsFor("db")},
			Template: podTemplate("db", corev1.RestartPolicyAlways),
		},
	}
	if _, err := cs.AppsV1().StatefulSets("default").Create(ctx, sts, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	ds := &appsv1.DaemonSet{
		ObjectMeta: metav1.ObjectMeta{Name: "agent", Namespace: "default"},
		Spec: appsv1.DaemonSetSpec{
			Selector: &metav1.LabelSelector{MatchLabels: labelsFor("agent")},
			Template: podTemplate("agent", corev1.RestartPolicyAlways),
		},
	}
	if _, err := cs.AppsV1().DaemonSets("default").Create(ctx, ds, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	poll.Until(t, "db and agent ready", func() error {
		s, err := cs.AppsV1().StatefulSets("default").Get(ctx, "db", metav1.GetOptions{})
		if err != nil {
			return err
		}
		if s.Status.ReadyReplicas != 3 || s.Status.ObservedGeneration != s.Generation {
			return fmt.Errorf("statefulset status %+v", s.Status)
		}
		for i := range 3 {
			p, err := cs.CoreV1().Pods("default").Get(ctx, fmt.Sprintf("db-%d", i), metav1.GetOptions{})
			if err != nil || !podReady(p) {
				return fmt.Errorf("pod db-%d: %v", i, err)
			}
		}
		d, err := cs.AppsV1().DaemonSets("default").Get(ctx, "agent", metav1.GetOptions{})
		if err != nil {
			return err
		}
		if d.Status.DesiredNumberScheduled != 3 || d.Status.NumberReady != 3 {
			return fmt.Errorf("daemonset status %+v", d.Status)
		}
		pods, err := cs.CoreV1().Pods("default").List(ctx, metav1.ListOptions{LabelSelector: "app=agent"})
		if err != nil {
			return err
		}
		nodes := map[string]bool{}
		for _, p := range pods.Items {
			nodes[p.Spec.NodeName] = true
		}
		if len(pods.Items) != 3 || len(nodes) != 3 {
			return fmt.Errorf("%d daemon pods on %d nodes", len(pods.Items), len(nodes))
		}
		return nil
	})
	// Scale the StatefulSet down: the highest ordinals go.
	s, err := cs.AppsV1().StatefulSets("default").Get(ctx, "db", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	s.Spec.Replicas = ptr.To[int32](1)
	if _, err := cs.AppsV1().StatefulSets("default").Update(ctx, s, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	poll.Until(t, "db scaled down to db-0", func() error {
		pods, err := cs.CoreV1().Pods("default").List(ctx, metav1.ListOptions{LabelSelector: "app=db"})
		if err != nil {
			return err
		}
		if len(pods.Items) != 1 || pods.Items[0].Name != "db-0" {
			return fmt.Errorf("%d pods", len(pods.Items))
		}
		return nil
	})
}

func TestNodesRegistered(t *testing.T) {
	_, cs := startCluster(t, Options{Name: "edge-7", Nodes: 3})
	nodes, err := cs.CoreV1().Nodes().List(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(nodes.Items) != 3 {
		t.Fatalf("%d nodes", len(nodes.Items))
	}
	for _, n := range nodes.Items {
		ready := false
		for _, c := range n.Status.Conditions {
			ready = ready || (c.Type == corev1.NodeReady && c.Status == corev1.ConditionTrue)
		}
		if !ready || !strings.HasPrefix(n.Name, "edge-7-node-") {
			t.Errorf("node %s: %+v", n.Name, n.Status.Conditions)
		}
	}
}

func TestWatchStreams(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	c, cs := startCluster(t, Options{})
	cms := cs.CoreV1().ConfigMaps("default")
	// A started cluster's own loops hold two store watches.
	const base = 2
	poll.Until(t, "the cluster's own store watches", func() error {
		if got := c.Stats().Watchers; got != base {
			return fmt.Errorf("%d store watchers, want %d", got, base)
		}
		return nil
	})
	w, err := cms.Watch(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for i := range 3 {
		cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("cm-%d", i)}, Data: map[string]string{"k": "v"}}
		if _, err := cms.Create(ctx, cm, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		// Each event arrives while the watch stays open: the response
		// streams rather than arriving when the handler ends.
		select {
		case ev := <-w.ResultChan():
			got, ok := ev.Object.(*corev1.ConfigMap)
			if ev.Type != watch.Added || !ok || got.Name != cm.Name {
				t.Fatalf("event %v %#v", ev.Type, ev.Object)
			}
		case <-ctx.Done():
			t.Fatal("no event")
		}
	}
	if got := c.Stats().Watchers; got != base+1 {
		t.Errorf("%d store watchers with the watch open, want %d", got, base+1)
	}
	w.Stop()
	// Stopping the client watch ends the server's handler.
	poll.Until(t, "the watch's store watcher gone", func() error {
		if got := c.Stats().Watchers; got != base {
			return fmt.Errorf("%d store watchers after Stop, want %d", got, base)
		}
		return nil
	})
}

func TestDiscoveryDynamicAndRESTMapper(t *testing.T) {
	ctx := context.Background()
	c, cs := startCluster(t, Options{})
	res, err := cs.Discovery().ServerResourcesForGroupVersion("apps/v1")
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, r := range res.APIResources {
		found = found || r.Name == "deployments"
	}
	if !found {
		t.Fatalf("apps/v1 resources %v lack deployments", res.APIResources)
	}
	mapper := restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(cs.Discovery()))
	m, err := mapper.RESTMapping(schema.GroupKind{Group: "apps", Kind: "Deployment"}, "v1")
	if err != nil {
		t.Fatal(err)
	}
	if m.Resource.Resource != "deployments" {
		t.Fatalf("mapping %+v", m)
	}
	dyn, err := dynamic.NewForConfig(c.RESTConfig())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cs.AppsV1().Deployments("default").Create(ctx, newDeployment("dyn", 1), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	list, err := dyn.Resource(m.Resource).Namespace("default").List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(list.Items) != 1 || list.Items[0].GetName() != "dyn" {
		t.Fatalf("dynamic list: %v", list.Items)
	}
	v, err := cs.Discovery().ServerVersion()
	if err != nil || v.GitVersion == "" {
		t.Fatalf("version %v %v", v, err)
	}
}

func TestClustersIsolated(t *testing.T) {
	ctx := context.Background()
	_, a := startCluster(t, Options{Name: "a"})
	_, b := startCluster(t, Options{Name: "b"})
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "only-in-a"}}
	if _, err := a.CoreV1().ConfigMaps("default").Create(ctx, cm, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := b.CoreV1().ConfigMaps("default").Get(ctx, "only-in-a", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Fatalf("get in b: %v, want NotFound", err)
	}
	nodes, err := b.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil || len(nodes.Items) != 1 || nodes.Items[0].Name != "b-node-0" {
		t.Fatalf("nodes of b: %v %v", nodes, err)
	}
}

func TestOptionsValidate(t *testing.T) {
	for _, o := range []Options{{}, {Name: "x", FailureRate: 2}, {Name: "x", Nodes: -1}, {Name: "x", LogInterval: -time.Second}} {
		if _, err := New(o); err == nil {
			t.Errorf("New(%+v) succeeded", o)
		}
	}
}
