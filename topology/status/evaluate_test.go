package status

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"

	utiljson "k8s.io/apimachinery/pkg/util/json"
	"sigs.k8s.io/yaml"

	"github.com/canopy-dev/canopy/topology/api/v1alpha1"
)

// object decodes YAML as the syncer's objects are decoded: numbers as
// int64 or float64.
func object(t testing.TB, y string) map[string]any {
	t.Helper()
	j, err := yaml.YAMLToJSON([]byte(y))
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := utiljson.Unmarshal(j, &m); err != nil {
		t.Fatal(err)
	}
	return m
}

// deployment is a Deployment with ready of want replicas ready, its
// ReplicaSet and its Pods (restarts restarts each) as associated objects.
func deployment(t testing.TB, ready, want, restarts int) (map[string]any, []map[string]any) {
	t.Helper()
	status := fmt.Sprintf("{replicas: %d, readyReplicas: %d, availableReplicas: %d, conditions: [{type: Available, status: %q}]}",
		want, ready, ready, map[bool]string{true: "True", false: "False"}[ready == want])
	if ready == 0 {
		// A Deployment with no ready replica has no readyReplicas field.
		status = fmt.Sprintf("{replicas: %d, conditions: [{type: Available, status: \"False\"}]}", want)
	}
	obj := object(t, `
apiVersion: apps/v1
kind: Deployment
metadata: {name: web, namespace: shop, creationTimestamp: "2024-05-01T10:00:00Z"}
spec:
  replicas: `+fmt.Sprint(want)+`
  template:
    spec:
      containers: [{name: web, image: "nginx:1.27", resources: {requests: {cpu: 250m}}}]
status: `+status)
	assoc := []map[string]any{object(t, fmt.Sprintf(`
apiVersion: apps/v1
kind: ReplicaSet
metadata: {name: web-5d8f, namespace: shop}
status: {replicas: %d, readyReplicas: %d}`, want, ready))}
	for i := range want {
		phase := "Running"
		if i >= ready {
			phase = "Pending"
		}
		assoc = append(assoc, object(t, fmt.Sprintf(`
apiVersion: v1
kind: Pod
metadata: {name: web-5d8f-%d, namespace: shop}
status: {phase: %s, containerStatuses: [{name: web, restartCount: %d}]}`, i, phase, restarts)))
	}
	return obj, assoc
}

const readyByZone = `
filter: "obj.kind == 'Deployment'"
groupBy: [{name: zone, def: "destination.labels['zone']"}]
combinedFields:
- {name: destinations, type: COUNT}
- {name: ready, type: SUM, subject: "obj.status.?readyReplicas.orValue(0)"}
- {name: available, type: SUM, subject: "obj.status.conditions.exists(c, c.type == 'Available' && c.status == 'True') ? 1 : 0"}
- {name: runningPods, type: SUM, subject: "associated.filter(a, a.kind == 'Pod' && a.status.phase == 'Running').size()"}
- {name: avgReady, type: AVG, subject: "obj.status.?readyReplicas.orValue(0)"}
- {name: minReady, type: MIN, subject: "obj.status.?readyReplicas.orValue(0)"}
- {name: maxRestarts, type: MAX, subject: "associated.filter(a, a.kind == 'Pod').map(p, p.status.containerStatuses[0].restartCount).max()"}
`

func row(vals ...any) v1alpha1.StatusRow {
	var r v1alpha1.StatusRow
	for _, v := range vals {
		switch v := v.(type) {
		case nil:
			r.Columns = append(r.Columns, v1alpha1.NullValue())
		case int:
			r.Columns = append(r.Columns, v1alpha1.IntValue(int64(v)))
		case float64:
			r.Columns = append(r.Columns, v1alpha1.FloatValue(v))
		case string:
			r.Columns = append(r.Columns, v1alpha1.StringValue(v))
		case bool:
			r.Columns = append(r.Columns, v1alpha1.BoolValue(v))
		default:
			panic(fmt.Sprintf("%T", v))
		}
	}
	return r
}

