package bench

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	certificatesv1 "k8s.io/api/certificates/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/canopy-dev/canopy/relay/layout"
	"github.com/canopy-dev/canopy/relay/pki"
	"github.com/canopy-dev/canopy/test/kubecluster"
	"github.com/canopy-dev/canopy/test/poll"
	testprocs "github.com/canopy-dev/canopy/test/procs"
	"github.com/canopy-dev/canopy/test/relaybin"
	edgev1alpha1 "github.com/canopy-dev/canopy/topology/api/v1alpha1"
)

// BenchmarkOCM joins the same real clusters (etcd and kube-apiserver each,
// test/kubecluster) to an Open Cluster Management hub and to a Canopy tree,
// then makes the same changes through both, alternately, and measures
// (OCMRun):
//
//   - a change until visible in every cluster: OCM, an update of each
//     cluster's ManifestWork at the hub (one per cluster, written at once:
//     OCM has no fan-out of its own without a placement); Canopy, an
//     update of one placed ConfigMap at the root; a watch per cluster sees
//     each value arrive;
//   - status until back at the hub or root: OCM, every ManifestWork
//     Available (and Applied) at its new generation; Canopy, the
//     EdgePlacement counting every destination synced at the change's
//     revision;
//   - each cluster's agent after the changes: RSS of OCM's klusterlet
//     agent (`registration-operator agent`, registration and work in one
//     process) and of Canopy's edge relay (`relay --role=edge`, a
//     process of its own), and the CPU time they used during the changes.
//
// The hub is a full cluster (its kube-controller-manager signs the agents'
// certificates); the managed clusters run etcd and kube-apiserver only.
// Canopy runs a root, one region and an edge per cluster, each a relay
// process. Both run with their defaults (OCMRun.Settings).
//
// It needs bin/ of the repository: the cluster binaries (make kube-bins),
// OCM's (make ocm-bins) and, unless RELAY_BIN names one, it builds the
// relay. OCM_BENCH_CLUSTERS sets the number of clusters (3),
// OCM_BENCH_STATUS_WINDOW the root's and the region's --status-window
// (200ms), and OCM_BENCH_JSON a file for the OCMRun as JSON
// (cmd/ocmreport, make bench-ocm). With OCM_BENCH_HEAPS=DIR every edge
// relay serves its profiles (--pprof), and the benchmark saves their heap
// profiles after the changes into DIR.
//
//	go test ./test/bench -run '^$' -bench '^BenchmarkOCM$' -benchtime=1x -timeout=30m -v
func BenchmarkOCM(b *testing.B) {
	if bt := flag.Lookup("test.benchtime"); bt == nil || bt.Value.String() != "1x" {
		b.Fatal("run with -benchtime=1x: the run does a fixed number of changes")
	}
	n := 3
	if s := os.Getenv("OCM_BENCH_CLUSTERS"); s != "" {
		var err error
		if n, err = strconv.Atoi(s); err != nil || n < 1 {
			b.Fatalf("OCM_BENCH_CLUSTERS=%q: want a number of clusters, at least 1", s)
		}
	}
	const updates = 20
	began := time.Now()
	run := OCMRun{Clusters: n, Updates: updates, LoadStart: loadAverage()}
	ocm := ocmInstall(b)
	relay := relaybin.For(b)
	run.OCMVersion = ocm.version
	run.CanopyVersion = firstLineOf(commandOutput(b, relay, "version"))
	window := "200ms (default)"
	if w := os.Getenv("OCM_BENCH_STATUS_WINDOW"); w != "" {
		if _, err := time.ParseDuration(w); err != nil {
			b.Fatalf("OCM_BENCH_STATUS_WINDOW=%q: %v", w, err)
		}
		window = w
	}
	run.Settings = []string{
		"OCM: work agent `--status-sync-interval` 10s (default; the Available condition also follows every ManifestWork event)",
		"Canopy: root and region `--status-window` " + window,
	}

	names := make([]string, n)
	opts := []kubecluster.Options{{}} // the hub: a full cluster, to sign certificates
	for i := range n {
		names[i] = fmt.Sprintf("cluster%02d", i+1)
		opts = append(opts, kubecluster.Options{Minimal: true})
	}
	clusters := startClustersParallel(b, opts)
	run.ClustersUp = time.Since(began)
	hub, managed := clusters[0], clusters[1:]
	run.KubeVersion = "etcd + kube-apiserver " + firstLineOf(commandOutput(b, filepath.Join(repoBin, "kube-apiserver"), "--version")) +
		" each (test/kubecluster, minimal); the OCM hub a full cluster"
	b.Logf("%d clusters and the hub up in %v", n, run.ClustersUp.Round(time.Millisecond))

	// Every cluster's ConfigMaps in default, watched once for both systems.
	seen := map[string]*arrivals{ocmObject: newArrivals(), canopyObject: newArrivals()}
	ctx, cancel := context.WithCancel(context.Background())
	b.Cleanup(cancel)
	for i, c := range managed {
		dyn, err := dynamic.NewForConfig(c.RESTConfig())
		if err != nil {
			b.Fatal(err)
		}
		name := names[i]
		watchAll(ctx, b, dyn.Resource(configMapsGVR).Namespace(metav1.NamespaceDefault), func(u *unstructured.Unstructured, at time.Time) {
			if a := seen[u.GetName()]; a != nil {
				v, _, _ := unstructured.NestedString(u.Object, "data", "v")
				if x, err := strconv.ParseInt(v, 10, 64); err == nil {
					a.add(name, x, at)
				}
			}
		})
	}

	t0 := time.Now()
	o := startOCM(ctx, b, ocm, hub, managed, names, seen[ocmObject])
	run.OCMJoin = time.Since(t0)
	b.Logf("OCM: %d agents joined, the first ManifestWorks applied and Available in %v", n, run.OCMJoin.Round(time.Millisecond))
	t0 = time.Now()
	c := startCanopyTree(ctx, b, relay, strings.Fields(window)[0], managed, names, seen[canopyObject])
	run.CanopyJoin = time.Since(t0)
	b.Logf("Canopy: %d edges joined, the first change synced in %v", n, run.CanopyJoin.Round(time.Millisecond))

	cpu := func(pids []int) time.Duration {
		d, err := ProcessCPU(pids...)
		if err != nil {
			b.Fatal(err)
		}
		return d
	}
	ocmCPU, canopyCPU := cpu(o.agentPIDs()), cpu(c.edgePIDs())
	var ocmVisible, ocmStatus, ocmApplied, canopyPlaced, canopyVisible, canopyStatus []time.Duration
	for i := 1; i <= updates; i++ {
		v, st, ap := o.change(ctx, b, int64(i), seen[ocmObject])
		ocmVisible, ocmStatus, ocmApplied = append(ocmVisible, v...), append(ocmStatus, st), append(ocmApplied, ap)
		pl, v, st := c.change(ctx, b, int64(i), seen[canopyObject])
		canopyPlaced, canopyVisible, canopyStatus = append(canopyPlaced, pl), append(canopyVisible, v...), append(canopyStatus, st)
	}
	run.OCM.CPU, run.Canopy.CPU = cpu(o.agentPIDs())-ocmCPU, cpu(c.edgePIDs())-canopyCPU
	run.OCM.Visible, run.OCM.Status, run.OCM.Applied = QuantilesOf(ocmVisible), QuantilesOf(ocmStatus), QuantilesOf(ocmApplied)
	run.Canopy.Visible, run.Canopy.Status, run.CanopyPlaced = QuantilesOf(canopyVisible), QuantilesOf(canopyStatus), QuantilesOf(canopyPlaced)
	memory := func(pids []int) []Memory {
		out := make([]Memory, len(pids))
		for i, pid := range pids {
			var err error
			if out[i], err = ProcessMemory(pid); err != nil {
				b.Fatal(err)
			}
		}
		return out
	}
	run.OCM.Agents, run.Canopy.Agents = memory(o.agentPIDs()), memory(c.edgePIDs())
	c.saveHeaps(b)
	run.LoadEnd, run.Took = loadAverage(), time.Since(began)

	for _, s := range run.Systems() {
		m, name := s.Memory(), strings.ToLower(s.Name)
		b.ReportMetric(ms(s.Visible.P50), name+"-visible-p50-ms")
		b.ReportMetric(ms(s.Visible.P90), name+"-visible-p90-ms")
		b.ReportMetric(ms(s.Visible.Max), name+"-visible-max-ms")
		b.ReportMetric(ms(s.Status.P50), name+"-status-p50-ms")
		b.ReportMetric(ms(s.Status.Max), name+"-status-max-ms")
		b.ReportMetric(float64(m.MaxRSS)/(1<<20), name+"-rss-max-MiB")
		b.ReportMetric(m.MeanRSS/(1<<20), name+"-rss-mean-MiB")
		b.Logf("%s: visible p50 %v p90 %v max %v; status p50 %v p90 %v max %v; agent RSS max %.1f MiB mean %.1f MiB (anon %.1f MiB, peak %.1f MiB); agents' CPU %v",
			name, s.Visible.P50, s.Visible.P90, s.Visible.Max, s.Status.P50, s.Status.P90, s.Status.Max,
			float64(m.MaxRSS)/(1<<20), m.MeanRSS/(1<<20), m.MeanAnon/(1<<20), float64(m.MaxPeak)/(1<<20), s.CPU)
	}
	b.Logf("ocm: Applied p50 %v p90 %v max %v", run.OCM.Applied.P50, run.OCM.Applied.P90, run.OCM.Applied.Max)
	b.Logf("canopy: in the root's downsync space p50 %v p90 %v max %v", run.CanopyPlaced.P50, run.CanopyPlaced.P90, run.CanopyPlaced.Max)
	if path := os.Getenv("OCM_BENCH_JSON"); path != "" {
		data, err := json.MarshalIndent(run, "", "  ")
		if err == nil {
			err = os.WriteFile(path, append(data, '\n'), 0o644)
		}
		if err != nil {
			b.Fatal(err)
		}
	}
}

