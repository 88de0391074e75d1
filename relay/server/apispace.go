package server

import (
	"cmp"
	"errors"
	"fmt"
	"slices"

	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apiserver/pkg/authentication/user"

	"github.com/canopy-dev/canopy/relay/layout"
	"github.com/canopy-dev/canopy/relay/store"
	"github.com/canopy-dev/canopy/topology/api/v1alpha1"
)

// rootSpaces is what the root's kube API serves in the spaces its relay
// tree keeps (kubeapi.Config.Space):
//   - mailbox-<child>: a view of the downsync space, of the objects the
//     child receives (DESIGN.md section 3: a mailbox is an index, not a
//     copy), read-only;
//   - reports-<child>: the child's reports, kept in memory out of the log
//     (DESIGN.md section 2), read-only;
//   - relays in the inventory space: the links of the tree as the relays
//     report them (relayView), in memory, read-only;
//   - the spaces Canopy maintains (of kind downsync or mailbox): read-only
//     but to the admin (system:masters), who may write there to drive the
//     tree by hand.
//
// Users may read them all to see what a child receives and reports. Every
// other space is the store's.
type rootSpaces struct {
	// store holds the downsync space and every space but the reports.
	store *store.Store
	// mailbox returns whether an object of the downsync space belongs in
	// child's mailbox, as of now.
	mailbox func(child string) (func(*store.Object) bool, error)
	// reports returns the store that holds a reports-<child> space.
	reports func(space string) *store.Store
	// relays holds the Relays of the inventory space (relayView).
	relays *store.Store
}

// space is kubeapi.Config.Space.
func (rs rootSpaces) space(space, kind string, gr schema.GroupResource, u user.Info) (store.Space, error) {
	if space == layout.InventorySpace && gr == v1alpha1.Resource(v1alpha1.ResourceRelays) {
		return store.ReadOnly(rs.relays.Space(space), errors.New("relays are the links of the relay tree as its relays report them, kept in memory: they are read-only")), nil
	}
	if child, ok := layout.MailboxChild(space); ok && kind == layout.SpaceKindMailbox {
		match, err := rs.mailbox(child)
		if err != nil {
			return nil, err
		}
		view := store.View(rs.store.Space(layout.DownsyncSpace), match)
		return store.ReadOnly(view, readOnlySpace(space, "is a mailbox: a view of what the child receives")), nil
	}
	var maintained error
	if !slices.Contains(u.GetGroups(), user.SystemPrivilegedGroup) {
		switch kind {
		case layout.SpaceKindMailbox:
			maintained = readOnlySpace(space, "is a mailbox maintained by Canopy")
		case layout.SpaceKindDownsync:
			maintained = readOnlySpace(space, "is the downsync space maintained by Canopy")
		}
	}
	if _, ok := layout.ReportsChild(space); ok {
		soft := rs.reports(space).Space(space)
		return store.ReadOnly(soft, cmp.Or(maintained, readOnlySpace(space, "holds what a child reports, kept in memory"))), nil
	}
	if maintained != nil {
		return store.ReadOnly(rs.store.Space(space), maintained), nil
	}
	return nil, nil
}

// readOnlySpace is why a write to space is refused (a 403 from the API).
func readOnlySpace(space, what string) error {
	return fmt.Errorf("space %q %s: it is read-only", space, what)
}
