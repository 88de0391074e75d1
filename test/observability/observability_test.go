package observability

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"github.com/prometheus/prometheus/model/rulefmt"
	"github.com/prometheus/prometheus/promql/parser"

	"github.com/canopy-dev/canopy/test/poll"
	"github.com/canopy-dev/canopy/test/procs"
	"github.com/canopy-dev/canopy/test/relaybin"
)

const (
	dashboardFile = "../../deploy/grafana/canopy.json"
	rulesFile     = "../../deploy/prometheus/canopy-rules.yaml"
	rbacFile      = "../../deploy/prometheus/root-metrics-rbac.yaml"
)

func TestMain(m *testing.M) { relaybin.Main(m) }

// promQL parses as Prometheus does by default.
var promQL = parser.NewParser(parser.Options{})

// query is one PromQL expression and where it is written.
type query struct{ where, expr string }

// dashboard is what the checks read of a Grafana dashboard.
type dashboard struct {
	Panels     []panel `json:"panels"`
	Templating struct {
		List []struct {
			Name  string          `json:"name"`
			Type  string          `json:"type"`
			Query json.RawMessage `json:"query"`
		} `json:"list"`
	} `json:"templating"`
}

type panel struct {
	Title   string `json:"title"`
	Type    string `json:"type"`
	Targets []struct {
		Expr string `json:"expr"`
	} `json:"targets"`
	Panels []panel `json:"panels"` // a collapsed row's
}

// Grafana's own variables that the dashboard may use, and a value of
// their kind; the dashboard's variables are label values matched as
// regular expressions (job=~"$job").
var grafanaVariables = map[string]string{"__rate_interval": "5m", "__interval": "1m", "__range": "1h"}

var variableRef = regexp.MustCompile(`\$(?:\{(\w+)(?::\w+)?\}|(\w+))`)

// labelValues is Grafana's variable query over one metric's label.
var labelValues = regexp.MustCompile(`^label_values\((.+),\s*(\w+)\)$`)

// dashboardQueries reads every PromQL expression of the dashboard, its
// variables replaced with values.
func dashboardQueries(t *testing.T) []query {
	t.Helper()
	data, err := os.ReadFile(dashboardFile)
	if err != nil {
		t.Fatal(err)
	}
	var d dashboard
	if err := json.Unmarshal(data, &d); err != nil {
		t.Fatalf("%s: %v", dashboardFile, err)
	}
	vars := maps.Clone(grafanaVariables)
	for _, v := range d.Templating.List {
		vars[v.Name] = ".*"
	}
	expand := func(where, expr string) string {
		return variableRef.ReplaceAllStringFunc(expr, func(ref string) string {
			m := variableRef.FindStringSubmatch(ref)
			v, ok := vars[m[1]+m[2]]
			if !ok {
				t.Errorf("%s: %q uses %s, which neither the dashboard nor Grafana defines", where, expr, ref)
			}
			return v
		})
	}
	var qs []query
	for _, v := range d.Templating.List {
		if v.Type != "query" {
			continue
		}
		// A query variable's query is a string or {"query": "..."}.
		var text string
		if json.Unmarshal(v.Query, &text) != nil {
			var q struct{ Query string }
			if err := json.Unmarshal(v.Query, &q); err != nil {
				t.Fatalf("variable %s: query %s: %v", v.Name, v.Query, err)
			}
			text = q.Query
		}
		m := labelValues.FindStringSubmatch(strings.TrimSpace(text))
		if m == nil {
			t.Errorf("variable %s: %q is not label_values(SELECTOR, LABEL)", v.Name, text)
			continue
		}
		where := "variable " + v.Name
		qs = append(qs, query{where, expand(where, m[1])})
	}
	var walk func(ps []panel)
	walk = func(ps []panel) {
		for _, p := range ps {
			walk(p.Panels)
			if p.Type == "row" {
				continue
			}
			if len(p.Targets) == 0 {
				t.Errorf("panel %q has no query", p.Title)
			}
			for _, tg := range p.Targets {
				where := fmt.Sprintf("panel %q", p.Title)
				qs = append(qs, query{where, expand(where, tg.Expr)})
			}
		}
	}
	walk(d.Panels)
	return qs
}

