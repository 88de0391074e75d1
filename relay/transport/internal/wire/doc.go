// Package wire is the byte format of a relay link: the frames that a child
// relay and its parent exchange on each stream of their connection
// (DESIGN.md §1-2, issue 3).
//
// # What it owns
//
// A link carries several streams: control, downsync (parent → child, acks
// child → parent), upsync (child → parent, acks parent → child) and the
// proxy streams a parent opens, one per proxied request. Each stream is a
// sequence of frames (relay/transport/link names a stream's kind when it
// opens it). This package defines the frame, the message types carried in
// frames and their encodings, and nothing else:
//
//   - [Writer] and [Reader] put frames on and take frames off a byte stream;
//     [Marshal] and [Unmarshal] handle a single frame.
//   - Object payloads ([Put.Data], [Report.Data]) larger than
//     [Config.CompressThreshold] are compressed with zstd when that makes them
//     smaller, and decompressed with a bound, so a decompression bomb is an
//     error, not an allocation.
//
// # Frame format
//
//	+---------+------+-------+----------------+-----------------+
//	| version | type | flags | length uvarint | payload (length)|
//	+---------+------+-------+----------------+-----------------+
//	  1 byte   1 byte 1 byte   1-10 bytes
//
// version is [Version] (1). type is a [Type]. flags is a bit set: bit 0,
// [FlagCompressed], means the object field of the payload (Put.Data,
// Report.Data) is one zstd frame that declares its content size; the other
// bits are reserved and must be zero. length is the payload length and may
// not exceed [Config.MaxFrameSize] (default 16 MiB); a Reader refuses a
// larger frame before allocating anything for it, and grows its buffer only
// as payload bytes actually arrive.
//
// Payloads are a sequence of fields without tags, in the order documented
// on each message type:
//
//   - integers: unsigned as uvarints (encoding/binary), signed (unix
//     nanoseconds) as zig-zag varints;
//   - enums ([Role]) and booleans: one byte, booleans 0 or 1;
//   - byte strings and strings: uvarint length, then the bytes (strings are
//     UTF-8 by convention; this package does not validate them);
//   - lists: uvarint count, then the elements; maps: uvarint count, then
//     key/value pairs in strictly increasing key order;
//   - [Key]: space, group, resource, namespace, name, as five strings.
//
// Empty byte strings, lists and maps decode as nil.
//
// # Versioning
//
// Two numbers are kept apart:
//
//   - The frame version ([Version], the first byte of every frame) changes
//     only if the header layout or the field encodings above change
//     incompatibly. A Reader refuses any other value with [ErrVersion]; it
//     reads the version byte first, so a peer speaking something else
//     entirely (HTTP, TLS, a later frame format) gets a clear error at once.
//   - The protocol version is negotiated on the control stream: the child
//     lists the versions it speaks in [Hello], the parent chooses one in
//     [Welcome]. This package implements protocol versions 1 to 5
//     ([MinProtocolVersion], [ProtocolVersion]; [Negotiate] picks the
//     highest in common); version 2 adds [Siblings] and [AnnounceAck],
//     version 3 [Register] and [Registered], version 4 [Renew] and
//     [Renewed], version 5 the proxy stream messages ([ProxyOpen] and the
//     others of proxy.go).
//
// A later protocol version may evolve the protocol compatibly, within frame
// version 1, in two ways only:
//
//   - Append fields at the end of a message's payload. Readers ignore bytes
//     after the last field they know, so an older peer still decodes the
//     message (this is what makes Hello, sent before any negotiation,
//     extensible). Fields are never removed, reordered or re-typed; a new
//     field's zero value must mean "the old behaviour".
//   - Add message types or flag bits. An unknown type or a reserved flag bit
//     is an error ([ErrUnknownType], [ErrMalformed]) because ignoring it
//     could silently change meaning, so a peer sends new types or flags only
//     after Welcome has chosen a protocol version that has them.
//
// Type numbers are grouped by stream: 0x01-0x1f control, 0x20-0x3f
// downsync, 0x40-0x5f upsync, 0x60-0x7f proxy streams. Type 0 is
// never valid, so zeroed memory is not a frame.
//
// # What it must not do
//
// No I/O policy: it opens no connections or streams, sets no deadlines, does
// not retry, and does not decide what to send when (cursors, resyncs, acks,
// keep-alives are the link's business; the message docs describe their
// meaning so both ends agree). No knowledge of stores, spaces or Kubernetes:
// keys are five strings and objects are opaque bytes. No reflection, gob or
// JSON on the encoding path.
//
// # Concurrency
//
// A Writer or a Reader is not safe for concurrent use; a stream has one
// writing goroutine and one reading goroutine. Marshal and Unmarshal are
// safe for concurrent use. The zstd encoder and decoder are shared by the
// whole process and are safe for concurrent use.
package wire