func rowsJSON(t testing.TB, rows []v1alpha1.StatusRow) string {
	t.Helper()
	b, err := json.Marshal(rows)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// TestEvaluateDeployments counts ready replicas of a Deployment placed on
// five destinations in two zones, each evaluated alone and then merged.
func TestEvaluateDeployments(t *testing.T) {
	c := mustCompile(t, "ready-by-zone", readyByZone)
	dests := []struct {
		name, zone      string
		ready, restarts int
	}{
		{"edge-1", "eu", 3, 0}, {"edge-2", "eu", 1, 2}, {"edge-3", "us", 3, 5}, {"edge-4", "us", 0, 0}, {"edge-5", "eu", 3, 1},
	}
	var total Partial
	for _, d := range dests {
		obj, assoc := deployment(t, d.ready, 3, d.restarts)
		p, err := c.Evaluate(obj, assoc, Destination{Name: d.name, Labels: map[string]string{"zone": d.zone}})
		if err != nil {
			t.Fatalf("%s: %v", d.name, err)
		}
		total = Merge(total, p)
	}
	res := total.Result("ready-by-zone")
	if want := []string{"zone", "destinations", "ready", "available", "runningPods", "avgReady", "minReady", "maxRestarts"}; strings.Join(res.ColumnNames, ",") != strings.Join(want, ",") {
		t.Fatalf("columns %v, want %v", res.ColumnNames, want)
	}
	want := []v1alpha1.StatusRow{
		row("eu", 3, 7, 2, 7, 7.0/3, 1, 2),
		row("us", 2, 3, 1, 3, 1.5, 0, 5),
	}
	if got := rowsJSON(t, res.Rows); got != rowsJSON(t, want) {
		t.Errorf("rows %s\nwant %s", got, rowsJSON(t, want))
	}
	if total.Destinations != 5 || total.FailingCount != 0 || res.Overflow != nil {
		t.Errorf("destinations %d failing %d overflow %v", total.Destinations, total.FailingCount, res.Overflow)
	}
}

func TestEvaluateSelect(t *testing.T) {
	c := mustCompile(t, "pods", `
select:
- {name: destination, def: "destination.name"}
- {name: image, def: "obj.spec.template.spec.containers[0].image"}
- {name: cpu, def: "quantity(obj.spec.template.spec.containers[0].resources.requests.cpu).asApproximateFloat()"}
- {name: available, def: "obj.status.conditions.exists(c, c.type == 'Available' && c.status == 'True')"}
- {name: restarts, def: "associated.filter(a, a.kind == 'Pod').map(p, p.status.containerStatuses[0].restartCount).sum()"}
- {name: note, def: "obj.metadata.?annotations.?note.orValue(null)"}
limit: 2`)
	var total Partial
	for _, name := range []string{"edge-c", "edge-a", "edge-d", "edge-b"} {
		obj, assoc := deployment(t, 2, 2, 1)
		p, err := c.Evaluate(obj, assoc, Destination{Name: name})
		if err != nil {
			t.Fatal(err)
		}
		total = Merge(p, total)
	}
	res := total.Result("pods")
	want := []v1alpha1.StatusRow{row("edge-a", "nginx:1.27", 0.25, true, 2, nil), row("edge-b", "nginx:1.27", 0.25, true, 2, nil)}
	if got := rowsJSON(t, res.Rows); got != rowsJSON(t, want) {
		t.Errorf("rows %s\nwant %s", got, rowsJSON(t, want))
	}
	if res.OmittedRows != 2 || total.Selected != 4 || total.Destinations != 4 {
		t.Errorf("omitted %d selected %d destinations %d", res.OmittedRows, total.Selected, total.Destinations)
	}
}

func TestEvaluateFilter(t *testing.T) {
	c := mustCompile(t, "c", `{filter: "obj.metadata.namespace == 'other'", combinedFields: [{name: "n", type: COUNT}, {name: s, type: SUM, subject: "obj.spec.replicas"}]}`)
	obj, assoc := deployment(t, 1, 1, 0)
	p, err := c.Evaluate(obj, assoc, Destination{Name: "edge-1"})
	if err != nil {
		t.Fatal(err)
	}
	if p.Destinations != 1 || len(p.Groups) != 0 {
		t.Fatalf("%+v", p)
	}
	// Without groupBy the table still has its one row.
	if got, want := rowsJSON(t, p.Result("c").Rows), rowsJSON(t, []v1alpha1.StatusRow{row(0, 0)}); got != want {
		t.Errorf("rows %s, want %s", got, want)
	}
}

// TestEvaluateFailures: each way an expression fails makes the
// destination failing, with the path in the reason.
func TestEvaluateFailures(t *testing.T) {
	obj, assoc := deployment(t, 0, 2, 0) // no status.readyReplicas
	cases := []struct{ name, spec, want string }{
		{"missing key", `{combinedFields: [{name: r, type: SUM, subject: "obj.status.readyReplicas"}]}`,
			"status collector c: spec.combinedFields[0].subject: no such key: readyReplicas"},
		{"filter not bool", `{filter: "obj.spec.replicas", combinedFields: [{name: "n", type: COUNT}]}`,
			"spec.filter: got int, want a bool"},
		{"groupBy map", `{groupBy: [{name: g, def: "obj.metadata"}]}`,
			"spec.groupBy[0].def: got map, want a string, number, bool or null"},
		{"sum of string", `{combinedFields: [{name: s, type: SUM, subject: "obj.kind"}]}`,
			"spec.combinedFields[0].subject: got string, want a number"},
		{"max of bool", `{combinedFields: [{name: s, type: MAX, subject: "dyn(obj.spec.replicas > 1)"}]}`,
			"spec.combinedFields[0].subject: got bool, want a number or a string"},
		{"NaN", `{combinedFields: [{name: s, type: AVG, subject: "dyn(0.0) / 0.0"}]}`,
			"spec.combinedFields[0].subject: got NaN, want a finite number"},
		{"select list", `{select: [{name: a, def: "obj.spec.template.spec.containers"}]}`,
			"spec.select[0].def: got list, want a string, number, bool or null"},
		{"too costly", `{select: [{name: a, def: "[1,2,3,4,5,6,7,8,9,10].map(a, [1,2,3,4,5,6,7,8,9,10].map(b, [1,2,3,4,5,6,7,8,9,10].map(c, [1,2,3,4,5,6,7,8,9,10].map(d, [1,2,3,4,5,6,7,8,9,10].map(e, [1,2,3,4,5,6,7,8,9,10].map(f, a)))))).size()"}]}`,
			"spec.select[0].def: operation cancelled: actual cost limit exceeded"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := mustCompile(t, "c", tc.spec)
			p, err := c.Evaluate(obj, assoc, Destination{Name: "edge-7"})
			var ee *EvalError
			if !errors.As(err, &ee) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %v, want an *EvalError containing %q", err, tc.want)
			}
			if p.Destinations != 1 || p.FailingCount != 1 || len(p.Failing) != 1 || p.Failing[0].Name != "edge-7" || p.Failing[0].Reason != err.Error() {
				t.Errorf("partial %+v", p)
			}
			if len(p.Groups) != 0 || len(p.Rows) != 0 {
				t.Errorf("a failing destination contributed: %+v", p)
			}
		})
	}
}

