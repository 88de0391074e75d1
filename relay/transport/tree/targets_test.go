package tree

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/canopy-dev/canopy/relay/store"
)

// The index of a long list of targets answers as a scan of the list
// does: whether a subtree holds one of them, which ones in the list's
// order, and which moved destinations they touch.
func TestTargetsIndex(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for _, n := range []int{0, 1, 5, indexedTargets - 1, indexedTargets, 200} {
		for trial := range 50 {
			names := make([]string, n)
			for i := range names {
				names[i] = fmt.Sprintf("d%d", rng.IntN(3*n+1))
			}
			if trial%2 == 0 { // half the lists without duplicates
				slices.Sort(names)
				names = slices.Compact(names)
				rng.Shuffle(len(names), func(i, j int) { names[i], names[j] = names[j], names[i] })
			}
			r := &Routing{Targets: func(*store.Object) []string { return names }}
			o := &store.Object{}
			tg := r.targetsOf(o)
			if tg != r.targetsOf(o) {
				t.Fatal("targets derived twice from one version")
			}
			sub := map[string]bool{}
			for range rng.IntN(2*n + 2) {
				sub[fmt.Sprintf("d%d", rng.IntN(3*n+1))] = rng.IntN(2) == 0
			}
			var wantIn []string
			wantAny, wantReplayed := false, false
			for _, d := range names {
				if rp, ok := sub[d]; ok {
					wantAny = true
					wantReplayed = wantReplayed || rp
				}
				if sub[d] {
					wantIn = append(wantIn, d)
				}
			}
			ro := &router{Routing: *r, subtree: sub}
			if got := ro.wants(o); got != wantAny {
				t.Fatalf("n=%d: wants %v, want %v", n, got, wantAny)
			}
			if got := tg.in(sub); !slices.Equal(got, wantIn) {
				t.Fatalf("n=%d: in %v, want %v", n, got, wantIn)
			}
			if a, rp := ro.targetsAny(o, sub); a != wantAny || rp != wantReplayed {
				t.Fatalf("n=%d: targetsAny %v %v, want %v %v", n, a, rp, wantAny, wantReplayed)
			}
			if indexed := tg.pos != nil; indexed && n < indexedTargets {
				t.Fatalf("n=%d: a short list is indexed", n)
			}
		}
	}
}
