package status

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"sync"

	"github.com/google/cel-go/cel"
	"github.com/google/cel-go/common/types"
	"github.com/google/cel-go/ext"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/apiserver/pkg/cel/library"

	"github.com/canopy-dev/canopy/topology/api/v1alpha1"
)

// MaxCost bounds the runtime cost (in CEL cost units, roughly one per
// operation and per element visited) of one evaluation of one expression;
// beyond it the evaluation fails.
const MaxCost = 1_000_000

// Bounds of names and expressions, as the CRD schema has them.
const (
	maxNameLength       = 63
	maxExpressionLength = 4096
)

// Names of the CEL variables.
const (
	varObject      = "obj"
	varAssociated  = "associated"
	varDestination = "destination"
)

// env is the CEL environment every expression compiles in; building it is
// costly, so it is built once.
var env = sync.OnceValues(func() (*cel.Env, error) {
	objType := cel.MapType(cel.StringType, cel.DynType)
	return cel.NewEnv(
		cel.Variable(varObject, objType),
		cel.Variable(varAssociated, cel.ListType(objType)),
		cel.Variable(varDestination, cel.MapType(cel.StringType, cel.DynType)),
		cel.OptionalTypes(),
		cel.DefaultUTCTimeZone(true),
		cel.CrossTypeNumericComparisons(true),
		ext.Strings(ext.StringsVersion(2)),
		ext.Sets(),
		ext.Math(),
		library.Lists(),
		library.Regex(),
		library.Quantity(),
		library.URLs(),
	)
})

// Collector is a compiled StatusCollector. It is immutable and safe for
// concurrent use.
type Collector struct {
	name       string
	generation int64
	specHash   string
	limit      int64
	shape      Shape

	filter  *expression // nil: every object
	groupBy []expression
	fields  []expression // prog is nil for COUNT
	sel     []expression
}

// expression is one compiled expression and where it came from.
type expression struct {
	path string // spec.groupBy[1].def
	prog cel.Program
}

// Shape is what a collector's table looks like: its column names and, for
// combined fields, how they aggregate. A Partial carries it so that tiers
// merge and render without the collector.
type Shape struct {
	GroupBy []string     `json:"groupBy,omitempty"`
	Fields  []FieldShape `json:"fields,omitempty"`
	Select  []string     `json:"select,omitempty"`
}

// FieldShape names a combined field and its aggregation.
type FieldShape struct {
	Name string                   `json:"name"`
	Type v1alpha1.AggregationType `json:"type"`
}

// Name returns the StatusCollector's name.
func (c *Collector) Name() string { return c.name }

// Limit returns the most rows a result holds.
func (c *Collector) Limit() int64 { return c.limit }

// Compile compiles and type-checks every expression of sc and checks the
// rest of its spec as the CRD schema does (names, bounds, the choice
// between select and aggregation), so that a collector that passes is one
// the edge can evaluate. Each error carries its field path:
// spec.filter, spec.groupBy[1].def, spec.combinedFields[0].subject,
// spec.select[2].name, spec.limit. Expression types: filter must be a
// bool; groupBy and select a string, number, bool or null; the subjects of
// SUM and AVG numbers; those of MIN and MAX numbers or strings; an
// expression of type dyn (any field of obj) passes, and is checked when
// evaluated. A Limit of 0 means v1alpha1.DefaultStatusCollectorLimit.
func Compile(sc *v1alpha1.StatusCollector) (*Collector, field.ErrorList) {
	e, err := env()
	if err != nil {
		return nil, field.ErrorList{field.InternalError(nil, fmt.Errorf("status: CEL environment: %w", err))}
	}
	spec := &sc.Spec
	specPath := field.NewPath("spec")
	c := &Collector{name: sc.Name, generation: sc.Generation, limit: spec.Limit}
	var errs field.ErrorList

	if c.limit == 0 {
		c.limit = v1alpha1.DefaultStatusCollectorLimit
	}
	if c.limit < 1 || c.limit > v1alpha1.MaxStatusCollectorLimit {
		errs = append(errs, field.Invalid(specPath.Child("limit"), spec.Limit,
			fmt.Sprintf("must be between 1 and %d", v1alpha1.MaxStatusCollectorLimit)))
	}

	aggregating := len(spec.GroupBy) > 0 || len(spec.CombinedFields) > 0
	switch {
	case len(spec.Select) > 0 && aggregating:
		errs = append(errs, field.Forbidden(specPath.Child("select"), "select cannot be combined with groupBy or combinedFields"))
	case len(spec.Select) == 0 && !aggregating:
		errs = append(errs, field.Required(specPath, "one of groupBy, combinedFields or select is required"))
	}

	if spec.Filter != "" {
		x, err := compileExpr(e, specPath.Child("filter"), spec.Filter, checkBool)
		if err != nil {
			errs = append(errs, err)
		} else {
			c.filter = &x
		}
	}

	// groupBy and combinedFields are columns of one table: their names
	// are unique together.
	columns := map[string]bool{}
	checkName := func(p *field.Path, name string) {
		switch {
		case name == "":
			errs = append(errs, field.Required(p, ""))
		case len(name) > maxNameLength:
			errs = append(errs, field.TooLong(p, "", maxNameLength))
		case columns[name]:
			errs = append(errs, field.Duplicate(p, name))
		}
		columns[name] = true
	}
	checkCount := func(p *field.Path, n int) {
		if n > v1alpha1.MaxStatusExpressions {
			errs = append(errs, field.TooMany(p, n, v1alpha1.MaxStatusExpressions))
		}
	}

	// named compiles the scalar columns of spec's child (groupBy, select)
	// and returns their expressions and names, in order.
	named := func(child string, list []v1alpha1.NamedExpression) (xs []expression, names []string) {
		checkCount(specPath.Child(child), len(list))
		for i, n := range list {
			p := specPath.Child(child).Index(i)
			checkName(p.Child("name"), n.Name)
			x, err := compileExpr(e, p.Child("def"), n.Def, checkScalar)
			if err != nil {
				errs = append(errs, err)
			}
			xs, names = append(xs, x), append(names, n.Name)
		}
		return xs, names
	}

	c.groupBy, c.shape.GroupBy = named("groupBy", spec.GroupBy)

	checkCount(specPath.Child("combinedFields"), len(spec.CombinedFields))
	for i, f := range spec.CombinedFields {
		p := specPath.Child("combinedFields").Index(i)
		checkName(p.Child("name"), f.Name)
		var x expression
		switch f.Type {
		case v1alpha1.AggregationCount:
			if f.Subject != "" {
				errs = append(errs, field.Forbidden(p.Child("subject"), "COUNT counts objects and takes no subject"))
			}
		case v1alpha1.AggregationSum, v1alpha1.AggregationAvg, v1alpha1.AggregationMin, v1alpha1.AggregationMax:
			check := checkNumber
			if f.Type == v1alpha1.AggregationMin || f.Type == v1alpha1.AggregationMax {
				check = checkOrdered
			}
			if f.Subject == "" {
				errs = append(errs, field.Required(p.Child("subject"), fmt.Sprintf("subject is required for %s", f.Type)))
				break
			}
			var err *field.Error
			if x, err = compileExpr(e, p.Child("subject"), f.Subject, check); err != nil {
				errs = append(errs, err)
			}
		default:
			errs = append(errs, field.NotSupported(p.Child("type"), f.Type, []string{
				string(v1alpha1.AggregationCount), string(v1alpha1.AggregationSum), string(v1alpha1.AggregationMin),
				string(v1alpha1.AggregationMax), string(v1alpha1.AggregationAvg)}))
		}
		c.fields = append(c.fields, x)
		c.shape.Fields = append(c.shape.Fields, FieldShape{Name: f.Name, Type: f.Type})
	}

	columns = map[string]bool{}
	c.sel, c.shape.Select = named("select", spec.Select)

	if len(errs) > 0 {
		return nil, errs
	}
	normalized := *spec.DeepCopy()
	normalized.Limit = c.limit
	b, err := json.Marshal(normalized)
	if err != nil {
		return nil, field.ErrorList{field.InternalError(specPath, err)}
	}
	sum := sha256.Sum256(b)
	c.specHash = hex.EncodeToString(sum[:8])
	return c, nil
}

