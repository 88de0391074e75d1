package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os/exec"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/canopy-dev/canopy/test/poll"
	"github.com/canopy-dev/canopy/test/relaybin"
)

// haMembers is the part of `relay members -o json` the tests read.
type haMembers struct {
	Self    string `json:"self"`
	Leader  string `json:"leader"`
	Members []struct {
		Name   string `json:"name"`
		APIURL string `json:"apiURL"`
		Voter  bool   `json:"voter"`
		Leader bool   `json:"leader"`
		Alive  bool   `json:"alive"`
		Health string `json:"health"`
		Error  string `json:"error"`
		Status *struct {
			State             string `json:"state"`
			Revision          uint64 `json:"revision"`
			FirstLogIndex     uint64 `json:"firstLogIndex"`
			LastSnapshotIndex uint64 `json:"lastSnapshotIndex"`
			SnapshotsRestored uint64 `json:"snapshotsRestored"`
			Ready             string `json:"ready"`
		} `json:"status"`
	} `json:"members"`
}

// members runs `relay members` with the admin kubeconfig of via's data
// directory (so it asks via) and returns its stdout.
func (c *haCluster) members(via *haNode, args ...string) (string, error) {
	var stdout, stderr bytes.Buffer
	cmd := exec.Command(relaybin.For(c.t), append([]string{"members", "--data-dir=" + via.dir}, args...)...)
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("relay members: %v: %s", err, strings.TrimSpace(stderr.String()))
	}
	return stdout.String(), nil
}

// membersJSON is members with -o json, decoded.
func (c *haCluster) membersJSON(via *haNode) (haMembers, error) {
	var m haMembers
	out, err := c.members(via, "-o", "json")
	if err == nil {
		err = json.Unmarshal([]byte(out), &m)
	}
	return m, err
}

// node returns the replica named name.
func (c *haCluster) node(name string) *haNode {
	for _, n := range c.nodes {
		if n.name == name {
			return n
		}
	}
	c.t.Fatalf("no replica %q", name)
	return nil
}

// listAll lists the ConfigMaps of haNamespace at rv ("" for a
// linearizable list) and returns them with the list's resourceVersion.
func listAll(cs *kubernetes.Clientset, rv string) (map[string]haObject, string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	list, err := cs.CoreV1().ConfigMaps(haNamespace).List(ctx, metav1.ListOptions{ResourceVersion: rv})
	if err != nil {
		return nil, "", err
	}
	out := map[string]haObject{}
	for _, cm := range list.Items {
		out[cm.Name] = haObject{cm.Data["v"], cm.ResourceVersion}
	}
	return out, list.ResourceVersion, nil
}