// repoBin is the repository's bin/, seen from this package's directory
// (where go test runs it).
var repoBin = filepath.Join("..", "..", "bin")

// The ConfigMaps each system places in every cluster's default namespace;
// data.v holds the number of the change.
const (
	ocmObject    = "ocm-bench"
	canopyObject = "canopy-bench"
)

var (
	configMapsGVR     = schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}
	manifestWorksGVR  = schema.GroupVersionResource{Group: "work.open-cluster-management.io", Version: "v1", Resource: "manifestworks"}
	managedClusterGVR = schema.GroupVersionResource{Group: "cluster.open-cluster-management.io", Version: "v1", Resource: "managedclusters"}
)

// changeTimeout bounds the wait for one change everywhere.
const changeTimeout = 2 * time.Minute

// arrivals records, per key (a cluster, a ManifestWork, a placement), the
// values seen there in the order they arrived, with when: the watches
// that feed it stamp each event as it comes, so how often a waiter looks
// does not enter the figures.
type arrivals struct {
	mu   sync.Mutex
	seen map[string][]arrival
}

type arrival struct {
	v  int64
	at time.Time
}

func newArrivals() *arrivals { return &arrivals{seen: map[string][]arrival{}} }

func (a *arrivals) add(key string, v int64, at time.Time) {
	a.mu.Lock()
	a.seen[key] = append(a.seen[key], arrival{v, at})
	a.mu.Unlock()
}

