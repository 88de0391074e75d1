package wire

import (
	"fmt"
	"slices"
)

// Message is a frame's content. It is implemented only by the pointer types
// of this package (*Hello, *Put, ...); Reader.Read and Unmarshal return
// those pointers, and the caller owns them.
type Message interface {
	// Type is the frame type that carries the message.
	Type() Type

	appendPayload(b []byte, e *encoder) ([]byte, error)
	decodePayload(d *decoder)
}

// decodePayload decodes payload p of a frame of type t. Bytes after the
// fields this version knows are ignored: they are fields appended by a
// later protocol version.
func decodePayload(t Type, f Flags, p []byte, l limits) (Message, error) {
	m := newMessage(t)
	if m == nil {
		return nil, fmt.Errorf("%w %#02x in frame version %d", ErrUnknownType, byte(t), Version)
	}
	d := decoder{b: p, typ: t, flags: f, limits: l}
	m.decodePayload(&d)
	if d.err != nil {
		return nil, d.err
	}
	return m, nil
}

// Key names an object: its space, API group ("" for the core group),
// resource (plural, lower case), namespace ("" for cluster-scoped objects)
// and name. Encoded as five strings in that order.
type Key struct {
	Space     string
	Group     string
	Resource  string
	Namespace string
	Name      string
}

func (k Key) String() string {
	return k.Space + "/" + k.Group + "/" + k.Resource + "/" + k.Namespace + "/" + k.Name
}

func appendKey(b []byte, k Key) []byte {
	b = appendString(b, k.Space)
	b = appendString(b, k.Group)
	b = appendString(b, k.Resource)
	b = appendString(b, k.Namespace)
	return appendString(b, k.Name)
}

func (d *decoder) key() Key {
	return Key{
		Space:     d.string("key.space"),
		Group:     d.string("key.group"),
		Resource:  d.string("key.resource"),
		Namespace: d.string("key.namespace"),
		Name:      d.string("key.name"),
	}
}

// ---- control stream ----

// Cursor is where a child's mailbox link left off; it lets a reconnect
// resume instead of starting over (DESIGN.md §2).
type Cursor struct {
	// Revision is the last revision of its mailbox the child has durably
	// applied (its last Ack). 0: nothing, the child needs a full resync.
	Revision uint64
	// ReportSeq is the last upsync sequence number the parent acknowledged
	// (its last ReportAck). The child resends its current state for every
	// key it reported after that.
	ReportSeq uint64
	// Epoch is the parent epoch (Welcome.Epoch) Revision belongs to. A
	// revision of another parent, or of this parent's store before it was
	// wiped, means nothing here: the parent resyncs.
	Epoch string
}

// Hello is the child's first message on the control stream. The
// child is authenticated by its TLS certificate; Name must match it.
//
// Payload: Name (string), Role (byte), Versions (count, uvarints),
// Cursor.Revision (uvarint), Cursor.ReportSeq (uvarint), Cursor.Epoch
// (string), then (protocol version 3; absent before) Proof.Time (varint)
// and Proof.Signature (bytes).
type Hello struct {
	// Name is the child relay's name.
	Name string
	// Role is the child's role: RoleRegion or RoleEdge.
	Role Role
	// Versions are the protocol versions the child speaks, any order.
	Versions []uint32
	// Cursor is the resume point of the child's mailbox at this parent.
	Cursor Cursor
	// Proof is the child's link proof: its signature of the path it links
	// at (its parent's and its name) and the time (relay/pki). The root
	// moves a relay to another parent only with a proof newer than the
	// last (relay/transport/registry).
	Proof LinkProof
}

// LinkProof is a relay's signature, by its own key, of the path it links
// at and the time (pki.SignLinkProof).
type LinkProof struct {
	// Time is when it was signed, in unix nanoseconds by the relay's clock.
	Time      int64
	Signature []byte
}

func (*Hello) Type() Type { return TypeHello }

