package mailbox

import (
	"context"
	"testing"

	"github.com/canopy-dev/canopy/relay/store"
	"github.com/canopy-dev/canopy/relay/transport/tree"
)

// shared is the space the tests' mailboxes index.
const shared = "inbox-shared"

func newStore(t testing.TB, opts store.Options) *store.Store {
	t.Helper()
	s := store.New(opts)
	s.SetLog(store.NewMemLog(s))
	t.Cleanup(s.Close)
	return s
}

// put creates or replaces the object at k.
func put(t testing.TB, s *store.Store, k store.Key, data []byte) {
	t.Helper()
	ctx := context.Background()
	if _, err := s.Get(k); err == nil {
		if _, err := s.Update(ctx, k, data, 0); err != nil {
			t.Fatal(err)
		}
		return
	}
	if _, err := s.Create(ctx, k, data); err != nil {
		t.Fatal(err)
	}
}

// setRoute writes child's route record under shared: dests, by name.
func setRoute(t testing.TB, s *store.Store, child string, dests ...string) {
	t.Helper()
	var rd []tree.RouteDestination
	for _, d := range dests {
		rd = append(rd, tree.RouteDestination{Name: d})
	}
	k := tree.RouteKey(shared, child)
	data, err := tree.EncodeRoute(k.Name, rd)
	if err != nil {
		t.Fatal(err)
	}
	put(t, s, k, data)
}

// superseded is Claims.Superseded over the route records of space in r,
// decoded anew.
func superseded(r store.Reader, space string, above map[string]int64) (map[string]map[string]int64, error) {
	routes, err := Routes(r, space)
	if err != nil {
		return nil, err
	}
	return routes.Superseded(above), nil
}
