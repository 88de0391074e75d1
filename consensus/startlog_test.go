package consensus

import (
	"log/slog"
	"strings"
	"testing"

	"github.com/canopy-dev/canopy/test/procs"
)

// TestSingleNodeStartsQuietly: a single voter elects itself at every start
// (issue 26: edges and regions logged "heartbeat timeout reached, starting
// election" each time); nothing of it reaches Warn. A cluster replica keeps
// the message at Warn: there it means the leader went silent.
func TestSingleNodeStartsQuietly(t *testing.T) {
	var out procs.Buffer
	logger := slog.New(slog.NewTextHandler(&out, &slog.HandlerOptions{Level: slog.LevelWarn}))
	dir := t.TempDir()
	for i := range 2 { // a new directory, then a restart
		n, err := Open(Config{Dir: dir, NodeID: "edge-1", Logger: logger}, newTestFSM())
		if err != nil {
			t.Fatal(err)
		}
		propose(t, n, "k"+string(rune('0'+i)))
		if err := n.Close(); err != nil {
			t.Fatal(err)
		}
	}
	if s := out.String(); s != "" {
		t.Fatalf("a single node logged at Warn or above while starting:\n%s", s)
	}

	out = procs.Buffer{}
	cluster := Config{NodeID: "root-0", RaftAddr: "127.0.0.1:0"}
	cluster.raftConfig(logger).Logger.Warn("heartbeat timeout reached, starting election")
	if s := out.String(); !strings.Contains(s, "level=WARN") || !strings.Contains(s, "starting election") {
		t.Fatalf("a cluster replica's election is not at Warn: %q", s)
	}
}
