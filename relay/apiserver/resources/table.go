package resources

import (
	"slices"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// table is a TableConvertor made of column definitions and a function
// computing one row's cells from the object's JSON map.
type table struct {
	columns []metav1.TableColumnDefinition
	cells   func(o object, now time.Time) []any
}

// Columns returns a copy of the column definitions.
func (t *table) Columns() []metav1.TableColumnDefinition { return slices.Clone(t.columns) }

// Cells returns the row for obj; a nil obj prints as an empty object.
func (t *table) Cells(obj *unstructured.Unstructured, now time.Time) []any {
	var o object
	if obj != nil {
		o = object(obj.Object)
	}
	return t.cells(o, now)
}

var objectMetaDocs = metav1.ObjectMeta{}.SwaggerDoc()

// DefaultTable returns the table kube-apiserver prints for a kind without a
// printer of its own (roles, CRDs, custom resources without
// additionalPrinterColumns): NAME and CREATED AT, the creation timestamp in
// RFC 3339, UTC.
func DefaultTable() TableConvertor { return defaultTable }

var defaultTable = &table{
	columns: []metav1.TableColumnDefinition{
		nameColumn,
		{Name: "Created At", Type: "date", Description: objectMetaDocs["creationTimestamp"]},
	},
	cells: func(o object, _ time.Time) []any {
		return []any{o.name(), o.time("metadata", "creationTimestamp").UTC().Format(time.RFC3339)}
	},
}

// Columns shared by most tables.
var (
	nameColumn = metav1.TableColumnDefinition{Name: "Name", Type: "string", Format: "name", Description: objectMetaDocs["name"]}
	ageColumn  = metav1.TableColumnDefinition{Name: "Age", Type: "string", Description: objectMetaDocs["creationTimestamp"]}
	// Wide columns of the workload controllers.
	containersColumn = wide("Containers", "string", "Names of each container in the template.")
	imagesColumn     = wide("Images", "string", "Images referenced by each container in the template.")
)

// column returns a default (Priority 0) column definition.
func column(name, typ, description string) metav1.TableColumnDefinition {
	return metav1.TableColumnDefinition{Name: name, Type: typ, Description: description}
}

// wide returns a column shown only with -o wide (Priority 1).
func wide(name, typ, description string) metav1.TableColumnDefinition {
	return metav1.TableColumnDefinition{Name: name, Type: typ, Priority: 1, Description: description}
}

// nameAgeTable prints NAME and AGE (kube's printer for DeviceClasses and
// ResourceClaimTemplates).
var nameAgeTable = &table{
	columns: []metav1.TableColumnDefinition{nameColumn, ageColumn},
	cells: func(o object, now time.Time) []any {
		return []any{o.name(), o.age(now)}
	},
}
