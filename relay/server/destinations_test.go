package server

import (
	"bufio"
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/canopy-dev/canopy/relay/destproxy"
	"github.com/canopy-dev/canopy/relay/pki"
	"github.com/canopy-dev/canopy/relay/transport/session"
	"github.com/canopy-dev/canopy/test/kubecluster"
	"github.com/canopy-dev/canopy/test/poll"
)

var (
	gvrConfigMaps   = schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}
	gvrClusterRoles = schema.GroupVersionResource{Group: "rbac.authorization.k8s.io", Version: "v1", Resource: "clusterroles"}
	gvrCRBindings   = schema.GroupVersionResource{Group: "rbac.authorization.k8s.io", Version: "v1", Resource: "clusterrolebindings"}
)

// destinationConfig is a rest.Config that reaches destination dest through
// the root, as the user of certificate cn in groups (the admin if cn is
// empty).
func destinationConfig(t testing.TB, rt *realTree, dest, cn string, groups ...string) *rest.Config {
	t.Helper()
	cfg, err := pki.KubeconfigForDestination(rt.root.KubeconfigPath(), "default", dest)
	if err != nil {
		t.Fatal(err)
	}
	rc, err := clientcmd.NewDefaultClientConfig(*cfg, nil).ClientConfig()
	if err != nil {
		t.Fatal(err)
	}
	if cn != "" {
		certPEM, keyPEM, err := rt.root.ca.IssueClient(cn, groups, time.Hour)
		if err != nil {
			t.Fatal(err)
		}
		rc.BearerToken, rc.CertData, rc.KeyData = "", certPEM, keyPEM
	}
	return rc
}