func (m *Hello) appendPayload(b []byte, _ *encoder) ([]byte, error) {
	b = appendString(b, m.Name)
	b = append(b, byte(m.Role))
	b = appendUvarint(b, uint64(len(m.Versions)))
	for _, v := range m.Versions {
		b = appendUvarint(b, uint64(v))
	}
	b = appendUvarint(b, m.Cursor.Revision)
	b = appendUvarint(b, m.Cursor.ReportSeq)
	b = appendString(b, m.Cursor.Epoch)
	b = appendVarint(b, m.Proof.Time)
	return appendBytes(b, m.Proof.Signature), nil
}

func (m *Hello) decodePayload(d *decoder) {
	m.Name = d.string("name")
	m.Role = Role(d.byte("role"))
	if n := d.count("versions", 1); n > 0 {
		m.Versions = make([]uint32, 0, capHint(n))
		for range n {
			m.Versions = append(m.Versions, d.uint32("versions"))
		}
	}
	m.Cursor.Revision = d.uvarint("cursor.revision")
	m.Cursor.ReportSeq = d.uvarint("cursor.reportSeq")
	m.Cursor.Epoch = d.string("cursor.epoch")
	if d.more() {
		m.Proof.Time = d.varint("proof.time")
		m.Proof.Signature = d.bytes("proof.signature")
	}
}

// Welcome is the parent's answer to Hello. After it the child opens the
// downsync and upsync streams. A parent that refuses the child sends Error
// instead.
//
// Payload: Name (string), Version (uvarint), Resync (bool), ReportAcked
// (uvarint), Epoch (string).
type Welcome struct {
	// Name is the parent relay's name.
	Name string
	// Version is the protocol version chosen from Hello.Versions; both ends
	// speak it from now on.
	Version uint32
	// Resync is false if the downsync resumes after Hello.Cursor.Revision,
	// true if it starts with a full snapshot (ResyncBegin ... ResyncEnd),
	// because the cursor is 0 or older than the parent's compacted history.
	Resync bool
	// ReportAcked is the last upsync sequence the parent holds durably for
	// this child: the child's upsync resumes after it.
	ReportAcked uint64
	// Epoch identifies the parent's store the downsync revisions come
	// from (random, persisted with it). The child keeps it with its cursor
	// and sends it back in Hello.Cursor.Epoch.
	Epoch string
}

func (*Welcome) Type() Type { return TypeWelcome }

func (m *Welcome) appendPayload(b []byte, _ *encoder) ([]byte, error) {
	b = appendString(b, m.Name)
	b = appendUvarint(b, uint64(m.Version))
	b = appendBool(b, m.Resync)
	b = appendUvarint(b, m.ReportAcked)
	return appendString(b, m.Epoch), nil
}

func (m *Welcome) decodePayload(d *decoder) {
	m.Name = d.string("name")
	m.Version = d.uint32("version")
	m.Resync = d.bool("resync")
	m.ReportAcked = d.uvarint("reportAcked")
	m.Epoch = d.string("epoch")
}

// JoinRequest asks the parent for a certificate. It follows Hello on the
// control stream of a link whose child has no certificate yet.
//
// Payload: Token (string), CSR (bytes).
type JoinRequest struct {
	// Token is the bootstrap join token from `relay token create`.
	Token string
	// CSR is a PEM certificate signing request for the child's name.
	CSR []byte
}

func (*JoinRequest) Type() Type { return TypeJoinRequest }

func (m *JoinRequest) appendPayload(b []byte, _ *encoder) ([]byte, error) {
	b = appendString(b, m.Token)
	return appendBytes(b, m.CSR), nil
}

func (m *JoinRequest) decodePayload(d *decoder) {
	m.Token = d.string("token")
	m.CSR = d.bytes("csr")
}

