package server

import (
	"context"
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"

	"github.com/canopy-dev/canopy/test/browser"
	"github.com/canopy-dev/canopy/test/poll"
	edgev1alpha1 "github.com/canopy-dev/canopy/topology/api/v1alpha1"
)

// heartbeatRE finds the heartbeat lines of a simulated container's log.
var heartbeatRE = regexp.MustCompile(`heartbeat (\d+)`)

// The console's pods and logs of a destination, and signing in with a
// client certificate, in Chromium. Through the root's destination proxy, a
// Deployment placed on an edge with a virtual cluster (below a region)
// shows its pods, Running, on the destination's pods page, and a pod scaled
// away leaves the page without a reload; a pod's log page shows what the
// simulated container wrote (its start lines), and, followed, new
// heartbeats as they come. A browser without a client certificate is
// refused when it signs in with one; a browser whose certificate the
// root's CA signed signs in as the user it names, who sees the tree and the
// pods that RBAC lets them see. The pages pass the accessibility audit;
// screenshots are kept (browser.ArtifactDir).
func TestConsoleDestinationInBrowser(t *testing.T) {
	b := browser.Start(t)
	pt := startPlacementTree(t, map[string]map[string]string{"e1": {"app": "yes"}})
	pt.apply(t, pt.inv, edgev1alpha1.LocationsGVR, map[string]any{"apiVersion": "edge.canopy.dev/v1alpha1", "kind": "Location",
		"metadata": map[string]any{"name": "all", "labels": map[string]any{"app": "yes"}},
		"spec":     map[string]any{"instanceSelector": map[string]any{"matchLabels": map[string]any{"app": "yes"}}}})
	pt.apply(t, pt.wds, nsGVR, map[string]any{"apiVersion": "v1", "kind": "Namespace", "metadata": map[string]any{"name": "shop"}})
	pt.apply(t, pt.wds, deployGVR, webDeployment(2, nil))
	pt.apply(t, pt.wds, edgev1alpha1.EdgePlacementsGVR, map[string]any{"apiVersion": "edge.canopy.dev/v1alpha1", "kind": "EdgePlacement",
		"metadata": map[string]any{"name": "web"},
		"spec": map[string]any{"locationSelectors": []any{map[string]any{"matchLabels": map[string]any{"app": "yes"}}},
			"downsync": []any{map[string]any{"apiGroup": "apps", "resources": []any{"deployments"}, "namespaces": []any{"shop"}}}}})

	// The pods the edge's simulated kubelet runs, read from its cluster.
	local, err := kubernetes.NewForConfig(pt.edges["e1"].VirtualCluster().RESTConfig())
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	runningPods := func() (names []string, nodes map[string]string, err error) {
		l, err := local.CoreV1().Pods("shop").List(ctx, metav1.ListOptions{})
		if err != nil {
			return nil, nil, err
		}
		nodes = map[string]string{}
		for _, p := range l.Items {
			if p.Status.Phase != "Running" {
				return nil, nil, fmt.Errorf("pod %s is %s", p.Name, p.Status.Phase)
			}
			names, nodes[p.Name] = append(names, p.Name), p.Spec.NodeName
		}
		slices.Sort(names)
		return names, nodes, nil
	}
	var pods []string
	var nodes map[string]string
	poll.Until(t, "two pods of shop/web running at e1", func() error {
		pods, nodes, err = runningPods()
		if err == nil && len(pods) != 2 {
			err = fmt.Errorf("pods %q", pods)
		}
		return err
	}, poll.For(30*time.Second))

	art := browser.ArtifactDir(t)
	browser.Do(t, b, "open the console", chromedp.Navigate(pt.root.Server()+"/console/"), chromedp.WaitVisible(chromedp.CSS("#token")))
	browser.Do(t, b, "sign in", chromedp.SendKeys(chromedp.CSS("#token"), pt.root.token), chromedp.Click(chromedp.CSS("button[type=submit]")))
	browser.WaitJS(t, b, "the tree's destination", `(document.querySelector('[data-testid=tree-summary]')?.textContent ?? '').startsWith('1 destinations, 1 connected')`, 20*time.Second)

	// The pods page lists the pods, as their cluster has them, Running.
	openPage(t, b, "#/destination/e1")
	clickLink(t, b, "Pods and logs of e1")
	rows := `[...document.querySelectorAll('tbody tr')].map(r => [...r.children].slice(0, 3).map(c => c.textContent).join(' '))`
	want := func(names ...string) string {
		var rs []string
		for _, n := range names {
			rs = append(rs, "shop "+n+" Running")
		}
		return strings.Join(rs, "\n")
	}
	browser.WaitJS(t, b, "the two pods listed Running", fmt.Sprintf(`location.hash === '#/destination/e1/pods' && %s.join('\n') === %q`, rows, want(pods...)), 20*time.Second)
	browser.Eval[bool](t, b, `window.__noReload = true`)
	browser.Accessibility(t, b)
	browser.Screenshot(t, b, art, "pods")

	// A pod's log page: the container's start lines (and the heartbeats
	// written by then: the page reads the log once).
	pod := pods[0]
	clickLink(t, b, "Logs of "+pod)
	logText := `(document.querySelector('pre.log')?.textContent ?? '')`
	start := fmt.Sprintf("starting container web of pod shop/%s on node %s\nimage web:1\nready\n", pod, nodes[pod])
	browser.WaitJS(t, b, pod+"'s start lines", fmt.Sprintf(`%s.startsWith(%q)`, logText, start), 20*time.Second)
	if h := browser.Eval[string](t, b, `document.getElementById('l-h').textContent`); h != "Logs of shop/"+pod+" on e1" {
		t.Errorf("the log page's heading is %q", h)
	}
	browser.Accessibility(t, b)
	browser.Screenshot(t, b, art, "log")

	// Followed, the log goes on: a heartbeat later than any read before.
	last := 0
	for _, m := range heartbeatRE.FindAllStringSubmatch(browser.Eval[string](t, b, logText), -1) {
		last, _ = strconv.Atoi(m[1])
	}
	browser.Do(t, b, "follow the log", chromedp.Click(chromedp.CSS(`input[type=checkbox]`)))
	browser.WaitJS(t, b, fmt.Sprintf("heartbeat %d, followed", last+1), fmt.Sprintf(`%s.includes(%q)`, logText, fmt.Sprintf("shop/%s web: heartbeat %d\n", pod, last+1)), 20*time.Second)
	browser.Screenshot(t, b, art, "log-followed")

	// Scaled to one through the root, the Deployment's other pod leaves
	// the pods page, which watches.
	clickLink(t, b, "Back to the pods of e1")
	browser.WaitJS(t, b, "the two pods listed again", fmt.Sprintf(`%s.join('\n') === %q`, rows, want(pods...)), 10*time.Second)
	if _, err := pt.wds.Resource(deployGVR).Namespace("shop").Patch(ctx, "web", types.MergePatchType, []byte(`{"spec":{"replicas":1}}`), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	var left []string
	poll.Until(t, "one pod left at e1", func() error {
		left, _, err = runningPods()
		if err == nil && len(left) != 1 {
			err = fmt.Errorf("pods %q", left)
		}
		return err
	}, poll.For(30*time.Second))
	browser.WaitJS(t, b, "one pod listed", fmt.Sprintf(`%s.join('\n') === %q`, rows, want(left...)), 10*time.Second)
	if !browser.Eval[bool](t, b, `window.__noReload === true`) {
		t.Fatal("the page reloaded")
	}
	browser.Screenshot(t, b, art, "pods-scaled")

	// This browser has no client certificate: signing in with one fails.
	browser.Do(t, b, "sign out", chromedp.Click(chromedp.Search(`//button[text()="Sign out"]`)), chromedp.WaitVisible(chromedp.CSS("#token")))
	browser.Do(t, b, "sign in with no certificate", chromedp.Click(chromedp.Search(`//button[text()="Use my client certificate"]`)))
	browser.WaitJS(t, b, "the sign-in refused", `document.querySelector('[role=alert]')?.textContent === 'The root refused these credentials.'`, 10*time.Second)

	// A browser with a client certificate the root's CA signed signs in
	// with it, as the user it names, and sees what RBAC lets that user
	// see: alice, of group ops, may read the SyncTargets and reach the
	// destinations, so she sees the tree and e1's pods, and no space's
	// placements.
	applyObject(t, pt.inv, gvrClusterRoles, map[string]any{"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
		"metadata": map[string]any{"name": "tree-viewer"}, "rules": []any{
			map[string]any{"apiGroups": []any{"edge.canopy.dev"}, "resources": []any{"synctargets"}, "verbs": []any{"get", "list", "watch"}},
			map[string]any{"apiGroups": []any{"edge.canopy.dev"}, "resources": []any{"synctargets/proxy"}, "verbs": []any{"*"}}}})
	applyObject(t, pt.inv, gvrCRBindings, map[string]any{"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
		"metadata": map[string]any{"name": "ops"},
		"roleRef":  map[string]any{"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "tree-viewer"},
		"subjects": []any{map[string]any{"apiGroup": "rbac.authorization.k8s.io", "kind": "Group", "name": "ops"}}})
	certPEM, keyPEM, err := pt.root.ca.IssueClient("alice", []string{"ops"}, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	cb := browser.Start(t, browser.ClientCertificate(certPEM, keyPEM))
	browser.Do(t, cb, "open the console", chromedp.Navigate(pt.root.Server()+"/console/"), chromedp.WaitVisible(chromedp.CSS("#token")))
	browser.Do(t, cb, "sign in with the certificate", chromedp.Click(chromedp.Search(`//button[text()="Use my client certificate"]`)))
	browser.WaitJS(t, cb, "alice signed in, in no space", `document.querySelector('[data-testid=user]')?.textContent === 'alice' && document.querySelector('[data-testid=spaces]')?.textContent === 'spaces: none'`, 20*time.Second)
	browser.WaitJS(t, cb, "the tree's destination", `(document.querySelector('[data-testid=tree-summary]')?.textContent ?? '').startsWith('1 destinations, 1 connected') && document.querySelector('[data-node="r1"][data-state=connected]') !== null`, 20*time.Second)
	browser.Accessibility(t, cb)
	browser.Screenshot(t, cb, art, "certificate-tree")
	openPage(t, cb, "#/destination/e1/pods")
	browser.WaitJS(t, cb, "e1's pod, for alice", fmt.Sprintf(`%s.join('\n') === %q`, rows, want(left...)), 20*time.Second)
	browser.Screenshot(t, cb, art, "certificate-pods")
}

// clickLink waits for the link whose text is text and clicks it.
func clickLink(t *testing.T, b context.Context, text string) {
	t.Helper()
	browser.WaitJS(t, b, "a link "+text, fmt.Sprintf(`[...document.querySelectorAll('a')].some(a => a.textContent === %q)`, text), 10*time.Second)
	browser.Do(t, b, "click "+text, chromedp.Click(chromedp.Search(fmt.Sprintf(`//a[.=%q]`, text))))
}