// grantProxy lets user reach the destinations named (all if none) with
// RBAC in the inventory space.
func grantProxy(t testing.TB, rt *realTree, user string, dests ...string) {
	t.Helper()
	ctx := context.Background()
	rule := map[string]any{"apiGroups": []any{"edge.canopy.dev"}, "resources": []any{"synctargets/proxy"}, "verbs": []any{"*"}}
	if len(dests) > 0 {
		names := make([]any, len(dests))
		for i, d := range dests {
			names[i] = d
		}
		rule["resourceNames"] = names
	}
	name := "proxy-" + user
	for _, o := range []struct {
		gvr schema.GroupVersionResource
		obj map[string]any
	}{
		{gvrClusterRoles, map[string]any{"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
			"metadata": map[string]any{"name": name}, "rules": []any{rule}}},
		{gvrCRBindings, map[string]any{"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
			"metadata": map[string]any{"name": name},
			"roleRef":  map[string]any{"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": name},
			"subjects": []any{map[string]any{"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": user}}}},
	} {
		if _, err := rt.inv.Resource(o.gvr).Create(ctx, &unstructured.Unstructured{Object: o.obj}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
}

// Through root → region → edge → a real kube-apiserver: stock kubectl
// gets, lists, applies, watches and deletes; the root's RBAC on
// synctargets/proxy and the destination's own RBAC both decide; every
// request is in the audit log.
func TestDestinationsThroughTheTree(t *testing.T) {
	rt := startRealTree(t, map[string]map[string]string{"e1": {"zone": "a"}, "e2": {"zone": "b"}})
	ctx := context.Background()

	// The root's admin is canopy:canopy:admin in canopy:system:masters at
	// a destination, which grants that group what it chooses: here, all.
	for _, dyn := range rt.dyn {
		applyTB(t, dyn, gvrCRBindings, map[string]any{"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
			"metadata": map[string]any{"name": "canopy-admins"},
			"roleRef":  map[string]any{"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "cluster-admin"},
			"subjects": []any{map[string]any{"apiGroup": "rbac.authorization.k8s.io", "kind": "Group", "name": "canopy:system:masters"}}})
	}

	// kubectl, with the kubeconfig `relay kubeconfig --destination` prints.
	cfg, err := pki.KubeconfigForDestination(rt.root.KubeconfigPath(), "default", "e1")
	if err != nil {
		t.Fatal(err)
	}
	kc := filepath.Join(t.TempDir(), "e1.kubeconfig")
	if err := clientcmd.WriteToFile(*cfg, kc); err != nil {
		t.Fatal(err)
	}
	kubectl := func(stdin string, args ...string) (string, error) {
		return kubecluster.RunKubectl(t, rt.home, kc, stdin, nil, args...)
	}
	if out, err := kubectl("", "get", "namespaces", "-o", "name"); err != nil || !strings.Contains(out, "namespace/kube-system") {
		t.Fatalf("get namespaces: %v\n%s", err, out)
	}
	if out, err := kubectl("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: hello, namespace: default}\ndata: {k: v}\n", "apply", "-f", "-"); err != nil {
		t.Fatalf("apply: %v\n%s", err, out)
	}
	// It is in e1's cluster, not e2's.
	if _, err := rt.dyn["e1"].Resource(gvrConfigMaps).Namespace("default").Get(ctx, "hello", metav1.GetOptions{}); err != nil {
		t.Fatalf("the applied ConfigMap in e1's cluster: %v", err)
	}
	if _, err := rt.dyn["e2"].Resource(gvrConfigMaps).Namespace("default").Get(ctx, "hello", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Fatalf("e2's cluster: %v, want not found", err)
	}
	if out, err := kubectl("", "get", "configmaps", "-n", "default", "-o", "jsonpath={.items[*].metadata.name}"); err != nil || !strings.Contains(out, "hello") {
		t.Fatalf("list: %v\n%s", err, out)
	}

	// A watch through the tree sees a change made at the cluster.
	wctx, wcancel := context.WithTimeout(ctx, time.Minute)
	defer wcancel()
	watch := kubecluster.KubectlCommand(wctx, t, rt.home, kc, "", nil, "get", "configmaps", "-n", "default", "-w", "-o", "name")
	stdout, _ := watch.StdoutPipe()
	if err := watch.Start(); err != nil {
		t.Fatal(err)
	}
	lines := make(chan string, 16)
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			lines <- sc.Text()
		}
		close(lines)
	}()
	if l := <-lines; l != "configmap/hello" && !strings.HasPrefix(l, "configmap/") {
		t.Fatalf("watch began with %q", l)
	}
	applyTB(t, rt.dyn["e1"], gvrConfigMaps, map[string]any{"apiVersion": "v1", "kind": "ConfigMap",
		"metadata": map[string]any{"name": "seen-by-watch", "namespace": "default"}})
	for l := range lines {
		if l == "configmap/seen-by-watch" {
			break
		}
	}
	wcancel()
	_ = watch.Wait()

	// A watch across a region's restart ends, as a watch whose server went
	// away does; the client's next watch works once the region is back.
	dcAdmin, err := dynamic.NewForConfig(destinationConfig(t, rt, "e1", ""))
	if err != nil {
		t.Fatal(err)
	}
	w, err := dcAdmin.Resource(gvrConfigMaps).Namespace("default").Watch(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	rt.stopReg()
	for range w.ResultChan() {
	}
	rt.startRegion(t)
	poll.Until(t, "a new watch through the restarted region", func() error {
		w, err := dcAdmin.Resource(gvrConfigMaps).Namespace("default").Watch(ctx, metav1.ListOptions{})
		if err != nil {
			return err
		}
		w.Stop()
		return nil
	})

	if out, err := kubectl("", "delete", "configmap", "hello", "-n", "default"); err != nil {
		t.Fatalf("delete: %v\n%s", err, out)
	}
	poll.Until(t, "the ConfigMap deleted in e1's cluster", func() error {
		_, err := rt.dyn["e1"].Resource(gvrConfigMaps).Namespace("default").Get(ctx, "hello", metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return nil
		}
		return fmt.Errorf("still there: %v", err)
	})

	// Who may reach what.
	status := func(rc *rest.Config, path string) (int, string) {
		t.Helper()
		c, err := rest.HTTPClientFor(rc)
		if err != nil {
			t.Fatal(err)
		}
		resp, err := c.Get(strings.TrimSuffix(rc.Host, "/") + path)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	nsPath := "/api/v1/namespaces/default/configmaps"
	if code, body := status(destinationConfig(t, rt, "e1", "mallory"), nsPath); code != http.StatusForbidden || !strings.Contains(body, "synctargets/proxy") {
		t.Errorf("a user without synctargets/proxy: %d %s", code, body)
	}
	grantProxy(t, rt, "alice", "e1")
	poll.Until(t, "alice reaches e1", func() error {
		code, body := status(destinationConfig(t, rt, "e1", "alice", "devs"), "/version")
		if code != http.StatusOK {
			return fmt.Errorf("%d %s", code, body)
		}
		return nil
	})
	if code, body := status(destinationConfig(t, rt, "e2", "alice", "devs"), "/version"); code != http.StatusForbidden {
		t.Errorf("alice, allowed e1 only, on e2: %d %s", code, body)
	}
	// At e1's cluster alice is canopy:alice, whom its RBAC does not know.
	if code, body := status(destinationConfig(t, rt, "e1", "alice", "devs"), nsPath); code != http.StatusForbidden || !strings.Contains(body, `User \"canopy:alice\" cannot list`) {
		t.Errorf("the destination's RBAC for canopy:alice: %d %s", code, body)
	}
	// Once the destination grants canopy:devs, she lists.
	applyTB(t, rt.dyn["e1"], gvrCRBindings, map[string]any{"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
		"metadata": map[string]any{"name": "canopy-devs-view"},
		"roleRef":  map[string]any{"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "view"},
		"subjects": []any{map[string]any{"apiGroup": "rbac.authorization.k8s.io", "kind": "Group", "name": "canopy:devs"}}})
	poll.Until(t, "alice lists through her group's grant at e1", func() error {
		if code, body := status(destinationConfig(t, rt, "e1", "alice", "devs"), nsPath); code != http.StatusOK {
			return fmt.Errorf("%d %s", code, body)
		}
		return nil
	})

	// Bad requests change nothing below the root.
	admin := destinationConfig(t, rt, "e1", "")
	if code, body := status(destinationConfig(t, rt, "nowhere", ""), "/version"); code != http.StatusNotFound || !strings.Contains(body, "nowhere") {
		t.Errorf("an unknown destination: %d %s", code, body)
	}
	if code, body := status(admin, "/metrics-or-else"); code != http.StatusNotFound || !strings.Contains(body, "not a path of a kube API") {
		t.Errorf("a path that is not a kube API's: %d %s", code, body)
	}
	big := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "v1", "kind": "ConfigMap",
		"metadata": map[string]any{"name": "too-big", "namespace": "default"}, "data": map[string]any{"x": strings.Repeat("x", 4<<20)}}}
	dc, err := dynamic.NewForConfig(admin)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := dc.Resource(gvrConfigMaps).Namespace("default").Create(ctx, big, metav1.CreateOptions{}); !apierrors.IsRequestEntityTooLargeError(err) {
		t.Errorf("a body over the limit: %v", err)
	}
	if _, err := rt.dyn["e1"].Resource(gvrConfigMaps).Namespace("default").Get(ctx, "too-big", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("the refused body reached the cluster: %v", err)
	}

	// A disconnected destination answers 503 at once, with when it was
	// last seen.
	rt.stops["e2"]()
	poll.Until(t, "e2 disconnected at the root", func() error {
		code, body := status(destinationConfig(t, rt, "e2", ""), "/version")
		if code != http.StatusServiceUnavailable {
			return fmt.Errorf("%d %s", code, body)
		}
		if !strings.Contains(body, "e2") || !strings.Contains(body, "last seen") {
			return poll.Stop(fmt.Errorf("the 503 does not say which destination and when it was seen: %s", body))
		}
		return nil
	})

	// The audit log has a line per request, with who, where and how it ended.
	data, err := os.ReadFile(rt.root.cfg.ProxyAuditLog)
	if err != nil {
		t.Fatal(err)
	}
	var recs []destproxy.AuditRecord
	for _, l := range strings.Split(strings.TrimSpace(string(data)), "\n") {
		var r destproxy.AuditRecord
		if err := json.Unmarshal([]byte(l), &r); err != nil {
			t.Fatalf("audit line %q: %v", l, err)
		}
		recs = append(recs, r)
	}
	find := func(user, dest string, code int) bool {
		for _, r := range recs {
			if r.User == user && r.Destination == dest && r.Status == code && r.Path != "" && r.ID != "" {
				return true
			}
		}
		return false
	}
	for _, w := range []struct {
		user, dest string
		code       int
	}{{"canopy:admin", "e1", 200}, {"mallory", "e1", 403}, {"alice", "e2", 403}, {"alice", "e1", 403}, {"canopy:admin", "nowhere", 404},
		{"canopy:admin", "e1", 413}, {"canopy:admin", "e2", 503}} {
		if !find(w.user, w.dest, w.code) {
			t.Errorf("no audit record of %s on %s answered %d in %d records", w.user, w.dest, w.code, len(recs))
		}
	}
}

// A relay's link certificate is not an API credential: it cannot reach
// destinations either.
func TestChildCertificateCannotReachDestinations(t *testing.T) {
	tt := makeTree(t, nil, 1, 1)
	edge := tt.edges[0]
	cert, _, err := pki.LoadChildIdentity(edge.cfg.DataDir)
	if err != nil {
		t.Fatal(err)
	}
	c := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{
		Certificates: []tls.Certificate{cert}, RootCAs: tt.root.ca.Pool(), MinVersion: tls.VersionTLS12}}}
	resp, err := c.Get(tt.root.server + destproxy.Prefix + edge.cfg.Name + "/version")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("an edge's certificate at the root: %d %s, want 401", resp.StatusCode, body)
	}
}