// Validate compiles a StatusCollector given as an unstructured object, as
// the API server's admission does on create and update: nil when it
// compiles, else the errors of Compile (paths from the object's root).
func Validate(obj *unstructured.Unstructured) field.ErrorList {
	var sc v1alpha1.StatusCollector
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(obj.UnstructuredContent(), &sc); err != nil {
		return field.ErrorList{field.Invalid(field.NewPath("spec"), nil, err.Error())}
	}
	_, errs := Compile(&sc)
	return errs
}

// compileExpr compiles src at path and checks its result type with check,
// which returns what is wrong or "".
func compileExpr(e *cel.Env, path *field.Path, src string, check func(*cel.Type) string) (expression, *field.Error) {
	switch {
	case src == "":
		return expression{}, field.Required(path, "")
	case len(src) > maxExpressionLength:
		return expression{}, field.TooLong(path, "", maxExpressionLength)
	}
	ast, iss := e.Compile(src)
	if iss.Err() != nil {
		return expression{}, field.Invalid(path, src, "compilation failed: "+iss.Err().Error())
	}
	if msg := check(ast.OutputType()); msg != "" {
		return expression{}, field.Invalid(path, src, msg)
	}
	prog, err := e.Program(ast, cel.EvalOptions(cel.OptOptimize), cel.CostLimit(MaxCost))
	if err != nil {
		return expression{}, field.Invalid(path, src, "program construction failed: "+err.Error())
	}
	return expression{path: path.String(), prog: prog}, nil
}

func isDyn(t *cel.Type) bool {
	switch t.Kind() {
	case types.DynKind, types.AnyKind, types.TypeParamKind:
		return true
	}
	return false
}

func checkBool(t *cel.Type) string {
	if t.Kind() == types.BoolKind || isDyn(t) {
		return ""
	}
	return "must evaluate to a bool, not " + t.String()
}

func checkScalar(t *cel.Type) string {
	switch t.Kind() {
	case types.BoolKind, types.IntKind, types.UintKind, types.DoubleKind, types.StringKind, types.NullTypeKind:
		return ""
	}
	if isDyn(t) {
		return ""
	}
	return "must evaluate to a string, number, bool or null, not " + t.String()
}

func checkNumber(t *cel.Type) string {
	switch t.Kind() {
	case types.IntKind, types.UintKind, types.DoubleKind:
		return ""
	}
	if isDyn(t) {
		return ""
	}
	return "must evaluate to a number (int, uint or double), not " + t.String()
}

func checkOrdered(t *cel.Type) string {
	if t.Kind() == types.StringKind || checkNumber(t) == "" {
		return ""
	}
	return "must evaluate to a number (int, uint or double) or a string, not " + t.String()
}
