package main

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// TestRootRefusesDamagedLog stops a root, changes one byte inside an entry
// of its log, and starts it again: it exits with code 1 and one line
// naming the segment file and the offset of the damaged entry.
func TestRootRefusesDamagedLog(t *testing.T) {
	if testing.Short() {
		t.Skip("starts relay processes")
	}
	dir := filepath.Join(t.TempDir(), "root")
	args := []string{"--role=root", "--name=root", "--data-dir=" + dir, "--api-addr=127.0.0.1:0", "--link-addr=127.0.0.1:0"}
	root := startRelay(t, "root", args...)
	root.waitLog("root relay serving")
	root.stop()

	segs, err := filepath.Glob(filepath.Join(dir, "raft", "wal", "*.wal"))
	if err != nil || len(segs) != 1 {
		t.Fatalf("want one log segment, found %v (%v)", segs, err)
	}
	seg := segs[0]
	b, err := os.ReadFile(seg)
	if err != nil {
		t.Fatal(err)
	}
	// Walk raft-wal's frames (a 32-byte file header, then 8-byte frame
	// headers: type, 3 bytes, length; payloads padded to 8 bytes) to the
	// entries (type 1); commit frames (type 3) have no payload.
	var entries []int64
	for off := int64(32); off+8 <= int64(len(b)) && b[off] != 0; {
		typ, n := b[off], int64(binary.LittleEndian.Uint32(b[off+4:]))
		if typ == 1 {
			entries = append(entries, off)
		}
		off += 8
		if typ != 3 {
			off += (n + 7) &^ 7
		}
	}
	if len(entries) < 4 {
		t.Fatalf("%s holds %d entries", seg, len(entries))
	}
	e := entries[len(entries)/2]
	b[e+8+int64(binary.LittleEndian.Uint32(b[e+4:]))-1] ^= 0x01
	if err := os.WriteFile(seg, b, 0o600); err != nil {
		t.Fatal(err)
	}

	// Bounded: a root that starts on the damaged log would serve on.
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, relayBin, append(args, "--log-level=error")...)
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	code := 0
	if err := cmd.Run(); err != nil {
		exitErr, ok := errors.AsType[*exec.ExitError](err)
		if !ok {
			t.Fatal(err)
		}
		code = exitErr.ExitCode()
	}
	stdout, stderr := out.String(), errOut.String()
	want := "relay: consensus: " + seg + " is damaged at offset " + strconv.FormatInt(e, 10) + ": "
	if code != exitFailure || stdout != "" || !strings.HasPrefix(stderr, want) || strings.Count(stderr, "\n") != 1 {
		t.Fatalf("exit code %d, stdout %q, stderr %q; want %d and one line starting %q", code, stdout, stderr, exitFailure, want)
	}
}
