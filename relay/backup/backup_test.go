package backup

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/canopy-dev/canopy/consensus"
	"github.com/canopy-dev/canopy/relay/store"
)

var spaces = []string{"", "default", "inventory", "team-a"}

var resources = []store.Resource{
	{Resource: "configmaps"},
	{Resource: "secrets"},
	{Group: "apps", Resource: "deployments"},
	{Group: "example.com", Resource: "gadgets"},
}

// openRoot opens a store on a single consensus node in dir, as a root's.
func openRoot(t *testing.T, dir string) (*store.Store, *consensus.Node) {
	t.Helper()
	st := store.New(store.Options{})
	n, err := consensus.Open(consensus.Config{Dir: dir, NodeID: "root",
		Logger: slog.New(slog.NewTextHandler(t.Output(), &slog.HandlerOptions{Level: slog.LevelWarn}))}, st)
	if err != nil {
		t.Fatal(err)
	}
	st.SetLog(n)
	t.Cleanup(func() {
		st.Close()
		if err := n.Close(); err != nil {
			t.Error(err)
		}
	})
	return st, n
}

func object(name string, i int) []byte {
	b, _ := json.Marshal(map[string]any{"metadata": map[string]any{"name": name, "uid": fmt.Sprint("uid-", name)}, "data": map[string]any{"i": i}})
	return b
}

// written is every acknowledged write of the writers, by key: the
// revision and data of each version, or a nil data for a delete.
type written struct {
	mu   sync.Mutex
	keys map[store.Key][]version
}

type version struct {
	rev  int64
	data []byte
}

func (w *written) add(k store.Key, rev int64, data []byte) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.keys[k] = append(w.keys[k], version{rev, data})
}

// at returns the state at revision rev: each key's last version at or
// before rev, deletes dropped.
func (w *written) at(rev int64) map[store.Key]version {
	w.mu.Lock()
	defer w.mu.Unlock()
	out := map[store.Key]version{}
	for k, vs := range w.keys {
		var last *version
		for i := range vs {
			if vs[i].rev <= rev && (last == nil || vs[i].rev > last.rev) {
				last = &vs[i]
			}
		}
		if last != nil && last.data != nil {
			out[k] = *last
		}
	}
	return out
}

// objects returns every object of st, by key.
func objects(t *testing.T, st *store.Store) map[store.Key]*store.Object {
	t.Helper()
	out := map[store.Key]*store.Object{}
	for _, sp := range spaces {
		res, err := st.List(store.ListOptions{Space: sp})
		if err != nil {
			t.Fatal(err)
		}
		for _, o := range res.Items {
			out[o.Key] = o
		}
	}
	return out
}

