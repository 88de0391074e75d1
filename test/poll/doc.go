// Package poll is the one way tests wait for a condition: Until and True
// poll it until it holds or a bound passes and then fail the test with
// the condition's last word; Holds checks that a condition stays true for
// a bound the test states (a negative assertion is a bound, never a bare
// sleep); Wait is Until for code that must not fail a test (a goroutine
// other than the test's, a benchmark's set-up), returning the last error.
// A condition that meets a failure no wait will mend returns Stop(err)
// and the wait ends at once.
//
// It must not import anything of Canopy: every package's tests use it.
package poll