// ruleQueries checks the rule file as Prometheus loads it and returns
// its expressions.
func ruleQueries(t *testing.T) ([]query, *rulefmt.RuleGroups) {
	t.Helper()
	groups, errs := rulefmt.ParseFile(rulesFile, false, model.UTF8Validation, promQL, slog.New(slog.DiscardHandler))
	for _, err := range errs {
		t.Errorf("rulefmt: %v", err)
	}
	if groups == nil {
		t.FailNow()
	}
	var qs []query
	for _, g := range groups.Groups {
		for _, r := range g.Rules {
			qs = append(qs, query{fmt.Sprintf("group %s, rule %s%s", g.Name, r.Alert, r.Record), r.Expr})
		}
	}
	return qs, groups
}

// metricNames returns the metric names that qs select, and where each
// is used; a query that does not parse fails t.
func metricNames(t *testing.T, qs []query) map[string][]string {
	t.Helper()
	names := map[string][]string{}
	for _, q := range qs {
		expr, err := promQL.ParseExpr(q.expr)
		if err != nil {
			t.Errorf("%s: %q: %v", q.where, q.expr, err)
			continue
		}
		var found bool
		parser.Inspect(expr, func(n parser.Node, _ []parser.Node) error {
			vs, ok := n.(*parser.VectorSelector)
			if !ok {
				return nil
			}
			name := vs.Name
			for _, m := range vs.LabelMatchers {
				if m.Name == model.MetricNameLabel && name == "" {
					name = m.Value
				}
			}
			if name == "" {
				t.Errorf("%s: %q selects no metric by name", q.where, q.expr)
				return nil
			}
			found = true
			if !slices.Contains(names[name], q.where) {
				names[name] = append(names[name], q.where)
			}
			return nil
		})
		if !found && err == nil {
			t.Errorf("%s: %q reads no metric", q.where, q.expr)
		}
	}
	return names
}

// Every query of the dashboard parses and reads a metric; the dashboard
// has a panel for each part of the tree.
func TestDashboardQueriesParse(t *testing.T) {
	qs := dashboardQueries(t)
	names := metricNames(t, qs)
	// A walk that stopped finding panels must not pass quietly.
	if len(qs) < 30 {
		t.Errorf("the dashboard has %d queries; expected at least 30", len(qs))
	}
	for _, want := range []string{
		"canopy_link_connected", "canopy_link_lag_revisions", "canopy_link_lag_seconds", "canopy_link_bytes_total",
		"canopy_raft_state", "canopy_raft_leader", "canopy_raft_applied_index",
		"canopy_store_objects", "canopy_store_revision", "canopy_store_watchers",
		"apiserver_request_total", "apiserver_request_duration_seconds_bucket",
		"canopy_syncer_applies_total", "canopy_syncer_failed_objects", "canopy_syncer_cluster_reachable",
		"canopy_destinations",
	} {
		if names[want] == nil {
			t.Errorf("no panel shows %s", want)
		}
	}
	t.Logf("%d queries over %d metrics", len(qs), len(names))
}

