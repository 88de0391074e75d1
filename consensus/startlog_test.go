package consensus

import (
	"bytes"
	"log/slog"
	"strings"
	"sync"
	"testing"
)

// syncBuffer is a bytes.Buffer safe for the node's goroutines.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// TestSingleNodeStartsQuietly: a single voter elects itself at every start
// (issue 26: edges and regions logged "heartbeat timeout reached, starting
// election" each time); nothing of it reaches Warn. A cluster replica keeps
// the message at Warn: there it means the leader went silent.
func TestSingleNodeStartsQuietly(t *testing.T) {
	var out syncBuffer
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

	out = syncBuffer{}
	cluster := Config{NodeID: "root-0", RaftAddr: "127.0.0.1:0"}
	cluster.raftConfig(logger).Logger.Warn("heartbeat timeout reached, starting election")
	if s := out.String(); !strings.Contains(s, "level=WARN") || !strings.Contains(s, "starting election") {
		t.Fatalf("a cluster replica's election is not at Warn: %q", s)
	}
}
