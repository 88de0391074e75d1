package kubeapi

import (
	"fmt"
	"maps"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// MaxNestingDepth is how deeply objects and arrays may nest in an object a
// write stores, its managed fields aside; the top-level object is level 1.
// A request body may nest managedFieldsDepth levels more, so that an
// object at the limit can be sent back with its managed fields, which
// mirror its fields 4 levels down (metadata.managedFields[].fieldsV1) and
// turn each scalar into an empty object.
//
// kube's JSON decoders stop only at 10 000 levels. The root stops far
// earlier because recording managed fields costs, for every field, time in
// proportion to its depth: a custom resource that keeps unknown fields,
// nested 9 000 levels in a 45 KB body, cost 2.5 CPU-seconds a request, and
// one nested 100 levels costs what a flat one does. No object of a built-in
// kind comes near the limit, and a CRD whose schema nests 45 objects is
// about 95 levels deep.
const MaxNestingDepth = 100

// managedFieldsDepth is how much deeper than the object its managed fields
// nest.
const managedFieldsDepth = 5

// maxBodyDepth is the nesting a request body may have.
const maxBodyDepth = MaxNestingDepth + managedFieldsDepth

// checkBodyDepth refuses, with a 400, a JSON document that nests objects
// and arrays more than maxBodyDepth levels deep. It scans the bytes
// without decoding them, so a body is refused before anything is built
// from it; malformed JSON passes, for the decoder to report.
func checkBodyDepth(b []byte) error {
	depth := 0
	inString, escaped := false, false
	for _, c := range b {
		if inString {
			switch {
			case escaped:
				escaped = false
			case c == '\\':
				escaped = true
			case c == '"':
				inString = false
			}
			continue
		}
		switch c {
		case '"':
			inString = true
		case '{', '[':
			if depth++; depth > maxBodyDepth {
				return apierrors.NewBadRequest(fmt.Sprintf("the request body nests objects and arrays more than %d levels deep: the limit is %d", maxBodyDepth, maxBodyDepth))
			}
		case '}', ']':
			depth--
		}
	}
	return nil
}

// checkObjectDepth refuses an object about to be stored (what a create
// sent, or what a patch made) that nests more than MaxNestingDepth levels,
// managed fields aside: it returns a field error on the top-level field
// under which it does, or nil.
func checkObjectDepth(obj map[string]any) field.ErrorList {
	for k, v := range obj {
		if k == "metadata" {
			if md, ok := v.(map[string]any); ok {
				if _, ok := md["managedFields"]; ok {
					md = maps.Clone(md)
					delete(md, "managedFields")
					v = md
				}
			}
		}
		if deeper(v, MaxNestingDepth-1) {
			return field.ErrorList{field.Forbidden(field.NewPath(k),
				fmt.Sprintf("may not nest objects and arrays more than %d levels deep (counting the object itself)", MaxNestingDepth))}
		}
	}
	return nil
}

// deeper reports whether v nests objects and arrays more than levels deep.
func deeper(v any, levels int) bool {
	switch v := v.(type) {
	case map[string]any:
		if levels == 0 {
			return true
		}
		for _, e := range v {
			if deeper(e, levels-1) {
				return true
			}
		}
	case []any:
		if levels == 0 {
			return true
		}
		for _, e := range v {
			if deeper(e, levels-1) {
				return true
			}
		}
	}
	return false
}
