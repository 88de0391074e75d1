package server

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"
)

// Part is a long-lived part of a relay (STYLE.md): Start runs it until
// ctx is done and returns early only when it fails. A role is a choice of
// parts; a group runs them.
type Part interface {
	Start(ctx context.Context) error
}

// PartFunc is a function that is a Part.
type PartFunc func(ctx context.Context) error

func (f PartFunc) Start(ctx context.Context) error { return f(ctx) }

// group runs a relay's parts together: all of them until ctx ends or one
// stops, then none. The zero value is an empty group.
type group struct {
	names []string
	parts []Part
}

// add adds part, named for the error a group returns when it stops.
func (g *group) add(name string, part Part) {
	g.names = append(g.names, name)
	g.parts = append(g.parts, part)
}

// errPartStopped: a part returned while its context was live.
var errPartStopped = errors.New("server: stopped")

// workStopTimeout bounds how long a group waits for its parts to stop once
// its context ends: what they hold (the store, the log) is closed after.
const workStopTimeout = 10 * time.Second

// run starts every part, calls started (nil: nothing) once they all run,
// and returns when ctx ends or a part stops; it then cancels the others
// and waits for them, at most workStopTimeout. It returns the error of
// the part that stopped first (one that stopped without an error while
// ctx was live: errPartStopped, naming it), nil when ctx ended first.
func (g *group) run(ctx context.Context, log *slog.Logger, started func()) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	type ended struct {
		name string
		err  error
	}
	done := make(chan ended, len(g.parts))
	var wg sync.WaitGroup
	for i, p := range g.parts {
		wg.Go(func() { done <- ended{g.names[i], p.Start(ctx)} })
	}
	if started != nil {
		started()
	}
	var err error
	select {
	case <-ctx.Done():
	case e := <-done:
		if ctx.Err() == nil {
			err = e.err
			if err == nil {
				err = fmt.Errorf("%s: %w", e.name, errPartStopped)
			}
		}
	}
	cancel()
	stopped := make(chan struct{})
	go func() { wg.Wait(); close(stopped) }()
	select {
	case <-stopped:
	case <-time.After(workStopTimeout):
		log.Warn("closing while some of the relay's work still runs", "waited", workStopTimeout)
	}
	return err
}
