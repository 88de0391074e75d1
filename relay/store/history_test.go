package store

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
)

// TestHistoryBounds adds events of random sizes to histories with random
// bounds and checks, after each, that the kept events are exactly the
// newest that fit both bounds (the newest always), in order, with floor
// the revision of the newest dropped.
func TestHistoryBounds(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	for round := range 200 {
		h := history{size: 1 + rng.IntN(8), bytes: rng.IntN(64)}
		var all []Event
		for i := range 100 {
			rev := int64(i/2 + 1) // two events per revision
			ev := Event{Revision: rev, Object: &Object{Data: make([]byte, rng.IntN(24))}}
			if rng.IntN(10) == 0 {
				ev.Object = nil
			}
			h.add(ev)
			all = append(all, ev)

			keep, held := 0, 0
			for keep < len(all) && keep < h.size {
				b := dataBytes(all[len(all)-1-keep])
				if keep > 0 && h.bytes > 0 && held+b > h.bytes {
					break
				}
				keep, held = keep+1, held+b
			}
			var got []Event
			h.since(0, func(ev Event) { got = append(got, ev) })
			want := all[len(all)-keep:]
			if len(got) != len(want) || h.held != held {
				t.Fatalf("round %d (size %d, bytes %d), after %d events: kept %d holding %d, want %d holding %d", round, h.size, h.bytes, i+1, len(got), h.held, len(want), held)
			}
			for j := range got {
				if got[j] != want[j] {
					t.Fatalf("round %d, after %d events: kept event %d differs", round, i+1, j)
				}
			}
			if wantFloor := int64(0); keep < len(all) {
				wantFloor = all[len(all)-keep-1].Revision
				if h.floor != wantFloor {
					t.Fatalf("round %d, after %d events: floor %d, want %d", round, i+1, h.floor, wantFloor)
				}
			}
			for _, ev := range h.events[:h.head] {
				if ev != (Event{}) {
					t.Fatalf("round %d: a dropped event still pins its version", round)
				}
			}
		}
	}
}

// TestWatchExpiredByBytes: a store whose history is bounded by bytes keeps
// the newest events whose data fit, serves watches from them, and expires
// those that resume from before.
func TestWatchExpiredByBytes(t *testing.T) {
	s := newStore(t, Options{HistoryBytes: 1000})
	ctx := context.Background()
	k := key("ws", pods, "ns", "a")
	o := mustCreate(t, s, k, body("u", nil, strings.Repeat("x", 300)))
	size := len(o.Data)
	for i := range 10 {
		o = mustUpdate(t, s, k, body("u", nil, strings.Repeat(fmt.Sprint(i), 300)))
	}
	kept := 1000 / size // the last revisions: 11 - kept + 1 .. 11
	oldest := int64(11 - kept)
	if got := s.Stats().OldestRevision; got != oldest {
		t.Fatalf("oldest revision %d, want %d (versions of %d bytes)", got, oldest, size)
	}
	if _, err := s.Watch(ctx, WatchOptions{Since: oldest - 1}); !errors.Is(err, ErrExpired) {
		t.Fatalf("Since %d: %v, want expired", oldest-1, err)
	}
	w := mustWatch(t, s, WatchOptions{Since: oldest})
	for rev := oldest + 1; rev <= 11; rev++ {
		if ev := next(t, w); ev.Revision != rev || ev.Type != Modified {
			t.Fatalf("replayed %v at %d, want Modified at %d", ev.Type, ev.Revision, rev)
		}
	}

	// A version larger than the bound is kept alone.
	big := mustUpdate(t, s, k, body("u", nil, strings.Repeat("y", 2000)))
	if got := s.Stats().OldestRevision; got != big.Revision-1 {
		t.Fatalf("oldest revision %d after a large version, want %d", got, big.Revision-1)
	}
	w = mustWatch(t, s, WatchOptions{Since: big.Revision - 1})
	checkEvent(t, next(t, w), Modified, big.Revision, big, o)
}
