package auth

import (
	"bytes"
	"context"
	"errors"
	"slices"
	"testing"

	authorizationv1 "k8s.io/api/authorization/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apiserver/pkg/authentication/user"
	"k8s.io/apiserver/pkg/authorization/authorizer"

	"github.com/canopy-dev/canopy/relay/store"
	"github.com/canopy-dev/canopy/test/poll"
)

var (
	all  = []string{"*"}
	read = []string{"get", "list", "watch"}
	core = []string{""}
)

// writeFixture writes the objects of space "s1" most tests use.
func writeFixture(h *harness) {
	h.put("s1",
		// Role + RoleBinding in a namespace.
		makeRole("dev", "pod-reader", rule(read, core, []string{"pods"})),
		makeRoleBinding("dev", "read-pods", "Role", "pod-reader", userSubject("alice")),
		// ClusterRole granted in one namespace by a RoleBinding; a subresource.
		makeClusterRole("deploy-scaler", nil, rule([]string{"get", "update"}, []string{"apps"}, []string{"deployments/scale"})),
		makeRoleBinding("dev", "scale", "ClusterRole", "deploy-scaler", groupSubject("scalers")),
		// ClusterRoleBinding.
		makeClusterRole("node-viewer", nil, rule(read, core, []string{"nodes"})),
		makeClusterRoleBinding("node-viewers", "node-viewer", userSubject("bob")),
		// resourceNames, and a ServiceAccount subject without a namespace.
		makeClusterRole("app-config", nil, rule([]string{"get", "update"}, core, []string{"configmaps"}, "app-config")),
		makeRoleBinding("dev", "robot-config", "ClusterRole", "app-config", saSubject("", "robot")),
		// A ServiceAccount subject with a namespace, cluster-wide.
		makeClusterRoleBinding("robot-nodes", "node-viewer", saSubject("", "nobody"), saSubject("dev", "robot")),
		// Wildcards.
		makeClusterRole("batch-all", nil, rule(all, []string{"batch"}, all)),
		makeClusterRole("status-reader", nil, rule([]string{"get"}, all, []string{"*/status"})),
		makeClusterRoleBinding("carol-batch", "batch-all", userSubject("carol")),
		makeClusterRoleBinding("carol-status", "status-reader", userSubject("carol")),
		// Non-resource URLs.
		makeClusterRole("metrics", nil, urlRule([]string{"get"}, "/metrics", "/logs/*")),
		makeClusterRoleBinding("erin-metrics", "metrics", userSubject("erin")),
		// Aggregation, nested, with an aggregated role's own rules ignored.
		makeAggregatedClusterRole("monitoring", nil, map[string]string{"canopy.dev/aggregate-to-monitoring": "true"}),
		makeClusterRole("mon-pods", map[string]string{"canopy.dev/aggregate-to-monitoring": "true"}, rule([]string{"list"}, core, []string{"pods"})),
		makeAggregatedClusterRole("mon-nested", map[string]string{"canopy.dev/aggregate-to-monitoring": "true"}, map[string]string{"canopy.dev/aggregate-to-nested": "true"}),
		makeClusterRole("mon-endpoints", map[string]string{"canopy.dev/aggregate-to-nested": "true"}, rule([]string{"list"}, core, []string{"endpoints"})),
		makeClusterRoleBinding("frank-monitoring", "monitoring", userSubject("frank")),
		// A binding to a missing role.
		makeRoleBinding("dev", "ghostly", "Role", "ghost", userSubject("gina")),
	)
	h.sync("s1")
}

