package server

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/canopy-dev/canopy/relay/layout"
	"github.com/canopy-dev/canopy/relay/pki"
	"github.com/canopy-dev/canopy/relay/store"
	"github.com/canopy-dev/canopy/test/poll"
	edgev1alpha1 "github.com/canopy-dev/canopy/topology/api/v1alpha1"
)

// BenchmarkFanout measures one change delivered to 100 edges, through
// 10 regions (tree) or with every edge dialing the root (flat): ns/op is
// the time until the last edge has it; root-bytes/op what the root sent
// on its links per change; p50-ms / p99-ms the per-edge delivery latency.
//
//	go test ./relay/server -run '^$' -bench Fanout -benchtime 50x
func BenchmarkFanout(b *testing.B) {
	b.Run("tree-10x10", func(b *testing.B) { benchFanout(b, 10, 10) })
	b.Run("flat-100", func(b *testing.B) { benchFanout(b, 0, 100) })
}

func benchFanout(b *testing.B, regions, edgesPer int) {
	root := startTestRoot(b)
	token := joinToken(b, root)
	type edgeInfo struct {
		name  string
		child *Child
	}
	var edges []edgeInfo
	var dests []string // every edge: the change targets them all
	addEdge := func(parent, name string) {
		c := startTestChild(b, ChildConfig{Role: pki.RoleEdge, Name: name, DataDir: b.TempDir(),
			Parents: []string{parent}, JoinToken: token, InMemory: true})
		edges = append(edges, edgeInfo{name, c})
	}
	if regions == 0 {
		for i := range edgesPer {
			name := fmt.Sprintf("e-%d", i)
			addEdge(root.LinkAddr(), name)
			dests = append(dests, name)
		}
	} else {
		for r := range regions {
			rname := fmt.Sprintf("r-%d", r)
			region := startTestChild(b, ChildConfig{Role: pki.RoleRegion, Name: rname, DataDir: b.TempDir(),
				Parents: []string{root.LinkAddr()}, JoinToken: token, LinkAddr: "127.0.0.1:0", InMemory: true})
			poll.True(b, rname+" serving", func() bool { return region.LinkAddr() != "" })
			for e := range edgesPer {
				name := fmt.Sprintf("e-%d-%d", r, e)
				addEdge(region.LinkAddr(), name)
				dests = append(dests, name)
			}
		}
	}
	poll.True(b, "every destination announced at the root", func() bool {
		dests, _ := root.down.Subtree()
		return len(dests) == len(edges)
	})

	// One object in the downsync space targets every edge: the root's
	// mailboxes (one per root child) are views of it.
	k := store.Key{Space: layout.DownsyncSpace, Resource: store.Resource{Resource: "configmaps"}, Namespace: "default", Name: "bench"}
	write := func(i int) {
		data := fmt.Sprintf(`{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"bench","namespace":"default","annotations":{%q:%q}},"data":{"v":"%d","payload":%q}}`,
			edgev1alpha1.DestinationsAnnotation, strings.Join(dests, ","), i, strings.Repeat("x", 512))
		if cur, err := root.Store().Get(k); err == nil {
			if _, err := root.Store().Update(context.Background(), k, []byte(data), cur.Revision); err != nil {
				b.Fatal(err)
			}
		} else if _, err := root.Store().Create(context.Background(), k, []byte(data)); err != nil {
			b.Fatal(err)
		}
	}
	// arrival: each edge's watcher reports when it holds version i.
	type arrival struct {
		edge int
		v    string
		at   time.Time
	}
	arrivals := make(chan arrival, len(edges)*4)
	ctx, cancel := context.WithCancel(context.Background())
	b.Cleanup(cancel)
	for i, e := range edges {
		w, err := e.child.Store().Watch(ctx, store.WatchOptions{Space: layout.InboxSpace})
		if err != nil {
			b.Fatal(err)
		}
		go func() {
			for ev := range w.Events() {
				if ev.Object != nil && ev.Type != store.Deleted {
					v := string(ev.Object.Data)
					if j := strings.Index(v, `"v":"`); j >= 0 {
						v = v[j+5:]
						v = v[:strings.IndexByte(v, '"')]
						arrivals <- arrival{i, v, time.Now()}
					}
				}
			}
		}()
	}
	rootBytes := func() uint64 {
		var n uint64
		for _, c := range root.Children() {
			n += c.Down.BytesSent
		}
		return n
	}
	write(-1) // warm: the object exists everywhere before timing
	waitAll := func(v string, start time.Time, lat []time.Duration) []time.Duration {
		got := map[int]bool{}
		deadline := time.After(30 * time.Second)
		for len(got) < len(edges) {
			select {
			case a := <-arrivals:
				if a.v == v && !got[a.edge] {
					got[a.edge] = true
					lat = append(lat, a.at.Sub(start))
				}
			case <-deadline:
				b.Fatalf("version %s reached %d of %d edges", v, len(got), len(edges))
			}
		}
		return lat
	}
	waitAll("-1", time.Now(), nil)

	var lat []time.Duration
	bytes0 := rootBytes()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		start := time.Now()
		write(i)
		lat = waitAll(fmt.Sprint(i), start, lat)
	}
	b.StopTimer()
	slices.Sort(lat)
	b.ReportMetric(float64(rootBytes()-bytes0)/float64(b.N), "root-bytes/op")
	b.ReportMetric(float64(lat[len(lat)/2].Microseconds())/1000, "p50-ms")
	b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds())/1000, "p99-ms")
}
