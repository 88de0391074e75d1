package inventory

import (
	"os/exec"
	"strings"
	"testing"
)

// TestImports checks what the package doc promises: the inventory imports
// neither the kube API server nor the tree transport.
func TestImports(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", ".").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	const module = "github.com/canopy-dev/canopy"
	for _, p := range strings.Fields(string(out)) {
		for _, room := range []string{"/relay/apiserver/", "/relay/transport/"} {
			if strings.HasPrefix(p, module) && strings.Contains(p+"/", room) {
				t.Errorf("inventory imports %s", p)
			}
		}
	}
}
