package status

import (
	"cmp"
	"fmt"
	"math"
	"strings"
	"unicode/utf8"

	"github.com/google/cel-go/common/types"
	"github.com/google/cel-go/common/types/ref"

	"github.com/canopy-dev/canopy/topology/api/v1alpha1"
)

// scalar converts a groupBy or select result to a Value.
func scalar(v ref.Val) (v1alpha1.Value, error) {
	switch v := v.(type) {
	case types.Null:
		return v1alpha1.NullValue(), nil
	case types.Bool:
		return v1alpha1.BoolValue(bool(v)), nil
	case types.String:
		return v1alpha1.StringValue(cut(string(v))), nil
	}
	n, ok, err := number(v)
	if err != nil {
		return v1alpha1.Value{}, err
	}
	if !ok {
		return v1alpha1.Value{}, fmt.Errorf("got %s, want a string, number, bool or null", typeName(v))
	}
	return n.value(), nil
}

// ordered converts a MIN or MAX subject's result: a number or a string,
// or null (left out: ok is false).
func ordered(v ref.Val) (val v1alpha1.Value, ok bool, err error) {
	switch v := v.(type) {
	case types.Null:
		return v1alpha1.Value{}, false, nil
	case types.String:
		return v1alpha1.StringValue(cut(string(v))), true, nil
	}
	n, ok, err := number(v)
	if err != nil {
		return v1alpha1.Value{}, false, err
	}
	if !ok {
		return v1alpha1.Value{}, false, fmt.Errorf("got %s, want a number or a string", typeName(v))
	}
	return n.value(), true, nil
}

// summand converts a SUM or AVG subject's result: a number, or null (left
// out: ok is false).
func summand(v ref.Val) (n num, ok bool, err error) {
	if _, null := v.(types.Null); null {
		return num{}, false, nil
	}
	n, ok, err = number(v)
	if err == nil && !ok {
		err = fmt.Errorf("got %s, want a number", typeName(v))
	}
	return n, ok, err
}

// num is a CEL number: an int64, or a float64 when isFloat.
type num struct {
	i       int64
	f       float64
	isFloat bool
}

func (n num) value() v1alpha1.Value {
	if n.isFloat {
		return v1alpha1.FloatValue(n.f)
	}
	return v1alpha1.IntValue(n.i)
}

// number converts int, uint and (finite) double; ok is false for other
// types.
func number(v ref.Val) (num, bool, error) {
	switch v := v.(type) {
	case types.Int:
		return num{i: int64(v)}, true, nil
	case types.Uint:
		if v <= math.MaxInt64 {
			return num{i: int64(v)}, true, nil
		}
		return num{f: float64(v), isFloat: true}, true, nil
	case types.Double:
		f := float64(v)
		if math.IsNaN(f) || math.IsInf(f, 0) {
			return num{}, false, fmt.Errorf("got %v, want a finite number", f)
		}
		return num{f: f, isFloat: true}, true, nil
	}
	return num{}, false, nil
}

func typeName(v ref.Val) string {
	if v == nil {
		return "nothing"
	}
	return v.Type().TypeName()
}

// cut shortens s to v1alpha1.MaxStatusValueLength bytes.
func cut(s string) string { return truncate(s, v1alpha1.MaxStatusValueLength) }

// truncate returns the longest prefix of s of at most n bytes that does
// not split a rune.
func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	s = s[:n]
	// Find where the last rune starts; drop it when the cut split it.
	j := len(s) - 1
	for j > 0 && j > len(s)-utf8.UTFMax && !utf8.RuneStart(s[j]) {
		j--
	}
	if !utf8.FullRuneInString(s[j:]) {
		s = s[:j]
	}
	return s
}

// Compare orders Values: null < false < true < numbers < strings; numbers
// by value, strings by bytes. It is the order of group keys, and of MIN
// and MAX.
func Compare(a, b v1alpha1.Value) int {
	ka, kb := a.Kind(), b.Kind()
	if ka != kb {
		return cmp.Compare(ka, kb)
	}
	sa, sb := a.String(), b.String()
	if sa == sb {
		return 0
	}
	switch ka {
	case v1alpha1.BoolValueKind:
		return cmp.Compare(sa, sb) // "false" < "true"
	case v1alpha1.StringValueKind:
		// Canonical JSON strings without escapes hold their content as is.
		if !strings.Contains(sa, `\`) && !strings.Contains(sb, `\`) {
			return strings.Compare(sa[1:len(sa)-1], sb[1:len(sb)-1])
		}
		return strings.Compare(a.Interface().(string), b.Interface().(string))
	case v1alpha1.NumberValueKind:
		x, y := a.Interface(), b.Interface()
		if i, ok := x.(int64); ok {
			if j, ok := y.(int64); ok {
				return cmp.Compare(i, j)
			}
		}
		return cmp.Compare(toFloat(x), toFloat(y))
	}
	return 0
}

func toFloat(x any) float64 {
	switch x := x.(type) {
	case int64:
		return float64(x)
	case float64:
		return x
	}
	return 0
}

// compareKeys orders group keys column by column.
func compareKeys(a, b []v1alpha1.Value) int {
	for i := range min(len(a), len(b)) {
		if c := Compare(a[i], b[i]); c != 0 {
			return c
		}
	}
	return cmp.Compare(len(a), len(b))
}