func TestAuthorize(t *testing.T) {
	h := newHarness(t, store.Options{})
	writeFixture(h)

	alice, bob, carol, erin, frank, gina := person("alice"), person("bob"), person("carol"), person("erin"), person("frank"), person("gina")
	scaler := person("sam", "scalers")
	robot := &user.DefaultInfo{Name: "system:serviceaccount:dev:robot", Groups: []string{"system:serviceaccounts", "system:serviceaccounts:dev", user.AllAuthenticated}}
	otherRobot := &user.DefaultInfo{Name: "system:serviceaccount:prod:robot", Groups: []string{"system:serviceaccounts", "system:serviceaccounts:prod", user.AllAuthenticated}}
	admin := &user.DefaultInfo{Name: AdminUser, Groups: []string{user.SystemPrivilegedGroup, user.AllAuthenticated}}

	tests := []struct {
		name   string
		space  string
		attrs  authorizer.Attributes
		allow  bool
		reason string
	}{
		{"role in its namespace", "s1", resourceAttrs(alice, "list", "", "pods", "dev", ""), true,
			`RBAC: allowed by RoleBinding "read-pods/dev" of Role "pod-reader" to User "alice"`},
		{"role: other verb", "s1", resourceAttrs(alice, "delete", "", "pods", "dev", "p"), false, ""},
		{"role: other namespace", "s1", resourceAttrs(alice, "list", "", "pods", "prod", ""), false, ""},
		{"role: cluster scope", "s1", resourceAttrs(alice, "list", "", "pods", "", ""), false, ""},
		{"role: other resource", "s1", resourceAttrs(alice, "list", "", "secrets", "dev", ""), false, ""},
		{"role: other group", "s1", resourceAttrs(alice, "list", "metrics.k8s.io", "pods", "dev", ""), false, ""},
		{"role: subresource not granted", "s1", resourceAttrs(alice, "get", "", "pods/log", "dev", "p"), false, ""},
		{"role: other space", "s2", resourceAttrs(alice, "list", "", "pods", "dev", ""), false, ""},

		{"clusterrole via rolebinding, subresource", "s1", resourceAttrs(scaler, "update", "apps", "deployments/scale", "dev", "web"), true,
			`RBAC: allowed by RoleBinding "scale/dev" of ClusterRole "deploy-scaler" to Group "scalers"`},
		{"clusterrole via rolebinding: other namespace", "s1", resourceAttrs(scaler, "update", "apps", "deployments/scale", "prod", "web"), false, ""},
		{"clusterrole via rolebinding: parent resource", "s1", resourceAttrs(scaler, "update", "apps", "deployments", "dev", "web"), false, ""},

		{"clusterrolebinding", "s1", resourceAttrs(bob, "get", "", "nodes", "", "n1"), true,
			`RBAC: allowed by ClusterRoleBinding "node-viewers" of ClusterRole "node-viewer" to User "bob"`},
		{"clusterrolebinding: namespaced request", "s1", resourceAttrs(bob, "list", "", "nodes", "dev", ""), true,
			`RBAC: allowed by ClusterRoleBinding "node-viewers" of ClusterRole "node-viewer" to User "bob"`},
		{"clusterrolebinding: other space", "s2", resourceAttrs(bob, "get", "", "nodes", "", "n1"), false, ""},

		{"resourceNames: named", "s1", resourceAttrs(robot, "get", "", "configmaps", "dev", "app-config"), true,
			`RBAC: allowed by RoleBinding "robot-config/dev" of ClusterRole "app-config" to ServiceAccount "robot/dev"`},
		{"resourceNames: other name", "s1", resourceAttrs(robot, "get", "", "configmaps", "dev", "other"), false, ""},
		{"resourceNames: list has no name", "s1", resourceAttrs(robot, "list", "", "configmaps", "dev", ""), false, ""},
		{"serviceaccount subject, cluster-wide", "s1", resourceAttrs(robot, "list", "", "nodes", "", ""), true,
			`RBAC: allowed by ClusterRoleBinding "robot-nodes" of ClusterRole "node-viewer" to ServiceAccount "robot/dev"`},
		{"serviceaccount subject: other namespace", "s1", resourceAttrs(otherRobot, "get", "", "configmaps", "dev", "app-config"), false, ""},

		{"wildcard resources and verbs", "s1", resourceAttrs(carol, "deletecollection", "batch", "jobs", "dev", ""), true,
			`RBAC: allowed by ClusterRoleBinding "carol-batch" of ClusterRole "batch-all" to User "carol"`},
		{"wildcard resources cover subresources", "s1", resourceAttrs(carol, "update", "batch", "jobs/status", "dev", "j"), true,
			`RBAC: allowed by ClusterRoleBinding "carol-batch" of ClusterRole "batch-all" to User "carol"`},
		{"wildcard: group not covered", "s1", resourceAttrs(carol, "delete", "apps", "deployments", "dev", "d"), false, ""},
		{"*/subresource", "s1", resourceAttrs(carol, "get", "apps", "deployments/status", "dev", "d"), true,
			`RBAC: allowed by ClusterRoleBinding "carol-status" of ClusterRole "status-reader" to User "carol"`},
		{"*/subresource: not the resource", "s1", resourceAttrs(carol, "get", "apps", "deployments", "dev", "d"), false, ""},

		{"nonResourceURL exact", "s1", pathAttrs(erin, "get", "/metrics"), true,
			`RBAC: allowed by ClusterRoleBinding "erin-metrics" of ClusterRole "metrics" to User "erin"`},
		{"nonResourceURL prefix", "s1", pathAttrs(erin, "get", "/logs/kube/a.log"), true,
			`RBAC: allowed by ClusterRoleBinding "erin-metrics" of ClusterRole "metrics" to User "erin"`},
		{"nonResourceURL: other verb", "s1", pathAttrs(erin, "post", "/metrics"), false, ""},
		{"nonResourceURL: not granted", "s1", pathAttrs(alice, "get", "/metrics"), false, ""},

		{"aggregated", "s1", resourceAttrs(frank, "list", "", "pods", "dev", ""), true,
			`RBAC: allowed by ClusterRoleBinding "frank-monitoring" of ClusterRole "monitoring" to User "frank"`},
		{"aggregated, nested", "s1", resourceAttrs(frank, "list", "", "endpoints", "", ""), true,
			`RBAC: allowed by ClusterRoleBinding "frank-monitoring" of ClusterRole "monitoring" to User "frank"`},
		{"aggregated: own rules ignored", "s1", resourceAttrs(frank, "delete", "", "secrets", "dev", "s"), false, ""},

		{"missing role", "s1", resourceAttrs(gina, "list", "", "pods", "dev", ""), false,
			`RBAC: role.rbac.authorization.k8s.io "ghost" not found`},

		{"masters", "s1", resourceAttrs(admin, "delete", "", "namespaces", "", "kube-system"), true, ""},
		{"masters, unknown space", "nowhere", pathAttrs(admin, "get", "/metrics"), true, ""},

		{"discovery", "s1", pathAttrs(alice, "get", "/apis/apps/v1"), true,
			`RBAC: allowed by ClusterRoleBinding "system:discovery" of ClusterRole "system:discovery" to Group "system:authenticated"`},
		{"discovery: /api", "s2", pathAttrs(alice, "get", "/api"), true,
			`RBAC: allowed by ClusterRoleBinding "system:discovery" of ClusterRole "system:discovery" to Group "system:authenticated"`},
		{"discovery: openapi", "s1", pathAttrs(alice, "get", "/openapi/v3"), true,
			`RBAC: allowed by ClusterRoleBinding "system:discovery" of ClusterRole "system:discovery" to Group "system:authenticated"`},
		{"discovery: readyz", "s1", pathAttrs(alice, "get", "/readyz"), true,
			`RBAC: allowed by ClusterRoleBinding "system:discovery" of ClusterRole "system:discovery" to Group "system:authenticated"`},
		{"discovery: not posted", "s1", pathAttrs(alice, "post", "/api"), false, ""},
		{"discovery: not other paths", "s1", pathAttrs(alice, "get", "/apisx"), false, ""},
		{"basic user: access review", "s1", resourceAttrs(alice, "create", "authorization.k8s.io", "selfsubjectaccessreviews", "", ""), true,
			`RBAC: allowed by ClusterRoleBinding "system:basic-user" of ClusterRole "system:basic-user" to Group "system:authenticated"`},
		{"basic user: rules review", "s1", resourceAttrs(alice, "create", "authorization.k8s.io", "selfsubjectrulesreviews", "", ""), true,
			`RBAC: allowed by ClusterRoleBinding "system:basic-user" of ClusterRole "system:basic-user" to Group "system:authenticated"`},
		{"basic user: self review", "s1", resourceAttrs(alice, "create", "authentication.k8s.io", "selfsubjectreviews", "", ""), true,
			`RBAC: allowed by ClusterRoleBinding "system:basic-user" of ClusterRole "system:basic-user" to Group "system:authenticated"`},
		{"basic user: not subject access reviews", "s1", resourceAttrs(alice, "create", "authorization.k8s.io", "subjectaccessreviews", "", ""), false, ""},
		{"built-ins need system:authenticated", "s1", pathAttrs(&user.DefaultInfo{Name: "x"}, "get", "/api"), false, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d, reason, err := h.az.Authorize(context.Background(), tt.space, tt.attrs)
			if err != nil {
				t.Fatal(err)
			}
			want := authorizer.DecisionNoOpinion
			if tt.allow {
				want = authorizer.DecisionAllow
			}
			if d != want || reason != tt.reason {
				t.Errorf("got %v %q, want %v %q", d, reason, want, tt.reason)
			}
		})
	}
}

