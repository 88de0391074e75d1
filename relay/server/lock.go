package server

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"syscall"
)

// createDataDir creates the data directory dir (0700) if it is missing
// and locks it (lockDataDir).
func createDataDir(dir string) (*os.File, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("server: data dir: %w", err)
	}
	return lockDataDir(dir)
}

// lockDataDir takes an exclusive lock on DIR/relay.lock so that two relays
// never share a data directory (the log store would block forever), then
// checks the directory's format (checkDataFormat).
func lockDataDir(dir string) (*os.File, error) {
	f, err := os.OpenFile(filepath.Join(dir, "relay.lock"), os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return nil, fmt.Errorf("server: --data-dir: %w", err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			return nil, fmt.Errorf("server: --data-dir %s is in use by another relay", dir)
		}
		return nil, fmt.Errorf("server: --data-dir: lock: %w", err)
	}
	if err := checkDataFormat(dir); err != nil {
		f.Close()
		return nil, err
	}
	return f, nil
}
