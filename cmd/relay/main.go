// Command relay runs one node of a Canopy tree, a root, region or edge relay
// chosen with --role, and offers subcommands that read what a root keeps in
// its data directory (kubeconfig) or describe the binary (version).
//
// Flags are parsed into options, completed with defaults, validated per role
// and only then turned into the configuration of the parts to run. A usage
// error (an unknown flag, a bad value, flags that contradict each other)
// prints one line per problem on stderr, "relay: --flag: what is wrong", and
// exits with code 2; any other failure exits with code 1.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

// Exit codes.
const (
	exitOK      = 0
	exitFailure = 1
	exitUsage   = 2
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	// The first signal starts a graceful shutdown; restoring the default
	// handling lets a second one kill a relay that is slow to stop.
	context.AfterFunc(ctx, stop)
	code := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

// run executes the relay command line args and returns the exit code.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	cmd := newRelayCommand()
	cmd.SetArgs(args)
	cmd.SetOut(stdout)
	cmd.SetErr(stderr)
	err := cmd.ExecuteContext(ctx)
	if err == nil {
		return exitOK
	}
	for line := range strings.SplitSeq(err.Error(), "\n") {
		fmt.Fprintf(stderr, "relay: %s\n", line)
	}
	if _, ok := errors.AsType[usageError](err); ok {
		return exitUsage
	}
	return exitFailure
}

// usageError marks a mistake in how relay was invoked: it exits with code 2
// and prints no usage text.
type usageError struct{ err error }

func (e usageError) Error() string { return e.err.Error() }
func (e usageError) Unwrap() error { return e.err }

// flagErrorf returns an error about the flag named name, formatted as
// "--name: message".
func flagErrorf(name, format string, args ...any) error {
	return fmt.Errorf("--%s: %s", name, fmt.Sprintf(format, args...))
}

// flagParseError is the cobra flag error function of every command: it
// names the flag first, as flagErrorf does, and marks the error as a usage
// error.
func flagParseError(_ *cobra.Command, err error) error {
	if e, ok := errors.AsType[*pflag.InvalidValueError](err); ok {
		cause := e.Unwrap()
		if ne, ok := errors.AsType[*strconv.NumError](cause); ok {
			cause = ne.Err // drop "strconv.ParseBool: parsing ..."
		}
		err = flagErrorf(e.GetFlag().Name, "invalid value %q: %v", e.GetValue(), cause)
	} else if e, ok := errors.AsType[*pflag.ValueRequiredError](err); ok {
		err = flagErrorf(e.GetSpecifiedName(), "needs a value")
	}
	return usageError{err}
}

// noArgs rejects positional arguments; relay and its subcommands take flags
// only.
func noArgs(cmd *cobra.Command, args []string) error {
	switch {
	case len(args) == 0:
		return nil
	case cmd.HasSubCommands():
		return usageError{fmt.Errorf("unknown command %q", args[0])}
	default:
		return usageError{fmt.Errorf("%s: unexpected argument %q", cmd.Name(), args[0])}
	}
}

// newGroupCommand is a command that only holds subcommands: run alone it
// is a usage error naming them.
func newGroupCommand(use, short string, subs ...*cobra.Command) *cobra.Command {
	names := make([]string, len(subs))
	for i, sub := range subs {
		names[i] = sub.Name()
	}
	cmd := &cobra.Command{
		Use:   use,
		Short: short,
		Args:  noArgs,
		RunE: func(*cobra.Command, []string) error {
			return usageError{fmt.Errorf("%s: missing subcommand: %s", use, strings.Join(names, " or "))}
		},
	}
	cmd.AddCommand(subs...)
	return cmd
}