// TestAuthorizeFollowsWatch checks that changes made after a space was
// loaded reach decisions through the watch.
func TestAuthorizeFollowsWatch(t *testing.T) {
	h := newHarness(t, store.Options{})
	alice := person("alice")
	listPods := resourceAttrs(alice, "list", "", "pods", "dev", "")
	listServices := resourceAttrs(alice, "list", "", "services", "dev", "")
	allowed := func(attrs authorizer.Attributes) bool {
		d, _, err := h.az.Authorize(context.Background(), "s1", attrs)
		if err != nil {
			t.Fatal(err)
		}
		return d == authorizer.DecisionAllow
	}
	if allowed(listPods) { // loads s1, empty
		t.Fatal("allowed before any binding")
	}

	agg := map[string]string{"canopy.dev/aggregate-to-viewer": "true"}
	h.put("s1",
		makeAggregatedClusterRole("viewer", nil, agg),
		makeClusterRole("view-pods", agg, rule(read, core, []string{"pods"})),
		makeRoleBinding("dev", "alice-view", "ClusterRole", "viewer", userSubject("alice")))
	poll.True(t, "binding seen", func() bool { return allowed(listPods) })

	// A new ClusterRole matching the selector extends the aggregated role.
	h.put("s1", makeClusterRole("view-services", agg, rule(read, core, []string{"services"})))
	poll.True(t, "aggregated rule seen", func() bool { return allowed(listServices) })

	// Relabelling takes it out again.
	h.put("s1", makeClusterRole("view-services", nil, rule(read, core, []string{"services"})))
	poll.True(t, "relabel seen", func() bool { return !allowed(listServices) })

	// Changing a role's rules, then deleting the binding.
	h.put("s1", makeClusterRole("view-pods", agg, rule([]string{"get"}, core, []string{"pods"})))
	poll.True(t, "rule change seen", func() bool { return !allowed(listPods) })
	h.put("s1", makeClusterRole("view-pods", agg, rule(read, core, []string{"pods"})))
	poll.True(t, "rule change back seen", func() bool { return allowed(listPods) })
	h.delete("s1", makeRoleBinding("dev", "alice-view", "ClusterRole", "viewer"))
	poll.True(t, "deletion seen", func() bool { return !allowed(listPods) })
}

