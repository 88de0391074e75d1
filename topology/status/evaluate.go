package status

import (
	"errors"
	"fmt"

	"github.com/google/cel-go/common/types"
	"github.com/google/cel-go/common/types/ref"
	"github.com/google/cel-go/interpreter"

	"github.com/canopy-dev/canopy/topology/api/v1alpha1"
)

// Errors of evaluation that are not about an expression.
var (
	ErrNoDestination = errors.New("status: the destination has no name")
	ErrNoObject      = errors.New("status: the object is not at the destination")
)

// Destination is what a collector's expressions see of the destination:
// the SyncTarget's name and labels. Labels are read, never written.
type Destination struct {
	Name   string
	Labels map[string]string
}

// EvalError is an expression that failed at a destination.
type EvalError struct {
	Collector string // the StatusCollector's name
	Path      string // the expression's field path: spec.groupBy[0].def
	Err       error  // what CEL said, or what is wrong with the value
}

func (e *EvalError) Error() string {
	return fmt.Sprintf("status collector %s: %s: %v", e.Collector, e.Path, e.Err)
}

func (e *EvalError) Unwrap() error { return e.Err }

// Empty returns the Partial of no destination, with the collector's
// version and shape: its Result is the collector's table with no row (or
// the one row of a collector without groupBy).
func (c *Collector) Empty() Partial {
	return Partial{Generation: c.generation, SpecHash: c.specHash, Shape: c.shape, Limit: c.limit}
}

// Failed returns the Partial of one failing destination: the object could
// not be applied or its status not read there, or an expression failed.
// reason is cut to v1alpha1.MaxFailingReasonLength bytes.
func (c *Collector) Failed(dest, reason string) Partial {
	p := c.Empty()
	p.Destinations, p.FailingCount = 1, 1
	p.Failing = []v1alpha1.FailingDestination{{Name: dest, Reason: cutReason(reason)}}
	return p
}

// Evaluate returns one destination's Partial: nothing but the count of
// destinations when the filter is false; else its select row, or its
// group with one value per combined field. obj is the placed object as the
// destination has it (decoded JSON, numbers as int64 or float64),
// associated the objects it owns; neither is changed.
//
// When an expression fails (an error in CEL, such as a missing key, a
// value of the wrong type, MaxCost exceeded), Evaluate returns the
// Partial of a failing destination (Failed, with the error as reason) and
// the error, an *EvalError: the Partial is what to send upward either
// way. A nil obj fails with ErrNoObject; an empty dest.Name returns the
// zero Partial and ErrNoDestination.
func (c *Collector) Evaluate(obj map[string]any, associated []map[string]any, dest Destination) (Partial, error) {
	if dest.Name == "" {
		return Partial{}, ErrNoDestination
	}
	if obj == nil {
		return c.Failed(dest.Name, ErrNoObject.Error()), ErrNoObject
	}
	act, err := activation(obj, associated, dest)
	if err != nil {
		return c.Failed(dest.Name, err.Error()), err
	}
	return c.evaluate(act, dest.Name)
}

// EvaluateAll evaluates several collectors (those one placement names) at
// one destination, reading obj, associated and dest once. A destination
// fails as a whole: when any collector fails there, every returned Partial
// is that destination failing, with the first failure as reason, so that
// the tables of one CombinedStatus describe the same destinations and
// their failing lists and counts agree. The error is the first failure.
func EvaluateAll(collectors []*Collector, obj map[string]any, associated []map[string]any, dest Destination) ([]Partial, error) {
	out := make([]Partial, len(collectors))
	if dest.Name == "" {
		return out, ErrNoDestination
	}
	fail := func(err error) ([]Partial, error) {
		for i, c := range collectors {
			out[i] = c.Failed(dest.Name, err.Error())
		}
		return out, err
	}
	if obj == nil {
		return fail(ErrNoObject)
	}
	act, err := activation(obj, associated, dest)
	if err != nil {
		return fail(err)
	}
	for i, c := range collectors {
		if out[i], err = c.evaluate(act, dest.Name); err != nil {
			return fail(err)
		}
	}
	return out, nil
}

