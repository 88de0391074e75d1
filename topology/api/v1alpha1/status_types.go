package v1alpha1

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"strconv"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
)

// Kinds and resources of reported-state summaries (DESIGN.md section 4),
// both served in every workload description space.
const (
	KindStatusCollector = "StatusCollector"
	KindCombinedStatus  = "CombinedStatus"

	ResourceStatusCollectors = "statuscollectors"
	ResourceCombinedStatuses = "combinedstatuses"
)

// GroupVersionResources of the reported-state kinds, for dynamic clients.
var (
	StatusCollectorsGVR = SchemeGroupVersion.WithResource(ResourceStatusCollectors)
	CombinedStatusesGVR = SchemeGroupVersion.WithResource(ResourceCombinedStatuses)
)

func init() {
	SchemeBuilder.Register(func(scheme *runtime.Scheme) error {
		scheme.AddKnownTypes(SchemeGroupVersion,
			&StatusCollector{}, &StatusCollectorList{},
			&CombinedStatus{}, &CombinedStatusList{},
		)
		return nil
	})
}

// Bounds of status collectors and their results. The CRD schemas enforce
// the same numbers; a test keeps the two in step.
const (
	// DefaultStatusCollectorLimit is StatusCollectorSpec.Limit when left
	// out.
	DefaultStatusCollectorLimit = 20
	// MaxStatusCollectorLimit bounds StatusCollectorSpec.Limit, hence the
	// rows of one result.
	MaxStatusCollectorLimit = 1000
	// MaxStatusExpressions bounds each of groupBy, combinedFields and
	// select, so a result has at most 2*MaxStatusExpressions columns.
	MaxStatusExpressions = 16
	// MaxFailingDestinations bounds CombinedStatus.Failing; the rest are
	// only counted (FailingCount).
	MaxFailingDestinations = 100
	// MaxFailingReasonLength bounds FailingDestination.Reason (bytes).
	MaxFailingReasonLength = 1024
	// MaxStatusValueLength bounds a string Value (bytes): longer strings
	// that expressions produce are cut to it.
	MaxStatusValueLength = 256
)

// AggregationType is how a combined field folds the values of the objects
// of one group.
//
// +kubebuilder:validation:Enum=COUNT;SUM;MIN;MAX;AVG
type AggregationType string

const (
	// AggregationCount counts the objects of the group; it takes no
	// subject.
	AggregationCount AggregationType = "COUNT"
	// AggregationSum adds the subject's values (numbers).
	AggregationSum AggregationType = "SUM"
	// AggregationMin keeps the least of the subject's values (numbers or
	// strings).
	AggregationMin AggregationType = "MIN"
	// AggregationMax keeps the greatest of the subject's values (numbers
	// or strings).
	AggregationMax AggregationType = "MAX"
	// AggregationAvg averages the subject's values (numbers): it carries
	// their sum and count up the tree and divides at the end.
	AggregationAvg AggregationType = "AVG"
)

// StatusCollector says how to summarize the reported state of the objects
// an EdgePlacement places (EdgePlacementSpec.StatusCollectors names it).
// Its expressions are CEL, evaluated at each destination against:
//
//	obj          map    the placed object as the destination has it, status included
//	associated   list   objects the placed object owns (the ReplicaSets and Pods of a Deployment)
//	destination  map    name (the SyncTarget's name) and labels (its labels)
//
// A collector either aggregates (groupBy and combinedFields, one row per
// group) or selects (select, one row per destination), never both. Every
// aggregation merges, so each tier of the relay tree combines its
// children's partial results and forwards one partial result upward; the
// root writes the final table into a CombinedStatus. It lives in a
// workload description space (WDS).
//
// +kubebuilder:object:root=true
// +kubebuilder:resource:scope=Cluster,shortName=stc,categories=canopy
// +kubebuilder:printcolumn:name="Filter",type=string,JSONPath=`.spec.filter`,description="Only objects for which this expression is true are summarized."
// +kubebuilder:printcolumn:name="Limit",type=integer,JSONPath=`.spec.limit`,description="The most rows a result holds."
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type StatusCollector struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// +required
	Spec StatusCollectorSpec `json:"spec"`
}

