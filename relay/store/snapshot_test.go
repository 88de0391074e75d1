package store

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
)

var snapSpaces = []string{"", "a", "b", "c"}

// fillSnapStore writes objects of several resources in spaces "", a and b,
// updating and deleting some.
func fillSnapStore(t *testing.T, s *Store) {
	for i := range 60 {
		k := key(snapSpaces[i%3], []Resource{pods, deploys, secrets}[i%3], fmt.Sprint("ns", i%4), fmt.Sprint("o", i))
		mustCreate(t, s, k, body(fmt.Sprint("uid", i), map[string]string{"i": fmt.Sprint(i % 5)}, map[string]any{"node": fmt.Sprint("n", i%2)}))
		switch i % 4 {
		case 1:
			mustUpdate(t, s, k, body(fmt.Sprint("uid", i), nil, "updated"))
		case 2:
			mustDelete(t, s, k)
		}
	}
}

// snapshotBytes writes out a snapshot of s's state now.
func snapshotBytes(t testing.TB, s *Store) []byte {
	t.Helper()
	snap, err := s.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	defer snap.Release()
	var buf bytes.Buffer
	if _, err := snap.WriteTo(&buf); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func TestSnapshotRestore(t *testing.T) {
	opts := Options{Fields: nodeFields}
	s := newStore(t, opts)
	fillSnapStore(t, s)

	snap, err := s.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	defer snap.Release()
	want := dump(t, s, snapSpaces...)
	wantStats := s.Stats()

	// Writes go on while the snapshot is written out.
	var buf bytes.Buffer
	done := make(chan error)
	var n int64
	go func() {
		var err error
		n, err = snap.WriteTo(&buf)
		done <- err
	}()
	res, err := s.List(ListOptions{Space: "a"})
	if err != nil {
		t.Fatal(err)
	}
	for _, o := range res.Items {
		mustUpdate(t, s, o.Key, body("changed", nil, "after"))
	}
	for _, o := range res.Items[:len(res.Items)/2] {
		mustDelete(t, s, o.Key)
	}
	for i := range 20 {
		mustCreate(t, s, key(snapSpaces[i%4], Resource{Resource: "new"}, "", fmt.Sprint(i)), body("u", nil, i))
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if n != int64(buf.Len()) {
		t.Fatalf("WriteTo reported %d bytes, wrote %d", n, buf.Len())
	}
	if slices.Equal(dump(t, s, snapSpaces...), want) {
		t.Fatal("the writes after the snapshot changed nothing")
	}

	r := newStore(t, opts)
	if err := r.Restore(bytes.NewReader(buf.Bytes())); err != nil {
		t.Fatal(err)
	}
	if got := dump(t, r, snapSpaces...); !slices.Equal(got, want) {
		t.Fatalf("restored state differs:\ngot  %q\nwant %q", got, want)
	}
	wantStats.OldestRevision = wantStats.Revision
	if st := r.Stats(); st != wantStats {
		t.Fatalf("restored stats %+v, want %+v", st, wantStats)
	}

	// The format is deterministic: the restored state writes the same bytes.
	if !bytes.Equal(buf.Bytes(), snapshotBytes(t, r)) {
		t.Fatal("snapshots of the same state differ")
	}

	// History starts at the snapshot; writes continue after it.
	ctx := context.Background()
	if _, err := r.Watch(ctx, WatchOptions{Since: wantStats.Revision - 1}); !errors.Is(err, ErrExpired) {
		t.Fatalf("watch before the snapshot: %v", err)
	}
	w := mustWatch(t, r, WatchOptions{Since: wantStats.Revision})
	o := mustCreate(t, r, key("a", pods, "ns", "fresh"), body("u", nil, 0))
	if o.Revision != wantStats.Revision+1 {
		t.Fatalf("first write after restore at %d, want %d", o.Revision, wantStats.Revision+1)
	}
	checkEvent(t, next(t, w), Added, o.Revision, o, nil)
}

func TestRestoreEndsWatchers(t *testing.T) {
	src := newStore(t, Options{})
	fillSnapStore(t, src)
	b := snapshotBytes(t, src)

	s := newStore(t, Options{})
	w := mustWatch(t, s, WatchOptions{})
	waited := make(chan error)
	go func() { waited <- s.WaitForRevision(context.Background(), src.Revision()) }()
	if err := s.Restore(bytes.NewReader(b)); err != nil {
		t.Fatal(err)
	}
	if err := ended(t, w); !errors.Is(err, ErrExpired) {
		t.Fatalf("watcher: %v, want ErrExpired", err)
	}
	if err := <-waited; err != nil {
		t.Fatalf("WaitForRevision: %v", err)
	}
	if st := s.Stats(); st.Watchers != 0 || st.Revision != src.Revision() {
		t.Fatalf("stats %+v", st)
	}
}

func TestRestoreRejectsCorruption(t *testing.T) {
	src := newStore(t, Options{})
	for i := range 3 {
		mustCreate(t, src, key("a", pods, "ns", fmt.Sprint(i)), body("u", nil, i))
	}
	good := snapshotBytes(t, src)

	s := newStore(t, Options{})
	mustCreate(t, s, key("x", pods, "ns", "keep"), body("u", nil, 0))
	before := dump(t, s, "a", "x")
	check := func(name string, b []byte) {
		t.Helper()
		if err := s.Restore(bytes.NewReader(b)); err == nil {
			t.Fatalf("%s: restored", name)
		}
		if got := dump(t, s, "a", "x"); !slices.Equal(got, before) {
			t.Fatalf("%s: a failed restore changed the state", name)
		}
	}
	for i := range good {
		check(fmt.Sprint("truncated at ", i), good[:i])
		bad := bytes.Clone(good)
		bad[i] ^= 0xff
		check(fmt.Sprint("byte ", i, " flipped"), bad)
	}
	check("trailing data", append(bytes.Clone(good), 0))
}

func TestSnapshotReleased(t *testing.T) {
	s := newStore(t, Options{})
	snap, err := s.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	snap.Release()
	if _, err := snap.WriteTo(&bytes.Buffer{}); err == nil {
		t.Fatal("WriteTo after Release succeeded")
	}
}

// A snapshot labelled with a later revision restores the same objects at
// that revision: its history starts there and writes continue past it.
func TestSnapshotAt(t *testing.T) {
	src := newStore(t, Options{})
	fillSnapStore(t, src)
	rev := src.Revision()
	if _, err := src.SnapshotAt(rev - 1); !errors.Is(err, ErrInvalid) {
		t.Fatalf("SnapshotAt below the revision: %v, want ErrInvalid", err)
	}
	snap, err := src.SnapshotAt(rev + 1000)
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	if _, err := snap.WriteTo(&buf); err != nil {
		t.Fatal(err)
	}
	snap.Release()

	r := newStore(t, Options{})
	if err := r.Restore(&buf); err != nil {
		t.Fatal(err)
	}
	if got, want := dump(t, r, snapSpaces...), dump(t, src, snapSpaces...); !slices.Equal(got, want) {
		t.Fatalf("restored state differs:\ngot  %q\nwant %q", got, want)
	}
	if st := r.Stats(); st.Revision != rev+1000 || st.OldestRevision != rev+1000 {
		t.Fatalf("restored at revision %d (history from %d), want %d", st.Revision, st.OldestRevision, rev+1000)
	}
	if _, err := r.Watch(context.Background(), WatchOptions{Since: rev + 500}); !errors.Is(err, ErrExpired) {
		t.Fatalf("watch from a revision between the two: %v, want ErrExpired", err)
	}
	if o := mustCreate(t, r, key("a", pods, "ns", "fresh"), body("u", nil, 0)); o.Revision != rev+1001 {
		t.Fatalf("first write at %d, want %d", o.Revision, rev+1001)
	}
}

// A snapshot of a newer format is refused in words that say so.
func TestRestoreRefusesNewerFormat(t *testing.T) {
	src := newStore(t, Options{})
	mustCreate(t, src, key("a", pods, "ns", "o"), body("u", nil, 0))
	b := snapshotBytes(t, src)
	b[len(snapshotMagic)] = snapshotVersion + 1
	err := newStore(t, Options{}).Restore(bytes.NewReader(b))
	if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), "snapshot format 2 is newer than this relay reads (1)") {
		t.Fatalf("Restore of a newer format: %v", err)
	}
}
