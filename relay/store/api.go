package store

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync"
	"sync/atomic"

	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
)

// Sentinel errors. Callers test them with errors.Is; an error from Txn that
// concerns one op is an *OpError wrapping one of these.
var (
	ErrNotFound = errors.New("store: not found")
	ErrExists   = errors.New("store: already exists")
	ErrConflict = errors.New("store: precondition failed")
	// ErrInvalid rejects a malformed command, op, object (not a JSON object
	// with a metadata object) or continue token.
	ErrInvalid = errors.New("store: invalid input")
	// ErrExpired is returned by Watch when the requested revision is older
	// than the history kept, by List when the state a continue token
	// (ListOptions.After) was listed from is no longer kept, and closes
	// watchers when Restore replaces the state under them: the consumer
	// must list again (from the first page).
	ErrExpired = errors.New("store: revision compacted")
	// ErrTooSlow closes a watcher whose consumer fell too far behind.
	ErrTooSlow = errors.New("store: watcher fell behind")
	// ErrOutcomeUnknown: a write may or may not be applied, now or later:
	// its context ended after it was proposed. The caller reads the state
	// back to learn what happened, as after a kube API timeout. The
	// consensus package's errors of that kind match it too.
	ErrOutcomeUnknown = errors.New("outcome unknown")
	// ErrClosed is returned after the store was closed.
	ErrClosed = errors.New("store: closed")
)

// Resource names a kind of stored object by API group and plural resource
// name, as in a kube URL: {"apps","deployments"}; the core group is "".
type Resource struct {
	Group    string `json:"g,omitempty"`
	Resource string `json:"r"`
}

func (r Resource) String() string {
	if r.Group == "" {
		return r.Resource
	}
	return r.Resource + "." + r.Group
}

// Key addresses one object. Namespace is empty for cluster-scoped objects.
// Space "" is the system space, reserved for Canopy's own bookkeeping (the
// list of spaces, for one).
type Key struct {
	Space     string   `json:"s"`
	Resource  Resource `json:"res"`
	Namespace string   `json:"ns,omitempty"`
	Name      string   `json:"n"`
}

func (k Key) String() string {
	return fmt.Sprintf("%s/%s/%s/%s", k.Space, k.Resource, k.Namespace, k.Name)
}

// Object is one immutable version of a stored object. Once returned by the
// store it is shared (by lists, watchers, history) and must never be modified.
type Object struct {
	Key Key
	// Revision is the revision of the write that produced this version; it
	// is also written into Data as metadata.resourceVersion (decimal).
	Revision int64
	// CreateRevision is the revision at which the object was created.
	CreateRevision int64
	// Data is the object's JSON encoding.
	Data []byte
	// UID is metadata.uid, Labels metadata.labels, Fields the field set
	// produced by Options.Fields (always containing metadata.name and
	// metadata.namespace).
	UID    string
	Labels labels.Set
	Fields fields.Set

	// memo holds what callers derived from this version (Memo).
	memo atomic.Pointer[sync.Map]
}

// OpType is the kind of one write operation.
type OpType int

const (
	// OpCreate fails with ErrExists when the key exists.
	OpCreate OpType = iota + 1
	// OpUpdate fails with ErrNotFound when the key does not exist.
	OpUpdate
	// OpDelete fails with ErrNotFound when the key does not exist.
	OpDelete
	// OpCheck writes nothing: it fails as OpUpdate would (ErrNotFound,
	// ErrConflict on ExpectRevision or ExpectUID), and so makes the other
	// ops of its Txn conditional on a key they do not write, of any space.
	// A release before it cannot apply it: see FeatureCheck.
	OpCheck
)

// FeatureCheck names OpCheck among what a replica's release reads in the
// log (consensus.Config.Features): a replicated store's Txns carry one
// only once every replica reads it, so that none refuses a command the
// others apply.
const FeatureCheck = "store-check"

