package status

import (
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"

	"github.com/canopy-dev/canopy/topology/api/v1alpha1"
)

// Partial is one collector's summary over a set of destinations of one
// placed object: what an edge computes for itself (Collector.Evaluate) and
// what each tier forwards after merging its children's (Merge). Its size
// is bounded by the collector (limit groups or rows, one overflow group,
// v1alpha1.MaxFailingDestinations failing destinations), never by the
// number of destinations.
//
// The zero Partial covers no destination and is the identity of Merge.
// Its JSON encoding is deterministic (groups, rows and failing
// destinations are sorted); decoding checks that the Partial is well
// formed, so a decoded Partial is safe to Merge. The fields are exported
// for encoding: use Merge and Result rather than changing them.
type Partial struct {
	// Generation and SpecHash identify the collector version the Partial
	// was computed with (its metadata.generation and a hash of its spec).
	// Merge keeps the newer of two Partials of different versions.
	Generation int64  `json:"generation,omitempty"`
	SpecHash   string `json:"specHash,omitempty"`
	// Shape names the columns; Limit bounds Groups and Rows.
	Shape Shape `json:"shape,omitzero"`
	Limit int64 `json:"limit,omitempty"`

	// Destinations counts the destinations covered, failing ones included.
	Destinations int64 `json:"destinations,omitempty"`

	// Groups are the first Limit groups in the order of their keys (see
	// Compare); Overflow aggregates every other group.
	Groups   []Group `json:"groups,omitempty"`
	Overflow *Group  `json:"overflow,omitempty"`

	// Rows are the select rows of the first Limit destinations by name;
	// Selected counts every destination that produced a row.
	Rows     []Row `json:"rows,omitempty"`
	Selected int64 `json:"selected,omitempty"`

	// Failing lists the first v1alpha1.MaxFailingDestinations failing
	// destinations by name; FailingCount counts them all.
	Failing      []v1alpha1.FailingDestination `json:"failing,omitempty"`
	FailingCount int64                         `json:"failingCount,omitempty"`
}

// Group is one group of an aggregating collector: its groupBy values and
// one Accumulator per combined field.
type Group struct {
	Key    []v1alpha1.Value `json:"key,omitempty"`
	Fields []Accumulator    `json:"fields,omitempty"`
}

// Row is one destination's select row.
type Row struct {
	Destination string           `json:"destination"`
	Columns     []v1alpha1.Value `json:"columns"`
}

// Accumulator is the mergeable state of one combined field in one group.
// N counts the objects (COUNT) or the non-null values (SUM, AVG, MIN,
// MAX). SUM and AVG carry the sum of int values in Int and of double values
// in Float; Floats says the sum is a double (a double was added, or Int
// overflowed into Float). MIN and MAX carry the extreme in Value, set when
// N > 0.
type Accumulator struct {
	N      int64          `json:"n,omitempty"`
	Int    int64          `json:"int,omitempty"`
	Float  Float          `json:"float,omitempty"`
	Floats bool           `json:"floats,omitempty"`
	Value  v1alpha1.Value `json:"value,omitzero"`
}

// Float is a float64 whose JSON form also writes NaN and infinities (as
// the strings "NaN", "+Inf" and "-Inf"), which a sum of doubles can reach.
type Float float64

// MarshalJSON implements json.Marshaler.
func (f Float) MarshalJSON() ([]byte, error) {
	x := float64(f)
	switch {
	case math.IsNaN(x):
		return []byte(`"NaN"`), nil
	case math.IsInf(x, 1):
		return []byte(`"+Inf"`), nil
	case math.IsInf(x, -1):
		return []byte(`"-Inf"`), nil
	}
	return strconv.AppendFloat(nil, x, 'g', -1, 64), nil
}

// UnmarshalJSON implements json.Unmarshaler.
func (f *Float) UnmarshalJSON(b []byte) error {
	switch string(b) {
	case `"NaN"`:
		*f = Float(math.NaN())
		return nil
	case `"+Inf"`:
		*f = Float(math.Inf(1))
		return nil
	case `"-Inf"`:
		*f = Float(math.Inf(-1))
		return nil
	}
	var x float64
	if err := json.Unmarshal(b, &x); err != nil {
		return err
	}
	*f = Float(x)
	return nil
}