// StatusCollectorSpec is what to collect. Column names (the names of
// groupBy and combinedFields together, or of select) are unique.
//
// +kubebuilder:validation:XValidation:rule="!has(self.select) || (!has(self.groupBy) && !has(self.combinedFields))",message="select cannot be combined with groupBy or combinedFields"
// +kubebuilder:validation:XValidation:rule="has(self.select) || has(self.groupBy) || has(self.combinedFields)",message="one of groupBy, combinedFields or select is required"
// +kubebuilder:validation:XValidation:rule="!has(self.groupBy) || !has(self.combinedFields) || self.groupBy.all(g, self.combinedFields.all(c, c.name != g.name))",message="groupBy and combinedFields names must differ: they are columns of one table"
type StatusCollectorSpec struct {
	// Filter is a CEL expression of type bool: only objects for which it
	// is true are summarized. Left out, every object is.
	// +optional
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=4096
	Filter string `json:"filter,omitempty"`

	// GroupBy are the columns that group objects: one row per distinct
	// combination of their values (string, number, bool or null). Left
	// out, all objects form one group.
	// +optional
	// +listType=map
	// +listMapKey=name
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=16
	GroupBy []NamedExpression `json:"groupBy,omitempty"`

	// CombinedFields are the columns that aggregate each group, after the
	// groupBy columns.
	// +optional
	// +listType=map
	// +listMapKey=name
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=16
	CombinedFields []CombinedField `json:"combinedFields,omitempty"`

	// Select are the columns of one row per destination (string, number,
	// bool or null), for the first Limit destinations by name.
	// +optional
	// +listType=map
	// +listMapKey=name
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=16
	Select []NamedExpression `json:"select,omitempty"`

	// Limit is the most rows a result holds: select keeps the first Limit
	// destinations by name; an aggregation keeps the first Limit groups
	// in the order of their groupBy values and folds the others into one
	// overflow row.
	// +optional
	// +kubebuilder:default=20
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=1000
	Limit int64 `json:"limit,omitempty"`
}

// NamedExpression is a named CEL expression: one column of a result.
type NamedExpression struct {
	// Name is the column's name.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	Name string `json:"name"`
	// Def is the CEL expression.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=4096
	Def string `json:"def"`
}

// CombinedField is a column that aggregates the objects of one group.
//
// +kubebuilder:validation:XValidation:rule="self.type != 'COUNT' || !has(self.subject)",message="COUNT counts objects and takes no subject",fieldPath=".subject",reason=FieldValueForbidden
// +kubebuilder:validation:XValidation:rule="self.type == 'COUNT' || has(self.subject)",message="subject is required for SUM, MIN, MAX and AVG",fieldPath=".subject",reason=FieldValueRequired
type CombinedField struct {
	// Name is the column's name.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	Name string `json:"name"`
	// Type is the aggregation: COUNT, SUM, MIN, MAX or AVG.
	// +required
	Type AggregationType `json:"type"`
	// Subject is the CEL expression aggregated: a number for SUM and AVG,
	// a number or a string for MIN and MAX. A null value is left out (it
	// is not counted by AVG). COUNT takes none.
	// +optional
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=4096
	Subject string `json:"subject,omitempty"`
}

// StatusCollectorList is a list of StatusCollectors.
//
// +kubebuilder:object:root=true
type StatusCollectorList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []StatusCollector `json:"items"`
}

// Labels the root sets on every CombinedStatus, so that `kubectl get
// combinedstatuses -l ...` finds one placement's or one object's. The
// placement's is PlacementLabel. Values longer than a label value allows
// (63 characters) are left out; the fields always name both.
const (
	// ObjectResourceLabel is the object's resource and group, as
	// deployments.apps (or configmaps for the core group).
	ObjectResourceLabel = GroupName + "/object-resource"
	// ObjectNameLabel is the object's name.
	ObjectNameLabel = GroupName + "/object-name"
)