// wait returns, for every key of want, when a value of at least want[key]
// first arrived there, waiting for them all; what names the wait.
func (a *arrivals) wait(b testing.TB, what string, want map[string]int64) map[string]time.Time {
	b.Helper()
	out := map[string]time.Time{}
	poll.Until(b, what, func() error {
		a.mu.Lock()
		defer a.mu.Unlock()
		var missing []string
		for k, w := range want {
			if _, ok := out[k]; ok {
				continue
			}
			i := slices.IndexFunc(a.seen[k], func(x arrival) bool { return x.v >= w })
			if i < 0 {
				missing = append(missing, fmt.Sprintf("%s (want %d)", k, w))
				continue
			}
			out[k] = a.seen[k][i].at
		}
		if len(missing) > 0 {
			slices.Sort(missing)
			return fmt.Errorf("not yet at %s", strings.Join(missing, ", "))
		}
		return nil
	}, poll.For(changeTimeout), poll.Every(2*time.Millisecond))
	return out
}

// since returns at[k] - t0 for every k.
func since(t0 time.Time, at map[string]time.Time) []time.Duration {
	out := make([]time.Duration, 0, len(at))
	for _, t := range at {
		out = append(out, t.Sub(t0))
	}
	return out
}

// latest returns the last of at's times minus t0.
func latest(t0 time.Time, at map[string]time.Time) time.Duration {
	return slices.Max(since(t0, at))
}

// watchAll lists and watches ri until ctx ends, calling seen with every
// object and when it arrived; a watch that ends is started again.
func watchAll(ctx context.Context, b testing.TB, ri dynamic.ResourceInterface, seen func(*unstructured.Unstructured, time.Time)) {
	b.Helper()
	go func() {
		for ctx.Err() == nil {
			l, err := ri.List(ctx, metav1.ListOptions{})
			if err != nil {
				time.Sleep(100 * time.Millisecond) // the server is busy or not up: try again
				continue
			}
			now := time.Now()
			for i := range l.Items {
				seen(&l.Items[i], now)
			}
			w, err := ri.Watch(ctx, metav1.ListOptions{ResourceVersion: l.GetResourceVersion()})
			if err != nil {
				continue
			}
			for ev := range w.ResultChan() {
				if u, ok := ev.Object.(*unstructured.Unstructured); ok && ev.Type != watch.Deleted {
					seen(u, time.Now())
				}
			}
		}
	}()
}

// startClustersParallel starts one cluster per options at once.
// kubecluster.Start fails its t from the goroutine it runs on, so each
// gets a recorder whose failure ends that goroutine only.
func startClustersParallel(b testing.TB, opts []kubecluster.Options) []*kubecluster.Cluster {
	b.Helper()
	out := make([]*kubecluster.Cluster, len(opts))
	tbs := make([]*failRecorder, len(opts))
	var wg sync.WaitGroup
	for i, o := range opts {
		tbs[i] = &failRecorder{TB: b}
		wg.Go(func() { out[i] = kubecluster.Start(tbs[i], o) })
	}
	wg.Wait()
	for i, r := range tbs {
		if r.msg != "" || out[i] == nil {
			b.Fatalf("cluster %d: %s", i, r.msg)
		}
	}
	return out
}

