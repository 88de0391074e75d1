package status

import (
	"encoding/json"
	"fmt"
	"math"
	"math/rand/v2"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/canopy-dev/canopy/topology/api/v1alpha1"
)

// mixed groups by a value of any scalar type, folds ints, halves (exact
// doubles) and mixed numbers and strings, and fails or skips some
// destinations. Limit 3 makes most runs overflow.
const mixed = `
filter: "obj.fail ? obj.nope : !obj.skip"
groupBy: [{name: g, def: "obj.g"}]
combinedFields:
- {name: "n", type: COUNT}
- {name: sumI, type: SUM, subject: "obj.i"}
- {name: sumX, type: SUM, subject: "obj.x"}
- {name: avgI, type: AVG, subject: "obj.i"}
- {name: lo, type: MIN, subject: "obj.v"}
- {name: hi, type: MAX, subject: "obj.v"}
limit: 3
`

// input is one destination's object for mixed.
type input struct {
	dest string
	obj  map[string]any
}

func randomScalar(r *rand.Rand) any {
	switch r.IntN(6) {
	case 0:
		return nil
	case 1:
		return r.IntN(2) == 0
	case 2:
		return int64(r.IntN(5))
	case 3:
		return float64(r.IntN(5)) + 0.5
	}
	return string(rune('a' + r.IntN(4)))
}

func randomInputs(r *rand.Rand, n int) []input {
	out := make([]input, n)
	for i := range out {
		obj := map[string]any{
			"fail": r.IntN(10) == 0,
			"skip": r.IntN(10) == 0,
			"g":    randomScalar(r),
			"v":    randomScalar(r),
		}
		if r.IntN(5) > 0 {
			obj["i"] = int64(r.IntN(100) - 20)
		} else {
			obj["i"] = nil
		}
		if r.IntN(2) == 0 {
			obj["x"] = int64(r.IntN(10))
		} else {
			obj["x"] = float64(r.IntN(10)) / 2
		}
		if _, isBool := obj["v"].(bool); isBool {
			obj["v"] = "t" // MIN and MAX refuse booleans
		}
		out[i] = input{dest: fmt.Sprintf("edge-%03d", r.IntN(1000)*1000+i), obj: obj}
	}
	return out
}

func evaluateAll(t testing.TB, c *Collector, in []input) []Partial {
	t.Helper()
	out := make([]Partial, len(in))
	for i, x := range in {
		out[i], _ = c.Evaluate(x.obj, nil, Destination{Name: x.dest})
	}
	return out
}