// CombinedStatus is the reported state of one workload object under one
// EdgePlacement, summarized over every destination the placement put it
// on: one result table per StatusCollector the placement names, and the
// destinations that failed. The root writes it (users only read it) in the
// object's namespace, in the object's space; it sets PlacementLabel,
// ObjectResourceLabel and ObjectNameLabel.
//
// +kubebuilder:object:root=true
// +kubebuilder:resource:scope=Namespaced,shortName=cst,categories=canopy
// +kubebuilder:printcolumn:name="Resource",type=string,JSONPath=`.object.resource`,priority=1,description="The placed object's resource."
// +kubebuilder:printcolumn:name="Object",type=string,JSONPath=`.object.name`,description="The placed object's name."
// +kubebuilder:printcolumn:name="Placement",type=string,JSONPath=`.placement`,description="The EdgePlacement that placed it."
// +kubebuilder:printcolumn:name="Destinations",type=integer,JSONPath=`.destinations`,description="Destinations that reported."
// +kubebuilder:printcolumn:name="Failing",type=integer,JSONPath=`.failingCount`,description="Destinations that failed."
// +kubebuilder:printcolumn:name="Revision",type=string,JSONPath=`.observedRevision`,priority=1,description="The root revision of the object the results describe."
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type CombinedStatus struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// Object is the placed workload object.
	// +required
	Object ObjectReference `json:"object"`
	// Placement is the EdgePlacement's name.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	Placement string `json:"placement"`

	// Results has one table per StatusCollector the placement names, in
	// the order of their names.
	// +optional
	// +listType=map
	// +listMapKey=name
	// +kubebuilder:validation:MaxItems=32
	Results []NamedStatusCombination `json:"results,omitempty"`

	// Destinations counts the destinations that reported (failing ones
	// included).
	// +optional
	// +kubebuilder:validation:Minimum=0
	Destinations int64 `json:"destinations"`
	// Failing lists the first MaxFailingDestinations (100) failing
	// destinations by name; FailingCount counts them all.
	// +optional
	// +listType=map
	// +listMapKey=name
	// +kubebuilder:validation:MaxItems=100
	Failing []FailingDestination `json:"failing,omitempty"`
	// FailingCount counts the failing destinations, listed or not.
	// +optional
	// +kubebuilder:validation:Minimum=0
	FailingCount int64 `json:"failingCount"`

	// ObservedRevision is the root revision (resourceVersion in this
	// space) of the placed object that the results describe.
	// +optional
	// +kubebuilder:validation:MaxLength=64
	ObservedRevision string `json:"observedRevision,omitempty"`
}

// NamedStatusCombination is the result table of one StatusCollector:
// select collectors have one row per destination (the first Limit by
// destination name), aggregating ones one row per group (the groupBy
// columns, then the combinedFields columns).
type NamedStatusCombination struct {
	// Name is the StatusCollector's name.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	Name string `json:"name"`
	// ColumnNames name the columns of every row.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=32
	// +kubebuilder:validation:items:MaxLength=63
	ColumnNames []string `json:"columnNames,omitempty"`
	// Rows of the table, at most the collector's limit.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=1000
	Rows []StatusRow `json:"rows,omitempty"`
	// Overflow aggregates the groups beyond the limit, in one row whose
	// groupBy columns are null; absent when every group has its row.
	// +optional
	Overflow *StatusRow `json:"overflow,omitempty"`
	// OmittedRows counts the destinations of a select collector whose
	// rows are beyond the limit.
	// +optional
	// +kubebuilder:validation:Minimum=0
	OmittedRows int64 `json:"omittedRows,omitempty"`
	// Error says why there is no table: the collector does not exist, or
	// it does not compile.
	// +optional
	// +kubebuilder:validation:MaxLength=1024
	Error string `json:"error,omitempty"`
}

// StatusRow is one row of a result table.
type StatusRow struct {
	// Columns hold one value per column name.
	// +required
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=32
	Columns []Value `json:"columns"`
}

// FailingDestination is a destination at which the object failed: it
// could not be applied, or a collector's expression failed on it.
type FailingDestination struct {
	// Name is the destination's (SyncTarget's) name.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	Name string `json:"name"`
	// Reason says what failed.
	// +optional
	// +kubebuilder:validation:MaxLength=1024
	Reason string `json:"reason,omitempty"`
}

// CombinedStatusList is a list of CombinedStatuses.
//
// +kubebuilder:object:root=true
type CombinedStatusList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []CombinedStatus `json:"items"`
}

