package status

import (
	"encoding/json"
	"fmt"
	"testing"
)

// BenchmarkEvaluate evaluates readyByZone (a filter, one groupBy, seven
// combined fields, some walking the associated objects) on a Deployment
// with its ReplicaSet and 10 Pods: the work of an edge per status change.
func BenchmarkEvaluate(b *testing.B) {
	c := mustCompile(b, "ready-by-zone", readyByZone)
	obj, assoc := deployment(b, 7, 10, 1)
	dest := Destination{Name: "edge-1", Labels: map[string]string{"zone": "eu", "tier": "store"}}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := c.Evaluate(obj, assoc, dest); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkMerge100 merges the Partials of 100 children, each already the
// merge of 10 destinations over 5 zones: the work of a tier per status
// wave. The encoded size of the result is reported, to show it does not
// grow with the number of destinations.
func BenchmarkMerge100(b *testing.B) {
	c := mustCompile(b, "ready-by-zone", readyByZone)
	children := make([]Partial, 100)
	for i := range children {
		for j := range 10 {
			obj, assoc := deployment(b, (i+j)%4, 3, j%3)
			p, err := c.Evaluate(obj, assoc, Destination{Name: fmt.Sprintf("edge-%03d-%02d", i, j),
				Labels: map[string]string{"zone": fmt.Sprint("zone-", (i*10+j)%5)}})
			if err != nil {
				b.Fatal(err)
			}
			children[i] = Merge(children[i], p)
		}
	}
	for _, how := range []struct {
		name  string
		merge func([]Partial) Partial
	}{{"MergeAll", func(p []Partial) Partial { return MergeAll(p...) }}, {"Merge-fold", fold}} {
		b.Run(how.name, func(b *testing.B) {
			var total Partial
			b.ReportAllocs()
			for b.Loop() {
				total = how.merge(children)
			}
			if total.Destinations != 1000 {
				b.Fatalf("%d destinations", total.Destinations)
			}
			enc, _ := json.Marshal(total)
			one, _ := json.Marshal(children[0])
			b.ReportMetric(float64(len(enc)), "bytes/result")
			b.ReportMetric(float64(len(one)), "bytes/child")
		})
	}
}

// BenchmarkMerge100Select is BenchmarkMerge100 for a select collector
// with the default limit (20 rows).
func BenchmarkMerge100Select(b *testing.B) {
	c := mustCompile(b, "s", `{select: [{name: d, def: "destination.name"}, {name: ready, def: "obj.status.?readyReplicas.orValue(0)"}]}`)
	children := make([]Partial, 100)
	for i := range children {
		for j := range 10 {
			obj, assoc := deployment(b, j%4, 3, 0)
			p, err := c.Evaluate(obj, assoc, Destination{Name: fmt.Sprintf("edge-%02d-%03d", j, i)})
			if err != nil {
				b.Fatal(err)
			}
			children[i] = Merge(children[i], p)
		}
	}
	b.ReportAllocs()
	for b.Loop() {
		_ = MergeAll(children...)
	}
}

// BenchmarkPartialJSON encodes and decodes a merged Partial, as a link
// does.
func BenchmarkPartialJSON(b *testing.B) {
	c := mustCompile(b, "ready-by-zone", readyByZone)
	var total Partial
	for j := range 50 {
		obj, assoc := deployment(b, j%4, 3, 0)
		p, _ := c.Evaluate(obj, assoc, Destination{Name: fmt.Sprint("edge-", j), Labels: map[string]string{"zone": fmt.Sprint(j % 5)}})
		total = Merge(total, p)
	}
	b.ReportAllocs()
	for b.Loop() {
		enc, err := json.Marshal(total)
		if err != nil {
			b.Fatal(err)
		}
		var back Partial
		if err := json.Unmarshal(enc, &back); err != nil {
			b.Fatal(err)
		}
	}
}
