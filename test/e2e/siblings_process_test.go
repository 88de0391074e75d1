package e2e

import (
	"bufio"
	"encoding/json"
	"fmt"
	"net/http"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/canopy-dev/canopy/test/kubecluster"
	"github.com/canopy-dev/canopy/test/poll"
	"github.com/canopy-dev/canopy/test/procs"
)

// siblingsWorkload places a Namespace and a ConfigMap on every edge
// labelled fleet=siblings (value is the ConfigMap's data).
func siblingsWorkload(value string) string {
	return fmt.Sprintf(`apiVersion: v1
kind: Namespace
metadata:
  name: shop
---
apiVersion: v1
kind: ConfigMap
metadata:
  name: cfg
  namespace: shop
data:
  value: %q
---
apiVersion: edge.canopy.dev/v1alpha1
kind: EdgePlacement
metadata:
  name: shop
spec:
  locationSelectors:
  - matchLabels: {fleet: siblings}
  downsync:
  - apiGroup: ""
    resources: [namespaces]
    objectNames: [shop]
  - apiGroup: ""
    resources: [configmaps]
    namespaces: [shop]
`, value)
}

const siblingsLocation = `apiVersion: edge.canopy.dev/v1alpha1
kind: Location
metadata:
  name: siblings
  labels: {fleet: siblings}
spec:
  instanceSelector:
    matchLabels: {fleet: siblings}
`

// syncerCounters reads an edge's syncer counters from its /metrics.
func (p *childProcess) syncerCounters() (applies, deletes, managed int, err error) {
	resp, err := http.Get("http://" + p.status + "/metrics")
	if err != nil {
		return 0, 0, 0, err
	}
	defer resp.Body.Close()
	found := 0
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		line := sc.Text()
		i := strings.LastIndexByte(line, ' ')
		if i < 0 || strings.HasPrefix(line, "#") {
			continue
		}
		name, value := line[:i], line[i+1:]
		if j := strings.IndexByte(name, '{'); j >= 0 {
			name = name[:j] // labels
		}
		var dst *int
		switch name {
		case "canopy_syncer_applies_total":
			dst = &applies
		case "canopy_syncer_deletes_total":
			dst = &deletes
		case "canopy_syncer_managed_objects":
			dst = &managed
		default:
			continue
		}
		f, err := strconv.ParseFloat(value, 64)
		if err != nil {
			return 0, 0, 0, fmt.Errorf("%s: %v", name, err)
		}
		*dst = int(f)
		found++
	}
	if found != 3 {
		return 0, 0, 0, fmt.Errorf("%s/metrics: %d of the syncer's counters", p.status, found)
	}
	return applies, deletes, managed, sc.Err()
}