// Value is one cell of a result table: a JSON string, number, boolean or
// null, written as itself (columns: ["eu", 3, true, null]). The zero
// Value is null. Values are comparable with ==: each is kept in one
// canonical form, where a number with an integral value that fits int64
// is written as an integer (2.0 is 2) and other numbers in the shortest
// form that reads back as the same float64.
//
// +kubebuilder:validation:Type=""
// +kubebuilder:pruning:PreserveUnknownFields
type Value struct {
	raw string `json:"-"` // canonical JSON text; "" is null
}

// ValueKind is the JSON type of a Value.
type ValueKind int

// Value kinds, in the order that status summaries sort them.
const (
	NullValueKind ValueKind = iota
	BoolValueKind
	NumberValueKind
	StringValueKind
)

// NullValue returns null (the zero Value).
func NullValue() Value { return Value{} }

// BoolValue returns b.
func BoolValue(b bool) Value {
	if b {
		return Value{raw: "true"}
	}
	return Value{raw: "false"}
}

// IntValue returns i.
func IntValue(i int64) Value { return Value{raw: strconv.FormatInt(i, 10)} }

// FloatValue returns f: as an integer when f is integral and fits int64;
// NaN and infinities, which JSON cannot write, as the strings "NaN",
// "+Inf" and "-Inf".
func FloatValue(f float64) Value {
	switch {
	case math.IsNaN(f):
		return StringValue("NaN")
	case math.IsInf(f, 1):
		return StringValue("+Inf")
	case math.IsInf(f, -1):
		return StringValue("-Inf")
	case f == math.Trunc(f) && f >= -(1<<63) && f < 1<<63:
		return IntValue(int64(f))
	}
	return Value{raw: strconv.FormatFloat(f, 'g', -1, 64)}
}

// StringValue returns s.
func StringValue(s string) Value {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(s) // a string always encodes (invalid UTF-8 becomes U+FFFD)
	return Value{raw: string(bytes.TrimSuffix(buf.Bytes(), []byte("\n")))}
}

// Kind returns v's JSON type.
func (v Value) Kind() ValueKind {
	switch {
	case v.raw == "" || v.raw == "null":
		return NullValueKind
	case v.raw == "true" || v.raw == "false":
		return BoolValueKind
	case v.raw[0] == '"':
		return StringValueKind
	}
	return NumberValueKind
}

// IsNull reports whether v is null.
func (v Value) IsNull() bool { return v.Kind() == NullValueKind }

// Interface returns v as nil, bool, int64 (integers), float64 (other
// numbers) or string.
func (v Value) Interface() any {
	switch v.Kind() {
	case NullValueKind:
		return nil
	case BoolValueKind:
		return v.raw == "true"
	case StringValueKind:
		var s string
		_ = json.Unmarshal([]byte(v.raw), &s)
		return s
	}
	if i, err := strconv.ParseInt(v.raw, 10, 64); err == nil {
		return i
	}
	f, _ := strconv.ParseFloat(v.raw, 64)
	return f
}

// String returns v as JSON text.
func (v Value) String() string {
	if v.raw == "" {
		return "null"
	}
	return v.raw
}

// MarshalJSON writes v as a JSON scalar.
func (v Value) MarshalJSON() ([]byte, error) { return []byte(v.String()), nil }

// UnmarshalJSON reads a JSON string, number, boolean or null, in any
// form, into its canonical form; objects and arrays are an error.
func (v *Value) UnmarshalJSON(b []byte) error {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	var x any
	if err := dec.Decode(&x); err != nil {
		return err
	}
	switch x := x.(type) {
	case nil:
		*v = Value{}
	case bool:
		*v = BoolValue(x)
	case string:
		*v = StringValue(x)
	case json.Number:
		if i, err := x.Int64(); err == nil {
			*v = IntValue(i)
			return nil
		}
		f, err := strconv.ParseFloat(x.String(), 64)
		if err != nil && !math.IsInf(f, 0) {
			return fmt.Errorf("v1alpha1: value %s: %w", x, err)
		}
		*v = FloatValue(f)
	default:
		return fmt.Errorf("v1alpha1: a status value is a string, number, boolean or null, not %T", x)
	}
	return nil
}
