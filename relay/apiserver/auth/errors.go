package auth

import "errors"

// Sentinel errors. Callers test them with errors.Is; the errors returned wrap
// them with details meant for logs, not for clients.
var (
	// ErrUnauthenticated means the request carried no credentials or none
	// that could be verified. The server answers 401.
	ErrUnauthenticated = errors.New("auth: unauthenticated")
	// ErrNotSynced is returned by Authorizer methods that need the RBAC index
	// of a space while the Authorizer is not following the store (before
	// Start has opened its watches, or after Start returned).
	ErrNotSynced = errors.New("auth: RBAC index not synced")
	// ErrTokenTTL is returned by IssueServiceAccountToken for a lifetime
	// shorter than MinTokenTTL (kube: "may not specify a duration less than
	// 10 minutes").
	ErrTokenTTL = errors.New("auth: may not specify a duration less than 10 minutes")
)

// errWatchEnded says a watch closed without an error while still wanted;
// the Authorizer then resyncs, as after ErrExpired.
var errWatchEnded = errors.New("watch ended")