// newer compares the collector versions of two Partials: generation,
// then spec hash. Partials of one version have one shape and limit; should
// two disagree all the same (a forged or corrupted Partial), the shapes
// and limits are compared too, so that Merge stays commutative and
// associative and never mixes shapes.
func newer(a, b *Partial) int {
	if c := cmp.Compare(a.Generation, b.Generation); c != 0 {
		return c
	}
	if c := cmp.Compare(a.SpecHash, b.SpecHash); c != 0 {
		return c
	}
	if c := cmp.Compare(a.Limit, b.Limit); c != 0 {
		return c
	}
	if slices.Equal(a.Shape.GroupBy, b.Shape.GroupBy) && slices.Equal(a.Shape.Fields, b.Shape.Fields) && slices.Equal(a.Shape.Select, b.Shape.Select) {
		return 0
	}
	ja, _ := json.Marshal(a.Shape)
	jb, _ := json.Marshal(b.Shape)
	return cmp.Compare(string(ja), string(jb))
}

// Merge returns the Partial of the union of a's and b's destinations,
// which must be disjoint (see the package documentation on double
// counting). It is commutative and associative (exactly, but for the
// rounding of double sums), and the zero Partial is its identity. When a
// and b come from different versions of the collector, the result is the
// newer one (higher generation, then greater spec hash), unchanged. Merge
// does not change a or b; the result may share memory with them.
func Merge(a, b Partial) Partial {
	switch c := newer(&a, &b); {
	case c > 0:
		return a
	case c < 0:
		return b
	}
	if a.empty() {
		return b
	}
	if b.empty() {
		return a
	}
	out := Partial{
		Generation:   a.Generation,
		SpecHash:     a.SpecHash,
		Shape:        a.Shape,
		Limit:        a.Limit,
		Destinations: a.Destinations + b.Destinations,
		Selected:     a.Selected + b.Selected,
		FailingCount: a.FailingCount + b.FailingCount,
		Failing:      mergeFailing(a.Failing, b.Failing),
		Rows:         mergeRows(a.Rows, b.Rows, int(a.Limit)),
	}
	out.Groups, out.Overflow = mergeGroups(a.Shape.Fields, a.Groups, b.Groups, int(a.Limit))
	out.Overflow = mergeOverflow(a.Shape.Fields, out.Overflow, a.Overflow)
	out.Overflow = mergeOverflow(a.Shape.Fields, out.Overflow, b.Overflow)
	return out
}

// MergeAll merges any number of Partials: the result is Merge's, folded
// over parts in any order (but for the rounding of double sums), computed
// in one pass. It is what a tier does with the latest Partial of each
// child.
func MergeAll(parts ...Partial) Partial {
	var best *Partial
	for i := range parts {
		if best == nil || newer(&parts[i], best) > 0 {
			best = &parts[i]
		}
	}
	if best == nil {
		return Partial{}
	}
	var same []*Partial
	for i := range parts {
		if p := &parts[i]; newer(p, best) == 0 && !p.empty() {
			same = append(same, p)
		}
	}
	switch len(same) {
	case 0:
		return *best // covers no destination, but has the newest shape
	case 1:
		return *same[0]
	case 2:
		return Merge(*same[0], *same[1])
	}

	out := Partial{Generation: best.Generation, SpecHash: best.SpecHash, Shape: best.Shape, Limit: best.Limit}
	var nGroups int
	for _, p := range same {
		out.Destinations += p.Destinations
		out.Selected += p.Selected
		out.FailingCount += p.FailingCount
		nGroups += len(p.Groups)
	}

	// Failing destinations and rows are bounded lists, sorted: merging
	// them two by two keeps every step short.
	for _, p := range same {
		out.Failing = mergeFailing(out.Failing, p.Failing)
		out.Rows = mergeRows(out.Rows, p.Rows, int(out.Limit))
	}

	fields := out.Shape.Fields
	fold := func(into []Accumulator, from []Accumulator) {
		for i, f := range fields {
			into[i] = mergeAccumulator(f.Type, into[i], from[i])
		}
	}
	var overflow []Accumulator
	spill := func(from []Accumulator) {
		if overflow == nil {
			overflow = make([]Accumulator, len(fields))
		}
		fold(overflow, from)
	}
	if nGroups > 0 {
		groups := make([]*Group, 0, nGroups)
		for _, p := range same {
			for i := range p.Groups {
				groups = append(groups, &p.Groups[i])
			}
		}
		slices.SortStableFunc(groups, func(x, y *Group) int { return compareKeys(x.Key, y.Key) })
		for i := 0; i < len(groups); {
			j := i + 1
			for j < len(groups) && compareKeys(groups[i].Key, groups[j].Key) == 0 {
				j++
			}
			if len(out.Groups) == int(out.Limit) {
				for _, g := range groups[i:j] {
					spill(g.Fields)
				}
			} else {
				g := Group{Key: groups[i].Key, Fields: slices.Clone(groups[i].Fields)}
				for _, h := range groups[i+1 : j] {
					fold(g.Fields, h.Fields)
				}
				out.Groups = append(out.Groups, g)
			}
			i = j
		}
	}
	for _, p := range same {
		if p.Overflow != nil {
			spill(p.Overflow.Fields)
		}
	}
	if overflow != nil {
		out.Overflow = &Group{Fields: overflow}
	}
	return out
}