// TestResyncAfterRestore checks that a watch ended with ErrExpired (here by
// Restore) makes the Authorizer re-list: the restored state wins.
func TestResyncAfterRestore(t *testing.T) {
	h := newHarness(t, store.Options{})
	alice := person("alice")
	listPods := resourceAttrs(alice, "list", "", "pods", "dev", "")
	h.put("s1", makeRole("dev", "pod-reader", rule(read, core, []string{"pods"})))
	h.sync("s1")

	snap, err := h.st.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	if _, err := snap.WriteTo(&buf); err != nil {
		t.Fatal(err)
	}
	snap.Release()

	h.put("s1", makeRoleBinding("dev", "read-pods", "Role", "pod-reader", userSubject("alice")))
	h.sync("s1")
	if d, _, _ := h.az.Authorize(context.Background(), "s1", listPods); d != authorizer.DecisionAllow {
		t.Fatal("binding not seen")
	}

	if err := h.st.Restore(&buf); err != nil { // back to before the binding
		t.Fatal(err)
	}
	poll.True(t, "restored state", func() bool {
		d, _, err := h.az.Authorize(context.Background(), "s1", listPods)
		return err == nil && d != authorizer.DecisionAllow
	})
	// And the new watches work.
	h.put("s1", makeRoleBinding("dev", "read-pods", "Role", "pod-reader", userSubject("alice")))
	poll.True(t, "binding seen again", func() bool {
		d, _, err := h.az.Authorize(context.Background(), "s1", listPods)
		return err == nil && d == authorizer.DecisionAllow
	})
}

