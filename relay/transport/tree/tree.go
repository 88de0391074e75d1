package tree

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"slices"

	"github.com/canopy-dev/canopy/relay/layout"
	"github.com/canopy-dev/canopy/relay/store"
	"github.com/canopy-dev/canopy/relay/transport/internal/wire"
)

// SenderOptions configures a Sender. The zero value selects every default.
type SenderOptions struct {
	// Wire configures frame size and compression; nil: wire defaults.
	Wire *wire.Config
	// NoBookmarks stops asking the store for bookmarks. Bookmarks let an
	// idle child's cursor follow the global revision (Progress), so that
	// its next resume is still within history; without them the cursor
	// moves only when the mailbox changes.
	NoBookmarks bool
	// Logger receives the Sender's logs; nil: discarded.
	Logger *slog.Logger
	// Routing, when set, makes the mailbox an index over a space shared
	// with the other children (see Routing); nil: the mailbox is the
	// whole space.
	Routing *Routing
}

// Sender is the parent side of one child's downsync stream. It sends the
// latest state of every key of the child's mailbox space, never a backlog of
// events (see the package doc).
//
// Serve runs one stream at a time; Stats is safe for concurrent use.
type Sender struct{ src *source }

// NewSender returns a Sender of the objects of space mailbox of st.
func NewSender(st *store.Store, mailbox string, opts SenderOptions) *Sender {
	return &Sender{src: newSource(st, mailbox, false, opts.Wire, !opts.NoBookmarks, opts.Logger, opts.Routing)}
}

// Serve sends the mailbox on stream until ctx is done or the stream fails,
// and returns why (ctx.Err() on cancellation). cursor is the child's (from
// its Hello): the last revision it has durably applied. When the store's
// history still covers it, Serve sends what changed after it; when it does
// not, or cursor is 0 or newer than the store, Serve starts with a full
// resync. Resync reports in advance which of the two Serve will do.
//
// The stream carries only downsync frames: the link named its kind.
// If stream is an io.Closer, Serve closes it before returning (that is how
// it unblocks a stalled peer on cancellation) and returns only after its
// reading goroutine has ended; otherwise the caller must end the stream.
// Serve returns ErrBusy while another Serve of s runs.
func (s *Sender) Serve(ctx context.Context, stream io.ReadWriter, cursor uint64) error {
	return s.src.serve(ctx, stream, cursor)
}

// Resync reports whether Serve with this cursor would start with a full
// resync (the value of Welcome.Resync), as of now.
func (s *Sender) Resync(cursor uint64) bool { return s.src.needsResync(cursor) }

// Stats returns the Sender's counters.
func (s *Sender) Stats() Stats { return s.src.stats() }

// ReceiverOptions configures a Receiver. The zero value selects every
// default.
type ReceiverOptions struct {
	// Wire configures frame size and compression; nil: wire defaults.
	Wire *wire.Config
	// MaxBatch bounds the object frames applied in one Txn; default 256.
	MaxBatch int
}

// Receiver is the child side of the downsync stream: it applies what the
// parent sends to the inbox space and persists its cursor with it.
//
// Serve runs one stream at a time; Cursor and Stats are safe for concurrent
// use. The Receiver must be the only writer of its inbox.
type Receiver struct{ snk *sink }

// NewReceiver returns a Receiver writing to space inbox of st. Its cursor is
// stored in the system space ("") of st.
func NewReceiver(st *store.Store, inbox string, opts ReceiverOptions) *Receiver {
	return &Receiver{snk: newSink(st, inbox, layout.DownsyncCursor(inbox), false, nil, opts.Wire, opts.MaxBatch)}
}

// Cursor returns the last parent revision durably applied to the inbox (0:
// none), the value to put in Hello.Cursor.Revision.
func (r *Receiver) Cursor() (uint64, error) {
	rev, _, err := r.snk.cursor()
	return rev, err
}

// CursorChanged returns a channel closed once the cursor has moved after
// the call: take it, then read Cursor, to wait for a revision without
// polling.
func (r *Receiver) CursorChanged() <-chan struct{} { return r.snk.cursorChanged() }