// The rule file loads in Prometheus, and each alert says how long it
// waits, how severe it is and what it means.
func TestAlertRules(t *testing.T) {
	qs, groups := ruleQueries(t)
	metricNames(t, qs)
	alerts := map[string]bool{}
	for _, g := range groups.Groups {
		for _, r := range g.Rules {
			if r.Alert == "" {
				continue
			}
			alerts[r.Alert] = true
			if r.For <= 0 {
				t.Errorf("%s: no for: it would fire on one bad sample", r.Alert)
			}
			if s := r.Labels["severity"]; s != "warning" && s != "critical" {
				t.Errorf("%s: severity %q, want warning or critical", r.Alert, s)
			}
			for _, a := range []string{"summary", "description"} {
				if strings.TrimSpace(r.Annotations[a]) == "" {
					t.Errorf("%s: no %s annotation", r.Alert, a)
				}
			}
		}
	}
	for _, want := range []string{
		"CanopyLinkDown", "CanopyPropagationLag", "CanopyNoRaftLeader",
		"CanopyDestinationsDisconnected", "CanopyClusterUnreachable", "CanopyRootAPIErrors",
	} {
		if !alerts[want] {
			t.Errorf("no alert %s", want)
		}
	}
}

// Every metric that the dashboard and the rules read is exported by a
// tree of relay processes: a root, a region under it and an edge (with a
// virtual cluster) under the region, each scraped as Prometheus would
// (the root with the token docs/operations.md gives it).
func TestMetricsExported(t *testing.T) {
	dq := dashboardQueries(t)
	rq, _ := ruleQueries(t)
	used := metricNames(t, append(dq, rq...))
	if t.Failed() {
		return
	}
	base := t.TempDir()
	rootDir, rootAPI, rootLink := filepath.Join(base, "root"), procs.FreeAddr(t), procs.FreeAddr(t)
	procs.Start(t, "root", exec.Command(relaybin.For(t), "--role=root", "--name=root", "--data-dir="+rootDir, "--api-addr="+rootAPI, "--link-addr="+rootLink))
	root := rootScraper(t, filepath.Join(rootDir, "admin.kubeconfig"))
	token := joinToken(t, rootDir)
	regionLink, regionStatus, edgeStatus := procs.FreeAddr(t), procs.FreeAddr(t), procs.FreeAddr(t)
	procs.Start(t, "region", exec.Command(relaybin.For(t), "--role=region", "--name=region-a", "--data-dir="+filepath.Join(base, "region-a"),
		"--parent="+rootLink, "--link-addr="+regionLink, "--join-token="+token, "--status-addr="+regionStatus))
	procs.Start(t, "edge", exec.Command(relaybin.For(t), "--role=edge", "--name=edge-1", "--data-dir="+filepath.Join(base, "edge-1"),
		"--parent="+regionLink, "--join-token="+token, "--virtual-cluster", "--status-addr="+edgeStatus))
	scrapers := map[string]func() (*http.Response, error){
		"root":   root,
		"region": func() (*http.Response, error) { return http.Get("http://" + regionStatus + "/metrics") },
		"edge":   func() (*http.Response, error) { return http.Get("http://" + edgeStatus + "/metrics") },
	}

	var missing []string
	exported := map[string][]string{}
	scrapeErrs := map[string]error{} // the last of each relay
	// Until every series read is exported; what is still missing after a
	// minute is reported below, series by series.
	_ = poll.Wait(context.Background(), func() error {
		for relay, scrape := range scrapers {
			names, err := scrapeNames(scrape)
			scrapeErrs[relay] = err
			if err != nil {
				continue
			}
			for _, n := range names {
				if !slices.Contains(exported[n], relay) {
					exported[n] = append(exported[n], relay)
				}
			}
		}
		missing = missing[:0]
		for name := range used {
			if exported[name] == nil {
				missing = append(missing, name)
			}
		}
		if len(missing) > 0 {
			return fmt.Errorf("%d series missing", len(missing))
		}
		return nil
	}, poll.For(60*time.Second), poll.Every(200*time.Millisecond))
	slices.Sort(missing)
	if len(missing) > 0 {
		for relay, err := range scrapeErrs {
			if err != nil {
				t.Errorf("scraping the %s: %v", relay, err)
			}
		}
	}
	for _, name := range missing {
		t.Errorf("%s, read by %s, is exported by no relay", name, strings.Join(used[name], "; "))
	}
	for _, name := range slices.Sorted(maps.Keys(used)) {
		t.Logf("%-45s %s", name, strings.Join(exported[name], ", "))
	}
}

