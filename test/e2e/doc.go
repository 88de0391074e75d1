// Package e2e tests a real root relay end to end: in-process (server.Open)
// and as a separate process (the relay binary), driven by client-go and by
// the real kubectl binary.
//
// The kubectl binary comes from $KUBECTL (make test sets it to the kubectl
// on PATH or the one it built into bin/); the relay binary from $RELAY_BIN,
// or it is built into a temporary directory. A missing binary fails the
// test: nothing here is skipped silently.
package e2e
