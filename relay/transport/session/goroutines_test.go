package session

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"runtime/pprof"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/canopy-dev/canopy/test/poll"
)

// idleLinkGoroutines is how many goroutines one idle link costs, both
// ends (parent and child relay, over QUIC) together: a region with
// thousands of children, and a process of simulated relays, pay it per
// link. Goroutines that would only wait for a link to end or for a timer
// are callbacks instead (link.AfterClose, context.AfterFunc,
// time.AfterFunc).
const idleLinkGoroutines = 21

// testLabel marks the goroutines this test starts, and those they start,
// apart from what other tests left winding down.
const testLabel = "canopy-test"

// labelled counts the goroutines that carry testLabel=value.
func labelled(t *testing.T, value string) int {
	t.Helper()
	var b bytes.Buffer
	if err := pprof.Lookup("goroutine").WriteTo(&b, 1); err != nil {
		t.Fatal(err)
	}
	// debug=1: "N @ pc..." heads each stack, its "# labels: {...}" below.
	want := strconv.Quote(testLabel) + ":" + strconv.Quote(value)
	n, count := 0, 0
	sc := bufio.NewScanner(&b)
	for sc.Scan() {
		line := sc.Text()
		if head, _, ok := strings.Cut(line, " @ "); ok {
			count, _ = strconv.Atoi(head)
		} else if strings.HasPrefix(line, "# labels: ") && strings.Contains(line, want) {
			n += count
		}
	}
	return n
}

// TestIdleLinkGoroutines counts the goroutines one idle link adds.
func TestIdleLinkGoroutines(t *testing.T) {
	pprof.SetGoroutineLabels(pprof.WithLabels(context.Background(), pprof.Labels(testLabel, "idle-link")))
	defer pprof.SetGoroutineLabels(context.Background())
	root := startRoot(t)
	// What the root runs by itself, once what its start began has ended.
	var before int
	poll.Until(t, "the root's goroutines steady", func() error {
		n := labelled(t, "idle-link")
		time.Sleep(200 * time.Millisecond)
		if before = labelled(t, "idle-link"); before != n {
			return fmt.Errorf("%d goroutines, then %d", n, before)
		}
		return nil
	})
	up, _ := startEdge(t, root.addr, t.TempDir(), root.token, newStore(t))
	poll.True(t, "the edge connected", up.Connected)
	poll.Until(t, "the idle link's goroutines within the bound", func() error {
		if n := labelled(t, "idle-link") - before; n > idleLinkGoroutines {
			return fmt.Errorf("one idle link runs %d goroutines, want at most %d", n, idleLinkGoroutines)
		}
		return nil
	})
}
