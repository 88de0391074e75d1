// Package reports is the format of what travels up the relay tree about
// placed workloads (DESIGN.md sections 2, 4 and 5), shared by the edge
// (which writes reports into its outbox), every region (which merges its
// children's reports into its own outbox) and the root (which turns them
// into CombinedStatus, placement status and singleton status).
//
// A report is an object of a relay's outbox (and, one tier up, of the
// parent's reports-<child> space), keyed by the kinds below:
//
//   - PartialResource: one StatusCollector's mergeable partial result for
//     one (workload object, EdgePlacement); merged per key at every tier.
//   - PlacementSyncResource: how many destinations below have applied a
//     placement's objects up to which source revision, and which failed;
//     merged per key at every tier.
//   - LinksResource: a relay's links to its children (Links, named
//     after the relay: one report per relay with children, however many
//     of them changed), forwarded unchanged up to the root, which serves
//     each link as a v1alpha1.Relay.
//   - Upsynced objects keep their own resource and namespace; their name
//     is prefixed with the destination (ForwardedName), so that the same
//     object at two destinations are two reports. So is the live copy of
//     a placed object that a View gathers, which carries
//     v1alpha1.ViewedAnnotation as well. The live state of a placed
//     object keeps its own key (only objects with a single destination
//     travel past the edge's parent, so it is unique). All carry
//     v1alpha1.DestinationAnnotation; tiers forward them unchanged.
//
// The package owns the keys, the data types and their merge; it does no
// I/O.
package reports

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"

	"github.com/canopy-dev/canopy/relay/store"
	"github.com/canopy-dev/canopy/topology/api/v1alpha1"
	"github.com/canopy-dev/canopy/topology/status"
)

// Report resources (group edge.canopy.dev, in outboxes and reports spaces;
// never served as kinds).
var (
	PartialResource       = store.Resource{Group: v1alpha1.GroupName, Resource: "partials"}
	PlacementSyncResource = store.Resource{Group: v1alpha1.GroupName, Resource: "placementsyncs"}
	LinksResource         = store.Resource{Group: v1alpha1.GroupName, Resource: "links"}
)

// PlacementRef names an EdgePlacement: its workload description space and
// its name.
type PlacementRef struct {
	Space string `json:"space"`
	Name  string `json:"name"`
}

func (p PlacementRef) String() string { return p.Space + "/" + p.Name }

// PlacedName is the name under which an EdgePlacement or StatusCollector
// of space travels down the tree (the downsync space holds those of every
// space, so names are qualified): "<space>.<name>".
func PlacedName(space, name string) string { return space + "." + name }

// SplitPlacedName undoes PlacedName; ok is false when name has no space.
func SplitPlacedName(name string) (space, orig string, ok bool) {
	return strings.Cut(name, ".")
}

// Partial is one collector's partial result for one (object, placement).
type Partial struct {
	Placement PlacementRef             `json:"placement"`
	Object    v1alpha1.ObjectReference `json:"object"`
	Collector string                   `json:"collector"`
	Partial   status.Partial           `json:"partial"`
}

// Key is where p is reported: a stable digest of (placement, object,
// collector).
func (p *Partial) Key() store.Key {
	h := sha256.New()
	fmt.Fprintf(h, "%s\x00%s\x00%s\x00%s\x00%s\x00%s\x00%s", p.Placement.Space, p.Placement.Name,
		p.Object.Group, p.Object.Resource, p.Object.Namespace, p.Object.Name, p.Collector)
	return store.Key{Resource: PartialResource, Name: hex.EncodeToString(h.Sum(nil))[:40]}
}

// PlacementSync is how the destinations below a relay stand with one
// placement: Revisions counts destinations by the newest source revision
// up to which they applied every object of the placement they hold
// without failure (the root compares it with the newest revision among
// the placement's objects); Failed counts destinations where some object
// of the placement failed, with the first MaxFailing by name.
type PlacementSync struct {
	Placement    PlacementRef     `json:"placement"`
	Destinations int64            `json:"destinations"`
	Revisions    map[string]int64 `json:"revisions,omitempty"` // decimal revision → destinations
	Failed       int64            `json:"failed,omitempty"`
	Failing      []FailingDest    `json:"failing,omitempty"`
	Ready        int64            `json:"ready,omitempty"` // destinations where every object reports ready
}

