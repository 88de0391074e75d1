package server

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/canopy-dev/canopy/relay/atomicfile"
)

// DataFormat is the format of the data directory this relay writes, and
// the newest it reads: the layout of the directory and the formats of
// what it holds (the log, its snapshots, the PKI files). A change an
// older relay could not read raises it; DIR/FORMAT records it, so that
// such a relay refuses the directory in one line instead of misreading
// it. A directory without the file predates it and is of format 1.
const DataFormat = 1

// formatFile records the DataFormat of a data directory.
const formatFile = "FORMAT"

// raftDir is where a relay keeps its log and snapshots
// (consensus.Config.Dir).
func raftDir(dataDir string) string { return filepath.Join(dataDir, "raft") }

// checkDataFormat refuses a data directory of a newer format than
// DataFormat, and records the format of one that has no FORMAT file yet.
func checkDataFormat(dir string) error {
	path := filepath.Join(dir, formatFile)
	raw, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return writeDataFormat(dir)
	}
	if err != nil {
		return fmt.Errorf("server: --data-dir: %w", err)
	}
	v, err := strconv.Atoi(strings.TrimSpace(string(raw)))
	if err != nil || v < 1 {
		return fmt.Errorf("server: %s does not hold a data format (%q): it should hold %d", path, strings.TrimSpace(string(raw)), DataFormat)
	}
	if v > DataFormat {
		return fmt.Errorf("server: --data-dir %s holds data of format %d, newer than this relay reads (%d): run a relay at least as new as the one that wrote it", dir, v, DataFormat)
	}
	return nil
}

// writeDataFormat writes DIR/FORMAT atomically.
func writeDataFormat(dir string) error {
	if err := atomicfile.WriteFile(filepath.Join(dir, formatFile), fmt.Appendln(nil, DataFormat), 0o600); err != nil {
		return fmt.Errorf("server: --data-dir: recording its format: %w", err)
	}
	return nil
}
