package layout

import (
	"encoding/json"
	"strings"

	"github.com/canopy-dev/canopy/relay/store"
)

// Spaces of the root that users see.
const (
	// DefaultSpace is a workload description space every root has, served
	// at / as well as at /spaces/default/.
	DefaultSpace = "default"
	// InventorySpace holds SyncTargets and Locations (and the root's join
	// tokens).
	InventorySpace = "inventory"
)

// SystemSpace is the root's administrative space: it serves the space
// records (SpaceResource, kept in the store's system space "") as the
// kind Space of canopy.dev/v1alpha1, and the RBAC that says who may
// create and delete spaces. No space record shadows it (BuiltinSpace).
const SystemSpace = "system"

// DownsyncSpace is the root's space of placed objects, each once with the
// destinations it targets (v1alpha1.DestinationsAnnotation); the root's
// mailboxes, like a region's (over its inbox), are indexes over it.
const DownsyncSpace = "downsync"

// Spaces of a child relay's own store.
const (
	// InboxSpace holds what the parent sent: this relay's share of the
	// desired state, persisted so an edge keeps enforcing it offline.
	InboxSpace = "inbox"
	// OutboxSpace holds what this relay reports upward.
	OutboxSpace = "outbox"
)

// LinksSpace is the space of a relay's store of reports (in memory, beside
// its children's reports-<child> spaces) that holds its own report of the
// link to each child: a region forwards it with its children's reports,
// and the root serves them all as Relays.
const LinksSpace = "links"

const (
	mailboxPrefix = "mailbox-"
	reportsPrefix = "reports-"
	viewsPrefix   = "views-"
)

// ViewsSpace names the space of the root's store that holds what the
// Views of workload description space wds gather, each object once
// whatever the Views and their partitions (topology/placement writes it;
// the kube API serves each View over it). It has no space record: it is
// served only through the Views.
func ViewsSpace(wds string) string { return viewsPrefix + wds }

// MailboxSpace names a child's mailbox: a read-only view of the downsync
// space (at the root) or of the inbox (at a region), what the child must
// receive.
func MailboxSpace(child string) string { return mailboxPrefix + child }

// MailboxChild returns the child whose mailbox space is named space, and
// false when space names no mailbox.
func MailboxChild(space string) (string, bool) { return strings.CutPrefix(space, mailboxPrefix) }

// ReportsSpace names the space a parent keeps per child for what the child
// reported.
func ReportsSpace(child string) string { return reportsPrefix + child }

// ReportsChild returns the child whose reports space is named space, and
// false when space names no reports space.
func ReportsChild(space string) (string, bool) { return strings.CutPrefix(space, reportsPrefix) }

// BuiltinSpace reports whether name is a space the relays make
// themselves, or reserved for one: the root's default, inventory,
// downsync and system spaces, a child's inbox and outbox, and every
// mailbox, reports and views space. Users create and delete other spaces
// only.
func BuiltinSpace(name string) bool {
	switch name {
	case DefaultSpace, InventorySpace, DownsyncSpace, SystemSpace, InboxSpace, OutboxSpace:
		return true
	}
	return strings.HasPrefix(name, mailboxPrefix) || strings.HasPrefix(name, reportsPrefix) || strings.HasPrefix(name, viewsPrefix)
}

// SystemNamespaces are created in every new space, as a kube cluster has
// them; every destination has them too, so they are never placed.
var SystemNamespaces = []string{"default", "kube-system", "kube-public", "kube-node-lease"}

// Space kinds (DESIGN.md section 3).
const (
	SpaceKindWDS       = "wds"
	SpaceKindInventory = "inventory"
	SpaceKindMailbox   = "mailbox"
	// SpaceKindDownsync is the root's space of placed objects, each
	// annotated with its destinations, over which mailboxes are views.
	SpaceKindDownsync = "downsync"
	// SpaceKindSystem is SystemSpace's kind.
	SpaceKindSystem = "system"
)

// SpaceResource is where space records live, in the system space "": one
// per space, named after it, its kind in spec.kind.
var SpaceResource = store.Resource{Group: "canopy.dev", Resource: "spaces"}

// SpaceKindOf reads the kind from a space record (an object of
// SpaceResource); "" if it has none.
func SpaceKindOf(record *store.Object) string { return ReadSpace(record).Kind }

