// Package tree moves state along one relay link (docs/tree-protocol.md,
// DESIGN.md §2): desired state down from a parent's mailbox space to a
// child's inbox (downsync), reported state up from a child's outbox to a
// parent's space (upsync). It is transport-agnostic: each side gets one
// byte stream per direction (a relay/transport/link stream in production, a pipe in
// tests) and speaks relay/transport/internal/wire frames on it.
//
// # What it owns
//
//   - Sender (parent) and Receiver (child): the downsync stream.
//   - Reporter (child) and Collector (parent): the upsync stream.
//   - The cursors: a Receiver's last applied parent revision and a
//     Collector's last durable report sequence, each an object of the
//     system space "" (layout.DownsyncCursor, layout.UpsyncCursor: the
//     edge syncer reads the first), written in the same Txn as the objects
//     it covers, so a crash never leaves state and cursor apart.
//
// # State, not events
//
// A sending side (Sender, Reporter) watches its space and only marks keys
// dirty (key → newest revision seen); one loop takes the dirty keys, reads
// each key's current version (absent: a deletion) and sends it. A slow or
// disconnected peer therefore skips intermediate versions, and what is held
// for it is bounded by its number of keys. Within one stream a key already
// sent at its current version is not sent again (history replay after a
// resume marks keys dirty once per event). When the dirty set is empty the
// sender sends Progress(rev): every change up to rev has been sent. One
// revision may change many keys (a Txn), whose events arrive one by one:
// it counts only once the store's Bookmark that ends it has arrived
// (store.WatchOptions.RevisionEnds), for a receiving side that moved its
// cursor past half a revision would resume after the other half.
//
// Frames are not in revision order (each key goes at its current version),
// so a receiving side moves its cursor only on Progress and ResyncEnd,
// never on a Put's revision. A burst applied without one is still a
// consistent state: each object at least as new as the cursor says.
//
// Resume: Serve gets the peer's cursor. If the store's history still covers
// it, the watch starts there; otherwise (or at 0) the sender sends
// ResyncBegin(rev), every object at rev, ResyncEnd(rev), and the receiving
// side deletes, in the Txn that sets its cursor to rev, every key of its
// space that the snapshot did not name. A watch that falls behind
// (store.ErrTooSlow) resumes from the last revision taken whole into the
// dirty set, or resyncs if that is gone.
//
// # Upsync on the wire
//
// Upsync uses the downsync scheme with sequence numbers for revisions: a
// Report's Seq is the child store revision of the version reported (of the
// deletion, for Deleted), so Seq is not monotonic across keys. The
// Reporter also sends, on the upsync stream, the downsync control frames
// with the same meaning in sequence space: Progress(seq) (all changes up to
// seq reported) and ResyncBegin(seq)/ResyncEnd(seq) around a full report
// set (the Collector deletes what it did not name). ReportAck(seq) acks the
// Collector's durable sequence, which moves only on Progress and ResyncEnd.
//
// Keys on the wire have an empty Space: the stream implies it. Object
// bytes are the stored JSON; a receiving side stores them under its own
// resourceVersion (ContentHash ignores it when comparing spaces).
//
// # What it must not do
//
// It opens no streams and handles no Hello or Welcome frames: the
// link does, and passes the cursors in (Sender.Resync gives
// Welcome.Resync). It does not decide what goes in a mailbox or an outbox,
// and does no authentication beyond CollectorOptions.Allow.
//
// # Concurrency
//
// Each of Sender, Receiver, Reporter and Collector serves one stream at a
// time (a second concurrent Serve returns ErrBusy) and may Serve again
// after a disconnect, keeping its counters. A sending side runs two
// goroutines per stream, the send loop and the ack reader; its watch's
// events are taken into the dirty set by the watcher's own goroutine,
// which runs only while they are pending (store.WatchOptions.Func).
// source.mu guards the dirty set and is never held across I/O. A
// receiving side runs a frame reader and the applier, which alone writes
// the store and the acks.
package tree