// failRecorder is a testing.TB whose fatal errors end the calling
// goroutine and are kept for the test's goroutine to report.
type failRecorder struct {
	testing.TB
	msg string // written before the goroutine ends, read after wg.Wait
}

func (r *failRecorder) Fatal(args ...any) { r.msg = fmt.Sprint(args...); runtime.Goexit() }
func (r *failRecorder) Fatalf(format string, args ...any) {
	r.msg = fmt.Sprintf(format, args...)
	runtime.Goexit()
}
func (r *failRecorder) FailNow() { r.msg = "FailNow"; runtime.Goexit() }

// startProc starts bin with args as a process of the benchmark, killed
// with it (test/procs), its output in a file whose tail is logged if the
// benchmark fails.
func startProc(b testing.TB, name, bin string, args ...string) *testprocs.Process {
	b.Helper()
	cmd := exec.Command(bin, args...)
	cmd.SysProcAttr = relaySysProcAttr()
	return testprocs.Start(b, name, cmd)
}

func commandOutput(b testing.TB, bin string, args ...string) string {
	b.Helper()
	out, err := exec.Command(bin, args...).Output()
	if err != nil {
		b.Fatalf("%s %s: %v", bin, strings.Join(args, " "), err)
	}
	return strings.TrimSpace(string(out))
}

func firstLineOf(s string) string {
	l, _, _ := strings.Cut(s, "\n")
	return l
}

func loadAverage() string {
	data, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "unknown"
	}
	f := strings.Fields(string(data))
	return strings.Join(f[:min(3, len(f))], " ")
}

// ---- Open Cluster Management ----

// ocmBinaries is OCM as make ocm-bins builds it (hack/ocm).
type ocmBinaries struct {
	agent    string // registration-operator: `agent` is the klusterlet agent
	hub      string // registration: `controller` is the hub's registration controller
	manifest string // OCM's manifests/ (the CRDs), in the module cache
	version  string
}

// ocmInstall finds OCM's binaries in bin/ and its manifests where hack/ocm
// has its module, failing with the make target when they are missing.
func ocmInstall(b testing.TB) ocmBinaries {
	b.Helper()
	o := ocmBinaries{agent: filepath.Join(repoBin, "registration-operator"), hub: filepath.Join(repoBin, "registration")}
	for _, p := range []string{o.agent, o.hub} {
		if fi, err := os.Stat(p); err != nil || fi.Mode()&0o111 == 0 {
			b.Fatalf("%s is missing or not executable: run `make ocm-bins` first", p)
		}
	}
	cmd := exec.Command("go", "list", "-m", "-f", "{{.Dir}} {{.Version}}", "open-cluster-management.io/ocm")
	cmd.Dir = filepath.Join("..", "..", "hack", "ocm")
	out, err := cmd.Output()
	if err != nil {
		b.Fatalf("go list -m open-cluster-management.io/ocm in %s: %v (run `make ocm-bins`, which downloads it)", cmd.Dir, err)
	}
	dir, version, _ := strings.Cut(strings.TrimSpace(string(out)), " ")
	o.manifest, o.version = filepath.Join(dir, "manifests"), version
	return o
}

// ocmBootstrapRBAC lets a cluster's agent, with its bootstrap identity,
// ask the hub for a certificate and register its ManagedCluster: what
// OCM's cluster-manager grants group system:bootstrappers:managedcluster.
const ocmBootstrapRBAC = `apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata: {name: "open-cluster-management:bootstrap"}
rules:
- {apiGroups: [""], resources: [configmaps], verbs: [get]}
- {apiGroups: [certificates.k8s.io], resources: [certificatesigningrequests], verbs: [create, get, list, watch]}
- {apiGroups: [cluster.open-cluster-management.io], resources: [managedclusters], verbs: [get, create, list, watch]}
- {apiGroups: [cluster.open-cluster-management.io], resources: [managedclustersets/join], verbs: [create]}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata: {name: "open-cluster-management:bootstrap"}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: "open-cluster-management:bootstrap"}
subjects:
- {apiGroup: rbac.authorization.k8s.io, kind: Group, name: "system:bootstrappers:managedcluster"}
---
apiVersion: v1
kind: Namespace
metadata: {name: open-cluster-management-hub}
`

const (
	ocmAgentNamespace = "open-cluster-management-agent"
	ocmWork           = "bench" // the ManifestWork in each cluster's namespace at the hub
	ocmClusterLabel   = "open-cluster-management.io/cluster-name"
)

// ocmSetup is OCM running on the clusters.
type ocmSetup struct {
	hub    *kubecluster.Cluster
	dyn    dynamic.Interface // the hub's
	names  []string
	agents []*testprocs.Process
	status *arrivals // per "<cluster>/Available" and "<cluster>/Applied": generations
}

