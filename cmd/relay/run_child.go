package main

import (
	"context"

	"github.com/canopy-dev/canopy/relay/server"
)

// runChild runs a region or edge relay until ctx is done. Tests replace it
// to see the configuration that a command line produces without starting a
// relay.
var runChild = func(ctx context.Context, cfg server.ChildConfig) error { return server.RunChild(ctx, cfg) }
