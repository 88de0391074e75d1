package consensus

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// The crash test runs this test binary again as a child that proposes in a
// loop; these variables tell TestHelperProcess what to do.
const (
	helperDirEnv   = "CONSENSUS_CRASH_DIR"
	helperRoundEnv = "CONSENSUS_CRASH_ROUND"
	// helperWriters proposes concurrently, so the child is killed in the
	// middle of group commits, not between two single writes.
	helperWriters = 16
	// helperMaxPerWriter stops a child whose parent is gone (its stdout
	// would normally break first).
	helperMaxPerWriter = 100_000
)

// TestHelperProcess is the child of TestCrashKeepsAckedProposals, not a test
// of its own. Each writer proposes keys "round/writer/i" for i = 0, 1, … in
// order and prints "ack KEY" once Propose returned.
func TestHelperProcess(t *testing.T) {
	dir := os.Getenv(helperDirEnv)
	if dir == "" {
		t.Skip("child process of TestCrashKeepsAckedProposals")
	}
	logger := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	n, err := Open(Config{Dir: dir, NodeID: "root-0", Logger: logger}, newTestFSM())
	if err != nil {
		t.Fatal(err)
	}
	round := os.Getenv(helperRoundEnv)
	var wg sync.WaitGroup
	for w := range helperWriters {
		wg.Go(func() {
			for i := range helperMaxPerWriter {
				key := fmt.Sprintf("%s/%d/%d", round, w, i)
				if _, err := n.Propose(context.Background(), []byte(key)); err != nil {
					t.Errorf("Propose(%s): %v", key, err)
					return
				}
				fmt.Printf("ack %s\n", key)
			}
		})
	}
	wg.Wait()
}

// runChildUntilKilled starts the helper on dir, reads at least want acks,
// kills it with SIGKILL and returns every ack it printed.
func runChildUntilKilled(t *testing.T, dir string, round, want int) []string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, os.Args[0], "-test.run=^TestHelperProcess$")
	cmd.Env = append(os.Environ(), helperDirEnv+"="+dir, helperRoundEnv+"="+strconv.Itoa(round))
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}

	var acks []string
	killed := false
	sc := bufio.NewScanner(stdout)
	for sc.Scan() {
		if key, ok := strings.CutPrefix(sc.Text(), "ack "); ok {
			acks = append(acks, key)
		}
		if !killed && len(acks) >= want {
			// Acks already in the pipe are read on: they count too.
			if err := cmd.Process.Kill(); err != nil {
				t.Fatal(err)
			}
			killed = true
		}
	}
	err = cmd.Wait()
	if !killed {
		t.Fatalf("child ended after %d acks (%v):\n%s", len(acks), err, stderr.Bytes())
	}
	return acks
}

func TestCrashKeepsAckedProposals(t *testing.T) {
	dir := t.TempDir()
	var acked []string
	// Later rounds crash a log that was itself recovered from a crash.
	for round := range 3 {
		acked = append(acked, runChildUntilKilled(t, dir, round, 300)...)

		fsm := newTestFSM()
		n := openNode(t, dir, fsm)
		state, _, err := fsm.snapshot()
		if err != nil {
			t.Fatal(err)
		}
		if err := state.check(); err != nil {
			t.Fatalf("round %d: inconsistent state: %v", round, err)
		}
		for _, key := range acked {
			if _, ok := state.Keys[key]; !ok {
				t.Fatalf("round %d: acked %s lost (%d keys recovered)", round, key, len(state.Keys))
			}
		}
		// Each writer proposed its keys one after another, so what the
		// log kept of a writer must be a prefix of its sequence.
		perWriter := map[string][]int{}
		for key := range state.Keys {
			cut := strings.LastIndexByte(key, '/')
			seq, err := strconv.Atoi(key[cut+1:])
			if err != nil {
				t.Fatalf("bad key %q", key)
			}
			perWriter[key[:cut]] = append(perWriter[key[:cut]], seq)
		}
		for writer, seqs := range perWriter {
			slices.Sort(seqs)
			if last := seqs[len(seqs)-1]; last != len(seqs)-1 {
				t.Fatalf("round %d: writer %s has %d keys up to %d: a hole in the log", round, writer, len(seqs), last)
			}
		}
		if n.AppliedIndex() != state.Last {
			t.Fatalf("round %d: AppliedIndex %d, last applied %d", round, n.AppliedIndex(), state.Last)
		}
		t.Logf("round %d: %d acked so far, %d recovered", round, len(acked), len(state.Keys))
		if err := n.Close(); err != nil {
			t.Fatal(err)
		}
	}
}