func (o *ocmSetup) agentPIDs() []int {
	pids := make([]int, len(o.agents))
	for i, p := range o.agents {
		pids[i] = p.Pid()
	}
	return pids
}

// startOCM installs the hub (CRDs, bootstrap RBAC, the registration
// controller) and an agent per managed cluster, approves each agent's
// certificate and accepts its cluster, as an administrator of the hub
// does, then creates each cluster's ManifestWork (change 0) and waits for
// it in every cluster and Available at the hub.
func startOCM(ctx context.Context, b testing.TB, bins ocmBinaries, hub *kubecluster.Cluster, managed []*kubecluster.Cluster, names []string, seen *arrivals) *ocmSetup {
	b.Helper()
	home := b.TempDir()
	kubectl := func(kubeconfig, stdin string, args ...string) {
		b.Helper()
		if _, err := kubecluster.RunKubectl(b, home, kubeconfig, stdin, nil, args...); err != nil {
			b.Fatal(err)
		}
	}
	crds := func(dir string) []string {
		files, err := filepath.Glob(filepath.Join(bins.manifest, dir, "*crd.yaml"))
		if err != nil || len(files) == 0 {
			b.Fatalf("no CRDs in %s (%v)", filepath.Join(bins.manifest, dir), err)
		}
		var args []string
		for _, f := range files {
			args = append(args, "-f", f)
		}
		return args
	}
	kubectl(hub.Kubeconfig, "", append([]string{"apply", "--server-side"}, crds("cluster-manager/hub")...)...)
	kubectl(hub.Kubeconfig, ocmBootstrapRBAC, "apply", "-f", "-")
	kubectl(hub.Kubeconfig, "", "wait", "--for=condition=Established", "crd", "--all", "--timeout=60s")
	o := &ocmSetup{hub: hub, names: names, status: newArrivals()}
	ctrl := startProc(b, "ocm registration controller", bins.hub, "controller", "--kubeconfig="+hub.Kubeconfig,
		"--namespace=open-cluster-management-hub", "--disable-leader-election", "--listen="+testprocs.FreeAddr(b))

	var err error
	if o.dyn, err = dynamic.NewForConfig(hub.RESTConfig()); err != nil {
		b.Fatal(err)
	}
	watchAll(ctx, b, o.dyn.Resource(manifestWorksGVR), func(u *unstructured.Unstructured, at time.Time) {
		if u.GetName() != ocmWork {
			return
		}
		conds, _, _ := unstructured.NestedSlice(u.Object, "status", "conditions")
		for _, c := range conds {
			m, _ := c.(map[string]any)
			typ, _ := m["type"].(string)
			gen, _ := m["observedGeneration"].(int64)
			if (typ == "Available" || typ == "Applied") && m["status"] == "True" && gen == u.GetGeneration() {
				o.status.add(u.GetNamespace()+"/"+typ, gen, at)
			}
		}
	})

	for i, c := range managed {
		name := names[i]
		kubectl(c.Kubeconfig, "", append([]string{"apply", "--server-side"}, crds("klusterlet/managed")...)...)
		kubectl(c.Kubeconfig, "", "create", "namespace", ocmAgentNamespace)
		boot := hub.UserKubeconfig(b, "ocm-bootstrap-"+name, "system:bootstrappers:managedcluster")
		dir := b.TempDir()
		p := startProc(b, "ocm agent "+name, bins.agent, "agent",
			"--spoke-cluster-name="+name, "--agent-id="+name+"-agent", "--kubeconfig="+c.Kubeconfig,
			"--namespace="+ocmAgentNamespace, "--bootstrap-kubeconfig="+boot, "--hub-kubeconfig-dir="+dir,
			"--workload-source-driver=kube", "--workload-source-config="+filepath.Join(dir, "kubeconfig"),
			"--disable-leader-election", "--listen="+testprocs.FreeAddr(b))
		o.agents = append(o.agents, p)
	}

	// Approve each agent's certificate request and accept its cluster,
	// until every ManagedCluster has joined.
	cs := hub.Clientset(b)
	everyProc := append([]*testprocs.Process{ctrl}, o.agents...)
	poll.Until(b, "every cluster joined to the OCM hub", func() error {
		for _, p := range everyProc {
			if err := p.Exited(); err != nil {
				return poll.Stop(fmt.Errorf("%w:\n%s", err, p.Tail(40)))
			}
		}
		csrs, err := cs.CertificatesV1().CertificateSigningRequests().List(ctx, metav1.ListOptions{LabelSelector: ocmClusterLabel})
		if err != nil {
			return err
		}
		for _, csr := range csrs.Items {
			if len(csr.Status.Conditions) > 0 {
				continue
			}
			csr.Status.Conditions = append(csr.Status.Conditions, certificatesv1.CertificateSigningRequestCondition{
				Type: certificatesv1.CertificateApproved, Status: corev1.ConditionTrue, Reason: "BenchmarkApproved"})
			if _, err := cs.CertificatesV1().CertificateSigningRequests().UpdateApproval(ctx, csr.Name, &csr, metav1.UpdateOptions{}); err != nil {
				return err
			}
		}
		var waiting []string
		for _, name := range names {
			mc, err := o.dyn.Resource(managedClusterGVR).Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				waiting = append(waiting, name+": "+err.Error())
				continue
			}
			if ok, _, _ := unstructured.NestedBool(mc.Object, "spec", "hubAcceptsClient"); !ok {
				if _, err := o.dyn.Resource(managedClusterGVR).Patch(ctx, name, types.MergePatchType,
					[]byte(`{"spec":{"hubAcceptsClient":true}}`), metav1.PatchOptions{}); err != nil {
					return err
				}
			}
			if !conditionTrue(mc, "ManagedClusterJoined") || !conditionTrue(mc, "ManagedClusterConditionAvailable") {
				waiting = append(waiting, name+": not joined and available")
			}
		}
		if len(waiting) > 0 {
			return errors.New(strings.Join(waiting, "; "))
		}
		return nil
	}, poll.For(5*time.Minute))

	for _, name := range names {
		w := &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": "work.open-cluster-management.io/v1", "kind": "ManifestWork",
			"metadata": map[string]any{"name": ocmWork, "namespace": name},
			"spec":     map[string]any{"workload": map[string]any{"manifests": []any{ocmConfigMap(0)}}},
		}}
		// The cluster's namespace at the hub comes with its acceptance.
		poll.Until(b, "ManifestWork "+name+"/"+ocmWork, func() error {
			_, err := o.dyn.Resource(manifestWorksGVR).Namespace(name).Create(ctx, w, metav1.CreateOptions{})
			if apierrors.IsAlreadyExists(err) { // an earlier try timed out after creating it
				return nil
			}
			return err
		})
	}
	in, status := map[string]int64{}, map[string]int64{}
	for _, name := range names {
		in[name], status[name+"/Available"] = 0, 1
	}
	seen.wait(b, "the first ManifestWorks' ConfigMap in every cluster", in)
	o.status.wait(b, "every first ManifestWork Available", status)
	return o
}

