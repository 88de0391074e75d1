package main

import (
	"context"

	"github.com/canopy-dev/canopy/relay/server"
)

// runRoot runs a root relay until ctx is done. Tests replace it to see the
// configuration that a command line produces without starting a server.
var runRoot = func(ctx context.Context, cfg server.Config) error { return server.Run(ctx, cfg) }
