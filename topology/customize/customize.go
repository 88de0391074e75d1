package customize

import (
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	utiljson "k8s.io/apimachinery/pkg/util/json"

	"github.com/canopy-dev/canopy/topology/api/v1alpha1"
)

// Expand returns obj as destination p gets it: a deep copy in which,
// when obj is annotated v1alpha1.ExpandParametersAnnotation: "true", every
// string value (not map keys) has its %(NAME) references replaced by p's
// parameters and %% by %; then, when cust is not nil, each of cust's
// replacements whose DestinationSelector matches p.SyncTargetLabels (no
// selector matches every destination) is applied in order: its Value is
// expanded the same way, parsed as one JSON value, and set at its Path
// with JSON Patch "add" semantics. Parameters are substituted as text,
// not JSON-escaped: a value holding a quote or a backslash, substituted
// inside a JSON string, makes the Value invalid. The annotations
// v1alpha1.ExpandParametersAnnotation and v1alpha1.CustomizerAnnotation
// are instructions, not content: the result does not carry them (nor an
// annotations map they leave empty).
//
// obj is never changed. On any error Expand returns nil and the error: a
// *ParameterError for an unknown parameter, naming the field (as
// `spec.template.spec.containers[0].env[1].value`) or the replacement
// (`customizer NS/NAME replacements[2].value`) that used it; otherwise an
// error naming the field, or the replacement and what is wrong with it
// (its path, a missing parent, a value that is not one JSON value, its
// destination selector).
//
// Numbers in the result are int64 or float64, as in objects decoded by
// apimachinery; obj may also hold other Go numbers, map[string]string and
// []string (copied as map[string]any and []any).
func Expand(obj map[string]any, p Params, cust *v1alpha1.Customizer) (map[string]any, error) {
	w := walker{p: &p, expand: annotation(obj, v1alpha1.ExpandParametersAnnotation) == "true", path: make([]step, 0, 16)}
	out, err := w.copyMap(obj)
	if err != nil {
		// Map order is random: walk again in key order, so that the same
		// object fails with the same message every time.
		w.sorted = true
		w.path = w.path[:0]
		if _, again := w.copyMap(obj); again != nil {
			err = again
		}
		return nil, err
	}
	if cust == nil {
		return out, nil
	}
	custName := cust.Name
	if cust.Namespace != "" {
		custName = cust.Namespace + "/" + cust.Name
	}
	for i := range cust.Replacements {
		r := &cust.Replacements[i]
		where := "customizer " + custName + " replacements[" + strconv.Itoa(i) + "]"
		if r.DestinationSelector != nil {
			sel, err := metav1.LabelSelectorAsSelector(r.DestinationSelector)
			if err != nil {
				return nil, fmt.Errorf("%s.destinationSelector: %w", where, err)
			}
			if !sel.Matches(labels.Set(p.SyncTargetLabels)) {
				continue
			}
		}
		toks, err := parsePointer(r.Path)
		if err != nil {
			return nil, fmt.Errorf("%s.path: %w", where, err)
		}
		text, err := expandString(r.Value, &p)
		if err != nil {
			return nil, place(where+".value", err)
		}
		var val any
		if err := utiljson.Unmarshal([]byte(text), &val); err != nil {
			return nil, fmt.Errorf("%s.value: %q is not one JSON value: %w", where, short(text), err)
		}
		if _, err := add(out, nil, toks, val); err != nil {
			return nil, fmt.Errorf("%s: path %s: %w", where, r.Path, err)
		}
	}
	return out, nil
}

// short cuts s to a length fit for a status message.
func short(s string) string {
	const max = 80
	if len(s) <= max {
		return s
	}
	return s[:max] + "..."
}

// walker deep-copies an object, expanding its strings when expand is set.
type walker struct {
	p      *Params
	expand bool
	sorted bool   // visit map keys in order, for a deterministic first error
	path   []step // from the object's root to the value being copied
}

// step is one step of a path: a map key, or an array index.
type step struct {
	key   string
	index int // >= 0 for an array element, else key
}

// where renders the current path as `spec.containers[0].env[1].value`,
// quoting keys that are not plain words:
// `metadata.labels["example.com/zone"]`. It only runs for errors.
func (w *walker) where() string {
	var b strings.Builder
	for _, s := range w.path {
		switch {
		case s.index >= 0:
			b.WriteByte('[')
			b.WriteString(strconv.Itoa(s.index))
			b.WriteByte(']')
		case plainKey(s.key):
			if b.Len() > 0 {
				b.WriteByte('.')
			}
			b.WriteString(s.key)
		default:
			b.WriteByte('[')
			b.WriteString(strconv.Quote(s.key))
			b.WriteByte(']')
		}
	}
	return b.String()
}

func plainKey(k string) bool {
	if k == "" {
		return false
	}
	for i := 0; i < len(k); i++ {
		c := k[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-' || c == '$') {
			return false
		}
	}
	return true
}

// atAnnotations reports whether the walker is at metadata.annotations of
// the object.
func (w *walker) atAnnotations() bool {
	return len(w.path) == 2 && w.path[0] == step{key: "metadata", index: -1} && w.path[1] == step{key: "annotations", index: -1}
}