// TestHAProcessSnapshotCatchUp: three replicas with a low
// --snapshot-threshold take snapshots and compact their logs while a few
// hundred ConfigMaps are written; a fourth replica, started empty with
// --join, can then only catch up by installing the leader's snapshot (the
// leader's log no longer starts at 1). `relay members` finds the leader,
// shows the compaction, then four healthy voters with one applied index,
// and the fourth replica's snapshot install; the fourth serves every
// object, at the leader's latest resourceVersion too.
func TestHAProcessSnapshotCatchUp(t *testing.T) {
	if testing.Short() {
		t.Skip("runs four replicas")
	}
	t.Parallel()
	c := startHACluster(t, 3, "--snapshot-threshold=64", "--snapshot-interval=100ms", "--trailing-logs=16")
	css := make([]*kubernetes.Clientset, len(c.nodes))
	for i, n := range c.nodes {
		css[i] = c.client(n)
	}
	const objects = 300
	want := map[string]haObject{}
	for i := range objects {
		name := fmt.Sprintf("snap-%03d", i)
		want[name] = createWithRetry(t, css[i%3], name)
	}

	// relay members on the first replica names the leader; the leader's
	// own status shows that a snapshot compacted its log.
	var leader *haNode
	var firstIndex uint64
	poll.Until(t, "a leader with a snapshot", func() error {
		m, err := c.membersJSON(c.nodes[0])
		if err != nil {
			return err
		}
		if m.Leader == "" {
			return errors.New("no leader known")
		}
		leader = c.node(m.Leader)
		for _, mm := range m.Members {
			if mm.Name == m.Leader && mm.Status != nil {
				if mm.Status.FirstLogIndex <= 1 || mm.Status.LastSnapshotIndex == 0 {
					return fmt.Errorf("leader %s has not compacted its log yet: %+v", m.Leader, *mm.Status)
				}
				firstIndex = mm.Status.FirstLogIndex
				return nil
			}
		}
		return fmt.Errorf("no status of the leader %s: %+v", m.Leader, m.Members)
	})
	t.Logf("leader %s: log starts at %d after %d writes", leader.name, firstIndex, objects)

	// A fourth replica joins empty and catches up from a snapshot.
	fourth := c.newNode("root-3")
	fourth.join = []string{c.nodes[0].peer}
	c.importPKI(fourth)
	start := time.Now()
	fourth.start(t)
	c.nodes = append(c.nodes, fourth)
	c.waitReady(60*time.Second, fourth)
	t.Logf("fourth replica serving after %v", time.Since(start).Round(time.Millisecond))

	// relay members, asked on the fourth: four healthy voters, one leader,
	// the same applied index everywhere once writes stop, and a snapshot
	// restored on the fourth, which started without any state.
	var m haMembers
	poll.Until(t, "the fourth replica to list four members", func() error {
		var err error
		if m, err = c.membersJSON(fourth); err != nil {
			return err
		}
		if len(m.Members) != 4 {
			return fmt.Errorf("%d members: %+v", len(m.Members), m.Members)
		}
		leaders, applied := 0, map[uint64]bool{}
		for _, mm := range m.Members {
			if !mm.Voter || !mm.Alive || mm.Health != "ok" || mm.Status == nil {
				return fmt.Errorf("member %s: voter %v alive %v health %s %s", mm.Name, mm.Voter, mm.Alive, mm.Health, mm.Error)
			}
			if mm.Leader {
				leaders++
			}
			applied[mm.Status.Revision] = true
		}
		if leaders != 1 || len(applied) != 1 {
			return fmt.Errorf("%d leaders, applied indexes %v", leaders, applied)
		}
		return nil
	})
	for _, mm := range m.Members {
		if mm.Name == fourth.name && mm.Status.SnapshotsRestored == 0 {
			t.Errorf("the fourth replica caught up without installing a snapshot: %+v", *mm.Status)
		}
	}
	table, err := c.members(fourth)
	if err != nil {
		t.Fatal(err)
	}
	if lines := strings.Split(strings.TrimSpace(table), "\n"); len(lines) != 5 || strings.Count(table, " Leader ") != 1 {
		t.Errorf("relay members table:\n%s", table)
	}
	t.Logf("relay members:\n%s", table)

	// The fourth serves every object: at the leader's latest
	// resourceVersion, linearizably and from its local state.
	leaderObjs, rv, err := listAll(c.client(leader), "")
	if err != nil {
		t.Fatal(err)
	}
	if err := holds(leaderObjs, want); err != nil || len(leaderObjs) != len(want) {
		t.Fatalf("leader: %d objects, want %d: %v", len(leaderObjs), len(want), err)
	}
	csFourth := c.client(fourth)
	got, _, err := listAll(csFourth, rv)
	if err != nil {
		t.Fatal(err)
	}
	if err := holds(got, leaderObjs); err != nil || len(got) != len(leaderObjs) {
		t.Fatalf("fourth at resourceVersion %s: %d objects, leader %d: %v", rv, len(got), len(leaderObjs), err)
	}
	if err := replicaHolds(csFourth, want, "", "0"); err != nil {
		t.Fatalf("fourth replica: %v", err)
	}
	want["via-fourth"] = createWithRetry(t, csFourth, "via-fourth")
	if err := replicaHolds(c.client(leader), want, ""); err != nil {
		t.Fatalf("leader after a write through the fourth: %v", err)
	}
}
