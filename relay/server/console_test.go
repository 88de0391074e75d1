package server

import (
	"context"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/chromedp/chromedp/kb"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"

	"github.com/canopy-dev/canopy/relay/layout"
	"github.com/canopy-dev/canopy/relay/pki"
	"github.com/canopy-dev/canopy/relay/transport/link"
	"github.com/canopy-dev/canopy/relay/transport/link/memnet"
	"github.com/canopy-dev/canopy/test/browser"
	"github.com/canopy-dev/canopy/test/poll"
	edgev1alpha1 "github.com/canopy-dev/canopy/topology/api/v1alpha1"
)

// consoleFleet is a root, regions and edges (without clusters: the console
// shows the tree and placements, which need none), over an in-memory
// network, with a stop per region.
type consoleFleet struct {
	root        *Root
	regionStops map[string]func()
	mn          *memnet.Network
	relays      map[string]*Child // by name
}

// cut partitions (or heals) the link between edge and its region.
func (f *consoleFleet) cut(t testing.TB, region, edge string, cut bool) {
	t.Helper()
	op := f.mn.Partition
	if !cut {
		op = f.mn.Heal
	}
	if err := op(f.relays[region].LinkAddr(), f.relays[edge].dialTransport.Conn.LocalAddr().String()); err != nil {
		t.Fatal(err)
	}
}

func startConsoleFleet(t testing.TB, regions, edgesPerRegion int) *consoleFleet {
	t.Helper()
	mn := memnet.NewSeeded(7)
	t.Cleanup(func() { _ = mn.Close() })
	// Hundreds of relays on 2 cores under -race: the default keep-alives,
	// so that a relay waiting for a core is not taken for dead. A stopped
	// region closes its links, which the root sees at once.
	net := NewNetwork(mn, link.DefaultConfig())
	root := startTestRootOn(t, net)
	token := joinToken(t, root)
	f := &consoleFleet{root: root, regionStops: map[string]func(){}, mn: mn, relays: map[string]*Child{}}
	var edges []*Child
	for i := range regions {
		name := fmt.Sprintf("region-%d", i)
		rc := ChildConfig{Role: pki.RoleRegion, Name: name, DataDir: t.TempDir(), Parents: []string{root.LinkAddr()}, JoinToken: token,
			InMemory: true, Network: net, LinkAddr: fmt.Sprintf("127.0.4.%d:7443", i+1)}
		region := startChildOnly(t, rc)
		f.relays[name] = region
		f.regionStops[name] = serveInBackground(t, name, region.Serve)
		poll.True(t, name+" serving", func() bool { return region.LinkAddr() != "" })
		for j := range edgesPerRegion {
			en := fmt.Sprintf("edge-%d-%d", i, j)
			edges = append(edges, startTestChild(t, ChildConfig{Role: pki.RoleEdge, Name: en, DataDir: t.TempDir(), Parents: []string{region.LinkAddr()},
				JoinToken: token, InMemory: true, Network: net, Labels: map[string]string{"zone": name}}))
			f.relays[en] = edges[len(edges)-1]
			// A join is a handshake and a certificate: let a few
			// run at once, not hundreds.
			if len(edges) >= 16 {
				poll.True(t, "edges joined", func() bool { return edges[len(edges)-16].Uplink().Connected() }, poll.For(2*time.Minute))
			}
		}
	}
	poll.True(t, "every edge joined", func() bool {
		for _, e := range edges {
			if !e.Uplink().Connected() {
				return false
			}
		}
		return true
	}, poll.For(2*time.Minute))
	return f
}