// ocmConfigMap is the manifest of change v.
func ocmConfigMap(v int64) map[string]any {
	return map[string]any{"apiVersion": "v1", "kind": "ConfigMap",
		"metadata": map[string]any{"name": ocmObject, "namespace": metav1.NamespaceDefault},
		"data":     map[string]any{"v": strconv.FormatInt(v, 10)}}
}

// change writes change v into every cluster's ManifestWork at once and
// returns the delay until each cluster had it, until every work was
// Available at its new generation, and until every work was Applied.
func (o *ocmSetup) change(ctx context.Context, b testing.TB, v int64, seen *arrivals) (visible []time.Duration, available, applied time.Duration) {
	b.Helper()
	gens := make([]int64, len(o.names))
	errs := make([]error, len(o.names))
	t0 := time.Now()
	var wg sync.WaitGroup
	for i, name := range o.names {
		wg.Go(func() {
			ri := o.dyn.Resource(manifestWorksGVR).Namespace(name)
			w, err := ri.Get(ctx, ocmWork, metav1.GetOptions{})
			if err == nil {
				err = unstructured.SetNestedSlice(w.Object, []any{ocmConfigMap(v)}, "spec", "workload", "manifests")
			}
			if err == nil {
				w, err = ri.Update(ctx, w, metav1.UpdateOptions{})
			}
			if err == nil {
				gens[i] = w.GetGeneration()
			}
			errs[i] = err
		})
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		b.Fatalf("OCM change %d: %v", v, err)
	}
	in, avail, appl := map[string]int64{}, map[string]int64{}, map[string]int64{}
	for i, name := range o.names {
		in[name] = v
		avail[name+"/Available"] = gens[i]
		appl[name+"/Applied"] = gens[i]
	}
	at := seen.wait(b, fmt.Sprintf("OCM change %d in every cluster", v), in)
	st := o.status.wait(b, fmt.Sprintf("OCM change %d Available", v), avail)
	ap := o.status.wait(b, fmt.Sprintf("OCM change %d Applied", v), appl)
	return since(t0, at), latest(t0, st), latest(t0, ap)
}

func conditionTrue(u *unstructured.Unstructured, typ string) bool {
	conds, _, _ := unstructured.NestedSlice(u.Object, "status", "conditions")
	for _, c := range conds {
		if m, _ := c.(map[string]any); m["type"] == typ && m["status"] == "True" {
			return true
		}
	}
	return false
}

// ---- Canopy ----

// canopyTree is a root, one region and an edge per cluster, each a relay
// process.
type canopyTree struct {
	wds     dynamic.Interface // the root's default space
	edges   []*testprocs.Process
	names   []string
	n       int
	status  *arrivals // "placement": the revision every destination synced at
	placed  *arrivals // "root": the values of the root's downsync copy
	heapDir string    // OCM_BENCH_HEAPS
	pprof   []string  // each edge's --pprof address, with heapDir
}