func TestEvaluateEdgeCases(t *testing.T) {
	c := mustCompile(t, "c", `{combinedFields: [{name: "n", type: COUNT}]}`)
	if p, err := c.Evaluate(map[string]any{}, nil, Destination{}); !errors.Is(err, ErrNoDestination) || p.Destinations != 0 {
		t.Errorf("no name: %v %+v", err, p)
	}
	if p, err := c.Evaluate(nil, nil, Destination{Name: "e"}); !errors.Is(err, ErrNoObject) || p.FailingCount != 1 {
		t.Errorf("no object: %v %+v", err, p)
	}
	long := strings.Repeat("é", 200) // 400 bytes
	s := mustCompile(t, "s", `{select: [{name: a, def: "obj.a"}, {name: b, def: "obj.b"}, {name: u, def: "obj.u"}, {name: d, def: "2.0"}]}`)
	p, err := s.Evaluate(map[string]any{"a": long, "b": uint64(1 << 63), "u": uint64(7)}, nil, Destination{Name: "e"})
	if err != nil {
		t.Fatal(err)
	}
	cols := p.Rows[0].Columns
	if got := cols[0].Interface().(string); got != strings.Repeat("é", v1alpha1.MaxStatusValueLength/2) {
		t.Errorf("cut to %d bytes", len(got))
	}
	if cols[1].Interface() != float64(1<<63) || cols[2].Interface() != int64(7) || cols[3].Interface() != int64(2) {
		t.Errorf("numbers %v %v %v", cols[1], cols[2], cols[3])
	}
	if got := cutReason(strings.Repeat("x", 2000)); len(got) != v1alpha1.MaxFailingReasonLength || !strings.HasSuffix(got, "...") {
		t.Errorf("reason of %d bytes", len(got))
	}
}