// activation binds the CEL variables.
func activation(obj map[string]any, associated []map[string]any, dest Destination) (interpreter.Activation, error) {
	assoc := make([]ref.Val, len(associated))
	for i, a := range associated {
		assoc[i] = types.NewStringInterfaceMap(types.DefaultTypeAdapter, a)
	}
	labels := dest.Labels
	if labels == nil {
		labels = map[string]string{}
	}
	return interpreter.NewActivation(map[string]any{
		varObject:      types.NewStringInterfaceMap(types.DefaultTypeAdapter, obj),
		varAssociated:  types.NewRefValList(types.DefaultTypeAdapter, assoc),
		varDestination: map[string]any{"name": dest.Name, "labels": labels},
	})
}

func (c *Collector) evaluate(act interpreter.Activation, dest string) (Partial, error) {
	p := c.Empty()
	p.Destinations = 1
	fail := func(x *expression, err error) (Partial, error) {
		e := &EvalError{Collector: c.name, Path: x.path, Err: err}
		return c.Failed(dest, e.Error()), e
	}
	if c.filter != nil {
		v, err := c.eval(c.filter, act)
		if err != nil {
			return fail(c.filter, err)
		}
		b, ok := v.(types.Bool)
		if !ok {
			return fail(c.filter, fmt.Errorf("got %s, want a bool", typeName(v)))
		}
		if !b {
			return p, nil
		}
	}
	if len(c.sel) > 0 {
		row := Row{Destination: dest, Columns: make([]v1alpha1.Value, len(c.sel))}
		for i := range c.sel {
			x := &c.sel[i]
			v, err := c.eval(x, act)
			if err == nil {
				row.Columns[i], err = scalar(v)
			}
			if err != nil {
				return fail(x, err)
			}
		}
		p.Selected = 1
		p.Rows = []Row{row}
		return p, nil
	}
	g := Group{Key: make([]v1alpha1.Value, len(c.groupBy)), Fields: make([]Accumulator, len(c.fields))}
	for i := range c.groupBy {
		x := &c.groupBy[i]
		v, err := c.eval(x, act)
		if err == nil {
			g.Key[i], err = scalar(v)
		}
		if err != nil {
			return fail(x, err)
		}
	}
	if len(g.Key) == 0 {
		g.Key = nil
	}
	for i, f := range c.shape.Fields {
		x := &c.fields[i]
		if f.Type == v1alpha1.AggregationCount {
			g.Fields[i].N = 1
			continue
		}
		v, err := c.eval(x, act)
		if err != nil {
			return fail(x, err)
		}
		acc := &g.Fields[i]
		switch f.Type {
		case v1alpha1.AggregationSum, v1alpha1.AggregationAvg:
			n, ok, err := summand(v)
			if err != nil {
				return fail(x, err)
			}
			if ok {
				acc.N = 1
				if n.isFloat {
					acc.Float, acc.Floats = Float(n.f), true
				} else {
					acc.Int = n.i
				}
			}
		case v1alpha1.AggregationMin, v1alpha1.AggregationMax:
			val, ok, err := ordered(v)
			if err != nil {
				return fail(x, err)
			}
			if ok {
				acc.N, acc.Value = 1, val
			}
		}
	}
	p.Groups = []Group{g}
	return p, nil
}

func (c *Collector) eval(x *expression, act interpreter.Activation) (ref.Val, error) {
	v, _, err := x.prog.Eval(act)
	if err != nil {
		return nil, err
	}
	if types.IsError(v) {
		return nil, fmt.Errorf("%v", v)
	}
	return v, nil
}

// cutReason shortens a failure reason to what a FailingDestination holds.
func cutReason(s string) string {
	const ellipsis = "..."
	if len(s) <= v1alpha1.MaxFailingReasonLength {
		return s
	}
	return truncate(s, v1alpha1.MaxFailingReasonLength-len(ellipsis)) + ellipsis
}