// saveHeaps writes each edge's heap profile into heapDir, when set, as
// edge-<cluster>.heap (go tool pprof -sample_index=inuse_space FILE).
func (c *canopyTree) saveHeaps(b testing.TB) {
	b.Helper()
	for i, addr := range c.pprof {
		if addr == "" {
			continue
		}
		resp, err := http.Get("http://" + addr + "/debug/pprof/heap")
		if err != nil {
			b.Fatal(err)
		}
		data, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err == nil {
			err = os.WriteFile(filepath.Join(c.heapDir, "edge-"+c.names[i]+".heap"), data, 0o644)
		}
		if err != nil {
			b.Fatal(err)
		}
	}
}

func (c *canopyTree) edgePIDs() []int {
	pids := make([]int, len(c.edges))
	for i, p := range c.edges {
		pids[i] = p.Pid()
	}
	return pids
}

// startCanopyTree starts the relays, places the ConfigMap on every
// cluster (change 0), and waits for it everywhere and for the placement's
// status.
func startCanopyTree(ctx context.Context, b testing.TB, bin, window string, managed []*kubecluster.Cluster, names []string, seen *arrivals) *canopyTree {
	b.Helper()
	rootDir, rootLink := b.TempDir(), testprocs.FreeAddr(b)
	root := startProc(b, "root", bin, "--role=root", "--name=root", "--data-dir="+rootDir,
		"--api-addr=127.0.0.1:0", "--link-addr="+rootLink, "--status-window="+window)
	kubeconfig := filepath.Join(rootDir, pki.AdminKubeconfigFile)
	var wds, inv, down *rest.Config
	root.Until(b, "the root serving", func() error {
		var err error
		if wds, err = spaceConfig(kubeconfig, layout.DefaultSpace); err != nil {
			return err
		}
		if inv, err = spaceConfig(kubeconfig, layout.InventorySpace); err != nil {
			return err
		}
		if down, err = spaceConfig(kubeconfig, layout.DownsyncSpace); err != nil {
			return err
		}
		cs, err := kubernetes.NewForConfig(wds)
		if err != nil {
			return err
		}
		_, err = cs.Discovery().RESTClient().Get().AbsPath("/readyz").DoRaw(ctx)
		return err
	}, poll.For(2*time.Minute))
	token := commandOutput(b, bin, "token", "create", "--data-dir="+rootDir, "--ttl=1h")

	regionLink := testprocs.FreeAddr(b)
	region := startProc(b, "region", bin, "--role=region", "--name=r1", "--data-dir="+b.TempDir(),
		"--parent="+rootLink, "--join-token="+token, "--link-addr="+regionLink, "--status-window="+window)
	c := &canopyTree{n: len(managed), names: names, status: newArrivals(), placed: newArrivals(), heapDir: os.Getenv("OCM_BENCH_HEAPS")}
	for i, cl := range managed {
		args := []string{"--role=edge", "--name=" + names[i], "--data-dir=" + b.TempDir(), "--parent=" + regionLink,
			"--join-token=" + token, "--kubeconfig=" + cl.Kubeconfig, "--labels=fleet=yes"}
		pprof := ""
		if c.heapDir != "" {
			pprof = testprocs.FreeAddr(b)
			args = append(args, "--pprof="+pprof)
		}
		c.edges = append(c.edges, startProc(b, "edge "+names[i], bin, args...))
		c.pprof = append(c.pprof, pprof)
	}

	invDyn, err := dynamic.NewForConfig(inv)
	if err != nil {
		b.Fatal(err)
	}
	if c.wds, err = dynamic.NewForConfig(wds); err != nil {
		b.Fatal(err)
	}
	region.Until(b, "a SyncTarget for every edge", func() error {
		for _, e := range c.edges {
			if err := e.Exited(); err != nil {
				return poll.Stop(fmt.Errorf("%w:\n%s", err, e.Tail(40)))
			}
		}
		l, err := invDyn.Resource(edgev1alpha1.SyncTargetsGVR).List(ctx, metav1.ListOptions{})
		if err != nil {
			return err
		}
		if len(l.Items) != len(managed) {
			return fmt.Errorf("%d of %d", len(l.Items), len(managed))
		}
		return nil
	}, poll.For(3*time.Minute))

	downDyn, err := dynamic.NewForConfig(down)
	if err != nil {
		b.Fatal(err)
	}
	watchAll(ctx, b, downDyn.Resource(configMapsGVR).Namespace(metav1.NamespaceDefault), func(u *unstructured.Unstructured, at time.Time) {
		v, _, _ := unstructured.NestedString(u.Object, "data", "v")
		if x, err := strconv.ParseInt(v, 10, 64); err == nil && u.GetName() == canopyObject {
			c.placed.add("root", x, at)
		}
	})
	watchAll(ctx, b, c.wds.Resource(edgev1alpha1.EdgePlacementsGVR), func(u *unstructured.Unstructured, at time.Time) {
		synced, _, _ := unstructured.NestedInt64(u.Object, "status", "syncedDestinations")
		rev, _, _ := unstructured.NestedString(u.Object, "status", "syncedRevision")
		if r, err := strconv.ParseInt(rev, 10, 64); err == nil && u.GetName() == canopyObject && synced == int64(c.n) {
			c.status.add("placement", r, at)
		}
	})
	applyTB(b, invDyn, edgev1alpha1.LocationsGVR, map[string]any{"apiVersion": "edge.canopy.dev/v1alpha1", "kind": "Location",
		"metadata": map[string]any{"name": "fleet", "labels": map[string]any{"fleet": "yes"}},
		"spec":     map[string]any{"instanceSelector": map[string]any{"matchLabels": map[string]any{"fleet": "yes"}}}})
	applyTB(b, c.wds, edgev1alpha1.EdgePlacementsGVR, map[string]any{"apiVersion": "edge.canopy.dev/v1alpha1", "kind": "EdgePlacement",
		"metadata": map[string]any{"name": canopyObject},
		"spec": map[string]any{"locationSelectors": []any{map[string]any{"matchLabels": map[string]any{"fleet": "yes"}}},
			"downsync": []any{map[string]any{"apiGroup": "", "resources": []any{"configmaps"},
				"namespaces": []any{metav1.NamespaceDefault}, "objectNames": []any{canopyObject}}}}})
	c.change(ctx, b, 0, seen)
	return c
}

