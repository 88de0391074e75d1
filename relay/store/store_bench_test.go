package store

import (
	"context"
	"fmt"
	"strconv"
	"sync"
	"testing"

	"k8s.io/apimachinery/pkg/fields"
)

// benchData is a pod-sized object of about 600 bytes.
var benchData = body("0a1b2c3d-4e5f-6789-abcd-ef0123456789",
	map[string]string{"app": "web", "tier": "frontend", "canopy.dev/placement": "edge-eu"},
	map[string]any{
		"replicas": 3,
		"template": map[string]any{
			"containers": []any{map[string]any{
				"name":      "web",
				"image":     "registry.example.com/web:1.27.3",
				"ports":     []any{map[string]any{"containerPort": 8080, "protocol": "TCP"}},
				"resources": map[string]any{"requests": map[string]any{"cpu": "250m", "memory": "256Mi"}},
				"env":       []any{map[string]any{"name": "MODE", "value": "production"}},
			}},
			"nodeSelector": map[string]any{"kubernetes.io/os": "linux"},
		},
	})

// benchStore returns a store holding n objects in space ws, resource pods,
// spread over 10 namespaces, and their keys.
func benchStore(b *testing.B, n int) (*Store, []Key) {
	s := New(Options{})
	b.Cleanup(s.Close)
	keys := make([]Key, n)
	ops := make([]Op, 0, 1000)
	for i := range keys {
		keys[i] = key("ws", pods, fmt.Sprint("ns", i%10), fmt.Sprintf("pod-%06d", i))
		ops = append(ops, Op{Type: OpCreate, Key: keys[i], Data: benchData})
		if len(ops) == cap(ops) || i == n-1 {
			if _, err := s.Txn(context.Background(), ops...); err != nil {
				b.Fatal(err)
			}
			ops = ops[:0]
		}
	}
	return s, keys
}

func BenchmarkCreate(b *testing.B) {
	s := New(Options{})
	b.Cleanup(s.Close)
	ctx := context.Background()
	b.ReportAllocs()
	b.SetBytes(int64(len(benchData)))
	i := 0
	for b.Loop() {
		if _, err := s.Create(ctx, key("ws", pods, "ns", strconv.Itoa(i)), benchData); err != nil {
			b.Fatal(err)
		}
		i++
	}
}

// BenchmarkCreateFields is BenchmarkCreate with an Options.Fields that
// reads an annotation (as the relays' stores do for every kind without
// field selectors of its own) or the whole object (pods' spec.nodeName).
func BenchmarkCreateFields(b *testing.B) {
	for _, bc := range []struct {
		read   string
		fields func(Resource, *FieldSource) fields.Set
	}{
		{"annotation", func(_ Resource, v *FieldSource) fields.Set { return fields.Set{"a": v.Annotation("a")} }},
		{"object", nodeFields},
	} {
		b.Run("read="+bc.read, func(b *testing.B) {
			s := New(Options{Fields: bc.fields})
			b.Cleanup(s.Close)
			ctx := context.Background()
			b.ReportAllocs()
			i := 0
			for b.Loop() {
				if _, err := s.Create(ctx, key("ws", pods, "ns", strconv.Itoa(i)), benchData); err != nil {
					b.Fatal(err)
				}
				i++
			}
		})
	}
}

func BenchmarkGet(b *testing.B) {
	s, keys := benchStore(b, 10_000)
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		if _, err := s.Get(keys[i%len(keys)]); err != nil {
			b.Fatal(err)
		}
		i += 7919 // a prime: visit keys out of order
	}
}

func BenchmarkList(b *testing.B) {
	for _, n := range []int{100, 10_000} {
		s, _ := benchStore(b, n)
		b.Run(fmt.Sprintf("objects=%d", n), func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				res, err := s.List(ListOptions{Space: "ws", Resource: pods})
				if err != nil || len(res.Items) != n {
					b.Fatal(len(res.Items), err)
				}
			}
		})
		b.Run(fmt.Sprintf("objects=%d/limit=50", n), func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				res, err := s.List(ListOptions{Space: "ws", Resource: pods, Limit: 50})
				if err != nil || len(res.Items) != 50 || res.Remaining != int64(n-50) {
					b.Fatal(len(res.Items), res.Remaining, err)
				}
			}
		})
	}
}

