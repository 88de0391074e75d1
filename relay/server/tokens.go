package server

import (
	"context"
	"time"

	"github.com/canopy-dev/canopy/relay/pki"
	"github.com/canopy-dev/canopy/relay/transport/registry"
)

// IssueJoinToken issues a join token signed by the root's CA, restricted
// by limits and valid for ttl, and records it at the root, as "relay
// token create" does through the kube API: a token is accepted only while
// its record exists (relay/transport/registry). For simulations and tests, which
// run the root in their own process.
func (r *Root) IssueJoinToken(ctx context.Context, limits pki.JoinLimits, ttl time.Duration) (string, error) {
	token, claims, err := pki.IssueLimitedJoinToken(r.ca, limits, ttl, time.Now())
	if err != nil {
		return "", err
	}
	if err := registry.RecordToken(ctx, r.store, claims); err != nil {
		return "", err
	}
	return token, nil
}