// A root, two sibling regions that find each other by gossip (region-b
// joins region-a's --peer-addr) and 20 edges, each with a virtual cluster,
// given only region-a as --parent. A workload placed on all of them
// through kubectl at the root reaches every edge. The edges learn
// region-b from region-a. region-a is killed with SIGKILL: every edge
// re-homes to region-b, its inbox converges to what region-b routes to it
// (content hashes), the root's inventory shows root/region-b/<edge>, no
// edge's syncer applies or deletes anything again, and a later change is
// applied once everywhere.
func TestSiblingsProcessRehome(t *testing.T) {
	const edges = 20
	base := t.TempDir()
	rootDir, rootLink, token := startRootWithToken(t, base)
	kubeconfig, home := filepath.Join(rootDir, "admin.kubeconfig"), t.TempDir()
	kubectl := func(stdin string, args ...string) string {
		t.Helper()
		out, err := kubecluster.RunKubectl(t, home, kubeconfig, stdin, nil, args...)
		if err != nil {
			t.Fatal(err)
		}
		return out
	}

	linkA, linkB, peerA := procs.FreeAddr(t), procs.FreeAddr(t), procs.FreeAddr(t)
	regionA := startChildProcess(t, "--role=region", "--name=region-a", "--data-dir="+filepath.Join(base, "region-a"),
		"--parent="+rootLink, "--link-addr="+linkA, "--peer-addr="+peerA, "--join-token="+token)
	regionB := startChildProcess(t, "--role=region", "--name=region-b", "--data-dir="+filepath.Join(base, "region-b"),
		"--parent="+rootLink, "--link-addr="+linkB, "--peer-addr="+procs.FreeAddr(t), "--join="+peerA, "--join-token="+token)
	names := make([]string, edges)
	edgeProcs := map[string]*childProcess{}
	for i := range names {
		names[i] = fmt.Sprintf("edge-%02d", i)
		edgeProcs[names[i]] = startChildProcess(t, "--role=edge", "--name="+names[i], "--data-dir="+filepath.Join(base, names[i]),
			"--parent="+linkA, "--virtual-cluster", "--labels=fleet=siblings", "--parent-timeout=3s", "--join-token="+token)
	}

	kubectl(siblingsLocation, "--context=inventory", "apply", "-f", "-")
	kubectl(siblingsWorkload("v1"), "apply", "-f", "-")

	// converged checks every edge against the region serving it: its
	// inbox (the placed objects and what the placement sends with them)
	// equals its mailbox there, and its syncer manages the placed objects
	// in its cluster and has applied them. (It records an object before
	// it applies it: managed alone does not say the apply is done, and
	// one still under way would count as an apply since re-homing.)
	converged := func(region *childProcess, managedWant int) func() error {
		return func() error {
			r, err := region.inbox()
			if err != nil {
				return err
			}
			for _, name := range names {
				e, err := edgeProcs[name].inbox()
				if err != nil {
					return err
				}
				mb, ok := r.Mailboxes["mailbox-"+name]
				switch {
				case !ok:
					return fmt.Errorf("%s has no mailbox at %s", name, region.args[1])
				case !e.Connected || e.Objects != mb.Objects || e.Hash != mb.Hash || mb.Objects < managedWant:
					return fmt.Errorf("%s: connected %v, %d objects (hash %s); its mailbox at %s: %d (hash %s)",
						name, e.Connected, e.Objects, e.Hash, region.args[1], mb.Objects, mb.Hash)
				}
				if applies, _, managed, err := edgeProcs[name].syncerCounters(); err != nil || managed != managedWant || applies < managedWant {
					return fmt.Errorf("%s manages %d objects in its cluster, %d applies (%v), want %d", name, managed, applies, err, managedWant)
				}
			}
			return nil
		}
	}
	poll.Until(t, "the edges converged under region-a", converged(regionA, 2), poll.For(60*time.Second))
	// The edges were given region-a only: they know region-b from it.
	poll.Until(t, "the edges told of region-b", func() error {
		for _, name := range names {
			out := edgeProcs[name].Output()
			if !strings.Contains(out, "parent's siblings") || !strings.Contains(out, linkB) {
				return fmt.Errorf("%s was not told of region-b (%s)", name, linkB)
			}
		}
		return nil
	})
	before := map[string]int{}
	for _, name := range names {
		applies, deletes, _, err := edgeProcs[name].syncerCounters()
		if err != nil {
			t.Fatal(err)
		}
		if deletes != 0 {
			t.Fatalf("%s deleted %d objects before the failure", name, deletes)
		}
		before[name] = applies
	}

	regionA.Kill(t)
	poll.Until(t, "the edges converged under region-b", converged(regionB, 2), poll.For(60*time.Second))
	poll.Until(t, "the edges under region-b in the inventory", func() error {
		var list struct {
			Items []struct {
				Metadata struct {
					Name string `json:"name"`
				} `json:"metadata"`
				Status struct {
					Path      string `json:"path"`
					Connected bool   `json:"connected"`
				} `json:"status"`
			} `json:"items"`
		}
		out, err := kubecluster.RunKubectl(t, home, kubeconfig, "", nil, "--context=inventory", "get", "synctargets", "-o", "json")
		if err != nil {
			return err
		}
		if err := json.Unmarshal([]byte(out), &list); err != nil {
			return err
		}
		paths := map[string]string{}
		for _, it := range list.Items {
			if it.Status.Connected {
				paths[it.Metadata.Name] = it.Status.Path
			}
		}
		for _, name := range names {
			if want := "root/region-b/" + name; paths[name] != want {
				return fmt.Errorf("inventory: %s at %q (connected), want %s", name, paths[name], want)
			}
		}
		return nil
	})
	for _, name := range names {
		applies, deletes, _, err := edgeProcs[name].syncerCounters()
		if err != nil {
			t.Fatal(err)
		}
		if applies != before[name] || deletes != 0 {
			t.Errorf("%s: %d applies and %d deletes since re-homing, want none", name, applies-before[name], deletes)
		}
	}

	if t.Failed() {
		return
	}
	// A change after the failure reaches every edge, applied once.
	kubectl(siblingsWorkload("v2"), "apply", "-f", "-")
	poll.Until(t, "the change at every edge, applied once", func() error {
		if err := converged(regionB, 2)(); err != nil {
			return err
		}
		for _, name := range names {
			applies, _, _, err := edgeProcs[name].syncerCounters()
			if err != nil {
				return err
			}
			if applies != before[name]+1 {
				return fmt.Errorf("%s: %d applies since re-homing, want 1 (the change)", name, applies-before[name])
			}
		}
		return nil
	}, poll.For(60*time.Second))
	for _, name := range names {
		if applies, deletes, _, _ := edgeProcs[name].syncerCounters(); applies != before[name]+1 || deletes != 0 {
			t.Errorf("%s: %d applies and %d deletes after the change, want 1 and 0", name, applies-before[name], deletes)
		}
	}
}