// empty reports whether p covers no destination.
func (p *Partial) empty() bool {
	return p.Destinations == 0 && p.Groups == nil && p.Overflow == nil && p.Rows == nil && p.Failing == nil
}

// mergeFailing merges two lists sorted by name, keeping the first
// MaxFailingDestinations. A name in both (overlapping sets) keeps the
// lesser reason, so the result does not depend on the order.
func mergeFailing(a, b []v1alpha1.FailingDestination) []v1alpha1.FailingDestination {
	return mergeSorted(a, b, v1alpha1.MaxFailingDestinations,
		func(f v1alpha1.FailingDestination) string { return f.Name },
		func(x, y v1alpha1.FailingDestination) bool { return x.Reason < y.Reason })
}

// mergeRows merges two lists of select rows sorted by destination, keeping
// the first limit. A destination in both keeps the lesser row.
func mergeRows(a, b []Row, limit int) []Row {
	return mergeSorted(a, b, limit,
		func(r Row) string { return r.Destination },
		func(x, y Row) bool { return compareKeys(x.Columns, y.Columns) < 0 })
}

// mergeSorted merges two lists sorted by key, keeping the first limit. An
// element whose key is in both lists is kept once: b's when less(b's, a's),
// else a's.
func mergeSorted[T any](a, b []T, limit int, key func(T) string, less func(x, y T) bool) []T {
	if len(a) == 0 {
		return b
	}
	if len(b) == 0 {
		return a
	}
	out := make([]T, 0, min(len(a)+len(b), limit))
	for len(out) < limit && (len(a) > 0 || len(b) > 0) {
		var c int
		switch {
		case len(a) == 0:
			c = 1
		case len(b) == 0:
			c = -1
		default:
			if c = cmp.Compare(key(a[0]), key(b[0])); c == 0 {
				e := a[0]
				if less(b[0], e) {
					e = b[0]
				}
				out = append(out, e)
				a, b = a[1:], b[1:]
				continue
			}
		}
		if c < 0 {
			out = append(out, a[0])
			a = a[1:]
		} else {
			out = append(out, b[0])
			b = b[1:]
		}
	}
	return out
}

// mergeGroups merges two lists of groups sorted by key, combining groups
// of equal keys, and keeps the first limit; the others are folded into the
// returned overflow group (nil when there are none).
//
// Keeping the least keys is what makes a bounded Merge exact and
// associative: a group dropped by some merge had limit lesser keys beside
// it, which every later merge keeps too, so it can never come back; every
// group that is kept has had every contribution merged into it.
func mergeGroups(fields []FieldShape, a, b []Group, limit int) ([]Group, *Group) {
	if len(a) == 0 && len(b) <= limit {
		return b, nil
	}
	if len(b) == 0 && len(a) <= limit {
		return a, nil
	}
	out := make([]Group, 0, min(len(a)+len(b), limit))
	var overflow *Group
	for len(a) > 0 || len(b) > 0 {
		var g Group
		var c int
		switch {
		case len(a) == 0:
			c = 1
		case len(b) == 0:
			c = -1
		default:
			c = compareKeys(a[0].Key, b[0].Key)
		}
		switch {
		case c < 0:
			g, a = a[0], a[1:]
		case c > 0:
			g, b = b[0], b[1:]
		default:
			g = Group{Key: a[0].Key, Fields: mergeFields(fields, a[0].Fields, b[0].Fields)}
			a, b = a[1:], b[1:]
		}
		if len(out) < limit {
			out = append(out, g)
		} else {
			overflow = mergeOverflow(fields, overflow, &g)
		}
	}
	return out, overflow
}

// mergeOverflow folds group g into the overflow group o (either may be
// nil). The result has no key.
func mergeOverflow(fields []FieldShape, o, g *Group) *Group {
	switch {
	case g == nil:
		return o
	case o == nil:
		return &Group{Fields: g.Fields}
	}
	return &Group{Fields: mergeFields(fields, o.Fields, g.Fields)}
}

// mergeFields merges the accumulators of two groups.
func mergeFields(fields []FieldShape, a, b []Accumulator) []Accumulator {
	out := make([]Accumulator, len(fields))
	for i, f := range fields {
		out[i] = mergeAccumulator(f.Type, a[i], b[i])
	}
	return out
}

