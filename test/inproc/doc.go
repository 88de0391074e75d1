// Package inproc serves a root relay inside the test's own process, on
// random loopback ports, for tests that drive it with clients (client-go,
// kubectl, the relay command's subcommands) rather than as a process
// (test/procs, test/relaybin do that).
//
// StartRoot opens the root, serves it until the test ends, fails the test
// if it stops with an error or does not stop, and returns once it is
// ready.
package inproc