// TestResyncAfterTooSlow checks that a watcher closed with ErrTooSlow is
// replaced and nothing written meanwhile is lost.
func TestResyncAfterTooSlow(t *testing.T) {
	h := newHarness(t, store.Options{WatcherQueue: 2})
	alice := person("alice")
	h.put("s1", makeRole("dev", "reader", rule(read, core, all)))
	h.sync("s1")

	h.az.mu.Lock() // stall the consumers so their watchers overflow
	for i := range 10 {
		putObject(t, h.st, "s1", makeRole("dev", "filler-"+string(rune('a'+i))))
	}
	putObject(t, h.st, "s1", makeRoleBinding("dev", "read", "Role", "reader", userSubject("alice")))
	h.az.mu.Unlock()

	poll.True(t, "binding seen after resync", func() bool {
		d, _, err := h.az.Authorize(context.Background(), "s1", resourceAttrs(alice, "get", "", "secrets", "dev", "x"))
		return err == nil && d == authorizer.DecisionAllow
	})
	h.sync("s1") // still following
}

func TestNotSynced(t *testing.T) {
	st := store.New(store.Options{})
	defer st.Close()
	az := NewAuthorizer(st)
	if az.Synced() {
		t.Fatal("Synced before Start")
	}
	ctx := context.Background()
	if _, _, err := az.Authorize(ctx, "s1", resourceAttrs(person("alice"), "list", "", "pods", "dev", "")); !errors.Is(err, ErrNotSynced) {
		t.Errorf("Authorize before Start: %v, want ErrNotSynced", err)
	}
	admin := person("root", user.SystemPrivilegedGroup)
	if d, _, err := az.Authorize(ctx, "s1", resourceAttrs(admin, "list", "", "pods", "dev", "")); err != nil || d != authorizer.DecisionAllow {
		t.Errorf("masters before Start: %v %v", d, err)
	}
	if d, _, err := az.Authorize(ctx, "s1", pathAttrs(person("alice"), "get", "/version")); err != nil || d != authorizer.DecisionAllow {
		t.Errorf("discovery before Start: %v %v", d, err)
	}
	if _, _, incomplete := az.RulesFor("s1", person("alice"), "dev"); !incomplete {
		t.Error("RulesFor before Start is complete")
	}
}

func TestStartFailsWhenStoreCloses(t *testing.T) {
	st := store.New(store.Options{})
	az := NewAuthorizer(st)
	errc := make(chan error, 1)
	go func() { errc <- az.Start(context.Background()) }()
	poll.True(t, "Synced", az.Synced)
	st.Close()
	if err := <-errc; !errors.Is(err, store.ErrClosed) {
		t.Errorf("Start: %v, want ErrClosed", err)
	}
	if az.Synced() {
		t.Error("Synced after Start returned")
	}
}

func TestRulesFor(t *testing.T) {
	h := newHarness(t, store.Options{})
	writeFixture(h)

	basicUser := []authorizationv1.ResourceRule{
		{Verbs: []string{"create"}, APIGroups: []string{"authorization.k8s.io"}, Resources: []string{"selfsubjectaccessreviews", "selfsubjectrulesreviews"}},
		{Verbs: []string{"create"}, APIGroups: []string{"authentication.k8s.io"}, Resources: []string{"selfsubjectreviews"}},
	}
	discovery := []authorizationv1.NonResourceRule{
		{Verbs: []string{"get"}, NonResourceURLs: []string{"/api", "/api/*", "/apis", "/apis/*", "/healthz", "/livez", "/openapi", "/openapi/*", "/readyz", "/version", "/version/"}},
		{Verbs: []string{"get"}, NonResourceURLs: []string{"/healthz", "/livez", "/readyz", "/version", "/version/"}},
	}
	tests := []struct {
		name        string
		u           user.Info
		namespace   string
		resource    []authorizationv1.ResourceRule
		nonResource []authorizationv1.NonResourceRule
		incomplete  bool
	}{
		{"role", person("alice"), "dev",
			append(slices.Clone(basicUser), authorizationv1.ResourceRule{Verbs: read, APIGroups: core, Resources: []string{"pods"}}),
			discovery, false},
		{"role elsewhere", person("alice"), "prod", basicUser, discovery, false},
		{"cluster role binding and url", person("erin"), "",
			basicUser,
			append(slices.Clone(discovery), authorizationv1.NonResourceRule{Verbs: []string{"get"}, NonResourceURLs: []string{"/metrics", "/logs/*"}}),
			false},
		{"aggregated", person("frank"), "",
			append(slices.Clone(basicUser),
				// mon-nested's rules, then mon-pods': by name, as kube's controller.
				authorizationv1.ResourceRule{Verbs: []string{"list"}, APIGroups: core, Resources: []string{"endpoints"}},
				authorizationv1.ResourceRule{Verbs: []string{"list"}, APIGroups: core, Resources: []string{"pods"}}),
			discovery, false},
		{"missing role", person("gina"), "dev", basicUser, discovery, true},
		{"masters", person("root", user.SystemPrivilegedGroup), "",
			append([]authorizationv1.ResourceRule{{Verbs: all, APIGroups: all, Resources: all}}, basicUser...),
			append([]authorizationv1.NonResourceRule{{Verbs: all, NonResourceURLs: all}}, discovery...),
			false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res, nonRes, incomplete := h.az.RulesFor("s1", tt.u, tt.namespace)
			if !equalJSON(res, tt.resource) || !equalJSON(nonRes, tt.nonResource) || incomplete != tt.incomplete {
				t.Errorf("got\n%+v\n%+v\n%v\nwant\n%+v\n%+v\n%v", res, nonRes, incomplete, tt.resource, tt.nonResource, tt.incomplete)
			}
		})
	}
}

