package status

import (
	"encoding/json"
	"math/rand/v2"
	"testing"
)

// FuzzPartialJSON: whatever a child sends, decoding either refuses it or
// yields a Partial that merges, renders and encodes without panicking.
func FuzzPartialJSON(f *testing.F) {
	c := mustCompile(f, "mixed", mixed)
	s := mustCompile(f, "s", `{select: [{name: d, def: "destination.name"}], limit: 2}`)
	r := rand.New(rand.NewPCG(5, 5))
	for range 4 {
		f.Add(encode(f, MergeAll(evaluateAll(f, c, randomInputs(r, 10))...)), encode(f, MergeAll(evaluateAll(f, c, randomInputs(r, 10))...)))
	}
	sa, _ := s.Evaluate(map[string]any{}, nil, Destination{Name: "a"})
	sb, _ := s.Evaluate(map[string]any{}, nil, Destination{Name: "b"})
	f.Add(encode(f, sa), encode(f, sb))
	f.Add(`{}`, `{"limit":1}`)
	f.Fuzz(func(t *testing.T, x, y string) {
		var a, b Partial
		if json.Unmarshal([]byte(x), &a) != nil || json.Unmarshal([]byte(y), &b) != nil {
			return
		}
		m := Merge(a, b)
		if encode(t, m) != encode(t, Merge(b, a)) {
			t.Fatalf("not commutative:\n%s\n%s", x, y)
		}
		_ = m.Result("r")
		var back Partial
		if err := json.Unmarshal([]byte(encode(t, m)), &back); err != nil {
			t.Fatalf("the merge of two valid Partials does not decode: %v\n%s\n%s", err, x, y)
		}
	})
}