// Op is one write, or one condition (OpCheck). A Txn applies all its ops
// at one revision, or none.
type Op struct {
	Type OpType `json:"t"`
	Key  Key    `json:"k"`
	// Data is the object's JSON for create and update. Its
	// metadata.resourceVersion is replaced by the revision of the write.
	Data []byte `json:"d,omitempty"`
	// ExpectRevision, when non-zero, must equal the current object's
	// Revision (update, delete, check), else the op fails with ErrConflict.
	ExpectRevision int64 `json:"er,omitempty"`
	// ExpectUID, when set, must equal the current object's UID (update,
	// delete, check), else the op fails with ErrConflict.
	ExpectUID string `json:"eu,omitempty"`
}

// OpError says which op of a Txn failed and why.
type OpError struct {
	Index int
	Key   Key
	Err   error
}

func (e *OpError) Error() string { return fmt.Sprintf("op %d on %s: %v", e.Index, e.Key, e.Err) }
func (e *OpError) Unwrap() error { return e.Err }

// Result is what a successful Txn did: the revision it was applied at and,
// per op, the object as written (create, update), as it was just before
// deletion (delete) or as it is (check).
type Result struct {
	Revision int64
	Objects  []*Object
}

// EventType says what happened to an object.
type EventType string

const (
	Added    EventType = "ADDED"
	Modified EventType = "MODIFIED"
	Deleted  EventType = "DELETED"
	// Bookmark carries no object: every event of the watch up to Revision
	// has been delivered.
	Bookmark EventType = "BOOKMARK"
)

// Event is one change seen by a watcher. Revision is the revision of the
// write (or, for Bookmark, the revision the watch has caught up to).
//
// For Added and Modified, Object is the new version. For a deletion, Object
// and Prev are both the last version (Object.Revision is that version's
// revision, older than the event's). When an update moves an object out of
// the watch's selection, the event is Deleted with Object the new,
// non-matching version and Prev the last matching one; when it moves an
// object in, the event is Added with Object the new version. Prev is the
// version before a Modified or Deleted event, nil for Added and Bookmark.
type Event struct {
	Type     EventType
	Revision int64
	Object   *Object
	Prev     *Object
}

// ListOptions selects objects. Space is required; an empty Resource.Resource
// lists every resource of the space; an empty Namespace lists all namespaces.
type ListOptions struct {
	Space     string
	Resource  Resource
	Namespace string
	Label     labels.Selector // nil: everything
	Field     fields.Selector // nil: everything
	// Limit bounds the number of items returned (0: no limit).
	Limit int64
	// Match, when set, further selects the objects for which it is true
	// (a view over a space, such as a child's mailbox). It must be cheap
	// and must not call the store.
	Match func(*Object) bool
	// After continues a paged list with this opaque token, the
	// ListResult.Continue of the previous page (same space and resource):
	// only keys strictly after the token's position are listed, from the
	// state at the first page's revision, and the page's Revision is the
	// first page's. The store retains that state for
	// Options.PagingRetention after the first page, and for at most
	// Options.PagingStates revisions; once it is dropped (by age, for newer
	// ones, by Restore, or never kept: a token of another replica), the
	// token fails with ErrExpired, unless the store is still at that
	// revision. A malformed token fails with ErrInvalid.
	After string
}

// ListResult is one page of a list, consistent at Revision: every page of a
// paged list carries the first page's Revision.
type ListResult struct {
	Items    []*Object
	Revision int64
	// Continue is non-empty when more items remain; pass it as After.
	Continue string
	// Remaining counts the items after this page (when Continue is set).
	Remaining int64
}