// startChain starts a root, a region r1 below it (at most maxProxyStreams
// proxy streams per link; 0: the default) and an edge e1 with a virtual
// cluster below r1.
func startChain(t testing.TB, maxProxyStreams int) (root *Root, region, edge *Child) {
	t.Helper()
	root = startTestRoot(t)
	token := joinToken(t, root)
	region = startTestChild(t, ChildConfig{Role: pki.RoleRegion, Name: "r1", DataDir: t.TempDir(), Parents: []string{root.LinkAddr()},
		JoinToken: token, LinkAddr: "127.0.0.1:0", InMemory: true, MaxProxyStreams: maxProxyStreams})
	poll.True(t, "region serving", func() bool { return region.LinkAddr() != "" })
	edge = startTestChild(t, ChildConfig{Role: pki.RoleEdge, Name: "e1", DataDir: t.TempDir(), Parents: []string{region.LinkAddr()},
		JoinToken: token, InMemory: true, VirtualCluster: true})
	return root, region, edge
}

// adminDestinationConfig reaches destination dest through root r as its
// admin.
func adminDestinationConfig(t testing.TB, r *Root, dest string) *rest.Config {
	t.Helper()
	cfg, err := pki.KubeconfigForDestination(r.KubeconfigPath(), "default", dest)
	if err != nil {
		t.Fatal(err)
	}
	rc, err := clientcmd.NewDefaultClientConfig(*cfg, nil).ClientConfig()
	if err != nil {
		t.Fatal(err)
	}
	return rc
}

