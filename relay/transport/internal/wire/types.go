package wire

import (
	"fmt"
	"strconv"
)

// Type identifies the message a frame carries (its second byte).
type Type uint8

// Message types of protocol version 1, grouped by the stream they travel on.
const (
	// 0x01 is reserved (an earlier draft's stream header: relay/transport/link now
	// names a stream's kind before its first frame).

	// Control stream.
	TypeHello        Type = 0x02
	TypeWelcome      Type = 0x03
	TypeJoinRequest  Type = 0x04
	TypeJoinResponse Type = 0x05
	TypeAnnounce     Type = 0x06
	TypeMoved        Type = 0x0a
	TypeSiblings     Type = 0x0b // protocol version 2
	TypeAnnounceAck  Type = 0x0c // protocol version 2
	TypeRegister     Type = 0x0d // protocol version 3
	TypeRegistered   Type = 0x0e // protocol version 3
	TypeRenew        Type = 0x0f // protocol version 4
	TypeRenewed      Type = 0x10 // protocol version 4
	// 0x07 and 0x08 are reserved (round-trip probes of an earlier draft:
	// the transport's keep-alive covers liveness).
	TypeError Type = 0x09

	// Downsync stream.
	TypePut         Type = 0x20
	TypeDelete      Type = 0x21
	TypeResyncBegin Type = 0x22
	TypeResyncEnd   Type = 0x23
	TypeProgress    Type = 0x24
	TypeAck         Type = 0x25

	// Upsync stream.
	TypeReport    Type = 0x40
	TypeReportAck Type = 0x41

	// Proxy streams (protocol version 5).
	TypeProxyOpen   Type = 0x60
	TypeProxyReady  Type = 0x61
	TypeProxyData   Type = 0x62
	TypeProxyCredit Type = 0x63
	TypeProxyClose  Type = 0x64
)

var typeNames = map[Type]string{
	TypeHello:        "Hello",
	TypeWelcome:      "Welcome",
	TypeJoinRequest:  "JoinRequest",
	TypeJoinResponse: "JoinResponse",
	TypeAnnounce:     "Announce",
	TypeMoved:        "Moved",
	TypeSiblings:     "Siblings",
	TypeAnnounceAck:  "AnnounceAck",
	TypeRegister:     "Register",
	TypeRegistered:   "Registered",
	TypeRenew:        "Renew",
	TypeRenewed:      "Renewed",
	TypeError:        "Error",
	TypePut:          "Put",
	TypeDelete:       "Delete",
	TypeResyncBegin:  "ResyncBegin",
	TypeResyncEnd:    "ResyncEnd",
	TypeProgress:     "Progress",
	TypeAck:          "Ack",
	TypeReport:       "Report",
	TypeReportAck:    "ReportAck",
	TypeProxyOpen:    "ProxyOpen",
	TypeProxyReady:   "ProxyReady",
	TypeProxyData:    "ProxyData",
	TypeProxyCredit:  "ProxyCredit",
	TypeProxyClose:   "ProxyClose",
}

func (t Type) String() string {
	if s, ok := typeNames[t]; ok {
		return s
	}
	return fmt.Sprintf("Type(%#02x)", uint8(t))
}

func (t Type) known() bool { return newMessage(t) != nil }

// hasObject reports whether messages of type t carry an object field, the
// only field FlagCompressed may apply to.
func (t Type) hasObject() bool { return t == TypePut || t == TypeReport }

// newMessage returns a zero message of type t, or nil if t is unknown.
func newMessage(t Type) Message {
	switch t {
	case TypeHello:
		return new(Hello)
	case TypeWelcome:
		return new(Welcome)
	case TypeJoinRequest:
		return new(JoinRequest)
	case TypeJoinResponse:
		return new(JoinResponse)
	case TypeAnnounce:
		return new(Announce)
	case TypeMoved:
		return new(Moved)
	case TypeSiblings:
		return new(Siblings)
	case TypeAnnounceAck:
		return new(AnnounceAck)
	case TypeRegister:
		return new(Register)
	case TypeRegistered:
		return new(Registered)
	case TypeRenew:
		return new(Renew)
	case TypeRenewed:
		return new(Renewed)
	case TypeError:
		return new(Error)
	case TypePut:
		return new(Put)
	case TypeDelete:
		return new(Delete)
	case TypeResyncBegin:
		return new(ResyncBegin)
	case TypeResyncEnd:
		return new(ResyncEnd)
	case TypeProgress:
		return new(Progress)
	case TypeAck:
		return new(Ack)
	case TypeReport:
		return new(Report)
	case TypeReportAck:
		return new(ReportAck)
	case TypeProxyOpen:
		return new(ProxyOpen)
	case TypeProxyReady:
		return new(ProxyReady)
	case TypeProxyData:
		return new(ProxyData)
	case TypeProxyCredit:
		return new(ProxyCredit)
	case TypeProxyClose:
		return new(ProxyClose)
	}
	return nil
}

// Role is the role of the relay sending Hello. Values this end does not know
// decode fine; refusing them is the link's decision.
type Role uint8

const (
	RoleUnknown Role = 0
	RoleRoot    Role = 1
	RoleRegion  Role = 2
	RoleEdge    Role = 3
)

func (r Role) String() string {
	switch r {
	case RoleUnknown:
		return "unknown"
	case RoleRoot:
		return "root"
	case RoleRegion:
		return "region"
	case RoleEdge:
		return "edge"
	}
	return "Role(" + strconv.Itoa(int(r)) + ")"
}

// ErrorCode classifies an Error message. Codes are stable across protocol
// versions; a receiver treats a code it does not know as CodeInternal.
type ErrorCode uint32

const (
	// CodeInternal: the sender failed; the link may be retried later.
	CodeInternal ErrorCode = 1
	// CodeProtocol: the sender received something it could not decode or
	// that broke the protocol (wrong message for the stream, bad order).
	CodeProtocol ErrorCode = 2
	// CodeUnsupportedVersion: no protocol version in common.
	CodeUnsupportedVersion ErrorCode = 3
	// CodeUnauthenticated: bad, expired or forged join token, or
	// certificate not acceptable.
	CodeUnauthenticated ErrorCode = 4
	// CodePermissionDenied: authenticated, but not allowed (another
	// child's mailbox, a report outside the child's subtree).
	CodePermissionDenied ErrorCode = 5
	// CodeShuttingDown: the sender is stopping; reconnect elsewhere or later.
	CodeShuttingDown ErrorCode = 6
	// CodeNotFound: a proxy stream names a destination that is not below
	// the sender.
	CodeNotFound ErrorCode = 7
	// CodeUnavailable: a proxy stream's destination is below the sender,
	// but the link toward it is down.
	CodeUnavailable ErrorCode = 8
	// CodeTooManyStreams: the link toward a proxy stream's destination
	// already carries as many proxy streams as its parent allows.
	CodeTooManyStreams ErrorCode = 9
)

func (c ErrorCode) String() string {
	switch c {
	case CodeInternal:
		return "internal"
	case CodeProtocol:
		return "protocol"
	case CodeUnsupportedVersion:
		return "unsupported-version"
	case CodeUnauthenticated:
		return "unauthenticated"
	case CodePermissionDenied:
		return "permission-denied"
	case CodeShuttingDown:
		return "shutting-down"
	case CodeNotFound:
		return "not-found"
	case CodeUnavailable:
		return "unavailable"
	case CodeTooManyStreams:
		return "too-many-streams"
	}
	return "ErrorCode(" + strconv.FormatUint(uint64(c), 10) + ")"
}
