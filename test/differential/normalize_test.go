package differential

import (
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/yaml"
)

// replacement turns one literal string of a target into a placeholder.
type replacement struct{ old, new string }

// sortReplacements drops empty ones and puts the longest first, so that a
// URL is replaced before its host.
func sortReplacements(rs []replacement) []replacement {
	var out []replacement
	for _, r := range rs {
		if r.old != "" {
			out = append(out, r)
		}
	}
	sort.SliceStable(out, func(i, j int) bool { return len(out[i].old) > len(out[j].old) })
	return out
}

// masks replace, in every output, what differs between any two servers by
// nature. Order matters: uids and times before resourceVersions.
var masks = []struct {
	re   *regexp.Regexp
	repl string
}{
	// uids (both servers use random UUIDs).
	{regexp.MustCompile(`\b[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}\b`), "<uid>"},
	// RFC 3339 times (creationTimestamp, managedFields, conditions).
	{regexp.MustCompile(`\b\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?(Z|[+-]\d{2}:\d{2})`), "<time>"},
	// diff(1) header times.
	{regexp.MustCompile(`\b\d{4}-\d{2}-\d{2} \d{2}:\d{2}:\d{2}(\.\d+)? [+-]\d{4}`), "<time>"},
	// resourceVersions in YAML, JSON, query strings and messages.
	{regexp.MustCompile(`((?i:resourceVersion)\\?"?\s*[:=]\s*\\?"?)\d+`), "${1}<rv>"},
	{regexp.MustCompile(`(ResourceVersion in (?:precondition|object meta): )\d+`), "${1}<rv>"},
	{regexp.MustCompile(`(ResourceVersion in (?:the precondition|record) \()\d+`), "${1}<rv>"},
	// generateName suffixes: every generateName of the scenario ends in "gen-".
	{regexp.MustCompile(`\b([a-z0-9.-]*gen-)[bcdfghjklmnpqrstvwxz2456789]{5}\b`), "${1}<suffix>"},
	// addresses.
	{regexp.MustCompile(`127\.0\.0\.1:\d+`), "<addr>"},
	// kubectl diff's temporary directories.
	{regexp.MustCompile(`\b(LIVE|MERGED)-\d+`), "${1}-<n>"},
}

// ageToken is a kubectl AGE column value.
var ageToken = regexp.MustCompile(`^((\d+[smhd])+|<invalid>|<unknown>)$`)

// normalize turns one output of a target into the form that is compared.
func (tg *target) normalize(s string, ages bool) string {
	for _, r := range tg.replacements {
		s = strings.ReplaceAll(s, r.old, r.new)
	}
	for _, m := range masks {
		s = m.re.ReplaceAllString(s, m.repl)
	}
	if ages {
		s = maskAges(s)
	}
	return s
}

// maskAges replaces the values of the AGE column of kubectl tables (the
// column headed AGE, wherever it is) and collapses the padding between
// columns, whose width follows the longest age.
func maskAges(s string) string {
	lines := strings.Split(s, "\n")
	col := -1
	for i, line := range lines {
		fields := strings.Fields(line)
		if len(fields) == 0 {
			continue
		}
		if idx := indexOf(fields, "AGE"); idx >= 0 {
			col = idx
		} else if col >= 0 && col < len(fields) && ageToken.MatchString(fields[col]) {
			fields[col] = "<age>"
		}
		lines[i] = strings.Join(fields, " ")
	}
	return strings.Join(lines, "\n")
}

func indexOf(fields []string, s string) int {
	for i, f := range fields {
		if strings.EqualFold(f, s) {
			return i
		}
	}
	return -1
}

// show renders what a client-go call returned: the object as YAML, or the
// error (the Status of an API error).
func show(obj any, err error) string {
	if err != nil {
		return showErr(err)
	}
	return toYAML(obj)
}

// showErr renders an error; an API error as its Status.
func showErr(err error) string {
	var se apierrors.APIStatus
	if !errors.As(err, &se) {
		return "error: " + err.Error() + "\n"
	}
	st := se.Status()
	sortCauses(&st)
	out := map[string]any{
		"status":  st.Status,
		"code":    st.Code,
		"reason":  string(st.Reason),
		"message": st.Message,
	}
	if st.Details != nil {
		out["details"] = st.Details
	}
	return "error:\n" + indent(toYAML(out))
}

