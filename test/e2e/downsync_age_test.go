package e2e

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/canopy-dev/canopy/test/poll"
)

// TestDownsyncAge: objects placed in the downsync space, and so in the
// mailboxes that are views of it, have a creation time: kubectl shows
// their AGE.
func TestDownsyncAge(t *testing.T) {
	t.Parallel()
	r := startRoot(t)
	r.mustKubectlIn(t, `apiVersion: edge.canopy.dev/v1alpha1
kind: SyncTarget
metadata:
  name: store-1
  labels: {region: east}
---
apiVersion: edge.canopy.dev/v1alpha1
kind: Location
metadata:
  name: east
  labels: {env: prod}
spec:
  instanceSelector:
    matchLabels: {region: east}
`, "--context=inventory", "apply", "-f", "-")
	r.mustKubectlIn(t, `apiVersion: v1
kind: Namespace
metadata:
  name: web
---
apiVersion: v1
kind: ConfigMap
metadata:
  name: settings
  namespace: web
data: {colour: blue}
---
apiVersion: edge.canopy.dev/v1alpha1
kind: EdgePlacement
metadata:
  name: web
spec:
  locationSelectors:
  - matchLabels: {env: prod}
  downsync:
  - apiGroup: ""
    resources: [configmaps]
    namespaces: [web]
`, "apply", "-f", "-")
	var out string
	poll.Until(t, "the settings ConfigMap in the downsync space", func() error {
		var err error
		out, err = r.kubectl(t, "--context=downsync", "get", "configmaps", "-n", "web", "settings")
		return err
	})
	wantMatch(t, "downsync get configmaps", out, `^NAME\s+DATA\s+AGE$`, `^settings\s+1\s+\d+[smhd]`)
	if strings.Contains(out, "<unknown>") {
		t.Errorf("downsync AGE unknown:\n%s", out)
	}
	for _, args := range [][]string{
		{"--context=downsync", "get", "configmaps", "-n", "web", "-o", "jsonpath={.items[*].metadata.creationTimestamp}"},
		{"--context=downsync", "get", "namespace", "web", "-o", "jsonpath={.metadata.creationTimestamp}"},
	} {
		if got := r.mustKubectl(t, args...); !strings.HasPrefix(got, fmt.Sprint(time.Now().UTC().Year())) {
			t.Errorf("kubectl %s: %q, want a creation time", strings.Join(args, " "), got)
		}
	}
}