// scrapeNames returns the names of the series in a scrape: a histogram's
// _bucket, _sum and _count, a summary's _sum and _count.
func scrapeNames(scrape func() (*http.Response, error)) ([]string, error) {
	resp, err := scrape()
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("%s: %s", resp.Status, body)
	}
	tp := expfmt.NewTextParser(model.UTF8Validation)
	families, err := tp.TextToMetricFamilies(bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	var names []string
	for name, f := range families {
		switch f.GetType() {
		case dto.MetricType_HISTOGRAM:
			names = append(names, name+"_bucket", name+"_sum", name+"_count")
		case dto.MetricType_SUMMARY:
			names = append(names, name, name+"_sum", name+"_count")
		default:
			names = append(names, name)
		}
	}
	return names, nil
}

// rootScraper returns a scrape of the root's /metrics as
// deploy/prometheus/root-metrics-rbac.yaml sets it up: applied with
// kubectl as the admin, once the root serves, and a token of its
// ServiceAccount, which may get /metrics and nothing else.
func rootScraper(t *testing.T, kubeconfig string) func() (*http.Response, error) {
	t.Helper()
	kubectl := os.Getenv("KUBECTL")
	if kubectl == "" {
		var err error
		if kubectl, err = exec.LookPath("kubectl"); err != nil {
			t.Fatalf("this test applies %s with kubectl (set KUBECTL, or put it on PATH): %v", rbacFile, err)
		}
	}
	home := t.TempDir()
	run := func(args ...string) (string, error) {
		cmd := exec.Command(kubectl, append([]string{"--kubeconfig=" + kubeconfig}, args...)...)
		cmd.Env = append(os.Environ(), "HOME="+home)
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		out, err := cmd.Output()
		if err != nil {
			return "", fmt.Errorf("kubectl %s: %v: %s", strings.Join(args, " "), err, stderr.String())
		}
		return strings.TrimSpace(string(out)), nil
	}
	// The root writes its kubeconfig, then serves.
	poll.Until(t, "the metrics RBAC applied", func() error {
		_, err := run("apply", "-f", rbacFile)
		return err
	}, poll.For(60*time.Second))
	token, err := run("-n", "monitoring", "create", "token", "prometheus")
	if err != nil {
		t.Fatal(err)
	}
	server, err := run("config", "view", "--raw", "--minify", "-o", "jsonpath={.clusters[0].cluster.server}")
	if err != nil {
		t.Fatal(err)
	}
	caData, err := run("config", "view", "--raw", "--minify", "-o", "jsonpath={.clusters[0].cluster.certificate-authority-data}")
	if err != nil {
		t.Fatal(err)
	}
	ca, err := base64.StdEncoding.DecodeString(caData)
	pool := x509.NewCertPool()
	if err != nil || !pool.AppendCertsFromPEM(ca) {
		t.Fatalf("%s: no CA certificate (%v)", kubeconfig, err)
	}
	client := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}}
	t.Cleanup(client.CloseIdleConnections)
	get := func(path string) func() (*http.Response, error) {
		return func() (*http.Response, error) {
			req, err := http.NewRequest(http.MethodGet, server+path, nil)
			if err != nil {
				return nil, err
			}
			req.Header.Set("Authorization", "Bearer "+token)
			return client.Do(req)
		}
	}
	// The token reads nothing else.
	resp, err := get("/api/v1/namespaces")()
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusForbidden {
		t.Errorf("the metrics token lists namespaces: %s, want 403 Forbidden", resp.Status)
	}
	return get("/metrics")
}

// joinToken creates a join token at the root in dataDir.
func joinToken(t *testing.T, dataDir string) string {
	t.Helper()
	out, err := exec.Command(relaybin.For(t), "token", "create", "--data-dir="+dataDir).Output()
	if err != nil {
		t.Fatalf("relay token create: %v", err)
	}
	return strings.TrimSpace(string(out))
}
