// Package relaybin gives tests that run relays as processes the relay
// binary: $RELAY_BIN, or one built from this module once per test binary;
// and the previous release's (Previous), built from this clone's history.
package relaybin

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"
)

// module is the module whose relay Path builds.
const module = "github.com/canopy-dev/canopy"

var (
	once  sync.Once
	dir   string // the temporary directory of a built binary
	path  string
	built error
)

// Path returns $RELAY_BIN if set, else the relay of this module
// (./cmd/relay, as `make build` does) built into a temporary directory,
// once per test binary; the working directory must be inside the module
// or inside a module that requires it.
// Main deletes what it built.
func Path() (string, error) {
	once.Do(func() {
		if p := os.Getenv("RELAY_BIN"); p != "" {
			if _, built = os.Stat(p); built == nil {
				path = p
			}
			return
		}
		root, err := moduleRoot()
		if err != nil {
			built = err
			return
		}
		if dir, built = os.MkdirTemp("", "canopy-relay-"); built != nil {
			return
		}
		path = filepath.Join(dir, "relay")
		cmd := goBuild(root, path)
		if out, err := cmd.CombinedOutput(); err != nil {
			built = fmt.Errorf("go build ./cmd/relay in %s: %v\n%s", cmd.Dir, err, out)
		}
	})
	return path, built
}

// For is Path for a test: it fails t, loudly, when there is no binary
// (a test that runs relays never runs without them).
func For(t testing.TB) string {
	t.Helper()
	p, err := Path()
	if err != nil {
		t.Fatalf("the relay binary (set RELAY_BIN, or run inside the module to build it): %v", err)
	}
	return p
}

// Main is a TestMain for the packages that use Path: it runs the tests,
// then deletes what Path built.
func Main(m *testing.M) {
	code := m.Run()
	if dir != "" {
		_ = os.RemoveAll(dir)
	}
	os.Exit(code)
}

// goBuild is the command that builds ./cmd/relay of the module in dir
// into out as `make build` does (static, -trimpath), so that it reuses
// what that build compiled of the module's dependencies.
func goBuild(dir, out string) *exec.Cmd {
	cmd := exec.Command("go", "build", "-trimpath", "-o", out, "./cmd/relay")
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	return cmd
}