// WatchOptions selects the events a watcher receives. Space "" watches every
// space, the system space included (used by controllers); Resource,
// Namespace, Label and Field filter as in ListOptions. A change that moves an object into the selection is
// delivered as Added, out of it as Deleted (kube watch semantics).
type WatchOptions struct {
	Space     string
	Resource  Resource
	Namespace string
	Label     labels.Selector
	Field     fields.Selector
	// Since: events with Revision > Since are delivered, starting with those
	// still in history. Since older than the oldest kept history fails with
	// ErrExpired. Since == 0 means "from now".
	Since int64
	// Bookmarks asks for a Bookmark event at least every BookmarkInterval
	// (Options) while the watcher is idle.
	Bookmarks bool
	// RevisionEnds asks for a Bookmark right after the events of each
	// write that delivered any (and after the history replayed from
	// Since, at the revision the watch started at). One revision may
	// change many keys (a Txn, a group of them), whose events arrive one
	// by one: an event's Revision says that every earlier revision has
	// been delivered, never that its own has; this Bookmark does.
	RevisionEnds bool
	// Match is as in ListOptions: objects moving in and out of it are
	// Added and Deleted like label changes.
	Match func(*Object) bool
	// Also adds single objects, in any space, to the selection: their
	// events are delivered whatever the other fields say, in the same
	// revision order, each once. (A mailbox's sender follows its space and
	// its child's routing record with one watcher.)
	Also []Key
	// Addressed, when set, narrows the events delivered live to those of
	// objects whose version or previous version is addressed
	// (Options.Addresses) to a name of a set that changes over time: a
	// relay's routed mailbox, one watcher per child, is visited per event
	// only when the object is addressed to its child's subtree, so a root
	// with 10 000 children does not visit 10 000 watchers per write. It
	// narrows nothing else: the events delivered are as without it (the
	// consumer still judges each one), and the history replayed at start
	// (Since) is not narrowed. Needs Options.Addresses.
	Addressed *Addressing
	// Func, when set, receives the events instead of Events, one at a
	// time and in order, in a goroutine of the watcher's that runs only
	// while events are pending: a consumer that keeps what it receives
	// for a loop of its own (a sender's set of changed keys) holds no
	// goroutine to wait for them. It must not block for long: events wait
	// behind it, up to Options.WatcherQueue (ErrTooSlow). Events is then
	// closed once the watch has ended and Func has returned for the last
	// time.
	Func func(Event)
	// Ended, when set, is called once the watch has ended (with Err's
	// error) and no event is on its way, in a goroutine of its own: a
	// consumer with Func may start its next watch there.
	Ended func(error)
}

// Addressing is the set of names of a WatchOptions.Addressed watch.
type Addressing struct {
	// Set is the key of the object whose versions give the set (a child's
	// route record). It joins Also: its events are delivered, and each one
	// moves the set at its place in revision order. An absent Set is the
	// empty set.
	Set Key
	// Names returns the names a version of Set holds.
	Names func(*Object) []string
}

// Watcher delivers events in revision order until stopped, its context is
// done, or it falls too far behind.
type Watcher interface {
	// Events is closed when the watch ends; Err then says why (nil after
	// Stop or context cancellation).
	Events() <-chan Event
	Err() error
	Stop()
}

// Log makes a command durable (and, with Raft, replicated) and applies it to
// the FSM. Propose returns what FSM.Apply returned for that command once it
// has been applied locally.
type Log interface {
	Propose(ctx context.Context, cmd []byte) (any, error)
}

// FSM is the deterministic state machine behind a Log: the store. Apply is
// called with strictly increasing indexes, from one goroutine at a time.
// Snapshot must be quick (copy-on-write); the returned Snapshot is written
// out concurrently with later Applies. Restore replaces the whole state.
type FSM interface {
	Apply(index uint64, cmd []byte) any
	Snapshot() (Snapshot, error)
	Restore(r io.Reader) error
}

// BatchFSM is an FSM that also applies several commands at once: the
// result is what Apply would return for each entry, in order.
type BatchFSM interface {
	FSM
	ApplyBatch(entries []Entry) []any
}

// Entry is one command of a log for BatchFSM.ApplyBatch.
type Entry struct {
	Index uint64
	Cmd   []byte
}

// Snapshot is a point-in-time copy of the store.
type Snapshot interface {
	WriteTo(w io.Writer) (int64, error)
	// Revision is the revision of the state the snapshot holds.
	Revision() int64
	Release()
}

// Reader is the read side of a store, for consumers that must not write.
type Reader interface {
	Revision() int64
	Get(k Key) (*Object, error)
	List(opts ListOptions) (ListResult, error)
	Watch(ctx context.Context, opts WatchOptions) (Watcher, error)
	WaitForRevision(ctx context.Context, rev int64) error
}