// JoinResponse answers JoinRequest: either a certificate or an error.
//
// Payload: Chain (bytes), CA (bytes), Error (string).
type JoinResponse struct {
	// Chain is the PEM certificate chain issued to the child, leaf first.
	Chain []byte
	// CA is the PEM root CA certificate the child trusts from now on.
	CA []byte
	// Error is why the join was refused ("token expired", ...); empty on
	// success.
	Error string
}

func (*JoinResponse) Type() Type { return TypeJoinResponse }

func (m *JoinResponse) appendPayload(b []byte, _ *encoder) ([]byte, error) {
	b = appendBytes(b, m.Chain)
	b = appendBytes(b, m.CA)
	return appendString(b, m.Error), nil
}

func (m *JoinResponse) decodePayload(d *decoder) {
	m.Chain = d.bytes("chain")
	m.CA = d.bytes("ca")
	m.Error = d.string("error")
}

// Destination is one cluster (SyncTarget) in a child's subtree.
//
// Encoding: Name (string), Labels (map), Path (count, strings), Connected
// (bool), LastSeen (varint), Since (varint).
type Destination struct {
	// Name is the destination's SyncTarget name.
	Name string
	// Labels are the destination's labels.
	Labels map[string]string
	// Path lists relay names from the announcing relay down to the edge
	// relay that serves the destination: an edge announces its own
	// destination with Path [edge]; a region merging its children's
	// announcements into its own prepends its name, [region, edge].
	Path []string
	// Connected reports whether the serving edge relay's link is up, as
	// far as the announcing relay knows.
	Connected bool
	// LastSeen is when the destination was last heard from, in unix
	// nanoseconds; 0 if never.
	LastSeen int64
	// Since orders the claims of one destination: of two, the one with
	// the greater Since is where the destination is, and the other is
	// superseded (Moved), so that no summary counts it twice. On links of
	// protocol version 3 it is the destination's generation, given by the
	// root when the destination linked along this path (relay/transport/registry),
	// and each parent checks it against what it recorded; an edge's
	// own value is replaced by its parent's. On older links it is when the
	// edge began to be served along this path, by the edge's clock in
	// unix nanoseconds (0: unknown).
	Since int64
}

// Announce is a child's full list of the destinations in its subtree,
// sent on connect and after every change. Each Announce replaces the
// previous one.
//
// Payload: Generation (uvarint), Destinations (count, Destination...).
type Announce struct {
	// Generation increases with every Announce a child sends; a parent
	// ignores one not newer than the last it applied.
	Generation uint64
	// Destinations is the whole subtree, in any order.
	Destinations []Destination
}

func (*Announce) Type() Type { return TypeAnnounce }

