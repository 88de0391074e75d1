package atomicfile

import (
	"errors"
	"io"
	"os"
	"path/filepath"
	"testing"
)

func TestWriteFileReplaces(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "f")
	for _, content := range []string{"first", "second"} {
		if err := WriteFile(path, []byte(content), 0o640); err != nil {
			t.Fatal(err)
		}
		got, err := os.ReadFile(path)
		if err != nil || string(got) != content {
			t.Fatalf("after writing %q: %q, %v", content, got, err)
		}
		if info, _ := os.Stat(path); info.Mode().Perm() != 0o640 {
			t.Fatalf("mode %v, want 0640", info.Mode().Perm())
		}
	}
	onlyFile(t, dir, "f")
}

func TestWriteFailureLeavesTheFile(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "f")
	if err := WriteFile(path, []byte("old"), 0o600); err != nil {
		t.Fatal(err)
	}
	boom := errors.New("boom")
	err := Write(path, 0o600, func(f *os.File) error {
		if _, err := f.Write([]byte("half")); err != nil {
			return err
		}
		return boom
	})
	if !errors.Is(err, boom) {
		t.Fatalf("Write = %v, want write's error", err)
	}
	if got, _ := os.ReadFile(path); string(got) != "old" {
		t.Fatalf("after a failed write: %q, want old", got)
	}
	onlyFile(t, dir, "f")
}

func TestWriteMayReadBack(t *testing.T) {
	path := filepath.Join(t.TempDir(), "f")
	var back []byte
	err := Write(path, 0o600, func(f *os.File) error {
		if _, err := f.Write([]byte("written")); err != nil {
			return err
		}
		if _, err := f.Seek(0, io.SeekStart); err != nil {
			return err
		}
		var err error
		back, err = io.ReadAll(f)
		return err
	})
	if err != nil || string(back) != "written" {
		t.Fatalf("read back %q, %v", back, err)
	}
}

func TestWriteIntoAMissingDirectory(t *testing.T) {
	if err := WriteFile(filepath.Join(t.TempDir(), "no", "f"), nil, 0o600); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("WriteFile into a missing directory: %v, want not exist", err)
	}
	if err := SyncDir(filepath.Join(t.TempDir(), "no")); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("SyncDir of a missing directory: %v, want not exist", err)
	}
}

// onlyFile fails t unless dir holds name alone: no temporary file is left.
func onlyFile(t *testing.T, dir, name string) {
	t.Helper()
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(ents) != 1 || ents[0].Name() != name {
		var names []string
		for _, e := range ents {
			names = append(names, e.Name())
		}
		t.Fatalf("%s holds %q, want only %s", dir, names, name)
	}
}
