package crd

import (
	"reflect"
	"sync"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestTableColumns(t *testing.T) {
	type col struct {
		Name, Type, Format string
		Priority           int32
	}
	columns := func(cs []metav1.TableColumnDefinition) []col {
		var out []col
		for _, c := range cs {
			if c.Description == "" {
				t.Errorf("column %s has no description", c.Name)
			}
			out = append(out, col{c.Name, c.Type, c.Format, c.Priority})
		}
		return out
	}

	widgets := compile(t, widgetsYAML)
	want := []col{
		{"Name", "string", "name", 0},
		{"Size", "integer", "", 0},
		{"Colour", "string", "", 0},
		{"Phase", "string", "", 0},
		{"Updated", "date", "", 0},
		{"Replicas", "integer", "", 1},
		{"Age", "date", "", 0},
	}
	if got := columns(widgets.Version("v1").Table.Columns()); !reflect.DeepEqual(got, want) {
		t.Errorf("v1 columns = %v\nwant %v", got, want)
	}

	// Without additionalPrinterColumns kube shows NAME and AGE.
	want = []col{{"Name", "string", "name", 0}, {"Age", "date", "", 0}}
	if got := columns(widgets.Version("v1beta1").Table.Columns()); !reflect.DeepEqual(got, want) {
		t.Errorf("v1beta1 columns = %v\nwant %v", got, want)
	}
	if got := columns(compile(t, gadgetsYAML).Version("v1").Table.Columns()); !reflect.DeepEqual(got, want) {
		t.Errorf("gadget columns = %v\nwant %v", got, want)
	}
}

func TestTableCells(t *testing.T) {
	now := time.Date(2026, 1, 5, 3, 4, 5, 0, time.UTC) // 3 days after creation
	table := compile(t, widgetsYAML).Version("v1").Table
	tests := []struct {
		name string
		obj  string
		want []any
	}{{
		name: "all set",
		obj: widget + `  colour: blue
status: {phase: Running, lastUpdated: "2026-01-05T01:34:05Z"}
`,
		want: []any{"w1", int64(3), "blue", "Running", "90m", int64(2), "3d"},
	}, {
		name: "missing values",
		obj:  "apiVersion: example.canopy.dev/v1\nkind: Widget\nmetadata: {name: w2, namespace: default}\nspec: {size: 1.5}",
		want: []any{"w2", int64(1), nil, nil, nil, nil, nil},
	}, {
		name: "bad date",
		obj:  widget + "status: {lastUpdated: yesterday}",
		want: []any{"w1", int64(3), nil, nil, "<invalid>", int64(2), "3d"},
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := table.Cells(objectFrom(t, tt.obj), now); !reflect.DeepEqual(got, tt.want) {
				t.Errorf("cells = %#v\nwant %#v", got, tt.want)
			}
		})
	}
}

func TestTableConcurrentCells(t *testing.T) {
	table := compile(t, widgetsYAML).Version("v1").Table
	obj := objectFrom(t, widget)
	now := time.Date(2026, 1, 2, 4, 4, 5, 0, time.UTC)
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for range 50 {
				if got := table.Cells(obj, now); got[len(got)-1] != "60m" {
					t.Errorf("age = %v", got[len(got)-1])
				}
			}
		})
	}
	wg.Wait()
}