// sortCauses puts the causes of an Invalid Status, and the list of errors
// its message repeats, in field order. Both servers validate custom
// resources with kube-openapi's schema validator, which walks properties in
// map order, so the order of the causes changes from one request to the
// next on either server.
func sortCauses(st *metav1.Status) {
	if st.Details == nil || len(st.Details.Causes) < 2 {
		return
	}
	causes := st.Details.Causes
	join := func(cs []metav1.StatusCause) string {
		parts := make([]string, len(cs))
		for i, c := range cs {
			parts[i] = c.Field + ": " + c.Message
		}
		return "[" + strings.Join(parts, ", ") + "]"
	}
	prefix, ok := strings.CutSuffix(st.Message, join(causes))
	sorted := slices.Clone(causes)
	slices.SortStableFunc(sorted, func(a, b metav1.StatusCause) int {
		return cmp.Or(cmp.Compare(a.Field, b.Field), cmp.Compare(a.Message, b.Message), cmp.Compare(a.Type, b.Type))
	})
	st.Details.Causes = sorted
	if ok {
		st.Message = prefix + join(sorted)
	}
}

// toYAML renders a value as YAML with sorted keys; a runtime.Object goes
// through its unstructured form so that typed and dynamic results compare
// alike.
func toYAML(v any) string {
	if o, ok := v.(runtime.Object); ok {
		if u, ok := o.(runtime.Unstructured); ok {
			v = u.UnstructuredContent()
		} else if m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(o); err == nil {
			v = m
		}
	}
	if m, ok := v.(map[string]any); ok {
		sortManagedFields(m)
		if items, ok := m["items"].([]any); ok {
			for _, it := range items {
				if im, ok := it.(map[string]any); ok {
					sortManagedFields(im)
				}
			}
		}
	}
	b, err := yaml.Marshal(v)
	if err != nil {
		return fmt.Sprintf("unrenderable %T: %v\n", v, err)
	}
	return string(b)
}

// sortManagedFields puts an object's managedFields entries in the order
// kube-apiserver gives them when their times are equal: kube sorts by
// operation, time in seconds (no time first), manager, apiVersion and
// subresource. Times are masked, and whether two writes fall in the same
// second or not is chance on either server, so the order compared must
// not follow them.
func sortManagedFields(obj map[string]any) {
	md, _ := obj["metadata"].(map[string]any)
	entries, _ := md["managedFields"].([]any)
	key := func(e any) []string {
		m, _ := e.(map[string]any)
		str := func(k string) string { s, _ := m[k].(string); return s }
		timed := "0"
		if _, ok := m["time"]; ok {
			timed = "1"
		}
		return []string{str("operation"), timed, str("manager"), str("apiVersion"), str("subresource")}
	}
	slices.SortStableFunc(entries, func(a, b any) int { return slices.Compare(key(a), key(b)) })
}

// sortManagedFieldsEntries is sortManagedFields for typed entries.
func sortManagedFieldsEntries(entries []metav1.ManagedFieldsEntry) []metav1.ManagedFieldsEntry {
	out := slices.Clone(entries)
	key := func(e metav1.ManagedFieldsEntry) []string {
		timed := "0"
		if e.Time != nil {
			timed = "1"
		}
		return []string{string(e.Operation), timed, e.Manager, e.APIVersion, e.Subresource}
	}
	slices.SortStableFunc(out, func(a, b metav1.ManagedFieldsEntry) int { return slices.Compare(key(a), key(b)) })
	return out
}

// jsonToYAML renders a JSON body as YAML; a body that is not JSON is
// returned as text.
func jsonToYAML(body []byte) string {
	var v any
	if err := json.Unmarshal(body, &v); err != nil {
		return "body (not JSON): " + string(body) + "\n"
	}
	return toYAML(v)
}

func indent(s string) string {
	lines := strings.SplitAfter(s, "\n")
	for i, l := range lines {
		if l != "" {
			lines[i] = "  " + l
		}
	}
	return strings.Join(lines, "")
}