// FailingDest is one destination that failed, and why.
type FailingDest struct {
	Name   string `json:"name"`
	Reason string `json:"reason"`
}

// MaxFailing bounds PlacementSync.Failing; MaxRevisions bounds the
// distinct revisions kept (older ones are folded into the oldest kept).
const (
	MaxFailing   = 100
	MaxRevisions = 16
)

// Key is where s is reported.
func (s *PlacementSync) Key() store.Key {
	h := sha256.Sum256([]byte(s.Placement.Space + "\x00" + s.Placement.Name))
	return store.Key{Resource: PlacementSyncResource, Name: hex.EncodeToString(h[:])[:40]}
}

// SyncedAt counts the destinations that applied everything up to rev or
// later.
func (s *PlacementSync) SyncedAt(rev int64) int64 {
	var n int64
	for r, c := range s.Revisions {
		if v, err := strconv.ParseInt(r, 10, 64); err == nil && v >= rev {
			n += c
		}
	}
	return n
}

// MergeSync merges the reports of disjoint sets of destinations of one
// placement. Inputs are not modified.
func MergeSync(parts ...PlacementSync) PlacementSync {
	var out PlacementSync
	revs := map[int64]int64{}
	var failing []FailingDest
	for i, p := range parts {
		if i == 0 {
			out.Placement = p.Placement
		}
		out.Destinations += p.Destinations
		out.Failed += p.Failed
		out.Ready += p.Ready
		for r, c := range p.Revisions {
			v, err := strconv.ParseInt(r, 10, 64)
			if err != nil {
				continue
			}
			revs[v] += c
		}
		failing = append(failing, p.Failing...)
	}
	keys := slices.Sorted(maps.Keys(revs))
	for len(keys) > MaxRevisions {
		// Fold the oldest into the next: those destinations are at least
		// that old, so they count as synced at no later revision.
		revs[keys[1]] += revs[keys[0]]
		delete(revs, keys[0])
		keys = keys[1:]
	}
	if len(revs) > 0 {
		out.Revisions = map[string]int64{}
		for v, c := range revs {
			out.Revisions[strconv.FormatInt(v, 10)] = c
		}
	}
	slices.SortFunc(failing, func(a, b FailingDest) int { return strings.Compare(a.Name, b.Name) })
	failing = slices.CompactFunc(failing, func(a, b FailingDest) bool { return a.Name == b.Name })
	out.Failing = failing[:min(len(failing), MaxFailing)]
	if len(out.Failing) == 0 {
		out.Failing = nil
	}
	return out
}

// ForwardedName is the report name of an object forwarded up the tree
// from destination dest (upsynced objects, singleton live state).
func ForwardedName(dest, name string) string { return dest + "." + name }

// object is the envelope every report is stored in: a JSON object with
// metadata (as the store requires) and the report.
type object[T any] struct {
	APIVersion string         `json:"apiVersion"`
	Kind       string         `json:"kind"`
	Metadata   map[string]any `json:"metadata"`
	Report     T              `json:"report"`
}

// Encode returns the stored form of a report named name.
func Encode[T any](kind, name string, r T) ([]byte, error) {
	return json.Marshal(object[T]{APIVersion: v1alpha1.SchemeGroupVersion.String(), Kind: kind,
		Metadata: map[string]any{"name": name}, Report: r})
}

// Decode reads a report from its stored form.
func Decode[T any](data []byte) (T, error) {
	var o object[T]
	err := json.Unmarshal(data, &o)
	return o.Report, err
}

// Links is a relay's report of its links to its children
// (LinksResource): each child's Relay, sorted by name.
type Links struct {
	Relays []v1alpha1.Relay `json:"relays"`
}

// Kinds of the envelopes.
const (
	KindPartial       = "PartialReport"
	KindPlacementSync = "PlacementSyncReport"
	KindLinks         = "LinksReport"
)