// Epoch returns the parent epoch the cursor belongs to (Hello.Cursor.Epoch):
// the one set with SetEpoch when the cursor was last written; "" if none.
func (r *Receiver) Epoch() (string, error) {
	c, _, err := r.snk.cursorObject()
	return c.Epoch, err
}

// SetEpoch sets the parent epoch (Welcome.Epoch) of the next stream
// served: cursors written from then on are of that epoch.
func (r *Receiver) SetEpoch(epoch string) { r.snk.parentEpoch.Store(&epoch) }

// Serve applies the frames of stream until it ends, ctx is done or the
// parent breaks the protocol, and returns why. Each burst of frames (up to
// MaxBatch objects; what had arrived, and what arrived with it in one read
// of the stream) is one Txn, which also moves the
// cursor when the burst ends with a Progress or ResyncEnd; after each such
// Txn the Receiver sends Ack. Stream handling is as for Sender.Serve.
func (r *Receiver) Serve(ctx context.Context, stream io.ReadWriter) error {
	return r.snk.serve(ctx, stream)
}

// Stats returns the Receiver's counters.
func (r *Receiver) Stats() Stats { return r.snk.c.stats() }

// ReporterOptions configures a Reporter. The zero value selects every
// default.
type ReporterOptions struct {
	// Wire configures frame size and compression; nil: wire defaults.
	Wire *wire.Config
	// Bookmarks makes an idle Reporter send Progress as the child store's
	// revision moves, so the acknowledged sequence follows it (and a
	// resume stays within history) at the cost of a parent write per
	// bookmark. Off by default: reports are soft state, and an expired
	// sequence costs one full report set.
	Bookmarks bool
	// Logger receives the Reporter's logs; nil: discarded.
	Logger *slog.Logger
}

// Reporter is the child side of the upsync stream: it reports the latest
// state of every key of its outbox space, acknowledged by the parent.
//
// Serve runs one stream at a time; Acked and Stats are safe for concurrent
// use.
type Reporter struct{ src *source }

// NewReporter returns a Reporter of the objects of space outbox of st.
func NewReporter(st *store.Store, outbox string, opts ReporterOptions) *Reporter {
	return &Reporter{src: newSource(st, outbox, true, opts.Wire, opts.Bookmarks, opts.Logger, nil)}
}

// Serve reports on stream until ctx is done or the stream fails. acked is
// the highest sequence the parent has made durable (Collector.Acked, or
// this Reporter's Acked after a reconnect): Serve resends, latest value per
// key, what changed after it, or the full report set (ResyncBegin ...
// ResyncEnd) when acked is 0, unknown to the store or older than its
// history. Stream handling is as for Sender.Serve.
func (r *Reporter) Serve(ctx context.Context, stream io.ReadWriter, acked uint64) error {
	return r.src.serve(ctx, stream, acked)
}

// Acked returns the highest ReportAck received (0: none yet).
func (r *Reporter) Acked() uint64 { return r.src.c.acked.Load() }

// Stats returns the Reporter's counters.
func (r *Reporter) Stats() Stats { return r.src.stats() }

// CollectorOptions configures a Collector. The zero value selects every
// default.
type CollectorOptions struct {
	// Wire configures frame size and compression; nil: wire defaults.
	Wire *wire.Config
	// MaxBatch bounds the reports applied in one Txn; default 256.
	MaxBatch int
	// Allow, when set, is asked about every reported key (Space empty);
	// a key it refuses ends Serve with ErrNotAllowed after an Error frame
	// (CodePermissionDenied), and nothing of that burst is applied.
	Allow func(key wire.Key) bool
}

// Collector is the parent side of one child's upsync stream: it stores the
// child's reports in one space and acknowledges them.
//
// Serve runs one stream at a time; Acked and Stats are safe for concurrent
// use. The Collector must be the only writer of its space.
type Collector struct{ snk *sink }

// NewCollector returns a Collector writing to space of st. Its
// acknowledged sequence is stored in the system space ("") of st.
func NewCollector(st *store.Store, space string, opts CollectorOptions) *Collector {
	return &Collector{snk: newSink(st, space, layout.UpsyncCursor(space), true, opts.Allow, opts.Wire, opts.MaxBatch)}
}

// Serve applies the reports of stream until it ends, ctx is done, the
// child breaks the protocol or reports a key Allow refuses. Stream handling
// is as for Sender.Serve.
func (c *Collector) Serve(ctx context.Context, stream io.ReadWriter) error {
	return c.snk.serve(ctx, stream)
}