// TestBackupRestore backs up a store on a consensus log while writers
// keep writing, checks the backup, and seeds a new log with it past its
// revision: the new store holds exactly the objects of the backup's
// revision, with their revisions, and its writes come after.
func TestBackupRestore(t *testing.T) {
	st, _ := openRoot(t, t.TempDir())
	w := &written{keys: map[store.Key][]version{}}
	ctx := context.Background()
	write := func(k store.Key, i int) error {
		var o *store.Object
		var err error
		switch i % 5 {
		case 3:
			o, err = st.Update(ctx, k, object(k.Name, i), 0)
		case 4:
			res, err := st.Txn(ctx, store.Op{Type: store.OpDelete, Key: k})
			if err == nil {
				w.add(k, res.Revision, nil)
			}
			return err
		default:
			o, err = st.Create(ctx, k, object(k.Name, i))
		}
		if err != nil {
			return err
		}
		w.add(k, o.Revision, o.Data)
		return nil
	}
	// Writer g's writes i come in runs of five (j = i/5): create objects
	// 0, 1 and 2 of the run, update object 2, delete object 0.
	key := func(g, i int) store.Key {
		j := i / 5
		return store.Key{Space: spaces[j%len(spaces)], Resource: resources[(j/2)%len(resources)], Namespace: fmt.Sprint("ns-", j%3),
			Name: fmt.Sprintf("w%d-r%d-o%d", g, j, [5]int{0, 1, 2, 2, 0}[i%5])}
	}
	for i := range 200 {
		if err := write(key(0, i), i); err != nil {
			t.Fatal(err)
		}
	}

	// Writers go on while the backup is taken and written.
	stop := make(chan struct{})
	var wg sync.WaitGroup
	stopWriters := sync.OnceFunc(func() { close(stop); wg.Wait() })
	defer stopWriters()
	for g := 1; g <= 3; g++ {
		wg.Go(func() {
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				if err := write(key(g, i), i); err != nil {
					t.Errorf("writer %d: %v", g, err)
					return
				}
			}
		})
	}
	wctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	if err := st.WaitForRevision(wctx, st.Revision()+10); err != nil { // the writers are going
		t.Fatalf("writes before the backup: %v", err)
	}
	snap, err := st.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	created := time.Now().UTC().Truncate(time.Second)
	if _, err := Write(&buf, Header{Relay: "root", Created: created, Commit: "0123abcd"}, snap); err != nil {
		t.Fatal(err)
	}
	snap.Release()
	rev := snap.Revision()
	// Let the writers go past the backup before they stop.
	if err := st.WaitForRevision(wctx, rev+10); err != nil {
		t.Fatalf("writes after the backup at %d: %v", rev, err)
	}
	stopWriters()
	want := w.at(rev)

	h, err := Check(bytes.NewReader(buf.Bytes()))
	if err != nil {
		t.Fatalf("Check: %v", err)
	}
	if want := (Header{Revision: rev, Relay: "root", Created: created, Commit: "0123abcd"}); h != want {
		t.Fatalf("header %+v, want %+v", h, want)
	}
	h, loaded, err := Load(bytes.NewReader(buf.Bytes()), store.Options{})
	if err != nil {
		t.Fatalf("Load: %v", err)
	}
	defer loaded.Close()

	// Seed a new log past the backup's revision, as relay restore does.
	const bump = 1000
	seedSnap, err := loaded.SnapshotAt(h.Revision + bump)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	if err := consensus.Seed(dir, uint64(seedSnap.Revision()), seedSnap); err != nil {
		t.Fatal(err)
	}
	seedSnap.Release()
	restored, _ := openRoot(t, dir)
	if got := restored.Revision(); got != rev+bump {
		t.Fatalf("restored store at revision %d, want %d", got, rev+bump)
	}
	got := objects(t, restored)
	if len(got) != len(want) {
		t.Errorf("restored %d objects, the backup's revision %d had %d", len(got), rev, len(want))
	}
	for k, v := range want {
		o, ok := got[k]
		switch {
		case !ok:
			t.Errorf("%s missing", k)
		case o.Revision != v.rev || !bytes.Equal(o.Data, v.data):
			t.Errorf("%s at revision %d (%s), want %d (%s)", k, o.Revision, o.Data, v.rev, v.data)
		}
	}
	for _, k := range slices.Collect(maps.Keys(got)) {
		if _, ok := want[k]; !ok {
			t.Errorf("%s restored, but not in the state at %d", k, rev)
		}
	}
	o, err := restored.Create(ctx, store.Key{Space: "default", Resource: resources[0], Namespace: "ns-0", Name: "after"}, object("after", 0))
	if err != nil {
		t.Fatal(err)
	}
	if o.Revision <= rev+bump {
		t.Fatalf("first write after the restore at revision %d, want past %d", o.Revision, rev+bump)
	}
}

// A backup is refused whole when any byte of it changes or it is cut
// short anywhere; one of a newer format is refused as such.
func TestBackupRefusesDamage(t *testing.T) {
	st := store.New(store.Options{})
	defer st.Close()
	ctx := context.Background()
	for i := range 5 {
		if _, err := st.Create(ctx, store.Key{Space: "default", Resource: resources[i%2], Name: fmt.Sprint("o", i)}, object(fmt.Sprint("o", i), i)); err != nil {
			t.Fatal(err)
		}
	}
	snap, err := st.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	n, err := Write(&buf, Header{Relay: "root"}, snap)
	if err != nil {
		t.Fatal(err)
	}
	good := buf.Bytes()
	if n != int64(len(good)) {
		t.Fatalf("Write says it wrote %d bytes, wrote %d", n, len(good))
	}
	if _, err := Check(bytes.NewReader(good)); err != nil {
		t.Fatal(err)
	}
	refused := func(what string, b []byte) {
		t.Helper()
		_, err := Check(bytes.NewReader(b))
		if !errors.Is(err, ErrDamaged) && !errors.Is(err, ErrNotBackup) {
			t.Fatalf("Check of a backup with %s: %v, want ErrDamaged or ErrNotBackup", what, err)
		}
		if _, st, err := Load(bytes.NewReader(b), store.Options{}); err == nil {
			st.Close()
			t.Fatalf("Load of a backup with %s succeeded", what)
		}
	}
	for i := range good {
		refused(fmt.Sprint("only its first ", i, " bytes"), good[:i])
		bad := bytes.Clone(good)
		bad[i] ^= 0x01
		refused(fmt.Sprint("byte ", i, " changed"), bad)
	}
	refused("a byte more", append(bytes.Clone(good), 0))
	if _, err := Check(bytes.NewReader([]byte("apiVersion: v1\nkind: List\n"))); !errors.Is(err, ErrNotBackup) {
		t.Fatalf("Check of a YAML file: %v, want ErrNotBackup", err)
	}

	newer := append([]byte(magic), binary.AppendUvarint(nil, Version+1)...)
	newer = append(newer, good[len(newer):]...)
	if _, err := Check(bytes.NewReader(newer)); !errors.Is(err, ErrNewerFormat) {
		t.Fatalf("Check of a newer format: %v, want ErrNewerFormat", err)
	}
}
