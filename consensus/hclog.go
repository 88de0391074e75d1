package consensus

import (
	"bytes"
	"context"
	"io"
	"log"
	"log/slog"

	"github.com/hashicorp/go-hclog"
)

// hclogAdapter is an hclog.Logger (what raft and raft-wal log to) that writes
// to a slog.Logger, so their logs come out structured with the relay's own.
// The slog handler owns the level: SetLevel does nothing.
type hclogAdapter struct {
	log     *slog.Logger
	name    string
	implied []any
	// quiet lists messages logged at Debug whatever their level.
	quiet map[string]bool
}

var _ hclog.Logger = (*hclogAdapter)(nil)

// newHCLogger returns an hclog.Logger named name writing to l. Levels map one
// notch down below Warn: raft's Info messages (state changes, elections,
// snapshot progress) are routine for a relay and appear at slog Debug, raft's
// Debug at Debug-4 and Trace at Debug-8; Warn and Error keep their level.
func newHCLogger(l *slog.Logger, name string) hclog.Logger {
	return &hclogAdapter{log: l, name: name}
}

// quieting returns a copy of a that logs msgs at Debug whatever their level.
func (a *hclogAdapter) quieting(msgs ...string) *hclogAdapter {
	c := *a
	c.quiet = make(map[string]bool, len(a.quiet)+len(msgs))
	for m := range a.quiet {
		c.quiet[m] = true
	}
	for _, m := range msgs {
		c.quiet[m] = true
	}
	return &c
}

func slogLevel(l hclog.Level) slog.Level {
	switch l {
	case hclog.Trace:
		return slog.LevelDebug - 8
	case hclog.Debug:
		return slog.LevelDebug - 4
	case hclog.Warn:
		return slog.LevelWarn
	case hclog.Error:
		return slog.LevelError
	default: // Info, NoLevel
		return slog.LevelDebug
	}
}

func (a *hclogAdapter) Log(level hclog.Level, msg string, args ...any) {
	if level == hclog.Off {
		return
	}
	ctx := context.Background()
	lvl := slogLevel(level)
	if a.quiet[msg] {
		lvl = min(lvl, slog.LevelDebug)
	}
	if !a.log.Enabled(ctx, lvl) {
		return
	}
	if a.name != "" {
		args = append([]any{"logger", a.name}, args...)
	}
	a.log.Log(ctx, lvl, msg, args...)
}

func (a *hclogAdapter) Trace(msg string, args ...any) { a.Log(hclog.Trace, msg, args...) }
func (a *hclogAdapter) Debug(msg string, args ...any) { a.Log(hclog.Debug, msg, args...) }
func (a *hclogAdapter) Info(msg string, args ...any)  { a.Log(hclog.Info, msg, args...) }
func (a *hclogAdapter) Warn(msg string, args ...any)  { a.Log(hclog.Warn, msg, args...) }
func (a *hclogAdapter) Error(msg string, args ...any) { a.Log(hclog.Error, msg, args...) }

func (a *hclogAdapter) enabled(level hclog.Level) bool {
	return a.log.Enabled(context.Background(), slogLevel(level))
}

func (a *hclogAdapter) IsTrace() bool { return a.enabled(hclog.Trace) }
func (a *hclogAdapter) IsDebug() bool { return a.enabled(hclog.Debug) }
func (a *hclogAdapter) IsInfo() bool  { return a.enabled(hclog.Info) }
func (a *hclogAdapter) IsWarn() bool  { return a.enabled(hclog.Warn) }
func (a *hclogAdapter) IsError() bool { return a.enabled(hclog.Error) }

func (a *hclogAdapter) ImpliedArgs() []any { return a.implied }

func (a *hclogAdapter) With(args ...any) hclog.Logger {
	return &hclogAdapter{
		log:     a.log.With(args...),
		name:    a.name,
		implied: append(a.implied[:len(a.implied):len(a.implied)], args...),
		quiet:   a.quiet,
	}
}

func (a *hclogAdapter) Name() string { return a.name }

func (a *hclogAdapter) Named(name string) hclog.Logger {
	if a.name != "" {
		name = a.name + "." + name
	}
	return a.ResetNamed(name)
}

func (a *hclogAdapter) ResetNamed(name string) hclog.Logger {
	return &hclogAdapter{log: a.log, name: name, implied: a.implied, quiet: a.quiet}
}

// SetLevel does nothing: the level is the slog handler's.
func (a *hclogAdapter) SetLevel(hclog.Level) {}

// GetLevel returns the lowest hclog level the slog handler lets through.
func (a *hclogAdapter) GetLevel() hclog.Level {
	for _, l := range []hclog.Level{hclog.Trace, hclog.Debug, hclog.Info, hclog.Warn, hclog.Error} {
		if a.enabled(l) {
			return l
		}
	}
	return hclog.Off
}

func (a *hclogAdapter) StandardLogger(opts *hclog.StandardLoggerOptions) *log.Logger {
	return log.New(a.StandardWriter(opts), "", 0)
}

// StandardWriter returns a writer that logs each write as one message, at
// opts.ForceLevel if set, else at the level named by a leading "[LEVEL]"
// tag when opts.InferLevels is set, else at Info.
func (a *hclogAdapter) StandardWriter(opts *hclog.StandardLoggerOptions) io.Writer {
	w := &stdWriter{log: a, level: hclog.Info}
	if opts != nil {
		w.infer = opts.InferLevels
		if opts.ForceLevel != hclog.NoLevel {
			w.level, w.infer = opts.ForceLevel, false
		}
	}
	return w
}

type stdWriter struct {
	log   *hclogAdapter
	level hclog.Level
	infer bool
}

var levelTags = []struct {
	tag   []byte
	level hclog.Level
}{
	{[]byte("[TRACE]"), hclog.Trace},
	{[]byte("[DEBUG]"), hclog.Debug},
	{[]byte("[INFO]"), hclog.Info},
	{[]byte("[WARN]"), hclog.Warn},
	{[]byte("[ERROR]"), hclog.Error},
	{[]byte("[ERR]"), hclog.Error},
}

func (w *stdWriter) Write(p []byte) (int, error) {
	msg, level := bytes.TrimSpace(p), w.level
	if w.infer {
		for _, t := range levelTags {
			if rest, ok := bytes.CutPrefix(msg, t.tag); ok {
				msg, level = bytes.TrimSpace(rest), t.level
				break
			}
		}
	}
	w.log.Log(level, string(msg))
	return len(p), nil
}
