package v1alpha1

import (
	"encoding/json"
	"math"
	"testing"

	"sigs.k8s.io/yaml"
)

// TestValueJSON: Values read and write as plain JSON scalars, in one
// canonical form.
func TestValueJSON(t *testing.T) {
	cases := []struct {
		in, out string
		want    any
		kind    ValueKind
	}{
		{`null`, `null`, nil, NullValueKind},
		{`true`, `true`, true, BoolValueKind},
		{`false`, `false`, false, BoolValueKind},
		{`3`, `3`, int64(3), NumberValueKind},
		{`-0`, `0`, int64(0), NumberValueKind},
		{`2.0`, `2`, int64(2), NumberValueKind},
		{`2.5e0`, `2.5`, 2.5, NumberValueKind},
		{`1e300`, `1e+300`, 1e300, NumberValueKind},
		{`9223372036854775807`, `9223372036854775807`, int64(math.MaxInt64), NumberValueKind},
		{`9223372036854775808`, `9.223372036854776e+18`, float64(1 << 63), NumberValueKind},
		{`1e400`, `"+Inf"`, "+Inf", StringValueKind},
		{`"eu"`, `"eu"`, "eu", StringValueKind},
		{`"a<b&\u00e9\n"`, `"a<b&é\n"`, "a<b&é\n", StringValueKind},
	}
	for _, tc := range cases {
		var v Value
		if err := json.Unmarshal([]byte(tc.in), &v); err != nil {
			t.Errorf("%s: %v", tc.in, err)
			continue
		}
		if v.String() != tc.out || v.Interface() != tc.want || v.Kind() != tc.kind {
			t.Errorf("%s: wrote %s (%v, kind %d), want %s (%v, kind %d)", tc.in, v, v.Interface(), v.Kind(), tc.out, tc.want, tc.kind)
		}
		// encoding/json escapes <, > and & in what it writes; the value
		// reads back the same.
		b, _ := json.Marshal(v)
		var back Value
		if err := json.Unmarshal(b, &back); err != nil || back != v {
			t.Errorf("%s: round trip through %s gave %v (%v)", tc.in, b, back, err)
		}
	}
	for _, bad := range []string{`{}`, `[1]`, `"`, ``} {
		var v Value
		if err := json.Unmarshal([]byte(bad), &v); err == nil {
			t.Errorf("accepted %q", bad)
		}
	}
	if FloatValue(3) != IntValue(3) || FloatValue(math.NaN()) != StringValue("NaN") || (Value{}) != NullValue() {
		t.Error("constructors are not canonical")
	}
}

// TestStatusRowYAML: a row reads naturally in kubectl get -o yaml.
func TestStatusRowYAML(t *testing.T) {
	r := StatusRow{Columns: []Value{StringValue("eu"), IntValue(3), FloatValue(2.5), BoolValue(true), NullValue()}}
	b, err := yaml.Marshal(r)
	if err != nil {
		t.Fatal(err)
	}
	want := "columns:\n- eu\n- 3\n- 2.5\n- true\n- null\n"
	if string(b) != want {
		t.Errorf("got\n%s\nwant\n%s", b, want)
	}
	var back StatusRow
	if err := yaml.Unmarshal(b, &back); err != nil {
		t.Fatal(err)
	}
	for i := range r.Columns {
		if back.Columns[i] != r.Columns[i] {
			t.Errorf("column %d: %v, want %v", i, back.Columns[i], r.Columns[i])
		}
	}
}