// Acked returns the highest report sequence made durable in the space,
// persisted in the same Txn as the reports (0: none).
func (c *Collector) Acked() (uint64, error) {
	seq, _, err := c.snk.cursor()
	return seq, err
}

// Stats returns the Collector's counters.
func (c *Collector) Stats() Stats { return c.snk.c.stats() }

// Collected reports whether a Collector of space has made a report set
// durable in r: its cursor exists once the child's first Progress or
// ResyncEnd is applied. A parent that keeps reports in memory uses it after
// a restart, to know which children have reported again.
func Collected(r store.Reader, space string) (bool, error) {
	_, err := r.Get(layout.UpsyncCursor(space))
	if errors.Is(err, store.ErrNotFound) {
		return false, nil
	}
	return err == nil, err
}

// ContentHash returns a hex SHA-256 of the objects of space in r, ordered by
// key, ignoring the space name and metadata.resourceVersion (which differ
// between a mailbox and the inbox it is copied to), so two spaces with the
// same content hash the same. For tests and convergence checks.
func ContentHash(r store.Reader, space string) (string, error) {
	lr, err := r.List(store.ListOptions{Space: space})
	if err != nil {
		return "", err
	}
	return HashObjects(lr.Items)
}

// RoutedContentHash is the ContentHash of a mailbox routed over space (see
// Routing): of the objects of space that target a destination of the
// child's route record, as of now. A child's inbox converged with its
// mailbox hashes the same.
func RoutedContentHash(r store.Reader, space string, rt Routing) (string, error) {
	objs, err := RoutedObjects(r, space, rt)
	if err != nil {
		return "", err
	}
	return HashObjects(objs)
}

// RoutedObjects lists the objects of a mailbox routed over space, as of
// now, as the child receives them (trimmed: Routing.Trim).
func RoutedObjects(r store.Reader, space string, rt Routing) ([]*store.Object, error) {
	lr, err := r.List(store.ListOptions{Space: space})
	if err != nil {
		return nil, err
	}
	ro := &router{Routing: rt}
	if err := ro.load(r); err != nil {
		return nil, err
	}
	out := slices.DeleteFunc(slices.Clone(lr.Items), func(o *store.Object) bool { return !ro.wants(o) })
	if rt.Trim != nil {
		for i, o := range out {
			out[i] = &store.Object{Key: o.Key, Revision: o.Revision, CreateRevision: o.CreateRevision,
				Data: rt.trimmed(o, ro.subtree), UID: o.UID, Labels: o.Labels, Fields: o.Fields}
		}
	}
	return out, nil
}

// Matcher returns a function reporting whether an object belongs in the
// mailbox, for the child's subtree as of now.
func (rt Routing) Matcher(r store.Reader) (func(*store.Object) bool, error) {
	ro := &router{Routing: rt}
	if err := ro.load(r); err != nil {
		return nil, err
	}
	return ro.wants, nil
}

// HashObjects is ContentHash of a set of objects.
func HashObjects(objs []*store.Object) (string, error) {
	items := slices.Clone(objs)
	slices.SortFunc(items, func(a, b *store.Object) int { return compareKeys(a.Key, b.Key) })
	h := sha256.New()
	for _, o := range items {
		data, err := stripResourceVersion(o.Data)
		if err != nil {
			return "", fmt.Errorf("tree: %s: %w", o.Key, err)
		}
		k := wireKey(o.Key)
		fmt.Fprintf(h, "%q %q %q %q %d\n", k.Group, k.Resource, k.Namespace, k.Name, len(data))
		h.Write(data)
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

func stripResourceVersion(data []byte) ([]byte, error) {
	var obj map[string]json.RawMessage
	if err := json.Unmarshal(data, &obj); err != nil {
		return nil, err
	}
	var meta map[string]json.RawMessage
	if err := json.Unmarshal(obj["metadata"], &meta); err != nil {
		return nil, err
	}
	delete(meta, "resourceVersion")
	m, err := json.Marshal(meta)
	if err != nil {
		return nil, err
	}
	obj["metadata"] = m
	return json.Marshal(obj) // map keys sorted
}
