package resources

import (
	"encoding/json"
	"fmt"
	"math"
	"strconv"
	"time"

	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
)

// object is read-only access to an object's JSON map (as decoded by
// unstructured or encoding/json). Every accessor tolerates missing fields and
// unexpected types by returning the zero value, so a malformed stored object
// prints as kube would print the zero value of the field.
type object map[string]any

// get returns the value at path and whether it is present (and not null).
func (o object) get(path ...string) (any, bool) {
	var cur any = map[string]any(o)
	for _, p := range path {
		m, ok := asMap(cur)
		if !ok {
			return nil, false
		}
		if cur, ok = m[p]; !ok {
			return nil, false
		}
	}
	return cur, cur != nil
}

// has reports whether path is present and not null.
func (o object) has(path ...string) bool {
	_, ok := o.get(path...)
	return ok
}

// obj returns the map at path, nil when absent.
func (o object) obj(path ...string) object {
	v, _ := o.get(path...)
	m, _ := asMap(v)
	return object(m)
}

// str returns the string at path, "" when absent or not a string.
func (o object) str(path ...string) string {
	v, _ := o.get(path...)
	s, _ := v.(string)
	return s
}

// int returns the integer at path, 0 when absent.
func (o object) int(path ...string) int64 {
	v, _ := o.get(path...)
	n, _ := asInt(v)
	return n
}

// bool returns the boolean at path, false when absent.
func (o object) bool(path ...string) bool {
	v, _ := o.get(path...)
	b, _ := v.(bool)
	return b
}

// list returns the array at path as objects (non-object items as nil).
func (o object) list(path ...string) []object {
	v, _ := o.get(path...)
	items, _ := v.([]any)
	out := make([]object, len(items))
	for i, item := range items {
		m, _ := asMap(item)
		out[i] = object(m)
	}
	return out
}

// strings returns the array of strings at path.
func (o object) strings(path ...string) []string {
	v, _ := o.get(path...)
	items, _ := v.([]any)
	out := make([]string, 0, len(items))
	for _, item := range items {
		if s, ok := item.(string); ok {
			out = append(out, s)
		}
	}
	return out
}

// stringMap returns the map of strings at path (labels, annotations, data).
func (o object) stringMap(path ...string) map[string]string {
	m := o.obj(path...)
	out := make(map[string]string, len(m))
	for k, v := range m {
		if s, ok := v.(string); ok {
			out[k] = s
		}
	}
	return out
}

// len returns the number of entries of the map or array at path.
func (o object) len(path ...string) int {
	v, _ := o.get(path...)
	switch v := v.(type) {
	case map[string]any:
		return len(v)
	case []any:
		return len(v)
	}
	return 0
}

// time returns the timestamp at path, the zero time when absent or invalid.
// It reads metav1.Time (RFC 3339) and metav1.MicroTime (with fractions).
func (o object) time(path ...string) time.Time {
	t, err := time.Parse(time.RFC3339Nano, o.str(path...))
	if err != nil {
		return time.Time{}
	}
	return t
}

// quantity returns the canonical form of the resource.Quantity at path
// ("10Gi", "500m"), "0" when absent, as a zero Quantity prints.
func (o object) quantity(path ...string) string {
	v, _ := o.get(path...)
	q, ok := asQuantity(v)
	if !ok {
		return "0"
	}
	return q.String()
}

// quantityPtr is quantity for a *resource.Quantity field: "<nil>" when
// absent, as a nil *Quantity prints.
func (o object) quantityPtr(path ...string) string {
	v, _ := o.get(path...)
	q, ok := asQuantity(v)
	if !ok {
		return "<nil>"
	}
	return q.String()
}

// intOrString returns the intstr.IntOrString at path as kube prints it.
func (o object) intOrString(path ...string) string {
	v, _ := o.get(path...)
	if s, ok := v.(string); ok {
		return s
	}
	n, _ := asInt(v)
	return strconv.FormatInt(n, 10)
}

// labelSelector decodes the metav1.LabelSelector at path; nil when absent.
func (o object) labelSelector(path ...string) (*metav1.LabelSelector, error) {
	v, ok := o.get(path...)
	if !ok {
		return nil, nil
	}
	m, ok := asMap(v)
	if !ok {
		return nil, fmt.Errorf("label selector is a %T", v)
	}
	var sel metav1.LabelSelector
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(m, &sel); err != nil {
		return nil, err
	}
	return &sel, nil
}

// formatLabelSelector prints the metav1.LabelSelector at path as
// metav1.FormatLabelSelector does: "<none>" when empty, "<error>" when
// invalid.
func (o object) formatLabelSelector(path ...string) string {
	sel, err := o.labelSelector(path...)
	if err != nil {
		return "<error>"
	}
	return metav1.FormatLabelSelector(sel)
}

// formatLabels prints the map of labels at path as labels.FormatLabels
// does: sorted key=value pairs, "<none>" when empty.
func (o object) formatLabels(path ...string) string {
	return labels.FormatLabels(o.stringMap(path...))
}

// asMap accepts both map[string]any and object.
func asMap(v any) (map[string]any, bool) {
	switch m := v.(type) {
	case map[string]any:
		return m, true
	case object:
		return m, true
	}
	return nil, false
}

// asInt converts a JSON number, whichever way it was decoded, to int64.
func asInt(v any) (int64, bool) {
	switch n := v.(type) {
	case int64:
		return n, true
	case int:
		return int64(n), true
	case int32:
		return int64(n), true
	case float64:
		if n != math.Trunc(n) || math.IsInf(n, 0) {
			return 0, false
		}
		return int64(n), true
	case json.Number:
		i, err := n.Int64()
		return i, err == nil
	}
	return 0, false
}

// asQuantity parses a quantity serialized as a string or a number.
func asQuantity(v any) (resource.Quantity, bool) {
	var s string
	switch n := v.(type) {
	case string:
		s = n
	case float64:
		s = strconv.FormatFloat(n, 'f', -1, 64)
	case json.Number:
		s = n.String()
	default:
		i, ok := asInt(v)
		if !ok {
			return resource.Quantity{}, false
		}
		s = strconv.FormatInt(i, 10)
	}
	q, err := resource.ParseQuantity(s)
	if err != nil {
		return resource.Quantity{}, false
	}
	return q, true
}

// since is kube's translateTimestampSince: the age of t at now, or
// "<unknown>" for a zero time.
func since(t, now time.Time) string {
	if t.IsZero() {
		return "<unknown>"
	}
	return HumanDuration(now.Sub(t))
}

// age is the AGE cell: the time since metadata.creationTimestamp.
func (o object) age(now time.Time) string {
	return since(o.time("metadata", "creationTimestamp"), now)
}

// name is metadata.name.
func (o object) name() string { return o.str("metadata", "name") }

// deleting reports whether metadata.deletionTimestamp is set.
func (o object) deleting() bool { return o.has("metadata", "deletionTimestamp") }

// condition returns the first condition of the given type in
// status.conditions, nil when there is none.
func (o object) condition(kind string) object {
	for _, c := range o.list("status", "conditions") {
		if c.str("type") == kind {
			return c
		}
	}
	return nil
}