// A link carries at most MaxProxyStreams requests at once: the next gets
// 429 from the relay whose link is full, and one that ends makes room.
// Watches nobody reads do not hold up what the link carries besides.
func TestProxyStreamsPerLinkAreBounded(t *testing.T) {
	root, _, edge := startChain(t, 2)
	local, err := dynamic.NewForConfig(edge.cluster.RESTConfig())
	if err != nil {
		t.Fatal(err)
	}
	dc, err := dynamic.NewForConfig(adminDestinationConfig(t, root, "e1"))
	if err != nil {
		t.Fatal(err)
	}
	cms := dc.Resource(gvrConfigMaps).Namespace("default")
	poll.Until(t, "e1 reachable", func() error { _, err := cms.List(t.Context(), metav1.ListOptions{}); return err })

	// Two watches, never read, fill r1's link to e1.
	var stops []func()
	for range 2 {
		w, err := cms.Watch(t.Context(), metav1.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		stops = append(stops, w.Stop)
	}
	_, err = cms.List(t.Context(), metav1.ListOptions{})
	if !apierrors.IsTooManyRequests(err) || !strings.Contains(err.Error(), "carries 2 proxy streams") {
		t.Fatalf("a third request: %v, want 429 from r1", err)
	}
	// Desired state still flows to e1 meanwhile.
	putDownsync(t, root, "while-streams-are-full", "v1", "e1")
	poll.Until(t, "the object applied at e1", func() error {
		_, err := local.Resource(gvrConfigMaps).Namespace("default").Get(t.Context(), "while-streams-are-full", metav1.GetOptions{})
		return err
	})
	stops[0]()
	poll.Until(t, "room for a request once a watch ended", func() error {
		_, err := cms.Get(t.Context(), "while-streams-are-full", metav1.GetOptions{})
		return err
	})
	stops[1]()
}

var forwardingRE = regexp.MustCompile(`Forwarding from 127\.0\.0\.1:(\d+) ->`)

// Through root and region to a virtual cluster, the stock kubectl reads
// logs (and follows them), execs (with and without stdin) and
// port-forwards, over WebSocket and over SPDY.
func TestStreamsThroughTwoTiers(t *testing.T) {
	root, _, _ := startChain(t, 0)
	cfg, err := pki.KubeconfigForDestination(root.KubeconfigPath(), "default", "e1")
	if err != nil {
		t.Fatal(err)
	}
	kc := filepath.Join(t.TempDir(), "e1.kubeconfig")
	if err := clientcmd.WriteToFile(*cfg, kc); err != nil {
		t.Fatal(err)
	}
	home := t.TempDir()
	kubectl := func(ctx context.Context, env []string, stdin string, args ...string) *exec.Cmd {
		return kubecluster.KubectlCommand(ctx, t, home, kc, stdin, env, args...)
	}
	run := func(env []string, stdin string, args ...string) (string, string, int) {
		t.Helper()
		return kubecluster.KubectlResult(t, home, kc, stdin, env, args...)
	}
	pod := "apiVersion: v1\nkind: Pod\nmetadata: {name: web, namespace: default}\n" +
		"spec: {containers: [{name: web, image: nginx, ports: [{containerPort: 8080}]}]}\n"
	poll.Until(t, "the pod created through the tree", func() error {
		if out, stderr, code := run(nil, pod, "apply", "-f", "-"); code != 0 {
			return fmt.Errorf("exit %d: %s %s", code, out, stderr)
		}
		return nil
	})
	poll.Until(t, "the pod running", func() error {
		out, stderr, code := run(nil, "", "get", "pod", "web", "-o", "jsonpath={.status.phase}")
		if code != 0 || out != "Running" {
			return fmt.Errorf("phase %q (exit %d, %s)", out, code, stderr)
		}
		return nil
	})

	// logs -f: the start lines, then it goes on.
	fctx, fcancel := context.WithCancel(t.Context())
	follow := kubectl(fctx, nil, "", "logs", "-f", "web")
	out, err := follow.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := follow.Start(); err != nil {
		t.Fatal(err)
	}
	sc := bufio.NewScanner(out)
	var lines []string
	for len(lines) < 6 && sc.Scan() {
		lines = append(lines, sc.Text())
	}
	fcancel()
	_ = follow.Wait()
	if len(lines) < 6 || !strings.HasPrefix(lines[0], "starting container web of pod default/web") || !strings.Contains(lines[5], "heartbeat") {
		t.Errorf("kubectl logs -f through the tree: %q", lines)
	}

	for proto, env := range map[string][]string{
		"websocket": nil,
		"spdy":      {"KUBECTL_REMOTE_COMMAND_WEBSOCKETS=false", "KUBECTL_PORT_FORWARD_WEBSOCKETS=false"},
	} {
		if stdout, stderr, code := run(env, "", "exec", "web", "--", "echo", "through", "the", "tree"); code != 0 || stdout != "through the tree\n" {
			t.Errorf("%s exec: exit %d %q %q", proto, code, stdout, stderr)
		}
		if stdout, stderr, code := run(env, "hostname\nexit 3\n", "exec", "-i", "web", "--", "sh"); code != 3 || stdout != "web\n" {
			t.Errorf("%s exec -i sh: exit %d %q %q", proto, code, stdout, stderr)
		}
		pctx, pcancel := context.WithCancel(t.Context())
		pf := kubectl(pctx, env, "", "port-forward", "--address", "127.0.0.1", "pod/web", ":8080")
		pout, err := pf.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		if err := pf.Start(); err != nil {
			t.Fatal(err)
		}
		local := ""
		for sc := bufio.NewScanner(pout); local == "" && sc.Scan(); {
			if m := forwardingRE.FindStringSubmatch(sc.Text()); m != nil {
				local = m[1]
			}
		}
		go func() { _, _ = io.Copy(io.Discard, pout) }()
		resp, err := http.Get("http://127.0.0.1:" + local + "/x")
		if err != nil {
			t.Errorf("%s port-forward: %v", proto, err)
		} else {
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if want := "hello from default/web port 8080: GET /x\n"; string(b) != want {
				t.Errorf("%s port-forward: %q, want %q", proto, b, want)
			}
		}
		pcancel()
		_ = pf.Wait()
	}
}

// Each replica of a root reaches every destination: an edge links to one
// replica, and the others pass its requests there as the same user.
func TestDestinationsThroughEveryReplica(t *testing.T) {
	rs := startReplicas(t, 3)
	leader := leaderOf(t, rs)
	token := joinToken(t, rs[leader].Root)
	edge := startChildOnly(t, ChildConfig{Role: pki.RoleEdge, Name: "e1", DataDir: t.TempDir(),
		Parents: []string{rs[0].LinkAddr()}, JoinToken: token, InMemory: true, VirtualCluster: true})
	stopEdge := serveInBackground(t, "e1", edge.Serve)
	poll.True(t, "edge connected", func() bool { return edge.Uplink().Connected() })
	for _, r := range rs {
		nodes, err := dynamic.NewForConfig(adminDestinationConfig(t, r.Root, "e1"))
		if err != nil {
			t.Fatal(err)
		}
		poll.Until(t, "e1's nodes through "+r.cfg.Name, func() error {
			l, err := nodes.Resource(schema.GroupVersionResource{Version: "v1", Resource: "nodes"}).List(t.Context(), metav1.ListOptions{})
			if err != nil {
				return err
			}
			if len(l.Items) == 0 || l.Items[0].GetName() != "e1-node-0" {
				return fmt.Errorf("nodes %v", l.Items)
			}
			return nil
		})
	}
	// A user who may not reach e1 is refused by whichever replica: the one
	// that passes the request on, or the one it passes it to.
	for _, r := range rs {
		rc := adminDestinationConfig(t, r.Root, "e1")
		certPEM, keyPEM, err := r.ca.IssueClient("mallory", nil, time.Hour)
		if err != nil {
			t.Fatal(err)
		}
		rc.BearerToken, rc.CertData, rc.KeyData = "", certPEM, keyPEM
		c, err := dynamic.NewForConfig(rc)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := c.Resource(gvrConfigMaps).List(t.Context(), metav1.ListOptions{}); !apierrors.IsForbidden(err) {
			t.Errorf("mallory through %s: %v, want 403", r.cfg.Name, err)
		}
	}
	// Once e1 is gone, every replica says so: 503 with when it was last
	// seen, not 404, whichever held its link.
	stopEdge()
	for _, r := range rs {
		c, err := dynamic.NewForConfig(adminDestinationConfig(t, r.Root, "e1"))
		if err != nil {
			t.Fatal(err)
		}
		poll.Until(t, "e1 disconnected at "+r.cfg.Name, func() error {
			_, err := c.Resource(gvrConfigMaps).List(t.Context(), metav1.ListOptions{})
			if !apierrors.IsServiceUnavailable(err) || !strings.Contains(err.Error(), "last seen") {
				return fmt.Errorf("%v, want 503 saying when e1 was last seen", err)
			}
			return nil
		})
	}
}

// A watch through a region whose edge re-homes to a sibling ends; the
// next request takes the new path.
func TestDestinationRequestsFollowARehoming(t *testing.T) {
	root := startTestRoot(t)
	token := joinToken(t, root)
	r1, stopR1, r2 := startSiblingRegions(t, root, token)
	edge := startTestChild(t, ChildConfig{Role: pki.RoleEdge, Name: "e1", DataDir: t.TempDir(), Parents: []string{r1.LinkAddr()},
		JoinToken: token, VirtualCluster: true, InMemory: true})
	poll.True(t, "e1 told of r2", func() bool { return edge.Uplink().Connected() })
	dc, err := dynamic.NewForConfig(adminDestinationConfig(t, root, "e1"))
	if err != nil {
		t.Fatal(err)
	}
	cms := dc.Resource(gvrConfigMaps).Namespace("default")
	poll.Until(t, "e1 through r1", func() error { _, err := cms.List(t.Context(), metav1.ListOptions{}); return err })
	w, err := cms.Watch(t.Context(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	stopR1()
	for range w.ResultChan() {
	}
	poll.Until(t, "e1 through r2", func() error {
		if cs := r2.Downlink().Children(); !slices.ContainsFunc(cs, func(c session.ChildStatus) bool { return c.Identity.Name == "e1" && c.Connected }) {
			return errors.New("e1 is not linked to r2 yet")
		}
		_, err := cms.List(t.Context(), metav1.ListOptions{})
		return err
	})
}