// SpaceOf reads a space record's kind ("" if it has none) and whether it
// has a deletionTimestamp: its space is being deleted and takes no new
// objects.
func SpaceOf(record *store.Object) (kind string, deleting bool) {
	info := ReadSpace(record)
	return info.Kind, info.Deleting
}

// Where a space's objects are kept (a space record's spec.backend).
const (
	// BackendEmbedded (or no backend) is the root's own store.
	BackendEmbedded = "embedded"
	// BackendKube is an existing Kubernetes API server, reached with the
	// kubeconfig of spec.kubeconfigSecret; the root's store holds a copy
	// of what placement reads (relay/backing).
	BackendKube = "kube"
)

// SystemSecretsNamespace is the namespace of the system space that holds
// the Secrets space records refer to (spec.kubeconfigSecret).
const SystemSecretsNamespace = "canopy-system"

// SecretRef names a Secret of the system space and the key of its data
// to read.
type SecretRef struct {
	Namespace string `json:"namespace,omitempty"`
	Name      string `json:"name,omitempty"`
	Key       string `json:"key,omitempty"`
}

// SpaceInfo is what a space record says.
type SpaceInfo struct {
	Kind    string
	Backend string
	// Secret is spec.kubeconfigSecret, defaulted (SystemSecretsNamespace,
	// key "kubeconfig"); Name is empty when the record names none.
	Secret   SecretRef
	Deleting bool
}

// Backed reports whether the space's objects are kept by a backend other
// than the root's store.
func (i SpaceInfo) Backed() bool { return i.Backend == BackendKube }

type spaceInfoMemo struct{}

// ReadSpace decodes a space record, once per version of it.
func ReadSpace(record *store.Object) SpaceInfo {
	return record.Memo(spaceInfoMemo{}, func(o *store.Object) any {
		var rec struct {
			Metadata struct {
				DeletionTimestamp *string `json:"deletionTimestamp"`
			} `json:"metadata"`
			Spec struct {
				Kind             string    `json:"kind"`
				Backend          string    `json:"backend"`
				KubeconfigSecret SecretRef `json:"kubeconfigSecret"`
			} `json:"spec"`
		}
		_ = json.Unmarshal(o.Data, &rec)
		ref := rec.Spec.KubeconfigSecret
		if ref.Namespace == "" {
			ref.Namespace = SystemSecretsNamespace
		}
		if ref.Key == "" {
			ref.Key = "kubeconfig"
		}
		return SpaceInfo{Kind: rec.Spec.Kind, Backend: rec.Spec.Backend, Secret: ref, Deleting: rec.Metadata.DeletionTimestamp != nil}
	}).(SpaceInfo)
}

// RouteResource is the resource of route records, in the system space "":
// per mailbox space and child, the destinations the child announced below
// it (relay/transport/tree owns their names and encoding).
var RouteResource = store.Resource{Group: "tree.canopy.dev", Resource: "routes"}

// CursorResource holds, in the system space "", the cursors of the tree's
// receiving sides: one object per inbox or report space (Cursor), written
// in the same Txn as the objects it covers.
var CursorResource = store.Resource{Group: "tree.canopy.dev", Resource: "cursors"}

// DownsyncCursor is the key of the cursor of what the parent sent into
// inbox: the last parent revision applied there.
func DownsyncCursor(inbox string) store.Key {
	return store.Key{Resource: CursorResource, Name: "downsync." + inbox}
}

// UpsyncCursor is the key of the cursor of what a child reported into
// space: the last report sequence made durable there.
func UpsyncCursor(space string) store.Key {
	return store.Key{Resource: CursorResource, Name: "upsync." + space}
}

// Cursor is the stored form of a cursor.
type Cursor struct {
	// Members in the order of their JSON names: the store then sets its
	// resourceVersion without decoding and encoding the cursor again.
	APIVersion string `json:"apiVersion"`
	// Epoch is the parent epoch Revision belongs to (downsync only).
	Epoch    string         `json:"epoch,omitempty"`
	Kind     string         `json:"kind"`
	Metadata map[string]any `json:"metadata"`
	Revision uint64         `json:"revision"`
}