func encode(t testing.TB, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// randomTree merges parts in a random bracketing, with random argument
// order: what some tree of relays would do.
func randomTree(r *rand.Rand, parts []Partial) Partial {
	switch len(parts) {
	case 0:
		return Partial{}
	case 1:
		return parts[0]
	}
	k := 1 + r.IntN(len(parts)-1)
	a, b := randomTree(r, parts[:k]), randomTree(r, parts[k:])
	if r.IntN(2) == 0 {
		a, b = b, a
	}
	return Merge(a, b)
}

// fold merges parts one by one, left to right.
func fold(parts []Partial) Partial {
	var out Partial
	for _, p := range parts {
		out = Merge(out, p)
	}
	return out
}

// reference computes mixed's table directly from the inputs.
func reference(in []input, limit int) (rows []v1alpha1.StatusRow, overflow *v1alpha1.StatusRow, failing int) {
	type agg struct {
		key    v1alpha1.Value
		n      int64
		sumI   int64
		sumXi  int64
		sumXf  float64
		floats bool
		nI     int64
		lo, hi v1alpha1.Value
		nLo    int64
	}
	val := func(x any) v1alpha1.Value {
		switch x := x.(type) {
		case nil:
			return v1alpha1.NullValue()
		case bool:
			return v1alpha1.BoolValue(x)
		case int64:
			return v1alpha1.IntValue(x)
		case float64:
			return v1alpha1.FloatValue(x)
		}
		return v1alpha1.StringValue(x.(string))
	}
	fold := func(a *agg, obj map[string]any) {
		a.n++
		if i, ok := obj["i"].(int64); ok {
			a.sumI += i
			a.nI++
		}
		switch x := obj["x"].(type) {
		case int64:
			a.sumXi += x
		case float64:
			a.sumXf += x
			a.floats = true
		}
		if v := val(obj["v"]); !v.IsNull() {
			if a.nLo == 0 || Compare(v, a.lo) < 0 {
				a.lo = v
			}
			if a.nLo == 0 || Compare(v, a.hi) > 0 {
				a.hi = v
			}
			a.nLo++
		}
	}
	byKey := map[v1alpha1.Value]*agg{}
	for _, x := range in {
		if x.obj["fail"].(bool) {
			failing++
			continue
		}
		if x.obj["skip"].(bool) {
			continue
		}
		k := val(x.obj["g"])
		if byKey[k] == nil {
			byKey[k] = &agg{key: k}
		}
		fold(byKey[k], x.obj)
	}
	var keys []v1alpha1.Value
	for k := range byKey {
		keys = append(keys, k)
	}
	slices.SortFunc(keys, Compare)
	render := func(key v1alpha1.Value, a *agg) v1alpha1.StatusRow {
		sumX := v1alpha1.IntValue(a.sumXi)
		if a.floats {
			sumX = v1alpha1.FloatValue(float64(a.sumXi) + a.sumXf)
		}
		avg, lo, hi := v1alpha1.NullValue(), v1alpha1.NullValue(), v1alpha1.NullValue()
		if a.nI > 0 {
			avg = v1alpha1.FloatValue(float64(a.sumI) / float64(a.nI))
		}
		if a.nLo > 0 {
			lo, hi = a.lo, a.hi
		}
		return v1alpha1.StatusRow{Columns: []v1alpha1.Value{key, v1alpha1.IntValue(a.n), v1alpha1.IntValue(a.sumI), sumX, avg, lo, hi}}
	}
	var rest *agg
	for i, k := range keys {
		if i < limit {
			rows = append(rows, render(k, byKey[k]))
			continue
		}
		a := byKey[k]
		if rest == nil {
			rest = &agg{}
			*rest = *a
			continue
		}
		rest.n += a.n
		rest.sumI += a.sumI
		rest.nI += a.nI
		rest.sumXi += a.sumXi
		rest.sumXf += a.sumXf
		rest.floats = rest.floats || a.floats
		if a.nLo > 0 {
			if rest.nLo == 0 || Compare(a.lo, rest.lo) < 0 {
				rest.lo = a.lo
			}
			if rest.nLo == 0 || Compare(a.hi, rest.hi) > 0 {
				rest.hi = a.hi
			}
			rest.nLo += a.nLo
		}
	}
	if rest != nil {
		r := render(v1alpha1.NullValue(), rest)
		overflow = &r
	}
	return rows, overflow, failing
}

// TestMergeProperties: for random destinations, every bracketing and
// order of merges gives the same Partial, and its table is the one
// computed directly, overflow included.
func TestMergeProperties(t *testing.T) {
	c := mustCompile(t, "mixed", mixed)
	var overflowed, failed int
	for seed := range uint64(200) {
		r := rand.New(rand.NewPCG(seed, 42))
		in := randomInputs(r, 1+r.IntN(40))
		parts := evaluateAll(t, c, in)

		want := encode(t, fold(parts))
		if got := encode(t, MergeAll(parts...)); got != want {
			t.Fatalf("seed %d: MergeAll gave\n%s\nthe fold of Merge gave\n%s", seed, got, want)
		}
		for range 5 {
			shuffled := slices.Clone(parts)
			r.Shuffle(len(shuffled), func(i, j int) { shuffled[i], shuffled[j] = shuffled[j], shuffled[i] })
			if got := encode(t, randomTree(r, shuffled)); got != want {
				t.Fatalf("seed %d: a tree of merges gave\n%s\nleft fold gave\n%s", seed, got, want)
			}
		}
		// Commutativity and associativity on sub-results.
		third := len(parts) / 3
		a, b, d := MergeAll(parts[:third]...), MergeAll(parts[third:2*third]...), MergeAll(parts[2*third:]...)
		if encode(t, Merge(a, b)) != encode(t, Merge(b, a)) {
			t.Fatalf("seed %d: not commutative", seed)
		}
		if encode(t, Merge(Merge(a, b), d)) != encode(t, Merge(a, Merge(b, d))) {
			t.Fatalf("seed %d: not associative", seed)
		}
		if encode(t, Merge(Partial{}, d)) != encode(t, d) || encode(t, Merge(d, c.Empty())) != encode(t, d) {
			t.Fatalf("seed %d: no identity", seed)
		}

		total := MergeAll(parts...)
		res := total.Result("mixed")
		rows, overflow, failing := reference(in, int(c.Limit()))
		if got, want := rowsJSON(t, res.Rows), rowsJSON(t, rows); got != want {
			t.Fatalf("seed %d: rows\n%s\nwant\n%s", seed, got, want)
		}
		if got, want := encode(t, res.Overflow), encode(t, overflow); got != want {
			t.Fatalf("seed %d: overflow %s, want %s", seed, got, want)
		}
		if total.FailingCount != int64(failing) || total.Destinations != int64(len(in)) {
			t.Fatalf("seed %d: failing %d of %d, want %d of %d", seed, total.FailingCount, total.Destinations, failing, len(in))
		}
		if overflow != nil {
			overflowed++
		}
		if failing > 0 {
			failed++
		}
	}
	if overflowed < 100 || failed < 100 {
		t.Errorf("only %d runs overflowed and %d had failures: the inputs are not random enough", overflowed, failed)
	}
}

// TestSelectLimit keeps the first limit rows by destination name, in any
// order of merging.
func TestSelectLimit(t *testing.T) {
	c := mustCompile(t, "s", `{select: [{name: d, def: "destination.name"}, {name: "n", def: "obj.n"}], limit: 5}`)
	r := rand.New(rand.NewPCG(1, 2))
	var names []string
	var parts []Partial
	for i := range 40 {
		name := fmt.Sprintf("edge-%02d", (i*17)%40)
		names = append(names, name)
		p, err := c.Evaluate(map[string]any{"n": int64(i)}, nil, Destination{Name: name})
		if err != nil {
			t.Fatal(err)
		}
		parts = append(parts, p)
	}
	slices.Sort(names)
	total := randomTree(r, parts)
	res := total.Result("s")
	var got []string
	for _, row := range res.Rows {
		got = append(got, row.Columns[0].Interface().(string))
	}
	if !slices.Equal(got, names[:5]) || res.OmittedRows != 35 || total.Selected != 40 {
		t.Errorf("rows %v omitted %d, want %v and 35", got, res.OmittedRows, names[:5])
	}
}

// TestFailingBounded lists the first 100 failing destinations by name and
// counts them all.
func TestFailingBounded(t *testing.T) {
	c := mustCompile(t, "c", `{combinedFields: [{name: "n", type: COUNT}]}`)
	var parts []Partial
	var failing []string
	for i := range 300 {
		name := fmt.Sprintf("edge-%03d", (i*7)%300)
		if i%6 == 0 {
			parts = append(parts, c.Failed(name, "apply failed"))
		} else {
			obj := map[string]any{}
			if i%6 == 1 {
				obj = nil // also failing: ErrNoObject
			}
			p, _ := c.Evaluate(obj, nil, Destination{Name: name})
			parts = append(parts, p)
		}
		if i%6 <= 1 {
			failing = append(failing, name)
		}
	}
	slices.Sort(failing)
	total := randomTree(rand.New(rand.NewPCG(3, 4)), parts)
	var got []string
	for _, f := range total.Failing {
		got = append(got, f.Name)
	}
	if !slices.Equal(got, failing[:v1alpha1.MaxFailingDestinations]) || total.FailingCount != int64(len(failing)) || total.Destinations != 300 {
		t.Errorf("failing %d listed, %d counted, want the first %d of %d", len(got), total.FailingCount, v1alpha1.MaxFailingDestinations, len(failing))
	}
	if n := total.Result("c").Rows[0].Columns[0].Interface(); n != int64(300-len(failing)) {
		t.Errorf("COUNT %v, want %d", n, 300-len(failing))
	}
}

// TestAverage: AVG carries sum and count, so the average of averages
// is not what comes out.
func TestAverage(t *testing.T) {
	c := mustCompile(t, "c", `{combinedFields: [{name: avg, type: AVG, subject: "obj.v"}, {name: sum, type: SUM, subject: "obj.v"}]}`)
	eval := func(vals ...any) Partial {
		var out Partial
		for i, v := range vals {
			p, err := c.Evaluate(map[string]any{"v": v}, nil, Destination{Name: fmt.Sprint("e", len(vals), i)})
			if err != nil {
				t.Fatal(err)
			}
			out = Merge(out, p)
		}
		return out
	}
	// {1} averages 1, {2, 3, 4} average 3: together 10/4, not 2.
	total := Merge(eval(int64(1)), eval(int64(2), int64(3), nil, int64(4)))
	if got, want := rowsJSON(t, total.Result("c").Rows), rowsJSON(t, []v1alpha1.StatusRow{row(2.5, 10)}); got != want {
		t.Errorf("rows %s, want %s", got, want)
	}
	// Ints and doubles: the sum becomes a double.
	if got, want := rowsJSON(t, eval(int64(1), 0.25).Result("c").Rows), rowsJSON(t, []v1alpha1.StatusRow{row(0.625, 1.25)}); got != want {
		t.Errorf("rows %s, want %s", got, want)
	}
	// Beyond int64 the sum goes on as a double.
	big := eval(int64(math.MaxInt64), int64(math.MaxInt64))
	if v := big.Result("c").Rows[0].Columns[1].Interface(); v != 2*float64(math.MaxInt64) {
		t.Errorf("sum %v", v)
	}
	// Only nulls: AVG is null, SUM 0.
	if got, want := rowsJSON(t, eval(nil).Result("c").Rows), rowsJSON(t, []v1alpha1.StatusRow{row(nil, 0)}); got != want {
		t.Errorf("rows %s, want %s", got, want)
	}
}

// TestVersions: a newer collector's Partial replaces an older one's.
func TestVersions(t *testing.T) {
	sc := collector(t, "c", `{combinedFields: [{name: "n", type: COUNT}]}`)
	sc.Generation = 1
	old, _ := Compile(sc)
	sc.Generation = 2
	sc.Spec.CombinedFields = append(sc.Spec.CombinedFields, v1alpha1.CombinedField{Name: "s", Type: v1alpha1.AggregationSum, Subject: "1"})
	cur, _ := Compile(sc)
	a, _ := old.Evaluate(map[string]any{}, nil, Destination{Name: "a"})
	b, _ := cur.Evaluate(map[string]any{}, nil, Destination{Name: "b"})
	for _, m := range []Partial{Merge(a, b), Merge(b, a)} {
		if m.Generation != 2 || m.Destinations != 1 || len(m.Shape.Fields) != 2 {
			t.Errorf("%+v", m)
		}
	}
}

// TestPartialJSON: a Partial survives encoding exactly, its encoding is
// deterministic, and malformed ones are refused.
func TestPartialJSON(t *testing.T) {
	c := mustCompile(t, "mixed", mixed)
	r := rand.New(rand.NewPCG(7, 7))
	for range 20 {
		total := MergeAll(evaluateAll(t, c, randomInputs(r, 30))...)
		b := encode(t, total)
		var back Partial
		if err := json.Unmarshal([]byte(b), &back); err != nil {
			t.Fatalf("%v\n%s", err, b)
		}
		if !reflect.DeepEqual(back, total) {
			t.Fatalf("round trip changed it:\n%+v\n%+v", back, total)
		}
		if encode(t, back) != b {
			t.Fatal("not deterministic")
		}
	}
	var zero Partial
	if b := encode(t, zero); b != "{}" {
		t.Errorf("zero Partial encodes as %s", b)
	}
	// Non-finite double sums survive too.
	inf := Partial{Shape: Shape{Fields: []FieldShape{{Name: "s", Type: v1alpha1.AggregationSum}}}, Limit: 1, Destinations: 1,
		Groups: []Group{{Fields: []Accumulator{{N: 1, Float: Float(math.Inf(1)), Floats: true}}}}}
	var back Partial
	if err := json.Unmarshal([]byte(encode(t, inf)), &back); err != nil || !math.IsInf(float64(back.Groups[0].Fields[0].Float), 1) {
		t.Errorf("%v %+v", err, back)
	}
	if v := inf.Result("s").Rows[0].Columns[0]; v.Interface() != "+Inf" {
		t.Errorf("rendered %v", v)
	}

	shape := `"shape":{"groupBy":["g"],"fields":[{"name":"n","type":"COUNT"}]},"limit":2,"destinations":3`
	for _, bad := range []string{
		`{` + shape + `,"groups":[{"key":["b"],"fields":[{"n":1}]},{"key":["a"],"fields":[{"n":1}]}]}`,
		`{` + shape + `,"groups":[{"key":["a"],"fields":[]}]}`,
		`{` + shape + `,"groups":[{"key":[],"fields":[{"n":1}]}]}`,
		`{` + shape + `,"groups":[{"key":["a"],"fields":[{"n":1}]},{"key":["b"],"fields":[{"n":1}]},{"key":["c"],"fields":[{"n":1}]}]}`,
		`{` + shape + `,"failing":[{"name":"x"}],"failingCount":0}`,
		`{` + shape + `,"failingCount":4}`,
		`{` + shape + `,"overflow":{"key":["a"],"fields":[{"n":1}]}}`,
		`{"shape":{"select":["a"]},"limit":2,"destinations":2,"selected":2,"rows":[{"destination":"b","columns":[1]},{"destination":"a","columns":[1]}]}`,
		`{"shape":{"fields":[{"name":"m","type":"MEDIAN"}]},"limit":1}`,
		`{"shape":{"select":["a"]},"limit":2,"destinations":1,"selected":1,"rows":[{"destination":"a","columns":[{"x":1}]}]}`,
	} {
		var p Partial
		if err := json.Unmarshal([]byte(bad), &p); err == nil {
			t.Errorf("accepted %s", bad)
		}
	}
}

// TestMergeDoesNotChangeInputs: Merge only reads its arguments.
func TestMergeDoesNotChangeInputs(t *testing.T) {
	c := mustCompile(t, "mixed", mixed)
	r := rand.New(rand.NewPCG(9, 9))
	a := MergeAll(evaluateAll(t, c, randomInputs(r, 30))...)
	b := MergeAll(evaluateAll(t, c, randomInputs(r, 30))...)
	a.Failing = append([]v1alpha1.FailingDestination{{Name: "edge-000", Reason: "z"}}, a.Failing...)
	b.Failing = append([]v1alpha1.FailingDestination{{Name: "edge-000", Reason: "a"}}, b.Failing...)
	ja, jb := encode(t, a), encode(t, b)
	m := Merge(a, b)
	if encode(t, a) != ja || encode(t, b) != jb {
		t.Fatal("Merge changed an argument")
	}
	if m.Failing[0].Name != "edge-000" || m.Failing[0].Reason != "a" || strings.Count(encode(t, m.Failing), "edge-000") != 1 {
		t.Errorf("overlapping failing destination: %+v", m.Failing[0])
	}
}
