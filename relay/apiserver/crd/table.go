package crd

import (
	"bytes"
	"encoding/json"
	"fmt"
	"reflect"
	"slices"
	"sync"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/duration"
	"k8s.io/client-go/util/jsonpath"
)

// TableConvertor renders custom resources as rows of a meta.k8s.io Table,
// the server-side printing kubectl get asks for.
type TableConvertor interface {
	// Columns returns the column definitions, NAME first.
	Columns() []metav1.TableColumnDefinition
	// Cells returns one row's cells, one per column; ages and date columns
	// are relative to now.
	Cells(obj *unstructured.Unstructured, now time.Time) []any
}

var metadataDescriptions = metav1.ObjectMeta{}.SwaggerDoc()

// columnTable is kube's CRD table convertor
// (apiextensions-apiserver/pkg/registry/customresource/tableconvertor) with
// the clock made explicit: that package computes ages with time.Since and
// returns whole Tables, so the cells are built here, the same way.
type columnTable struct {
	headers []metav1.TableColumnDefinition // NAME, then one per path

	// mu guards paths: a JSONPath keeps evaluation state while it walks
	// {range} blocks.
	mu    sync.Mutex
	paths []*jsonpath.JSONPath
}

// newTable builds the table for a version's additionalPrinterColumns. As in
// kube, no columns means a single AGE column, and a column whose JSONPath
// does not parse ends the list (validation admits no such path).
func newTable(cols []apiextensionsv1.CustomResourceColumnDefinition) *columnTable {
	if len(cols) == 0 {
		cols = []apiextensionsv1.CustomResourceColumnDefinition{{
			Name:        "Age",
			Type:        "date",
			Description: metadataDescriptions["creationTimestamp"],
			JSONPath:    ".metadata.creationTimestamp",
		}}
	}
	t := &columnTable{headers: []metav1.TableColumnDefinition{
		{Name: "Name", Type: "string", Format: "name", Description: metadataDescriptions["name"]},
	}}
	for _, col := range cols {
		path := jsonpath.New(col.Name)
		if err := path.Parse(fmt.Sprintf("{%s}", col.JSONPath)); err != nil {
			break
		}
		path.AllowMissingKeys(true)
		desc := col.Description
		if desc == "" {
			desc = fmt.Sprintf("Custom resource definition column (in JSONPath format): %s", col.JSONPath)
		}
		t.paths = append(t.paths, path)
		t.headers = append(t.headers, metav1.TableColumnDefinition{
			Name:        col.Name,
			Type:        col.Type,
			Format:      col.Format,
			Description: desc,
			Priority:    col.Priority,
		})
	}
	return t
}

// Columns implements TableConvertor. The result is a copy.
func (t *columnTable) Columns() []metav1.TableColumnDefinition {
	return slices.Clone(t.headers)
}

// Cells implements TableConvertor. It is safe for concurrent use.
func (t *columnTable) Cells(obj *unstructured.Unstructured, now time.Time) []any {
	cells := make([]any, 1, len(t.headers))
	cells[0] = obj.GetName()

	t.mu.Lock()
	defer t.mu.Unlock()
	var buf bytes.Buffer
	for i, path := range t.paths {
		typ := t.headers[i+1].Type
		results, err := path.FindResults(obj.UnstructuredContent())
		if err != nil || len(results) == 0 || len(results[0]) == 0 {
			cells = append(cells, nil)
			continue
		}
		// Printer column paths are simple: the first result is the value.
		value := results[0][0].Interface()
		if typ == "string" {
			buf.Reset()
			if err := path.PrintResults(&buf, []reflect.Value{reflect.ValueOf(value)}); err != nil {
				cells = append(cells, nil)
				continue
			}
			cells = append(cells, buf.String())
			continue
		}
		cells = append(cells, cell(typ, value, now))
	}
	return cells
}

// cell converts a JSON value to the cell type of a non-string column, as
// kube's tableconvertor does; a value of the wrong type gives nil.
func cell(typ string, value any, now time.Time) any {
	switch typ {
	case "integer":
		switch v := value.(type) {
		case int64:
			return v
		case float64:
			return int64(v)
		case json.Number:
			if i, err := v.Int64(); err == nil {
				return i
			}
		}
	case "number":
		switch v := value.(type) {
		case int64:
			return float64(v)
		case float64:
			return v
		case json.Number:
			if f, err := v.Float64(); err == nil {
				return f
			}
		}
	case "boolean":
		if b, ok := value.(bool); ok {
			return b
		}
	case "date":
		if s, ok := value.(string); ok {
			var ts metav1.Time
			if err := ts.UnmarshalQueryParameter(s); err != nil {
				return "<invalid>"
			}
			if ts.IsZero() {
				return "<unknown>"
			}
			return duration.HumanDuration(now.Sub(ts.Time))
		}
	}
	return nil
}
