// Package procs runs the programs a test starts as child processes (the
// relay, or a wrapper that execs it: unshare, nsenter) and picks the
// loopback addresses they listen on.
//
// Start writes a process's output to a file in the test's temporary
// directory, kills the process when the test ends and logs the end of its
// output if the test failed. A Process stops with SIGTERM as a supervisor
// stops it (Stop), dies with SIGKILL (Kill), and ends a wait at once when
// it exits (Until). FreeAddr gives a loopback address free for TCP and
// UDP, never the same port twice in one test binary. Buffer holds a
// process's output (or a log) for a test to read while it is still being
// written.
//
// It builds no binary (test/relaybin does) and knows nothing of what it
// runs. It must not import anything of Canopy but test/poll: the modules
// under test/ (deploy, observability) use it without the relay's
// dependencies.
package procs
