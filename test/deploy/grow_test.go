package deploy

import (
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/canopy-dev/canopy/test/poll"
	"github.com/canopy-dev/canopy/test/procs"
	"github.com/canopy-dev/canopy/test/relaybin"
)

// replicaAddrs are where one root replica listens, on 127.0.0.1: in a pod
// each is the pod's IP and the chart's port.
type replicaAddrs struct{ api, link, raft, peer string }

// chartRootArgs are the args of a container of the chart's root
// StatefulSet rendered with values, as pod i runs them on this host:
// $(POD_NAME) and $(POD_IP), the data directory, the bundle's path and
// the listen addresses made those of the test, and each replica's
// stable name in --join its gossip address here.
func chartRootArgs(t *testing.T, values, container string, i int, dir, bundle string, addrs []replicaAddrs) []string {
	t.Helper()
	manifest, err := renderChart(t, values)
	if err != nil {
		t.Fatal(err)
	}
	replica := regexp.MustCompile(`^canopy-root-(\d)\.canopy-root-peers\.canopy\.svc\.cluster\.local:\d+$`)
	var args []string
	for _, a := range containerArgs(t, find(t, objects(t, manifest), "StatefulSet", "canopy-root"), container) {
		flag, value, _ := strings.Cut(a, "=")
		switch flag {
		case "--name":
			value = strings.ReplaceAll(value, "$(POD_NAME)", fmt.Sprintf("canopy-root-%d", i))
		case "--data-dir":
			value = dir
		case "--bundle":
			value = bundle
		case "--api-addr":
			value = addrs[i].api
		case "--link-addr":
			value = addrs[i].link
		case "--raft-addr":
			value = addrs[i].raft
		case "--peer-addr":
			value = addrs[i].peer
		case "--join":
			var join []string
			for _, j := range strings.Split(value, ",") {
				m := replica.FindStringSubmatch(j)
				if m == nil {
					t.Fatalf("--join names %q, not a replica of canopy-root-peers", j)
				}
				join = append(join, addrs[m[1][0]-'0'].peer)
			}
			value = strings.Join(join, ",")
		}
		if strings.Contains(value, "$(") {
			t.Fatalf("%s: a variable this test does not set", a)
		}
		if value != "" {
			a = flag + "=" + value
		}
		args = append(args, a)
	}
	return args
}

// TestRootGrowsFrom1To3 grows a root from one replica to three as
// docs/operations.md says, with the chart's flags: a single root
// and an edge joined to it; the bundle of `relay pki export`; the chart
// rendered with three replicas, each importing the bundle (the init
// container) and started with the chart's Raft flags. Replica 0 keeps its
// data, the three form one cluster, and the edge, whose certificate the
// single root issued, gets what is placed afterwards.
func TestRootGrowsFrom1To3(t *testing.T) {
	base := t.TempDir()
	addrs := make([]replicaAddrs, 3)
	dirs := make([]string, 3)
	for i := range addrs {
		addrs[i] = replicaAddrs{api: procs.FreeAddr(t), link: procs.FreeAddr(t), raft: procs.FreeAddr(t), peer: procs.FreeAddr(t)}
		dirs[i] = filepath.Join(base, fmt.Sprintf("canopy-root-%d", i))
	}
	single := chartRootArgs(t, ``, "relay", 0, dirs[0], "", addrs)
	root := startRootArgs(t, "canopy-root-0 (single)", dirs[0], addrs[0].link, single...)
	t.Logf("single root: relay %s", strings.Join(single, " "))

	tokenFile := filepath.Join(base, "token")
	if err := os.WriteFile(tokenFile, []byte(root.token(t)), 0o600); err != nil {
		t.Fatal(err)
	}
	status := procs.FreeAddr(t)
	edge := procs.Start(t, "edge", exec.Command(relaybin.For(t), "--role=edge", "--name=edge-1", "--parent="+addrs[0].link,
		"--data-dir="+filepath.Join(base, "edge-1"), "--virtual-cluster", "--labels=env=test", "--join-token-file="+tokenFile, "--status-addr="+status))
	edgeJoined(t, edge, status, root)
	placeSynced(t, root, placement("before"), "before")

	// The shared credentials, as `kubectl exec canopy-root-0 -- /relay pki
	// export` prints them into the Secret.
	bundle := filepath.Join(base, "bundle.pem")
	out, err := exec.Command(relaybin.For(t), "pki", "export", "--data-dir="+dirs[0]).Output()
	if err != nil {
		t.Fatalf("relay pki export: %v", err)
	}
	if err := os.WriteFile(bundle, out, 0o600); err != nil {
		t.Fatal(err)
	}
	root.Stop(t)

	const three = `root: {replicas: 3, pki: {secretName: canopy-root-pki}}`
	replicas := make([]*rootRelay, 3)
	for i := range replicas {
		imp := chartRootArgs(t, three, "pki-import", i, dirs[i], bundle, addrs)
		if out, err := exec.Command(relaybin.For(t), imp...).CombinedOutput(); err != nil {
			t.Fatalf("replica %d: relay %s: %v: %s", i, strings.Join(imp, " "), err, out)
		}
	}
	// The replicas start together (podManagementPolicy: Parallel), and
	// none is ready before the cluster has a leader.
	for i := range replicas {
		args := chartRootArgs(t, three, "relay", i, dirs[i], bundle, addrs)
		if i == 0 {
			t.Logf("replica 0: relay %s", strings.Join(args, " "))
		}
		p := procs.Start(t, fmt.Sprintf("canopy-root-%d", i), exec.Command(relaybin.For(t), args...))
		replicas[i] = &rootRelay{Process: p, dir: dirs[i], link: addrs[i].link, home: t.TempDir()}
	}
	for _, r := range replicas {
		r.ready(t, 90*time.Second)
	}
	poll.Until(t, "three voters", func() error {
		raw, err := replicas[1].kubectl(t, "", "get", "--raw=/canopy/v1/members")
		if err != nil {
			return err
		}
		var ml struct {
			Members []struct {
				Name  string `json:"name"`
				Voter bool   `json:"voter"`
			} `json:"members"`
		}
		if err := json.Unmarshal([]byte(raw), &ml); err != nil {
			return err
		}
		voters := 0
		for _, m := range ml.Members {
			if m.Voter {
				voters++
			}
		}
		if voters != 3 {
			return fmt.Errorf("members %+v", ml.Members)
		}
		return nil
	}, poll.For(60*time.Second))

	// What the single root placed is there, and the edge, which joined
	// it, gets what is placed through another replica.
	if c, err := synced(t, replicas[2], "before"); err != nil || c.Status != "True" {
		t.Errorf("placement before, read at replica 2: %+v %v", c, err)
	}
	placeSynced(t, replicas[1], placement("after"), "after")
	if err := edge.Exited(); err != nil {
		t.Fatal(err)
	}
}

// placement places a ConfigMap of its own name on the edge (labels
// env=test).
func placement(name string) string {
	return fmt.Sprintf(`apiVersion: v1
kind: ConfigMap
metadata: {name: %[1]s, namespace: default}
data: {placed: %[1]s}
---
apiVersion: edge.canopy.dev/v1alpha1
kind: EdgePlacement
metadata: {name: %[1]s}
spec:
  locationSelectors:
  - matchLabels: {env: test}
  downsync:
  - apiGroup: ""
    resources: [configmaps]
    namespaces: [default]
    objectNames: [%[1]s]
`, name)
}

// httpOK is nil once url answers 200.
func httpOK(url string) error {
	resp, err := http.Get(url)
	if err != nil {
		return err
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("%s: %s", url, resp.Status)
	}
	return nil
}