// change writes change v into the placed ConfigMap at the root and
// returns the delay until the root's placement controller had written it
// into the downsync space, until each cluster had it and until the
// placement's status counted every destination synced at its revision.
func (c *canopyTree) change(ctx context.Context, b testing.TB, v int64, seen *arrivals) (placed time.Duration, visible []time.Duration, status time.Duration) {
	b.Helper()
	t0 := time.Now()
	rv := applyTB(b, c.wds, configMapsGVR, map[string]any{"apiVersion": "v1", "kind": "ConfigMap",
		"metadata": map[string]any{"name": canopyObject, "namespace": metav1.NamespaceDefault},
		"data":     map[string]any{"v": strconv.FormatInt(v, 10)}})
	rev, err := strconv.ParseInt(rv, 10, 64)
	if err != nil {
		b.Fatalf("the root's resourceVersion %q: %v", rv, err)
	}
	in := map[string]int64{}
	for i := range c.edges {
		in[fmt.Sprintf("cluster%02d", i+1)] = v
	}
	at := seen.wait(b, fmt.Sprintf("Canopy change %d in every cluster", v), in)
	st := c.status.wait(b, fmt.Sprintf("Canopy change %d synced", v), map[string]int64{"placement": rev})
	pl := c.placed.wait(b, fmt.Sprintf("Canopy change %d in the downsync space", v), map[string]int64{"root": v})
	return latest(t0, pl), since(t0, at), latest(t0, st)
}

// applyTB creates obj through c, or updates it when it exists, and
// returns its new resourceVersion.
func applyTB(b testing.TB, c dynamic.Interface, gvr schema.GroupVersionResource, obj map[string]any) string {
	b.Helper()
	u := &unstructured.Unstructured{Object: obj}
	ri := dynamic.ResourceInterface(c.Resource(gvr))
	if ns := u.GetNamespace(); ns != "" {
		ri = c.Resource(gvr).Namespace(ns)
	}
	ctx := context.Background()
	if cur, err := ri.Get(ctx, u.GetName(), metav1.GetOptions{}); err == nil {
		u.SetResourceVersion(cur.GetResourceVersion())
		out, err := ri.Update(ctx, u, metav1.UpdateOptions{})
		if err != nil {
			b.Fatalf("update %s %s: %v", gvr.Resource, u.GetName(), err)
		}
		return out.GetResourceVersion()
	}
	out, err := ri.Create(ctx, u, metav1.CreateOptions{})
	if err != nil {
		b.Fatalf("create %s %s: %v", gvr.Resource, u.GetName(), err)
	}
	return out.GetResourceVersion()
}

// spaceConfig reads the admin kubeconfig a root writes into its data
// directory, for one space (its context).
func spaceConfig(path, space string) (*rest.Config, error) {
	if _, err := os.Stat(path); err != nil {
		return nil, err
	}
	cc := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(
		&clientcmd.ClientConfigLoadingRules{ExplicitPath: path},
		&clientcmd.ConfigOverrides{CurrentContext: space})
	cfg, err := cc.ClientConfig()
	if err != nil {
		return nil, err
	}
	// As test/kubecluster's clients for OCM's hub: client-go's default
	// limit (5 requests a second) would delay the changes themselves.
	cfg.QPS, cfg.Burst = 100, 200
	return cfg, nil
}
