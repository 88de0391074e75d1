package store

import (
	"context"
	"fmt"
	"slices"
	"testing"
)

// A RevisionEnds watcher gets a Bookmark right after the events of each
// write that reached it, and after the history it replays; no Bookmark
// for a write that did not reach it, and none for a plain watcher.
func TestRevisionEnds(t *testing.T) {
	s := newStore(t, Options{})
	ctx := context.Background()
	x, y, z := key("a", pods, "ns", "x"), key("a", pods, "ns", "y"), key("b", pods, "ns", "z")
	first := mustCreate(t, s, key("c", pods, "ns", "first"), body("1", nil, nil)).Revision
	a := mustWatch(t, s, WatchOptions{Space: "a", RevisionEnds: true})
	b := mustWatch(t, s, WatchOptions{Space: "b", RevisionEnds: true})
	plain := mustWatch(t, s, WatchOptions{Space: "a"})

	res, err := s.Txn(ctx, Op{Type: OpCreate, Key: x, Data: body("x", nil, 1)},
		Op{Type: OpCreate, Key: z, Data: body("z", nil, 1)},
		Op{Type: OpCreate, Key: y, Data: body("y", nil, 1)})
	if err != nil {
		t.Fatal(err)
	}
	r := res.Revision
	mustCreate(t, s, key("c", pods, "ns", "other"), body("2", nil, nil)) // reaches none of them
	last := mustUpdate(t, s, x, body("x", nil, 2)).Revision

	expect(t, a, fmt.Sprintf("ADDED x@%d", r), fmt.Sprintf("ADDED y@%d", r), fmt.Sprintf("BOOKMARK@%d", r),
		fmt.Sprintf("MODIFIED x@%d", last), fmt.Sprintf("BOOKMARK@%d", last))
	expect(t, b, fmt.Sprintf("ADDED z@%d", r), fmt.Sprintf("BOOKMARK@%d", r))
	expect(t, plain, fmt.Sprintf("ADDED x@%d", r), fmt.Sprintf("ADDED y@%d", r), fmt.Sprintf("MODIFIED x@%d", last))

	// The history replayed from Since ends with a Bookmark at the
	// revision the watch started at.
	resumed := mustWatch(t, s, WatchOptions{Space: "a", Since: first, RevisionEnds: true})
	expect(t, resumed, fmt.Sprintf("ADDED x@%d", r), fmt.Sprintf("ADDED y@%d", r),
		fmt.Sprintf("MODIFIED x@%d", last), fmt.Sprintf("BOOKMARK@%d", s.Revision()))
}

// expect reads len(want) events of w and compares them with want
// ("TYPE name@revision", "BOOKMARK@revision").
func expect(t *testing.T, w Watcher, want ...string) {
	t.Helper()
	var got []string
	for range want {
		ev := next(t, w)
		if ev.Type == Bookmark {
			got = append(got, fmt.Sprintf("%s@%d", ev.Type, ev.Revision))
		} else {
			got = append(got, fmt.Sprintf("%s %s@%d", ev.Type, ev.Object.Key.Name, ev.Revision))
		}
	}
	if !slices.Equal(got, want) {
		t.Fatalf("events %q, want %q", got, want)
	}
}