// instruction reports whether an annotation key is one of the
// customization instructions the result drops.
func instruction(key string) bool {
	return key == v1alpha1.ExpandParametersAnnotation || key == v1alpha1.CustomizerAnnotation
}

func (w *walker) copyMap(m map[string]any) (map[string]any, error) {
	out := make(map[string]any, len(m))
	dropping := w.atAnnotations()
	one := func(k string, x any) error {
		if dropping && instruction(k) {
			return nil
		}
		w.path = append(w.path, step{key: k, index: -1})
		v, err := w.copyValue(x)
		w.path = w.path[:len(w.path)-1]
		out[k] = v
		return err
	}
	if w.sorted {
		for _, k := range slices.Sorted(maps.Keys(m)) {
			if err := one(k, m[k]); err != nil {
				return nil, err
			}
		}
	} else {
		for k, x := range m {
			if err := one(k, x); err != nil {
				return nil, err
			}
		}
	}
	if len(w.path) == 0 {
		dropEmptyAnnotations(m, out)
	}
	return out, nil
}

// dropEmptyAnnotations removes metadata.annotations from out when only
// instructions filled it in orig.
func dropEmptyAnnotations(orig, out map[string]any) {
	md, ok := out["metadata"].(map[string]any)
	if !ok {
		return
	}
	if a, ok := md["annotations"].(map[string]any); ok && len(a) == 0 && hadInstruction(orig) {
		delete(md, "annotations")
	}
}

func hadInstruction(obj map[string]any) bool {
	_, e := annotationOK(obj, v1alpha1.ExpandParametersAnnotation)
	_, c := annotationOK(obj, v1alpha1.CustomizerAnnotation)
	return e || c
}

// copyValue returns a deep copy of v. Immutable values (strings, numbers,
// booleans) come back as the same interface value, without allocating.
func (w *walker) copyValue(v any) (any, error) {
	switch x := v.(type) {
	case string:
		if !w.expand {
			return v, nil
		}
		s, err := expandString(x, w.p)
		if err != nil {
			return nil, place(w.where(), err)
		}
		if s == x {
			return v, nil
		}
		return s, nil
	case map[string]any:
		return w.copyMap(x)
	case []any:
		out := make([]any, len(x))
		for i, e := range x {
			w.path = append(w.path, step{index: i})
			c, err := w.copyValue(e)
			w.path = w.path[:len(w.path)-1]
			if err != nil {
				return nil, err
			}
			out[i] = c
		}
		return out, nil
	case nil, bool, int64, float64, int, int32, float32, uint, uint32, uint64, int8, int16, uint8, uint16, json.Number:
		return v, nil
	case map[string]string:
		m := make(map[string]any, len(x))
		for k, e := range x {
			m[k] = e
		}
		return w.copyMap(m)
	case []string:
		s := make([]any, len(x))
		for i, e := range x {
			s[i] = e
		}
		return w.copyValue(s)
	default:
		return nil, fmt.Errorf("%s: unsupported value of type %T", w.where(), v)
	}
}

// annotation returns an annotation of obj, or "".
func annotation(obj map[string]any, key string) string {
	v, _ := annotationOK(obj, key)
	return v
}

func annotationOK(obj map[string]any, key string) (string, bool) {
	md, _ := obj["metadata"].(map[string]any)
	switch a := md["annotations"].(type) {
	case map[string]any:
		v, ok := a[key]
		s, _ := v.(string)
		return s, ok
	case map[string]string:
		v, ok := a[key]
		return v, ok
	}
	return "", false
}

// CustomizerRef says which Customizer applies to obj: clauseCustomizer
// (the matching downsync clause's Customizer) when it is set, else obj's
// v1alpha1.CustomizerAnnotation. For a namespaced object the reference is
// NAME, a Customizer of the object's namespace (NAMESPACE/NAME is accepted
// when NAMESPACE is the object's own); for a cluster-scoped object it is
// NAMESPACE/NAME. ok is false when no Customizer is named, and when the
// reference does not fit the object (a cluster-scoped object naming a bare
// NAME, a namespaced object naming another namespace's Customizer, an
// empty part): a caller that must tell a malformed reference from none
// checks whether the clause or the annotation was set.
func CustomizerRef(obj map[string]any, clauseCustomizer string) (namespace, name string, ok bool) {
	ref := clauseCustomizer
	if ref == "" {
		ref = annotation(obj, v1alpha1.CustomizerAnnotation)
	}
	if ref == "" {
		return "", "", false
	}
	md, _ := obj["metadata"].(map[string]any)
	objNS, _ := md["namespace"].(string)
	ns, n, qualified := strings.Cut(ref, "/")
	switch {
	case !qualified:
		if objNS == "" {
			return "", "", false
		}
		return objNS, ref, true
	case ns == "" || n == "" || strings.Contains(n, "/"):
		return "", "", false
	case objNS != "" && ns != objNS:
		return "", "", false
	}
	return ns, n, true
}