// The console in Chromium against a root with 5 regions of 100 edges: the
// tree renders the 500 destinations and is driven with the keyboard and
// searched; a placement created and then changed through the API shows up
// live; an edge cut off from its region shows behind; a stopped region
// shows disconnected within seconds; a user who may
// read only one space sees nothing of the others. Every page passes the
// accessibility audit; screenshots are kept (browser.ArtifactDir).
func TestConsoleInBrowser(t *testing.T) {
	b := browser.Start(t)
	start := time.Now()
	f := startConsoleFleet(t, 5, 100)
	inv, err := f.root.spaceClient(layout.InventorySpace)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	poll.Until(t, "500 connected SyncTargets", func() error {
		l, err := inv.Resource(edgev1alpha1.SyncTargetsGVR).List(ctx, metav1.ListOptions{})
		if err != nil {
			return err
		}
		up := 0
		for _, st := range l.Items {
			if c, _, _ := unstructured.NestedBool(st.Object, "status", "connected"); c {
				up++
			}
		}
		if up != 500 {
			return fmt.Errorf("%d of %d connected", up, len(l.Items))
		}
		return nil
	}, poll.For(3*time.Minute))
	t.Logf("fleet of 500 destinations up in %v", time.Since(start).Round(time.Millisecond))
	art := browser.ArtifactDir(t)
	url := f.root.Server() + "/console/"

	// Signing in.
	browser.Do(t, b, "open the console", chromedp.Navigate(url), chromedp.WaitVisible(chromedp.CSS("#token")))
	browser.Accessibility(t, b)
	browser.Screenshot(t, b, art, "login")
	browser.Do(t, b, "sign in", chromedp.SendKeys(chromedp.CSS("#token"), f.root.token), chromedp.Click(chromedp.CSS("button[type=submit]")))
	browser.WaitJS(t, b, "the tree's 500 destinations", `(document.querySelector('[data-testid=tree-summary]')?.textContent ?? '').startsWith('500 destinations, 500 connected')`, time.Minute)
	browser.WaitJS(t, b, "the five regions", `document.querySelectorAll('[role=treeitem][data-kind=relay][data-state=connected]').length === 5`, 10*time.Second)
	browser.Eval[bool](t, b, `window.__signedIn = true`)

	// Keyboard: Tab reaches the tree; Enter and Space expand and collapse.
	for i := 0; ; i++ {
		if browser.Eval[bool](t, b, `document.activeElement?.getAttribute('role') === 'tree'`) {
			break
		}
		if i == 30 {
			t.Fatal("30 Tabs did not reach the tree")
		}
		browser.Do(t, b, "Tab", chromedp.KeyEvent(kb.Tab))
	}
	active := `document.getElementById(document.activeElement.getAttribute('aria-activedescendant'))`
	browser.Do(t, b, "ArrowDown", chromedp.KeyEvent(kb.ArrowDown))
	if got := browser.Eval[string](t, b, active+`.dataset.node`); got != "region-0" {
		t.Fatalf("ArrowDown from the root went to %q, want region-0", got)
	}
	browser.Do(t, b, "Enter", chromedp.KeyEvent(kb.Enter))
	browser.WaitJS(t, b, "region-0 expanded by Enter", active+`.getAttribute('aria-expanded') === 'true' && document.querySelector('[data-node="edge-0-0"]') !== null`, 5*time.Second)
	browser.Do(t, b, "Space", chromedp.KeyEvent(" "))
	browser.WaitJS(t, b, "region-0 collapsed by Space", active+`.getAttribute('aria-expanded') === 'false' && document.querySelector('[data-node="edge-0-0"]') === null`, 5*time.Second)
	browser.Do(t, b, "Enter", chromedp.KeyEvent(kb.Enter))
	browser.WaitJS(t, b, "region-0 expanded again", `document.querySelector('[data-node="edge-0-0"]') !== null`, 5*time.Second)
	// Virtualized: 100 expanded edges, far fewer rows in the page.
	if n := browser.Eval[int](t, b, `document.querySelectorAll('[role=treeitem]').length`); n >= 100 {
		t.Errorf("%d tree rows in the page with 106 shown: the list is not virtualized", n)
	}
	browser.Accessibility(t, b)
	browser.Screenshot(t, b, art, "tree")

	// Search finds an edge in a collapsed region.
	browser.Do(t, b, "search", chromedp.SendKeys(chromedp.CSS("#tree-search"), "edge-3-42"))
	browser.WaitJS(t, b, "edge-3-42 found", `document.querySelector('[data-node="edge-3-42"][data-state=connected]') !== null && document.querySelectorAll('[role=treeitem]').length === 3`, 5*time.Second)
	setInput(t, b, "tree-search", "")
	browser.WaitJS(t, b, "the search cleared", `document.querySelector('[data-node="edge-0-0"]') !== null`, 5*time.Second)

	// A placement appears, and then changes, without a reload.
	wds, err := f.root.spaceClient(layout.DefaultSpace)
	if err != nil {
		t.Fatal(err)
	}
	openPage(t, b, "#/placements")
	browser.WaitJS(t, b, "the placements table", `document.querySelector('[data-testid=placements-default]') !== null`, 10*time.Second)
	browser.Eval[bool](t, b, `window.__noReload = true`)
	applyObject(t, inv, edgev1alpha1.LocationsGVR, map[string]any{"apiVersion": "edge.canopy.dev/v1alpha1", "kind": "Location",
		"metadata": map[string]any{"name": "everywhere", "labels": map[string]any{"all": "yes"}}, "spec": map[string]any{"instanceSelector": map[string]any{}}})
	applyObject(t, inv, edgev1alpha1.LocationsGVR, map[string]any{"apiVersion": "edge.canopy.dev/v1alpha1", "kind": "Location",
		"metadata": map[string]any{"name": "region-1", "labels": map[string]any{"region": "1"}},
		"spec":     map[string]any{"instanceSelector": map[string]any{"matchLabels": map[string]any{"zone": "region-1"}}}})
	applyObject(t, wds, edgev1alpha1.EdgePlacementsGVR, map[string]any{"apiVersion": "edge.canopy.dev/v1alpha1", "kind": "EdgePlacement",
		"metadata": map[string]any{"name": "web"}, "spec": map[string]any{
			"locationSelectors": []any{map[string]any{"matchLabels": map[string]any{"all": "yes"}}},
			"downsync":          []any{map[string]any{"apiGroup": "", "resources": []any{"configmaps"}, "namespaces": []any{"web"}}}}})
	matched := `document.querySelector('[data-placement=web] [data-testid=matched]')?.textContent`
	browser.WaitJS(t, b, "placement web matching 500", matched+` === '500'`, 30*time.Second)
	changed := time.Now()
	patch := `{"spec":{"locationSelectors":[{"matchLabels":{"region":"1"}}]}}`
	if _, err := wds.Resource(edgev1alpha1.EdgePlacementsGVR).Patch(ctx, "web", types.MergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	browser.WaitJS(t, b, "placement web matching 100 after the change", matched+` === '100'`, 30*time.Second)
	t.Logf("placement change shown in %v", time.Since(changed).Round(time.Millisecond))
	if !browser.Eval[bool](t, b, `window.__noReload === true`) {
		t.Fatal("the page reloaded")
	}
	browser.Accessibility(t, b)
	browser.Screenshot(t, b, art, "placements")

	// An edge cut off from its region, sent a change: the tree shows it
	// behind (its Relay's lag) while its link still counts as up, and up
	// to date once the cut heals.
	openPage(t, b, "#/tree")
	browser.WaitJS(t, b, "no relay behind", `(document.querySelector('[data-testid=tree-summary]')?.textContent ?? '').includes(', 0 relays behind')`, 10*time.Second)
	setInput(t, b, "tree-search", "edge-1-5")
	f.cut(t, "region-1", "edge-1-5", true)
	applyObject(t, wds, schema.GroupVersionResource{Version: "v1", Resource: "namespaces"}, map[string]any{"apiVersion": "v1", "kind": "Namespace", "metadata": map[string]any{"name": "web"}})
	applyObject(t, wds, schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}, map[string]any{"apiVersion": "v1", "kind": "ConfigMap",
		"metadata": map[string]any{"name": "page", "namespace": "web"}, "data": map[string]any{"v": "1"}})
	cut := time.Now()
	browser.WaitJS(t, b, "edge-1-5 behind", `(() => { const r = document.querySelector('[data-node="edge-1-5"]'); return r?.dataset.state === 'connected' && Number(r.dataset.lag) > 0 && /behind [1-9][0-9]* rev, [1-9][0-9]* s/.test(r.textContent) })()`, 30*time.Second)
	browser.WaitJS(t, b, "relays behind counted", `/, [1-9][0-9]* relays? behind/.test(document.querySelector('[data-testid=tree-summary]')?.textContent ?? '')`, 5*time.Second)
	t.Logf("an edge cut off shown behind in %v", time.Since(cut).Round(time.Millisecond))
	browser.Accessibility(t, b)
	browser.Screenshot(t, b, art, "tree-edge-behind")
	f.cut(t, "region-1", "edge-1-5", false)
	browser.WaitJS(t, b, "edge-1-5 up to date", `(() => { const r = document.querySelector('[data-node="edge-1-5"]'); return r?.dataset.state === 'connected' && r.dataset.lag === undefined })()`, 60*time.Second)
	setInput(t, b, "tree-search", "")

	// A region stops: it shows disconnected within seconds.
	openPage(t, b, "#/tree")
	browser.Do(t, b, "collapse the tree", chromedp.Click(chromedp.Search(`//button[text()="Collapse all"]`)))
	browser.WaitJS(t, b, "region-2 connected", `document.querySelector('[data-node="region-2"]')?.dataset.state === 'connected'`, 10*time.Second)
	stopped := time.Now()
	f.regionStops["region-2"]()
	browser.WaitJS(t, b, "region-2 disconnected", `document.querySelector('[data-node="region-2"]')?.dataset.state === 'disconnected'`, 30*time.Second)
	t.Logf("stopped region shown disconnected in %v", time.Since(stopped).Round(time.Millisecond))
	browser.WaitJS(t, b, "400 connected", `(document.querySelector('[data-testid=tree-summary]')?.textContent ?? '').startsWith('500 destinations, 400 connected')`, 15*time.Second)
	browser.Accessibility(t, b)
	shot := browser.Screenshot(t, b, art, "tree-region-down")
	if os.Getenv("CANOPY_CONSOLE_SCREENSHOT") != "" {
		// make console-screenshot: the picture of the README.
		data, err := os.ReadFile(shot)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(os.Getenv("CANOPY_CONSOLE_SCREENSHOT"), data, 0o644); err != nil {
			t.Fatal(err)
		}
	}

	// The feed and a destination page.
	openPage(t, b, "#/feed")
	browser.Eval[bool](t, b, `(() => { const s = document.getElementById('feed-kind'); s.value = 'EdgePlacement'; s.dispatchEvent(new Event('change', {bubbles: true})); return true })()`)
	browser.WaitJS(t, b, "the feed shows the placement's change", `document.querySelector('[data-feed-kind=EdgePlacement][data-feed-name=web]') !== null`, 5*time.Second)
	browser.Accessibility(t, b)
	browser.Screenshot(t, b, art, "feed")
	openPage(t, b, "#/destination/edge-1-7")
	browser.WaitJS(t, b, "edge-1-7 placed by web", `document.body.innerText.includes('Pods and logs of edge-1-7') && document.querySelector('[data-testid=connected]')?.textContent === 'yes' && [...document.querySelectorAll('th[scope=row]')].some(e => e.textContent === 'web')`, 10*time.Second)
	browser.Accessibility(t, b)
	browser.Screenshot(t, b, art, "destination")

	// A user who may read only team-a sees neither default nor the inventory.
	token := teamViewer(t, f.root)
	browser.Do(t, b, "sign out", chromedp.Click(chromedp.Search(`//button[text()="Sign out"]`)), chromedp.WaitVisible(chromedp.CSS("#token")))
	setInput(t, b, "spaces", "team-a,default,inventory")
	browser.Do(t, b, "sign in as team-a's viewer", chromedp.SendKeys(chromedp.CSS("#token"), token), chromedp.Click(chromedp.CSS("button[type=submit]")))
	browser.WaitJS(t, b, "only team-a", `document.querySelector('[data-testid=spaces]')?.textContent === 'spaces: team-a'`, 20*time.Second)
	openPage(t, b, "#/tree")
	browser.WaitJS(t, b, "no tree", `document.body.innerText.includes('You may not read the inventory space')`, 5*time.Second)
	openPage(t, b, "#/placements")
	browser.WaitJS(t, b, "team-a's placement and nothing else", `document.querySelector('[data-placement=team-app]') !== null && document.querySelector('[data-placement=web]') === null && document.querySelector('[data-testid=placements-default]') === null`, 20*time.Second)
	browser.Accessibility(t, b)
	browser.Screenshot(t, b, art, "team-a")
}

