package syncer

import (
	"os/exec"
	"strings"
	"testing"
)

// TestImports checks that the edge syncer reaches the root's packages
// only through what tiers share (relay/layout, relay/store and topology's
// API and helpers): not the placement controller, the kube API server or
// the tree transport.
func TestImports(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", ".").Output()
	if err != nil {
		t.Skipf("go list: %v", err)
	}
	const module = "github.com/canopy-dev/canopy"
	for _, p := range strings.Fields(string(out)) {
		for _, avoid := range []string{"/topology/placement/", "/relay/apiserver/", "/relay/transport/", "/relay/server/"} {
			if strings.HasPrefix(p, module) && strings.Contains(p+"/", avoid) {
				t.Errorf("syncer imports %s", p)
			}
		}
	}
}
