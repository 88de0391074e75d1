package server

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/dynamic/dynamicinformer"
	"k8s.io/client-go/tools/cache"
	"sigs.k8s.io/yaml"

	"github.com/canopy-dev/canopy/test/kubecluster"
	"github.com/canopy-dev/canopy/test/poll"
	edgev1alpha1 "github.com/canopy-dev/canopy/topology/api/v1alpha1"
)

// The compliance-to-policy scenario of docs/c2p.md, whose manifests
// (docs/examples/c2p) the test applies as the walk-through does.

var (
	clusterPoliciesGVR = schema.GroupVersionResource{Group: "policy.c2p.example", Version: "v1", Resource: "clusterpolicies"}
	policyReportsGVR   = schema.GroupVersionResource{Group: "policy.c2p.example", Version: "v1", Resource: "policyreports"}
)

const (
	// auditedLabel marks the Namespaces of an edge cluster that the
	// policies apply to.
	auditedLabel = "c2p.example/audited"
	// reportPolicyLabel names, on a PolicyReport, the policy it reports on.
	reportPolicyLabel = "c2p.example/policy"
	c2pExamples       = "../../docs/examples/c2p"
)

// c2pTree is what the scenario runs on: the root (its default space,
// its inventory) and a client of each edge's cluster.
type c2pTree struct {
	root     *Root
	wds, inv dynamic.Interface
	edges    map[string]dynamic.Interface
	home     string
}

// c2pEdges are the edges of the scenario, as `make run` labels them.
var c2pEdges = map[string]map[string]string{
	"edge-1-1": {"region": "region-1"}, "edge-1-2": {"region": "region-1"}, "edge-1-3": {"region": "region-1"},
}

// TestCompliancePolicyScenario: ClusterPolicies of two providers, with
// their CRDs, are placed on three edges; a policy engine at each edge
// (runPolicyEngine) checks the edge's Namespaces, writes a PolicyReport
// per policy and the policy's pass and fail counts into its status. The
// reports come up through an upsync clause; the View policy-reports,
// partitioned by provider, gives each provider's controller (an informer
// as an impersonated user) exactly its reports from every edge, and 403
// for the other provider's partition and the whole view; the
// StatusCollector compliance sums each policy's counts over the edges.
// A Namespace fixed at an edge, and a policy withdrawn, show in both.
// virtual runs it on edges with virtual clusters, real on edges with
// real (Minimal) kube-apiservers.
func TestCompliancePolicyScenario(t *testing.T) {
	t.Run("virtual", func(t *testing.T) {
		pt := startPlacementTree(t, c2pEdges)
		ct := &c2pTree{root: pt.root, wds: pt.wds, inv: pt.inv, edges: map[string]dynamic.Interface{}, home: t.TempDir()}
		for name, e := range pt.edges {
			ct.edges[name] = vclusterClient(t, e)
		}
		c2pScenario(t, ct)
	})
	t.Run("real", func(t *testing.T) {
		rt := startRealTreeWith(t, c2pEdges, realTreeOptions{minimal: true})
		c2pScenario(t, &c2pTree{root: rt.root, wds: rt.wds, inv: rt.inv, edges: rt.dyn, home: rt.home})
	})
}