func (m *Announce) appendPayload(b []byte, _ *encoder) ([]byte, error) {
	b = appendUvarint(b, m.Generation)
	b = appendUvarint(b, uint64(len(m.Destinations)))
	var keys []string
	for i := range m.Destinations {
		dst := &m.Destinations[i]
		b = appendString(b, dst.Name)
		keys = keys[:0]
		for k := range dst.Labels {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		b = appendUvarint(b, uint64(len(keys)))
		for _, k := range keys {
			b = appendString(b, k)
			b = appendString(b, dst.Labels[k])
		}
		b = appendStrings(b, dst.Path)
		b = appendBool(b, dst.Connected)
		b = appendVarint(b, dst.LastSeen)
		b = appendVarint(b, dst.Since)
	}
	return b, nil
}

func (m *Announce) decodePayload(d *decoder) {
	m.Generation = d.uvarint("generation")
	// A destination takes at least 6 bytes: name, labels, path, connected,
	// lastSeen, since.
	n := d.count("destinations", 6)
	if n == 0 {
		return
	}
	m.Destinations = make([]Destination, 0, capHint(n))
	for range n {
		var dst Destination
		dst.Name = d.string("destination.name")
		if nl := d.count("destination.labels", 2); nl > 0 {
			dst.Labels = make(map[string]string, capHint(nl))
			prev := ""
			for i := range nl {
				k := d.string("destination.labels.key")
				v := d.string("destination.labels.value")
				if d.err != nil {
					return
				}
				if i > 0 && k <= prev {
					d.fail("destination.labels", "destination %q: keys not strictly increasing (%q after %q)", dst.Name, k, prev)
					return
				}
				dst.Labels[k], prev = v, k
			}
		}
		dst.Path = d.strings("destination.path")
		dst.Connected = d.bool("destination.connected")
		dst.LastSeen = d.varint("destination.lastSeen")
		dst.Since = d.varint("destination.since")
		if d.err != nil {
			return
		}
		m.Destinations = append(m.Destinations, dst)
	}
}

// Moved tells a child which of the destinations it announced are now
// reached through another path, more recently homed there: for each, the
// newer claim's Since. The child leaves them out of its summaries and of
// its announcements, and passes the news down. Each Moved replaces the
// previous one; a parent sends it after Welcome when it is not empty, and
// whenever it changes.
//
// Payload: Destinations (count, (Name string, Since varint)...).
type Moved struct {
	Destinations []MovedDestination
}

// MovedDestination is one destination of Moved.
type MovedDestination struct {
	Name  string
	Since int64
}

func (*Moved) Type() Type { return TypeMoved }

func (m *Moved) appendPayload(b []byte, _ *encoder) ([]byte, error) {
	b = appendUvarint(b, uint64(len(m.Destinations)))
	for _, md := range m.Destinations {
		b = appendString(b, md.Name)
		b = appendVarint(b, md.Since)
	}
	return b, nil
}

func (m *Moved) decodePayload(d *decoder) {
	n := d.count("moved", 2)
	if n == 0 {
		return
	}
	m.Destinations = make([]MovedDestination, 0, capHint(n))
	for range n {
		md := MovedDestination{Name: d.string("moved.name"), Since: d.varint("moved.since")}
		if d.err != nil {
			return
		}
		m.Destinations = append(m.Destinations, md)
	}
}

// Siblings tells a child the link addresses of its parent's siblings:
// the relays that serve the same level of the same tree under the same
// parent (found by gossip, docs/ha.md), where the child may re-home when
// its parent is unreachable. The parent's own address is not listed.
// Each Siblings replaces the previous one; a parent sends it after
// Welcome (also when empty, so that a child forgets the siblings of a
// previous parent) and whenever the set changes. Protocol version 2: a
// parent never sends it on a link of version 1.
//
// Payload: Addrs (count, strings), host:port each, sorted.
type Siblings struct {
	Addrs []string
}

func (*Siblings) Type() Type { return TypeSiblings }

func (m *Siblings) appendPayload(b []byte, _ *encoder) ([]byte, error) {
	return appendStrings(b, m.Addrs), nil
}

func (m *Siblings) decodePayload(d *decoder) {
	m.Addrs = d.strings("siblings")
}

// AnnounceAck tells a child that its Announce of Generation is recorded
// (the parent's route record for it) as of the parent's store Revision:
// once the child's downsync cursor reaches Revision, it holds everything
// its parent routes to the destinations of that announcement. A region
// that a re-homed child dials waits for this before resyncing the child,
// so the child is never told to delete what its new parent has not
// fetched yet. Sent for every Announce that changed nothing or was
// recorded. Protocol version 2.
//
// Payload: Generation (uvarint), Revision (uvarint).
type AnnounceAck struct {
	Generation uint64
	Revision   uint64
}

func (*AnnounceAck) Type() Type { return TypeAnnounceAck }

func (m *AnnounceAck) appendPayload(b []byte, _ *encoder) ([]byte, error) {
	b = appendUvarint(b, m.Generation)
	return appendUvarint(b, m.Revision), nil
}

func (m *AnnounceAck) decodePayload(d *decoder) {
	m.Generation = d.uvarint("generation")
	m.Revision = d.uvarint("revision")
}

// RegisterKind says what a Register asks.
type RegisterKind uint8

const (
	// RegisterJoin: a relay asks to join under Name; its parent signs
	// its certificate only once the root has recorded the name.
	RegisterJoin RegisterKind = 1
	// RegisterLink: a relay with a certificate linked to a parent; the
	// root checks its key and records where it is (its home).
	RegisterLink RegisterKind = 2
)

// Register asks the root, through every parent on the way, to record a
// relay below the sender: a join or a link (Kind). Each parent checks that
// Path runs through the child that sent it, forwards it to its own parent
// and, once answered, records the relay's generation for that child before
// it passes the answer (Registered) down, so that it can check what the
// child announces. The root answers itself (relay/transport/registry). Protocol
// version 3.
//
// Payload: ID (uvarint), Kind (byte), Name (string), Role (byte), Path
// (count, strings), PublicKey (bytes), Token (string), Proof.Time
// (varint), Proof.Signature (bytes).
type Register struct {
	// ID matches the answer to the request on this link.
	ID   uint64
	Kind RegisterKind
	// Name and Role are the relay's; Path is its path from the root's
	// name to its own.
	Name string
	Role Role
	Path []string
	// PublicKey is the relay's public key (PKIX): of its certificate
	// request for a join, of its certificate for a link.
	PublicKey []byte
	// Token is the join token (RegisterJoin only).
	Token string
	// Proof is the relay's link proof (RegisterLink: Hello.Proof).
	Proof LinkProof
}

func (*Register) Type() Type { return TypeRegister }

func (m *Register) appendPayload(b []byte, _ *encoder) ([]byte, error) {
	b = appendUvarint(b, m.ID)
	b = append(b, byte(m.Kind))
	b = appendString(b, m.Name)
	b = append(b, byte(m.Role))
	b = appendStrings(b, m.Path)
	b = appendBytes(b, m.PublicKey)
	b = appendString(b, m.Token)
	b = appendVarint(b, m.Proof.Time)
	return appendBytes(b, m.Proof.Signature), nil
}

func (m *Register) decodePayload(d *decoder) {
	m.ID = d.uvarint("id")
	m.Kind = RegisterKind(d.byte("kind"))
	m.Name = d.string("name")
	m.Role = Role(d.byte("role"))
	m.Path = d.strings("path")
	m.PublicKey = d.bytes("publicKey")
	m.Token = d.string("token")
	m.Proof.Time = d.varint("proof.time")
	m.Proof.Signature = d.bytes("proof.signature")
}

// Registered answers the Register of the same ID: the relay's generation,
// or why the root (or a parent on the way) refused. Protocol version 3.
//
// Payload: ID (uvarint), Generation (varint), Code (uvarint), Message
// (string).
type Registered struct {
	ID         uint64
	Generation int64
	// Code is 0 when the relay was registered; otherwise the refusal's
	// class, and Message says why, for the operator.
	Code    ErrorCode
	Message string
}

func (*Registered) Type() Type { return TypeRegistered }

func (m *Registered) appendPayload(b []byte, _ *encoder) ([]byte, error) {
	b = appendUvarint(b, m.ID)
	b = appendVarint(b, m.Generation)
	b = appendUvarint(b, uint64(m.Code))
	return appendString(b, m.Message), nil
}

func (m *Registered) decodePayload(d *decoder) {
	m.ID = d.uvarint("id")
	m.Generation = d.varint("generation")
	m.Code = ErrorCode(d.uint32("code"))
	m.Message = d.string("message")
}

// Renew asks the parent for a new certificate: for the name, role, path
// and key of the certificate the child presented on this link, which the
// parent checks against the request and the root's registry before it
// signs (docs/security.md). The child sends one at a time, when its
// certificate nears its expiry. Protocol version 4.
//
// Payload: ID (uvarint), CSR (bytes).
type Renew struct {
	// ID matches the answer to the request on this link.
	ID uint64
	// CSR is a PEM certificate request for the child's name, made with
	// the key of its current certificate.
	CSR []byte
}

func (*Renew) Type() Type { return TypeRenew }

func (m *Renew) appendPayload(b []byte, _ *encoder) ([]byte, error) {
	b = appendUvarint(b, m.ID)
	return appendBytes(b, m.CSR), nil
}

func (m *Renew) decodePayload(d *decoder) {
	m.ID = d.uvarint("id")
	m.CSR = d.bytes("csr")
}

// Renewed answers the Renew of the same ID: the child's new certificate
// chain, or why the parent refused. Protocol version 4.
//
// Payload: ID (uvarint), Chain (bytes), Code (uvarint), Message (string).
type Renewed struct {
	ID uint64
	// Chain is the PEM certificate chain issued to the child, leaf first,
	// then the intermediates up to the root (excluded), as in
	// JoinResponse.Chain.
	Chain []byte
	// Code is 0 when the certificate was renewed; otherwise the refusal's
	// class, and Message says why, for the operator.
	Code    ErrorCode
	Message string
}

func (*Renewed) Type() Type { return TypeRenewed }

func (m *Renewed) appendPayload(b []byte, _ *encoder) ([]byte, error) {
	b = appendUvarint(b, m.ID)
	b = appendBytes(b, m.Chain)
	b = appendUvarint(b, uint64(m.Code))
	return appendString(b, m.Message), nil
}

func (m *Renewed) decodePayload(d *decoder) {
	m.ID = d.uvarint("id")
	m.Chain = d.bytes("chain")
	m.Code = ErrorCode(d.uint32("code"))
	m.Message = d.string("message")
}

// Error reports a failure to the peer on the control stream; the sender
// then usually closes the link.
//
// Payload: Code (uvarint), Message (string).
type Error struct {
	Code    ErrorCode
	Message string
}

func (*Error) Type() Type { return TypeError }

func (m *Error) appendPayload(b []byte, _ *encoder) ([]byte, error) {
	b = appendUvarint(b, uint64(m.Code))
	return appendString(b, m.Message), nil
}

func (m *Error) decodePayload(d *decoder) {
	m.Code = ErrorCode(d.uint32("code"))
	m.Message = d.string("message")
}

// ---- downsync stream ----
//
// The parent sends the latest state of each key of the child's mailbox, in
// revision order, never a backlog of intermediate versions; the child acks
// what it has durably applied.

// Put sets a key of the child's mailbox to an object version.
//
// Payload: Revision (uvarint), Key, Data (object bytes, compressed if
// FlagCompressed).
type Put struct {
	// Revision is the revision at which the object took this value.
	Revision uint64
	Key      Key
	// Data is the object, opaque to this package (JSON today).
	Data []byte
}

func (*Put) Type() Type { return TypePut }

func (m *Put) appendPayload(b []byte, e *encoder) ([]byte, error) {
	b = appendUvarint(b, m.Revision)
	b = appendKey(b, m.Key)
	return e.object(b, m.Data), nil
}

func (m *Put) decodePayload(d *decoder) {
	m.Revision = d.uvarint("revision")
	m.Key = d.key()
	m.Data = d.object("data")
}

// Delete removes a key from the child's mailbox.
//
// Payload: Revision (uvarint), Key.
type Delete struct {
	// Revision is the revision of the deletion.
	Revision uint64
	Key      Key
}

func (*Delete) Type() Type { return TypeDelete }

func (m *Delete) appendPayload(b []byte, _ *encoder) ([]byte, error) {
	b = appendUvarint(b, m.Revision)
	return appendKey(b, m.Key), nil
}

func (m *Delete) decodePayload(d *decoder) {
	m.Revision = d.uvarint("revision")
	m.Key = d.key()
}

// ResyncBegin opens a full snapshot of the mailbox at Revision: the Puts up
// to ResyncEnd are its entire content.
//
// Payload: Revision (uvarint).
type ResyncBegin struct{ Revision uint64 }

// ResyncEnd closes the snapshot opened by ResyncBegin at the same Revision.
// The child deletes every key it holds that no Put named since
// ResyncBegin, then is at Revision.
//
// Payload: Revision (uvarint).
type ResyncEnd struct{ Revision uint64 }

// Progress says that everything in the mailbox up to Revision has been sent,
// even if no Put or Delete carried that revision (changes to other
// mailboxes advance the global revision too). It lets the child's cursor
// advance while idle.
//
// Payload: Revision (uvarint).
type Progress struct{ Revision uint64 }

// Ack, from the child, says it has durably applied everything up to
// Revision; the parent records it as the child's cursor.
//
// Payload: Revision (uvarint).
type Ack struct{ Revision uint64 }

func (*ResyncBegin) Type() Type { return TypeResyncBegin }
func (*ResyncEnd) Type() Type   { return TypeResyncEnd }
func (*Progress) Type() Type    { return TypeProgress }
func (*Ack) Type() Type         { return TypeAck }

func (m *ResyncBegin) appendPayload(b []byte, _ *encoder) ([]byte, error) {
	return appendUvarint(b, m.Revision), nil
}
func (m *ResyncEnd) appendPayload(b []byte, _ *encoder) ([]byte, error) {
	return appendUvarint(b, m.Revision), nil
}
func (m *Progress) appendPayload(b []byte, _ *encoder) ([]byte, error) {
	return appendUvarint(b, m.Revision), nil
}
func (m *Ack) appendPayload(b []byte, _ *encoder) ([]byte, error) {
	return appendUvarint(b, m.Revision), nil
}

func (m *ResyncBegin) decodePayload(d *decoder) { m.Revision = d.uvarint("revision") }
func (m *ResyncEnd) decodePayload(d *decoder)   { m.Revision = d.uvarint("revision") }
func (m *Progress) decodePayload(d *decoder)    { m.Revision = d.uvarint("revision") }
func (m *Ack) decodePayload(d *decoder)         { m.Revision = d.uvarint("revision") }

// ---- upsync stream ----

// Report carries the latest reported state of one key of the child's
// subtree (or its deletion) to the parent.
//
// Payload: Seq (uvarint), Key, Deleted (bool), Data (object bytes,
// compressed if FlagCompressed; empty if Deleted).
type Report struct {
	// Seq is the child's sequence number for this report. It increases with
	// every Report the child sends its parent and survives reconnects, so
	// that Cursor.ReportSeq stays meaningful.
	Seq uint64
	Key Key
	// Deleted reports that the key no longer exists; Data is then empty.
	Deleted bool
	// Data is the object, opaque to this package.
	Data []byte
}

func (*Report) Type() Type { return TypeReport }

func (m *Report) appendPayload(b []byte, e *encoder) ([]byte, error) {
	if m.Deleted && len(m.Data) > 0 {
		return b, fmt.Errorf("%w: Report of %v is Deleted but has %d bytes of Data", ErrMalformed, m.Key, len(m.Data))
	}
	b = appendUvarint(b, m.Seq)
	b = appendKey(b, m.Key)
	b = appendBool(b, m.Deleted)
	return e.object(b, m.Data), nil
}

func (m *Report) decodePayload(d *decoder) {
	m.Seq = d.uvarint("seq")
	m.Key = d.key()
	m.Deleted = d.bool("deleted")
	m.Data = d.object("data")
	if d.err == nil && m.Deleted && len(m.Data) > 0 {
		d.fail("data", "Report of %v is Deleted but has %d bytes of Data", m.Key, len(m.Data))
	}
}

// ReportAck, from the parent, says every Report up to Seq is durable there;
// the child need not resend them after a reconnect.
//
// Payload: Seq (uvarint).
type ReportAck struct{ Seq uint64 }

func (*ReportAck) Type() Type { return TypeReportAck }

func (m *ReportAck) appendPayload(b []byte, _ *encoder) ([]byte, error) {
	return appendUvarint(b, m.Seq), nil
}

func (m *ReportAck) decodePayload(d *decoder) { m.Seq = d.uvarint("seq") }