// TestMinMaxStrings: MIN and MAX take strings (creation times in RFC 3339
// compare as time), and mixed numbers and strings order numbers first.
func TestMinMaxStrings(t *testing.T) {
	c := mustCompile(t, "c", `{combinedFields: [
	  {name: oldest, type: MIN, subject: "obj.metadata.creationTimestamp"},
	  {name: newest, type: MAX, subject: "obj.metadata.creationTimestamp"},
	  {name: lo, type: MIN, subject: "obj.v"}, {name: hi, type: MAX, subject: "obj.v"}]}`)
	var total Partial
	for i, v := range []any{int64(5), "b", 2.5, "a", nil} {
		obj := map[string]any{"metadata": map[string]any{"creationTimestamp": fmt.Sprintf("2024-0%d-01T00:00:00Z", 5-i)}, "v": v}
		p, err := c.Evaluate(obj, nil, Destination{Name: fmt.Sprint("e", i)})
		if err != nil {
			t.Fatal(err)
		}
		total = Merge(total, p)
	}
	want := []v1alpha1.StatusRow{row("2024-01-01T00:00:00Z", "2024-05-01T00:00:00Z", 2.5, "b")}
	if got := rowsJSON(t, total.Result("c").Rows); got != rowsJSON(t, want) {
		t.Errorf("rows %s, want %s", got, rowsJSON(t, want))
	}
}

// TestEvaluateAll: a destination fails as a whole.
func TestEvaluateAll(t *testing.T) {
	good := mustCompile(t, "a-good", `{combinedFields: [{name: "n", type: COUNT}]}`)
	bad := mustCompile(t, "b-bad", `{select: [{name: x, def: "obj.nope"}]}`)
	obj, assoc := deployment(t, 1, 1, 0)
	parts, err := EvaluateAll([]*Collector{good, good}, obj, assoc, Destination{Name: "e"})
	if err != nil || len(parts) != 2 || len(parts[0].Groups) != 1 || parts[1].FailingCount != 0 {
		t.Fatalf("%v %+v", err, parts)
	}
	parts, err = EvaluateAll([]*Collector{good, bad}, obj, assoc, Destination{Name: "e"})
	if err == nil {
		t.Fatal("no error")
	}
	for i, p := range parts {
		if p.FailingCount != 1 || len(p.Groups) != 0 || p.Failing[0].Reason != err.Error() || !strings.Contains(err.Error(), "b-bad") {
			t.Errorf("partial %d: %+v", i, p)
		}
	}
	cs := &v1alpha1.CombinedStatus{}
	Fill(cs, map[string]Partial{"b-bad": parts[1], "a-good": parts[0]})
	if cs.Destinations != 1 || cs.FailingCount != 1 || len(cs.Failing) != 1 || len(cs.Results) != 2 || cs.Results[0].Name != "a-good" {
		t.Errorf("%+v", cs)
	}
	// The failing destination is not counted by COUNT.
	if got, want := rowsJSON(t, cs.Results[0].Rows), rowsJSON(t, []v1alpha1.StatusRow{row(0)}); got != want {
		t.Errorf("rows %s, want %s", got, want)
	}
}