func c2pScenario(t *testing.T, ct *c2pTree) {
	ctx := context.Background()
	// The Locations `make run` makes (hack/run.sh).
	ct.kubectl(t, `apiVersion: edge.canopy.dev/v1alpha1
kind: Location
metadata: {name: region-1, labels: {region: region-1}}
spec: {instanceSelector: {matchLabels: {region: region-1}}}`, "--context=inventory", "apply", "-f", "-")
	for edge, c := range ct.edges {
		if _, err := os.Stat(filepath.Join(c2pExamples, edge+".yaml")); err == nil {
			for _, o := range readManifests(t, edge+".yaml") {
				applyTB(t, c, nsGVR, o.Object)
			}
		}
		ctx, cancel := context.WithCancel(ctx)
		done := make(chan struct{})
		go func() {
			defer close(done)
			runPolicyEngine(ctx, c, func(format string, args ...any) { t.Logf(edge+": "+format, args...) })
		}()
		t.Cleanup(func() { cancel(); <-done })
	}

	// The walk-through's steps.
	ct.kubectl(t, "", "apply", "-f", filepath.Join(c2pExamples, "crds.yaml"))
	ct.kubectl(t, "", "wait", "--for=condition=Established", "crd/clusterpolicies.policy.c2p.example", "crd/policyreports.policy.c2p.example")
	for _, f := range []string{"policies.yaml", "placements.yaml", "view.yaml"} {
		ct.kubectl(t, "", "apply", "-f", filepath.Join(c2pExamples, f))
	}

	// Each provider's controller: an informer on its partition.
	alpha := inform(t, viewClient(t, ct.root, "views/policy-reports/partitions/alpha", "alpha-controller"), policyReportsGVR)
	beta := inform(t, viewClient(t, ct.root, "views/policy-reports/partitions/beta", "beta-controller"), policyReportsGVR)
	reports := func(policies ...string) []string {
		var out []string
		for edge := range ct.edges {
			for _, p := range policies {
				out = append(out, "/"+edge+"."+p+"-report")
			}
		}
		return out
	}
	poll.Until(t, "alpha's reports from every edge", func() error { return alpha.holds(reports("require-owner", "require-team")...) })
	poll.Until(t, "beta's reports from every edge", func() error { return beta.holds(reports("require-cost-center")...) })
	// The same, with kubectl as docs/c2p.md shows it.
	partition := "--server=" + ct.root.server + "/spaces/default/views/policy-reports/partitions/"
	out := ct.kubectl(t, "", "get", "policyreports", partition+"beta", "--as=beta-controller", "-o", "name")
	var listed []string
	for _, n := range strings.Fields(out) {
		listed = append(listed, strings.Replace(n, "policyreport.policy.c2p.example/", "/", 1))
	}
	if want := reports("require-cost-center"); !slices.Equal(slices.Sorted(slices.Values(listed)), slices.Sorted(slices.Values(want))) {
		t.Errorf("kubectl lists beta's partition as beta-controller: %q, want %v", out, want)
	}
	if out, err := kubecluster.RunKubectl(t, ct.home, ct.root.KubeconfigPath(), "", nil,
		"get", "policyreports", partition+"alpha", "--as=beta-controller"); err == nil || !strings.Contains(err.Error(), "Forbidden") {
		t.Errorf("kubectl lists alpha's partition as beta-controller: %q, %v; want Forbidden", out, err)
	}
	for _, c := range []struct{ user, path string }{
		{"alpha-controller", "views/policy-reports/partitions/beta"}, {"alpha-controller", "views/policy-reports"},
		{"beta-controller", "views/policy-reports/partitions/alpha"}, {"beta-controller", "views/policy-reports"},
	} {
		_, err := viewClient(t, ct.root, c.path, c.user).Resource(policyReportsGVR).List(ctx, metav1.ListOptions{})
		if !apierrors.IsForbidden(err) {
			t.Errorf("%s lists %s: %v, want Forbidden", c.user, c.path, err)
		}
	}

	// What each edge's engine found (edge-1-3 audits no Namespace), as
	// each provider sees it and as the StatusCollector sums it.
	want := map[string]map[string][2]int64{
		"require-owner":       {"edge-1-1": {2, 0}, "edge-1-2": {0, 1}, "edge-1-3": {0, 0}},
		"require-team":        {"edge-1-1": {1, 1}, "edge-1-2": {0, 1}, "edge-1-3": {0, 0}},
		"require-cost-center": {"edge-1-1": {0, 2}, "edge-1-2": {1, 0}, "edge-1-3": {0, 0}},
	}
	ct.waitCompliance(t, "each provider's summaries, and the sums", alpha, beta, want)

	// A Namespace fixed at edge-1-1 passes require-cost-center there.
	if _, err := ct.edges["edge-1-1"].Resource(nsGVR).Patch(ctx, "lab", types.MergePatchType,
		[]byte(`{"metadata":{"labels":{"cost-center":"cc-9"}}}`), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	want["require-cost-center"]["edge-1-1"] = [2]int64{1, 1}
	ct.waitCompliance(t, "edge-1-1's fixed Namespace", alpha, beta, want)

	// A withdrawn policy leaves every edge, and its reports every view.
	ct.kubectl(t, "", "delete", "clusterpolicy", "require-team")
	delete(want, "require-team")
	poll.Until(t, "require-team's reports gone", func() error { return alpha.holds(reports("require-owner")...) })
	ct.waitCompliance(t, "without require-team", alpha, beta, want)

	for _, s := range []*seen{alpha, beta} {
		s.mu.Lock()
		for _, u := range s.ever {
			if p := u.GetLabels()["provider"]; (s == alpha) != (p == "alpha") {
				t.Errorf("%s was given to the wrong provider's controller", u.GetName())
			}
		}
		s.mu.Unlock()
	}
}

// waitCompliance waits until the providers' informers hold, for each
// policy and edge of want, a report with those pass and fail counts, and
// the CombinedStatus of each policy counts every edge and sums them.
func (ct *c2pTree) waitCompliance(t *testing.T, what string, alpha, beta *seen, want map[string]map[string][2]int64) {
	t.Helper()
	poll.Until(t, what, func() error {
		held := map[string][2]int64{}
		for _, s := range []*seen{alpha, beta} {
			s.mu.Lock()
			for _, u := range s.ever {
				if s.now["/"+u.GetName()] {
					p, _, _ := unstructured.NestedInt64(u.Object, "summary", "pass")
					f, _, _ := unstructured.NestedInt64(u.Object, "summary", "fail")
					held[u.GetName()] = [2]int64{p, f} // the latest given wins
				}
			}
			s.mu.Unlock()
		}
		for policy, edges := range want {
			var sum [2]int64
			for edge, pf := range edges {
				if got := held[edge+"."+policy+"-report"]; got != pf {
					return fmt.Errorf("%s's report at %s: pass, fail %v, want %v", policy, edge, got, pf)
				}
				sum[0], sum[1] = sum[0]+pf[0], sum[1]+pf[1]
			}
			cols, err := ct.complianceColumns(policy)
			if err != nil {
				return err
			}
			if w := []int64{int64(len(edges)), sum[0], sum[1]}; !slices.Equal(cols, w) {
				return fmt.Errorf("%s's CombinedStatus: destinations, pass, fail %v, want %v", policy, cols, w)
			}
		}
		return nil
	})
}

// complianceColumns returns the one row of the CombinedStatus of policy
// under placement c2p (destinations, pass, fail).
func (ct *c2pTree) complianceColumns(policy string) ([]int64, error) {
	l, err := ct.wds.Resource(edgev1alpha1.SchemeGroupVersion.WithResource("combinedstatuses")).Namespace("default").
		List(context.Background(), metav1.ListOptions{LabelSelector: edgev1alpha1.PlacementLabel + "=c2p," + edgev1alpha1.ObjectNameLabel + "=" + policy})
	if err != nil {
		return nil, err
	}
	if len(l.Items) != 1 {
		return nil, fmt.Errorf("%d CombinedStatuses of %s", len(l.Items), policy)
	}
	b, _ := json.Marshal(l.Items[0].Object["results"])
	var results []struct {
		Name string `json:"name"`
		Rows []struct {
			Columns []int64 `json:"columns"`
		} `json:"rows"`
	}
	if err := json.Unmarshal(b, &results); err != nil || len(results) != 1 || results[0].Name != "compliance" || len(results[0].Rows) != 1 {
		return nil, fmt.Errorf("%s's CombinedStatus results %s: %v", policy, b, err)
	}
	return results[0].Rows[0].Columns, nil
}

// kubectl runs kubectl with the root's admin kubeconfig, as the
// walk-through does, and returns its output.
func (ct *c2pTree) kubectl(t *testing.T, stdin string, args ...string) string {
	t.Helper()
	out, err := kubecluster.RunKubectl(t, ct.home, ct.root.KubeconfigPath(), stdin, nil, args...)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// readManifests decodes the YAML documents of file in docs/examples/c2p.
func readManifests(t *testing.T, file string) []*unstructured.Unstructured {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(c2pExamples, file))
	if err != nil {
		t.Fatal(err)
	}
	var out []*unstructured.Unstructured
	for _, doc := range strings.Split(string(b), "\n---\n") {
		var m map[string]any
		if err := yaml.Unmarshal([]byte(doc), &m); err != nil {
			t.Fatalf("%s: %v", file, err)
		}
		if len(m) > 0 {
			out = append(out, &unstructured.Unstructured{Object: m})
		}
	}
	return out
}

// runPolicyEngine is the policy engine of one edge cluster c, until ctx
// ends: once the cluster serves ClusterPolicies and PolicyReports, it evaluates each rule
// of each ClusterPolicy on every Namespace labelled auditedLabel=true (a
// pass when the Namespace has the rule's requiredLabel), and writes the
// results into a cluster-scoped PolicyReport <policy>-report, labelled
// with the policy's provider, and the counts into the policy's status.
// It deletes the reports of policies that are gone. Every change of a
// policy, a Namespace or a report starts a pass; a failed pass is tried
// again.
func runPolicyEngine(ctx context.Context, c dynamic.Interface, logf func(string, ...any)) {
	served := func() bool {
		for _, gvr := range []schema.GroupVersionResource{clusterPoliciesGVR, policyReportsGVR} {
			if _, err := c.Resource(gvr).List(ctx, metav1.ListOptions{Limit: 1}); err != nil {
				return false
			}
		}
		return true
	}
	for !served() {
		select {
		case <-ctx.Done():
			return
		case <-time.After(50 * time.Millisecond):
		}
	}
	kick := make(chan struct{}, 1)
	poke := func() {
		select {
		case kick <- struct{}{}:
		default:
		}
	}
	f := dynamicinformer.NewDynamicSharedInformerFactory(c, 0)
	defer f.Shutdown()
	var stores []cache.Store
	for _, gvr := range []schema.GroupVersionResource{clusterPoliciesGVR, nsGVR, policyReportsGVR} {
		inf := f.ForResource(gvr).Informer()
		_, _ = inf.AddEventHandler(cache.ResourceEventHandlerFuncs{AddFunc: func(any) { poke() },
			UpdateFunc: func(any, any) { poke() }, DeleteFunc: func(any) { poke() }})
		stores = append(stores, inf.GetStore())
	}
	f.Start(ctx.Done())
	f.WaitForCacheSync(ctx.Done())
	for {
		select {
		case <-ctx.Done():
			return
		case <-kick:
		}
		if err := enginePass(ctx, c, stores[0].List(), stores[1].List(), stores[2].List()); err != nil && ctx.Err() == nil {
			logf("policy engine: %v", err)
			time.AfterFunc(100*time.Millisecond, poke)
		}
	}
}

// enginePass is one pass of runPolicyEngine over what its informers hold.
func enginePass(ctx context.Context, c dynamic.Interface, policies, namespaces, reports []any) error {
	var audited []*unstructured.Unstructured
	for _, o := range namespaces {
		if ns := o.(*unstructured.Unstructured); ns.GetLabels()[auditedLabel] == "true" {
			audited = append(audited, ns)
		}
	}
	slices.SortFunc(audited, func(a, b *unstructured.Unstructured) int { return strings.Compare(a.GetName(), b.GetName()) })
	present := map[string]bool{}
	for _, o := range policies {
		p := o.(*unstructured.Unstructured)
		present[p.GetName()] = true
		rules, _, _ := unstructured.NestedSlice(p.Object, "spec", "rules")
		results := []any{}
		var pass, fail int64
		for _, r := range rules {
			rule, _ := r.(map[string]any)
			name, _ := rule["name"].(string)
			label, _ := rule["requiredLabel"].(string)
			for _, ns := range audited {
				result := "fail"
				if _, ok := ns.GetLabels()[label]; ok {
					result = "pass"
					pass++
				} else {
					fail++
				}
				results = append(results, map[string]any{"rule": name, "resource": ns.GetName(), "result": result})
			}
		}
		report := &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": policyReportsGVR.GroupVersion().String(), "kind": "PolicyReport",
			"metadata": map[string]any{"name": p.GetName() + "-report",
				"labels": map[string]any{"provider": p.GetLabels()["provider"], reportPolicyLabel: p.GetName()}},
			"policy": p.GetName(), "results": results, "summary": map[string]any{"pass": pass, "fail": fail}}}
		if _, err := c.Resource(policyReportsGVR).Apply(ctx, report.GetName(), report, metav1.ApplyOptions{FieldManager: "c2p-engine", Force: true}); err != nil {
			return fmt.Errorf("report of %s: %w", p.GetName(), err)
		}
		st, _ := json.Marshal(map[string]any{"status": map[string]any{"pass": pass, "fail": fail}})
		if _, err := c.Resource(clusterPoliciesGVR).Patch(ctx, p.GetName(), types.MergePatchType, st, metav1.PatchOptions{}, "status"); err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("status of %s: %w", p.GetName(), err)
		}
	}
	for _, o := range reports {
		r := o.(*unstructured.Unstructured)
		if p, ok := r.GetLabels()[reportPolicyLabel]; ok && !present[p] {
			if err := c.Resource(policyReportsGVR).Delete(ctx, r.GetName(), metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
				return fmt.Errorf("report of %s: %w", p, err)
			}
		}
	}
	return nil
}
