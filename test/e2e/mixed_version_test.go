package e2e

import (
	"encoding/json"
	"fmt"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/canopy-dev/canopy/test/kubecluster"
	"github.com/canopy-dev/canopy/test/poll"
	"github.com/canopy-dev/canopy/test/procs"
	"github.com/canopy-dev/canopy/test/relaybin"
)

// mixedWorkload is placed on the edge: a ConfigMap, and a StatusCollector
// that reports its color from the edge's cluster, counted per color.
const mixedWorkload = `
apiVersion: v1
kind: Namespace
metadata: {name: shop}
---
apiVersion: v1
kind: ConfigMap
metadata: {name: settings, namespace: shop}
data: {color: blue}
---
apiVersion: edge.canopy.dev/v1alpha1
kind: StatusCollector
metadata: {name: colors}
spec:
  groupBy: [{name: color, def: obj.data.color}]
  combinedFields: [{name: edges, type: COUNT}]
---
apiVersion: edge.canopy.dev/v1alpha1
kind: EdgePlacement
metadata: {name: shop}
spec:
  locationSelectors: [{matchLabels: {zone: a}}]
  downsync: [{apiGroup: "", resources: [configmaps], namespaces: [shop]}]
  statusCollectors: [colors]
`

// TestPreviousReleaseInTheTree runs the previous release's relay
// (hack/release/previous) beside this one in one tree, in both mixes:
// a root of this version, a region of the previous one and an edge of
// this one; and a root of the previous version under which this
// version's region and edge run. In each a ConfigMap placed at the root
// reaches the edge's cluster, whose report comes back as a
// CombinedStatus. Then the previous relay is upgraded in place (stopped,
// started as this version on its data directory), and a change to the
// ConfigMap makes the same round trip.
func TestPreviousReleaseInTheTree(t *testing.T) {
	t.Parallel()
	cur, prev := relaybin.For(t), relaybin.Previous(t)
	t.Run("previous region", func(t *testing.T) {
		t.Parallel()
		runMixedTree(t, mixedTree{root: cur, region: prev, edge: cur})
	})
	t.Run("previous root", func(t *testing.T) {
		t.Parallel()
		runMixedTree(t, mixedTree{root: prev, region: cur, edge: cur})
	})
}

// mixedTree names the binary of each relay of a root ← region ← edge tree.
type mixedTree struct{ root, region, edge string }

func runMixedTree(t *testing.T, bins mixedTree) {
	cur := relaybin.For(t)
	base := t.TempDir()
	rootDir, apiAddr, rootLink, regionLink := filepath.Join(base, "root"), procs.FreeAddr(t), procs.FreeAddr(t), procs.FreeAddr(t)
	root := startRootBinary(t, bins.root, rootDir, apiAddr, rootLink)
	tok, err := exec.Command(bins.root, "token", "create", "--data-dir="+rootDir).Output()
	if err != nil {
		t.Fatalf("relay token create: %v", err)
	}
	token := "--join-token=" + strings.TrimSpace(string(tok))
	region := &childProcess{bin: bins.region, status: procs.FreeAddr(t), args: []string{"--role=region", "--name=region-1",
		"--data-dir=" + filepath.Join(base, "region-1"), "--parent=" + rootLink, "--link-addr=" + regionLink, token}}
	region.start(t)
	edge := &childProcess{bin: bins.edge, status: procs.FreeAddr(t), args: []string{"--role=edge", "--name=edge-1",
		"--data-dir=" + filepath.Join(base, "edge-1"), "--parent=" + regionLink, "--virtual-cluster", "--labels=zone=a", token}}
	edge.start(t)

	kubeconfig := filepath.Join(rootDir, "admin.kubeconfig")
	home := filepath.Join(base, "home")
	kubectl := func(stdin string, args ...string) {
		t.Helper()
		if _, err := kubecluster.RunKubectl(t, home, kubeconfig, stdin, nil, args...); err != nil {
			t.Fatalf("kubectl %s: %v", strings.Join(args, " "), err)
		}
	}
	kubectl(`{"apiVersion": "edge.canopy.dev/v1alpha1", "kind": "Location", "metadata": {"name": "zone-a", "labels": {"zone": "a"}},
		"spec": {"instanceSelector": {"matchLabels": {"zone": "a"}}}}`, "--context=inventory", "apply", "-f", "-")
	// The edge.canopy.dev CRDs of the default space come with the leader's
	// first work.
	poll.Until(t, "the workload applied", func() error {
		_, err := kubecluster.RunKubectl(t, home, kubeconfig, mixedWorkload, nil, "apply", "-f", "-")
		return err
	})
	waitColor(t, home, kubeconfig, "blue")

	// Upgrade the previous relay in place: stop it, start this version
	// on its data directory (it joined: no token).
	switch bins.prev(cur) {
	case "region":
		region.Stop(t)
		region.bin, region.args = cur, withoutToken(region.args)
		region.start(t)
	case "root":
		if err := root.Stop(t); err != nil {
			t.Fatalf("the previous root: %v", err)
		}
		startRootBinary(t, cur, rootDir, apiAddr, rootLink)
	}
	kubectl("", "-n", "shop", "patch", "configmap", "settings", "--type=merge", "-p", `{"data": {"color": "green"}}`)
	waitColor(t, home, kubeconfig, "green")
}

// prev says which relay of the tree runs the previous release, the one
// whose binary is not cur.
func (m mixedTree) prev(cur string) string {
	switch {
	case m.root != cur:
		return "root"
	case m.region != cur:
		return "region"
	default:
		return "edge"
	}
}

// waitColor waits until the root's CombinedStatus of the ConfigMap under
// the placement holds one row: one edge reporting color.
func waitColor(t *testing.T, home, kubeconfig, color string) {
	t.Helper()
	want := fmt.Sprintf(`[[%q,1]]`, color)
	poll.Until(t, "the CombinedStatus to show "+color, func() error {
		out, err := kubecluster.RunKubectl(t, home, kubeconfig, "", nil, "-n", "shop", "get", "combinedstatuses", "-o", "json")
		if err != nil {
			return err
		}
		var list struct {
			Items []struct {
				Object    struct{ Name string }
				Placement string
				Results   []struct {
					Name string
					Rows []struct {
						Columns []json.RawMessage
					}
				}
			}
		}
		if err := json.Unmarshal([]byte(out), &list); err != nil {
			return err
		}
		var got []string
		for _, cs := range list.Items {
			if cs.Object.Name != "settings" || cs.Placement != "shop" {
				continue
			}
			for _, r := range cs.Results {
				if r.Name != "colors" {
					continue
				}
				var cols [][]json.RawMessage
				for _, row := range r.Rows {
					cols = append(cols, row.Columns)
				}
				b, _ := json.Marshal(cols)
				if string(b) == want {
					return nil
				}
				got = append(got, string(b))
			}
		}
		return fmt.Errorf("CombinedStatus of settings under shop: %v, want rows %s", got, want)
	}, poll.For(90*time.Second))
}
