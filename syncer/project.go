package syncer

import (
	"bytes"
	"encoding/json"
)

// project returns the part of v that shape covers: for a map shape, v's
// values at shape's keys (keys v lacks are left out), each projected; for
// a list shape, v's elements projected one by one when v is a list of the
// same length; anything else is v itself. The result shares v's leaves.
//
// Projected on what the syncer applied, the cluster's answer is what the
// syncer set, as the cluster normalized it (quantities, defaults inside
// lists); projected the same way later, the live object differs from it
// exactly when someone changed or removed a field the syncer set.
func project(shape, v any) any {
	switch s := shape.(type) {
	case map[string]any:
		m, ok := v.(map[string]any)
		if !ok {
			return v
		}
		out := make(map[string]any, len(s))
		for k, sv := range s {
			if x, ok := m[k]; ok {
				out[k] = project(sv, x)
			}
		}
		return out
	case []any:
		l, ok := v.([]any)
		if !ok || len(l) != len(s) {
			return v
		}
		out := make([]any, len(l))
		for i := range l {
			out[i] = project(s[i], l[i])
		}
		return out
	}
	return v
}

// projectMap is project for whole objects.
func projectMap(shape, v map[string]any) map[string]any {
	out, _ := project(shape, v).(map[string]any)
	return out
}

// jsonEqual compares two values as their JSON encodings (maps sorted), so
// that int64(3) and float64(3) are equal.
func jsonEqual(a, b any) bool {
	ja, err1 := json.Marshal(a)
	jb, err2 := json.Marshal(b)
	return err1 == nil && err2 == nil && bytes.Equal(ja, jb)
}
