package layout

import (
	"bytes"
	"encoding/json"
	"testing"

	"github.com/canopy-dev/canopy/relay/store"
)

func TestChildSpaces(t *testing.T) {
	for _, c := range []struct {
		name  func(string) string
		child func(string) (string, bool)
	}{{MailboxSpace, MailboxChild}, {ReportsSpace, ReportsChild}} {
		if got, ok := c.child(c.name("edge-1")); !ok || got != "edge-1" {
			t.Errorf("child of %q = %q, %v; want edge-1, true", c.name("edge-1"), got, ok)
		}
		for _, other := range []string{DefaultSpace, InventorySpace, DownsyncSpace, InboxSpace, OutboxSpace} {
			if got, ok := c.child(other); ok {
				t.Errorf("child of %q = %q, true; want none", other, got)
			}
		}
	}
	if MailboxSpace("x") == ReportsSpace("x") {
		t.Error("a child's mailbox and reports spaces share a name")
	}
}

func TestSpaceKindOf(t *testing.T) {
	for data, want := range map[string]string{
		`{"spec":{"kind":"wds"}}`: SpaceKindWDS,
		`{"spec":{}}`:             "",
		`not json`:                "",
	} {
		if got := SpaceKindOf(&store.Object{Data: []byte(data)}); got != want {
			t.Errorf("SpaceKindOf(%s) = %q, want %q", data, got, want)
		}
	}
}

func TestCursorKeys(t *testing.T) {
	if DownsyncCursor(InboxSpace) == UpsyncCursor(InboxSpace) {
		t.Error("a space's downsync and upsync cursors share a key")
	}
	for _, k := range []store.Key{DownsyncCursor(InboxSpace), UpsyncCursor(ReportsSpace("edge-1"))} {
		if k.Space != "" || k.Resource != CursorResource {
			t.Errorf("cursor key %v is not a cursor of the system space", k)
		}
	}
}

func TestBuiltinSpace(t *testing.T) {
	for _, name := range []string{DefaultSpace, InventorySpace, DownsyncSpace, SystemSpace, InboxSpace, OutboxSpace, MailboxSpace("e1"), ReportsSpace("e1"), ViewsSpace("default"), "mailbox-"} {
		if !BuiltinSpace(name) {
			t.Errorf("BuiltinSpace(%q) = false", name)
		}
	}
	for _, name := range []string{"team-a", "systems", "defaults", "mailbox", "my-mailbox-1", "views"} {
		if BuiltinSpace(name) {
			t.Errorf("BuiltinSpace(%q) = true", name)
		}
	}
}

// TestCursorSortedMembers: a cursor encodes its members in the order of
// their names, as an object decoded into a map and encoded again would
// (the form the store sets a resourceVersion in without re-encoding).
func TestCursorSortedMembers(t *testing.T) {
	data, err := json.Marshal(Cursor{APIVersion: "tree.canopy.dev/v1alpha1", Kind: "Cursor",
		Metadata: map[string]any{"name": "downsync.inbox"}, Revision: 7, Epoch: "e1"})
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(data, &m); err != nil {
		t.Fatal(err)
	}
	sorted, _ := json.Marshal(m)
	if !bytes.Equal(data, sorted) {
		t.Errorf("cursor encodes as %s, want %s", data, sorted)
	}
}