func TestRuleAllows(t *testing.T) {
	u := person("u")
	tests := []struct {
		name  string
		rule  rbacv1.PolicyRule
		attrs authorizer.Attributes
		want  bool
	}{
		{"exact", rule([]string{"get"}, core, []string{"pods"}), resourceAttrs(u, "get", "", "pods", "ns", "p"), true},
		{"verb star", rule(all, core, []string{"pods"}), resourceAttrs(u, "escalate", "", "pods", "ns", "p"), true},
		{"group star", rule([]string{"get"}, all, []string{"pods"}), resourceAttrs(u, "get", "x.io", "pods", "ns", "p"), true},
		{"resource star", rule([]string{"get"}, core, all), resourceAttrs(u, "get", "", "pods/log", "ns", "p"), true},
		{"subresource exact", rule([]string{"get"}, core, []string{"pods/log"}), resourceAttrs(u, "get", "", "pods/log", "ns", "p"), true},
		{"subresource not parent", rule([]string{"get"}, core, []string{"pods/log"}), resourceAttrs(u, "get", "", "pods", "ns", "p"), false},
		{"parent not subresource", rule([]string{"get"}, core, []string{"pods"}), resourceAttrs(u, "get", "", "pods/log", "ns", "p"), false},
		{"star subresource", rule([]string{"get"}, core, []string{"*/log"}), resourceAttrs(u, "get", "", "pods/log", "ns", "p"), true},
		{"star subresource other", rule([]string{"get"}, core, []string{"*/log"}), resourceAttrs(u, "get", "", "pods/exec", "ns", "p"), false},
		{"resource star/ not subresource", rule([]string{"get"}, core, []string{"pods/*"}), resourceAttrs(u, "get", "", "pods/log", "ns", "p"), false},
		{"name", rule([]string{"get"}, core, []string{"pods"}, "a", "b"), resourceAttrs(u, "get", "", "pods", "ns", "b"), true},
		{"name other", rule([]string{"get"}, core, []string{"pods"}, "a"), resourceAttrs(u, "get", "", "pods", "ns", "b"), false},
		{"url star", urlRule([]string{"get"}, "*"), pathAttrs(u, "get", "/anything"), true},
		{"url prefix", urlRule([]string{"get"}, "/a/*"), pathAttrs(u, "get", "/a/b/c"), true},
		{"url prefix not parent", urlRule([]string{"get"}, "/a/*"), pathAttrs(u, "get", "/a"), false},
		{"url rule on resource request", urlRule(all, "*"), resourceAttrs(u, "get", "", "pods", "ns", "p"), false},
		{"resource rule on url request", rule(all, all, all), pathAttrs(u, "get", "/healthz"), false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := ruleAllows(tt.attrs, &tt.rule); got != tt.want {
				t.Errorf("ruleAllows = %v, want %v", got, tt.want)
			}
		})
	}
}