// TestNormalize checks the masks on the shapes the scenario produces.
func TestNormalize(t *testing.T) {
	tg := &target{replacements: []replacement{
		{"https://127.0.0.1:4000/spaces/default", "<server>"},
		{"https://127.0.0.1:4000", "<server>"},
		{"/spaces/default/", "/"},
		{"/tmp/x/home", "<home>"},
		{"", "never"},
	}}
	tg.replacements = sortReplacements(tg.replacements)
	tests := []struct {
		in, want string
		ages     bool
	}{
		{`uid: 3f2b1c1e-1111-4222-8333-444455556666`, `uid: <uid>`, false},
		{`creationTimestamp: "2026-01-02T03:04:05Z"`, `creationTimestamp: "<time>"`, false},
		{`time: "2026-01-02T03:04:05.123456+01:00"`, `time: "<time>"`, false},
		{`resourceVersion: "1234"`, `resourceVersion: "<rv>"`, false},
		{`{"resourceVersion":"77","x":1}`, `{"resourceVersion":"<rv>","x":1}`, false},
		{`{\"resourceVersion\":\"77\"}`, `{\"resourceVersion\":\"<rv>\"}`, false},
		{`?resourceVersion=12&watch=true`, `?resourceVersion=<rv>&watch=true`, false},
		{`Precondition failed: ResourceVersion in precondition: 5, ResourceVersion in object meta: 7`, `Precondition failed: ResourceVersion in precondition: <rv>, ResourceVersion in object meta: <rv>`, false},
		{`the ResourceVersion in the precondition (1) does not match the ResourceVersion in record (217)`, `the ResourceVersion in the precondition (<rv>) does not match the ResourceVersion in record (<rv>)`, false},
		{`name: gen-x7k2q`, `name: gen-<suffix>`, false},
		{`name: gentle`, `name: gentle`, false},
		{`Get "https://127.0.0.1:4000/spaces/default/api/v1/namespaces/x": EOF`, `Get "<server>/api/v1/namespaces/x": EOF`, false},
		{`dial 127.0.0.1:5555`, `dial <addr>`, false},
		{`diff -u -N <tmp>/LIVE-123/v1.ConfigMap /tmp/x/home/MERGED-99/a`, `diff -u -N <tmp>/LIVE-<n>/v1.ConfigMap <home>/MERGED-<n>/a`, false},
		{"--- a\t2026-01-02 03:04:05.123456789 +0000", "--- a\t<time>", false},
		{"NAME   STATUS   AGE\ndiff   Active   3s\nold    Active   2m10s\n", "NAME STATUS AGE\ndiff Active <age>\nold Active <age>\n", true},
		{"NAME   SIZE   AGE   COLOR\nw1     3      12s   red\n", "NAME SIZE AGE COLOR\nw1 3 <age> red\n", true},
	}
	for _, tc := range tests {
		if got := tg.normalize(tc.in, tc.ages); got != tc.want {
			t.Errorf("normalize(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

// TestSortCauses checks that causes and the message that lists them are put
// in field order together.
func TestSortCauses(t *testing.T) {
	st := metav1.Status{
		Message: `W "x" is invalid: [spec.size: Invalid value: "a, b", spec.color: Unsupported value: "p"]`,
		Details: &metav1.StatusDetails{Causes: []metav1.StatusCause{
			{Field: "spec.size", Message: `Invalid value: "a, b"`},
			{Field: "spec.color", Message: `Unsupported value: "p"`},
		}},
	}
	sortCauses(&st)
	if want := `W "x" is invalid: [spec.color: Unsupported value: "p", spec.size: Invalid value: "a, b"]`; st.Message != want {
		t.Errorf("message %q, want %q", st.Message, want)
	}
	if st.Details.Causes[0].Field != "spec.color" {
		t.Errorf("causes not sorted: %+v", st.Details.Causes)
	}
}

// TestSortManagedFields checks that the order of managedFields entries
// does not depend on their times, but for entries without one, first as
// in kube.
func TestSortManagedFields(t *testing.T) {
	got := toYAML(map[string]any{"metadata": map[string]any{"managedFields": []any{
		map[string]any{"manager": "bob", "operation": "Apply", "time": "2026-01-01T00:00:01Z"},
		map[string]any{"manager": "alice", "operation": "Apply", "time": "2026-01-01T00:00:02Z"},
		map[string]any{"manager": "zed", "operation": "Update", "time": "2026-01-01T00:00:00Z"},
		map[string]any{"manager": "hpa", "operation": "Update", "subresource": "scale"},
	}}})
	var order []string
	for _, l := range strings.Split(got, "\n") {
		if _, m, ok := strings.Cut(l, "manager: "); ok {
			order = append(order, m)
		}
	}
	if want := []string{"alice", "bob", "hpa", "zed"}; !slices.Equal(order, want) {
		t.Errorf("order %v, want %v", order, want)
	}
}
