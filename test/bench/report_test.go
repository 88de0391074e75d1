package bench

import (
	"strings"
	"testing"
	"time"
)

const sample = `goos: linux
goarch: amd64
pkg: github.com/canopy-dev/canopy/test/bench
cpu: AMD EPYC
BenchmarkAPI/target=kube/op=create-2         	       1	   1800000 ns/op	       555.5 ops/s	        25.00 p50-ms	        80.00 p99-ms
BenchmarkAPI/target=canopy-1/op=create-2     	       1	    432174 ns/op	      2314 ops/s	         5.838 p50-ms	        17.68 p99-ms
BenchmarkAPI/target=kube/op=list-100-2       	       1	   2000000 ns/op	       500.0 ops/s	         2.000 p50-ms	         4.000 p99-ms
BenchmarkAPI/target=canopy-1/op=list-100-2   	       1	   2416186 ns/op	       413.9 ops/s	         2.312 p50-ms	         5.638 p99-ms
--- FAIL: BenchmarkAPI/target=canopy-3
pkg: github.com/canopy-dev/canopy/relay/store
BenchmarkGet-2   	 5000000	       449.0 ns/op	       0 B/op	       0 allocs/op
PASS
`

func TestParseBench(t *testing.T) {
	bs, err := ParseBench(strings.NewReader(sample))
	if err != nil {
		t.Fatal(err)
	}
	if len(bs) != 5 {
		t.Fatalf("parsed %d results, want 5: %+v", len(bs), bs)
	}
	g := bs[4]
	if g.Name != "Get" || g.Pkg != "github.com/canopy-dev/canopy/relay/store" || g.N != 5000000 ||
		g.Metrics["ns/op"] != 449 || g.Metrics["allocs/op"] != 0 || len(g.Units) != 3 {
		t.Errorf("last result = %+v", g)
	}
	if bs[1].Name != "API/target=canopy-1/op=create" || bs[1].Metrics["ops/s"] != 2314 {
		t.Errorf("second result = %+v", bs[1])
	}
	if _, err := ParseBench(strings.NewReader("BenchmarkX-2  1  12 ns/op 3\n")); err == nil {
		t.Error("a value without a unit parsed")
	}
}

func TestCompareAndMisses(t *testing.T) {
	bs, err := ParseBench(strings.NewReader(sample))
	if err != nil {
		t.Fatal(err)
	}
	rows := Compare(bs)
	// create: ops/s and p99; list-100: p50 and p99.
	if len(rows) != 4 || rows[0].Op != "create" || rows[0].Unit != "ops/s" || rows[2].Unit != "p50-ms" {
		t.Fatalf("rows = %+v", rows)
	}
	if a, _ := rows[0].Advantage("canopy-1"); a < 4.16 || a > 4.17 { // 2314 / 555.5
		t.Errorf("create advantage = %v, want 4.166", a)
	}
	if a, _ := rows[2].Advantage("canopy-1"); a > 0.87 || a < 0.86 { // latency: 2.000 / 2.312
		t.Errorf("list p50 advantage = %v, want 0.865", a)
	}
	if _, ok := rows[0].Advantage("canopy-3"); ok {
		t.Error("an advantage for a target that was not measured")
	}
	miss := Misses(rows, "canopy-1")
	if len(miss) != 2 || miss[0].Op != "list-100" || miss[1].Op != "list-100" {
		t.Errorf("misses = %+v, want both list-100 rows", miss)
	}
	table := CompareTable(rows)
	if !strings.Contains(table, "| create | ops/s | 556 | 2314 | – | 4.17× | – |") {
		t.Errorf("create row missing or wrong in\n%s", table)
	}
	if !strings.Contains(table, "**0.87× (below 1.5×)**") {
		t.Errorf("list-100 miss not marked in\n%s", table)
	}
}

func TestParseSim(t *testing.T) {
	out := []byte("progress…\n{\"scenario\":\"flat-vs-tree\",\"topology\":\"1x10x10\",\"edges\":100," +
		"\"flat_vs_tree\":{\"root_bytes_ratio\":9.5,\"tree_p99_ms\":120},\"ok\":true}\n")
	s, err := ParseSim(out)
	if err != nil {
		t.Fatal(err)
	}
	if s.Edges != 100 || s.FlatVsTree == nil || s.FlatVsTree.RootBytesRatio != 9.5 || !s.OK || s.Partition != nil {
		t.Errorf("parsed %+v", s)
	}
	if _, err := ParseSim([]byte("failed to start\n")); err != ErrNoJSON {
		t.Errorf("no JSON: err = %v, want ErrNoJSON", err)
	}
}

func TestReplaceGenerated(t *testing.T) {
	doc := "# B\n\nintro\n\n" + BeginMarker + "\nold\n" + EndMarker + "\n\n## Kept\n"
	got, err := ReplaceGenerated(doc, "new\n")
	if err != nil {
		t.Fatal(err)
	}
	want := "# B\n\nintro\n\n" + BeginMarker + "\nnew\n" + EndMarker + "\n\n## Kept\n"
	if got != want {
		t.Errorf("got\n%s\nwant\n%s", got, want)
	}
	if _, err := ReplaceGenerated("# B\n"+EndMarker+"\n"+BeginMarker+"\n", "x"); err == nil {
		t.Error("markers in the wrong order accepted")
	}
	got, _ = ReplaceGenerated("# B\n", "gen\n")
	if !strings.HasSuffix(got, BeginMarker+"\ngen\n"+EndMarker+"\n") {
		t.Errorf("without markers: %q", got)
	}
}

func TestNumAndPercentile(t *testing.T) {
	for v, want := range map[float64]string{12345.6: "12 346", 2314: "2314", 555.5: "556", 25.04: "25.0", 73: "73", 0: "0", 5.838: "5.84", 0.4567: "0.457"} {
		if got := Num(v); got != want {
			t.Errorf("Num(%v) = %q, want %q", v, got, want)
		}
	}
	var lat []time.Duration
	for i := 1; i <= 100; i++ {
		lat = append(lat, time.Duration(i)*time.Millisecond)
	}
	if p := Percentile(lat, 0.99); p != 99*time.Millisecond {
		t.Errorf("p99 of 1..100 ms = %v", p)
	}
	if p := Percentile(lat, 0.5); p != 50*time.Millisecond {
		t.Errorf("p50 of 1..100 ms = %v", p)
	}
	if Percentile(nil, 0.5) != 0 {
		t.Error("percentile of nothing")
	}
}
