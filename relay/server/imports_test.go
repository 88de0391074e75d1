package server

import (
	"os/exec"
	"strings"
	"testing"
)

// TestImports checks that a production relay does not link the
// simulator: only cmd/relay (for relay simulate) imports simulations/.
func TestImports(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", ".").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	for _, p := range strings.Fields(string(out)) {
		if strings.HasPrefix(p, "github.com/canopy-dev/canopy/simulations/") {
			t.Errorf("relay/server imports %s", p)
		}
	}
}