// openPage goes to the console's page hash, in the same document (no
// reload).
func openPage(t *testing.T, b context.Context, hash string) {
	t.Helper()
	browser.Eval[bool](t, b, fmt.Sprintf(`(() => { location.hash = %q; return true })()`, hash))
}

// setInput sets the value of the input with id as typing would.
func setInput(t *testing.T, b context.Context, id, value string) {
	t.Helper()
	browser.Eval[bool](t, b, fmt.Sprintf(`(() => { const i = document.getElementById(%q); i.value = %q; i.dispatchEvent(new Event('input', {bubbles: true})); return true })()`, id, value))
}

// applyObject creates obj (of resource gvr) through c.
func applyObject(t *testing.T, c dynamic.Interface, gvr schema.GroupVersionResource, obj map[string]any) {
	t.Helper()
	u := &unstructured.Unstructured{Object: obj}
	ri := dynamic.ResourceInterface(c.Resource(gvr))
	if ns := u.GetNamespace(); ns != "" {
		ri = c.Resource(gvr).Namespace(ns)
	}
	if _, err := ri.Create(context.Background(), u, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create %s %s: %v", gvr.Resource, u.GetName(), err)
	}
}

// teamViewer makes space team-a with a placement, and a ServiceAccount
// there that may read edge.canopy.dev objects of team-a only; it returns
// the ServiceAccount's token.
func teamViewer(t *testing.T, root *Root) string {
	t.Helper()
	ctx := context.Background()
	sys, err := root.spaceClient(layout.SystemSpace)
	if err != nil {
		t.Fatal(err)
	}
	applyObject(t, sys, spacesGVR, map[string]any{"apiVersion": "canopy.dev/v1alpha1", "kind": "Space", "metadata": map[string]any{"name": "team-a"}})
	team, err := root.spaceClient("team-a")
	if err != nil {
		t.Fatal(err)
	}
	poll.Until(t, "team-a serving EdgePlacements", func() error {
		_, err := team.Resource(edgev1alpha1.EdgePlacementsGVR).List(ctx, metav1.ListOptions{})
		return err
	})
	applyObject(t, team, edgev1alpha1.EdgePlacementsGVR, map[string]any{"apiVersion": "edge.canopy.dev/v1alpha1", "kind": "EdgePlacement",
		"metadata": map[string]any{"name": "team-app"}, "spec": map[string]any{
			"locationSelectors": []any{map[string]any{"matchLabels": map[string]any{"region": "1"}}},
			"downsync":          []any{map[string]any{"apiGroup": "", "resources": []any{"configmaps"}, "namespaces": []any{"team"}}}}})
	rbacLabels := map[string]any{"edge.canopy.dev/space-rbac": "true"}
	applyObject(t, team, schema.GroupVersionResource{Version: "v1", Resource: "serviceaccounts"}, map[string]any{"apiVersion": "v1", "kind": "ServiceAccount",
		"metadata": map[string]any{"name": "viewer", "namespace": "default"}})
	applyObject(t, team, schema.GroupVersionResource{Group: "rbac.authorization.k8s.io", Version: "v1", Resource: "clusterroles"}, map[string]any{
		"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole", "metadata": map[string]any{"name": "placement-viewer", "labels": rbacLabels},
		"rules": []any{map[string]any{"apiGroups": []any{"edge.canopy.dev"}, "resources": []any{"*"}, "verbs": []any{"get", "list", "watch"}}}})
	applyObject(t, team, schema.GroupVersionResource{Group: "rbac.authorization.k8s.io", Version: "v1", Resource: "clusterrolebindings"}, map[string]any{
		"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding", "metadata": map[string]any{"name": "viewer", "labels": rbacLabels},
		"roleRef":  map[string]any{"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "placement-viewer"},
		"subjects": []any{map[string]any{"kind": "ServiceAccount", "name": "viewer", "namespace": "default"}}})
	tr := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest",
		"metadata": map[string]any{"name": "viewer"}, "spec": map[string]any{"expirationSeconds": int64(3600)}}}
	out, err := team.Resource(schema.GroupVersionResource{Version: "v1", Resource: "serviceaccounts"}).Namespace("default").Create(ctx, tr, metav1.CreateOptions{}, "token")
	if err != nil {
		t.Fatal(err)
	}
	tok, _, _ := unstructured.NestedString(out.Object, "status", "token")
	if tok == "" {
		t.Fatalf("no token in %v", out.Object)
	}
	return tok
}