// BenchmarkListPaged walks every page of a list of 10 000 objects, 100 per
// page (ns/op is per full walk of 100 pages). With writes, an update lands
// between pages, so each page after the first is served while the state
// moves on (and each write after a first page pays the copy-on-write of
// the paths it touches).
func BenchmarkListPaged(b *testing.B) {
	const n, limit = 10_000, 100
	s, keys := benchStore(b, n)
	ctx := context.Background()
	for _, writes := range []bool{false, true} {
		b.Run(fmt.Sprintf("objects=%d/limit=%d/writes=%v", n, limit, writes), func(b *testing.B) {
			b.ReportAllocs()
			i := 0
			for b.Loop() {
				opts := ListOptions{Space: "ws", Resource: pods, Limit: limit}
				got := 0
				for {
					res, err := s.List(opts)
					if err != nil {
						b.Fatal(err)
					}
					got += len(res.Items)
					if res.Continue == "" {
						break
					}
					opts.After = res.Continue
					if writes {
						if _, err := s.Update(ctx, keys[i%n], benchData, 0); err != nil {
							b.Fatal(err)
						}
						i += 7919
					}
				}
				if got != n {
					b.Fatalf("listed %d objects, want %d", got, n)
				}
			}
		})
	}
}

// BenchmarkWatchFanout1000 measures one update applied and delivered to
// 1 000 watchers of its resource.
func BenchmarkWatchFanout1000(b *testing.B) {
	const watchers = 1000
	s, keys := benchStore(b, 1)
	ctx := context.Background()
	var delivered sync.WaitGroup
	for range watchers {
		countDeliveries(b, s, WatchOptions{Space: "ws", Resource: pods}, &delivered)
	}
	b.ReportAllocs()
	for b.Loop() {
		delivered.Add(watchers)
		if _, err := s.Update(ctx, keys[0], benchData, 0); err != nil {
			b.Fatal(err)
		}
		delivered.Wait()
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*watchers), "ns/delivery")
}

// BenchmarkWatchAddressed measures a write addressed to one of 10 000
// children, each followed by a watcher of the space (a root's routed
// mailboxes): Addressed watchers, each over its own set record, against
// plain ones that each take every event and judge it. An iteration, the
// creation of an object, ends when every watcher that gets it has it.
func BenchmarkWatchAddressed(b *testing.B) {
	const children = 10_000
	for _, addressed := range []bool{true, false} {
		b.Run(map[bool]string{true: "addressed", false: "plain"}[addressed], func(b *testing.B) {
			s := New(Options{Addresses: specNames})
			b.Cleanup(s.Close)
			ctx := context.Background()
			ops := make([]Op, 0, children)
			for i := range children {
				ops = append(ops, Op{Type: OpCreate, Key: key("", routes, "", fmt.Sprint("c", i)), Data: body("r", nil, fmt.Sprint("d", i))})
			}
			if _, err := s.Txn(ctx, ops...); err != nil {
				b.Fatal(err)
			}
			var delivered sync.WaitGroup
			for i := range children {
				opts := WatchOptions{Space: "ws"}
				if addressed {
					opts.Addressed = &Addressing{Set: key("", routes, "", fmt.Sprint("c", i)), Names: specNames}
				}
				countDeliveries(b, s, opts, &delivered)
			}
			per := children
			if addressed {
				per = 1
			}
			i := 0
			b.ReportAllocs()
			for b.Loop() {
				delivered.Add(per)
				if _, err := s.Create(ctx, key("ws", pods, "ns", fmt.Sprint("o", i)), body("u", nil, fmt.Sprint("d", i%children))); err != nil {
					b.Fatal(err)
				}
				delivered.Wait()
				i++
			}
		})
	}
}

// countDeliveries starts a watch that marks each event it gets done on
// delivered.
func countDeliveries(b *testing.B, s *Store, opts WatchOptions, delivered *sync.WaitGroup) {
	w, err := s.Watch(context.Background(), opts)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(w.Stop)
	go func() {
		for range w.Events() {
			delivered.Done()
		}
	}()
}
