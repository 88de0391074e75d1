package server

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// A data directory records its format; one of a newer format, or whose
// record does not parse, is refused in one line and left as it is.
func TestDataFormat(t *testing.T) {
	dir := t.TempDir()
	lock, err := lockDataDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	lock.Close()
	if b, err := os.ReadFile(filepath.Join(dir, formatFile)); err != nil || string(b) != fmt.Sprintln(DataFormat) {
		t.Fatalf("%s holds %q (%v), want %d", formatFile, b, err, DataFormat)
	}
	for content, want := range map[string]string{
		"2\n":   "holds data of format 2, newer than this relay reads (1)",
		"two\n": `does not hold a data format ("two")`,
	} {
		if err := os.WriteFile(filepath.Join(dir, formatFile), []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		lock, err := lockDataDir(dir)
		if err == nil {
			lock.Close()
			t.Fatalf("a data dir whose %s holds %q was taken", formatFile, content)
		}
		if !strings.Contains(err.Error(), want) || strings.Contains(err.Error(), "\n") {
			t.Errorf("%s holding %q: %v, want one line saying %q", formatFile, content, err, want)
		}
		if b, _ := os.ReadFile(filepath.Join(dir, formatFile)); string(b) != content {
			t.Errorf("%s rewritten to %q", formatFile, b)
		}
	}
}