func mergeAccumulator(t v1alpha1.AggregationType, x, y Accumulator) Accumulator {
	switch {
	case y.N == 0 && !y.Floats:
		return x
	case x.N == 0 && !x.Floats:
		return y
	}
	out := Accumulator{N: x.N + y.N}
	switch t {
	case v1alpha1.AggregationSum, v1alpha1.AggregationAvg:
		out.Floats = x.Floats || y.Floats
		if s, ok := addInt(x.Int, y.Int); ok {
			out.Int, out.Float = s, x.Float+y.Float
		} else {
			// Out of the int64 range: the sum goes on as a double.
			out.Float, out.Floats = (Float(x.Int)+Float(y.Int))+(x.Float+y.Float), true
		}
	case v1alpha1.AggregationMin:
		out.Value = x.Value
		if Compare(y.Value, x.Value) < 0 {
			out.Value = y.Value
		}
	case v1alpha1.AggregationMax:
		out.Value = x.Value
		if Compare(y.Value, x.Value) > 0 {
			out.Value = y.Value
		}
	}
	return out
}

// addInt adds without overflowing; ok is false when the sum does not fit.
func addInt(a, b int64) (int64, bool) {
	s := a + b
	if (a > 0 && b > 0 && s < 0) || (a < 0 && b < 0 && s >= 0) {
		return 0, false
	}
	return s, true
}

// value renders an accumulator as a table cell.
func (acc Accumulator) value(t v1alpha1.AggregationType) v1alpha1.Value {
	switch t {
	case v1alpha1.AggregationCount:
		return v1alpha1.IntValue(acc.N)
	case v1alpha1.AggregationSum:
		if acc.Floats {
			return v1alpha1.FloatValue(float64(Float(acc.Int) + acc.Float))
		}
		return v1alpha1.IntValue(acc.Int)
	case v1alpha1.AggregationAvg:
		if acc.N == 0 {
			return v1alpha1.NullValue()
		}
		return v1alpha1.FloatValue((float64(acc.Int) + float64(acc.Float)) / float64(acc.N))
	case v1alpha1.AggregationMin, v1alpha1.AggregationMax:
		if acc.N == 0 {
			return v1alpha1.NullValue()
		}
		return acc.Value
	}
	return v1alpha1.NullValue()
}

// Result renders p as the table of collector name: for a select
// collector, the select columns of the first Limit destinations by name
// (OmittedRows counts the rest); for an aggregating one, the groupBy
// columns then the combined fields of each group (AVG is the sum divided
// by the count), the groups beyond the limit in Overflow. A collector
// without groupBy always has its one row, also over no object (COUNT and
// SUM 0, MIN, MAX and AVG null), as SQL aggregates do.
func (p Partial) Result(name string) v1alpha1.NamedStatusCombination {
	out := v1alpha1.NamedStatusCombination{Name: name}
	if len(p.Shape.Select) > 0 {
		out.ColumnNames = slices.Clone(p.Shape.Select)
		for _, r := range p.Rows {
			out.Rows = append(out.Rows, v1alpha1.StatusRow{Columns: slices.Clone(r.Columns)})
		}
		out.OmittedRows = max(0, p.Selected-int64(len(p.Rows)))
		return out
	}
	out.ColumnNames = append(out.ColumnNames, p.Shape.GroupBy...)
	for _, f := range p.Shape.Fields {
		out.ColumnNames = append(out.ColumnNames, f.Name)
	}
	if len(out.ColumnNames) == 0 {
		return out
	}
	groups := p.Groups
	if len(groups) == 0 && len(p.Shape.GroupBy) == 0 {
		groups = []Group{{Fields: make([]Accumulator, len(p.Shape.Fields))}}
	}
	for _, g := range groups {
		out.Rows = append(out.Rows, p.row(g.Key, g.Fields))
	}
	if p.Overflow != nil {
		row := p.row(make([]v1alpha1.Value, len(p.Shape.GroupBy)), p.Overflow.Fields)
		out.Overflow = &row
	}
	return out
}

func (p *Partial) row(key []v1alpha1.Value, fields []Accumulator) v1alpha1.StatusRow {
	cols := make([]v1alpha1.Value, 0, len(key)+len(fields))
	cols = append(cols, key...)
	for i, f := range p.Shape.Fields {
		cols = append(cols, fields[i].value(f.Type))
	}
	return v1alpha1.StatusRow{Columns: cols}
}

// Fill writes into cs the results of its placement's collectors, one
// Partial per collector name, sorted by name, and the destination counts:
// Destinations, Failing and FailingCount are those of the Partial covering
// the most destinations (ties: the first by name). Partials computed with
// EvaluateAll agree on them. Object, Placement, ObservedRevision and the
// metadata are the caller's; so are results for collectors that have no
// Partial (v1alpha1.NamedStatusCombination.Error), appended after.
func Fill(cs *v1alpha1.CombinedStatus, parts map[string]Partial) {
	names := make([]string, 0, len(parts))
	for n := range parts {
		names = append(names, n)
	}
	slices.Sort(names)
	cs.Results = make([]v1alpha1.NamedStatusCombination, 0, len(names))
	cs.Destinations, cs.Failing, cs.FailingCount = 0, nil, 0
	best := ""
	for _, n := range names {
		p := parts[n]
		cs.Results = append(cs.Results, p.Result(n))
		if best == "" || p.Destinations > parts[best].Destinations {
			best = n
		}
	}
	if best != "" {
		p := parts[best]
		cs.Destinations, cs.FailingCount = p.Destinations, p.FailingCount
		cs.Failing = slices.Clone(p.Failing)
	}
}

// errMalformed prefixes the errors of decoding a Partial that is not well
// formed.
var errMalformed = errors.New("status: malformed partial")

// UnmarshalJSON decodes a Partial and checks that it is well formed:
// every group, row and accumulator fits the shape, lists are sorted, unique
// and within their bounds, and counts are consistent.
func (p *Partial) UnmarshalJSON(b []byte) error {
	type plain Partial
	var q plain
	if err := json.Unmarshal(b, &q); err != nil {
		return err
	}
	if err := (*Partial)(&q).check(); err != nil {
		return fmt.Errorf("%w: %v", errMalformed, err)
	}
	*p = Partial(q)
	return nil
}

func (p *Partial) check() error {
	nf := len(p.Shape.Fields)
	switch {
	case p.Limit < 0 || p.Limit > v1alpha1.MaxStatusCollectorLimit:
		return fmt.Errorf("limit %d", p.Limit)
	case p.Destinations < 0 || p.Selected < 0 || p.FailingCount < 0:
		return errors.New("negative count")
	case p.Selected > p.Destinations || p.FailingCount > p.Destinations:
		return fmt.Errorf("%d selected and %d failing of %d destinations", p.Selected, p.FailingCount, p.Destinations)
	case int64(len(p.Groups)) > p.Limit || int64(len(p.Rows)) > p.Limit:
		return fmt.Errorf("more than %d groups or rows", p.Limit)
	case len(p.Failing) > v1alpha1.MaxFailingDestinations || int64(len(p.Failing)) > p.FailingCount:
		return fmt.Errorf("%d failing destinations, count %d", len(p.Failing), p.FailingCount)
	case int64(len(p.Rows)) > p.Selected:
		return fmt.Errorf("%d rows, %d selected", len(p.Rows), p.Selected)
	case len(p.Shape.Select) > 0 && (nf > 0 || len(p.Shape.GroupBy) > 0):
		return errors.New("select with groupBy or combined fields")
	}
	for _, f := range p.Shape.Fields {
		switch f.Type {
		case v1alpha1.AggregationCount, v1alpha1.AggregationSum, v1alpha1.AggregationAvg, v1alpha1.AggregationMin, v1alpha1.AggregationMax:
		default:
			return fmt.Errorf("field %q: aggregation %q", f.Name, f.Type)
		}
	}
	for i, g := range p.Groups {
		if len(g.Key) != len(p.Shape.GroupBy) || len(g.Fields) != nf {
			return fmt.Errorf("group %d does not fit the shape", i)
		}
		if i > 0 && compareKeys(p.Groups[i-1].Key, g.Key) >= 0 {
			return fmt.Errorf("groups %d and %d out of order", i-1, i)
		}
	}
	if p.Overflow != nil && (len(p.Overflow.Key) != 0 || len(p.Overflow.Fields) != nf) {
		return errors.New("overflow does not fit the shape")
	}
	for i, r := range p.Rows {
		if len(r.Columns) != len(p.Shape.Select) {
			return fmt.Errorf("row %d does not fit the shape", i)
		}
		if i > 0 && p.Rows[i-1].Destination >= r.Destination {
			return fmt.Errorf("rows %d and %d out of order", i-1, i)
		}
	}
	for i := 1; i < len(p.Failing); i++ {
		if p.Failing[i-1].Name >= p.Failing[i].Name {
			return fmt.Errorf("failing destinations %d and %d out of order", i-1, i)
		}
	}
	return nil
}
