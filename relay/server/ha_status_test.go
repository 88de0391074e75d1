package server

import (
	"crypto/tls"
	"encoding/json"
	"io"
	"net/http"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/canopy-dev/canopy/test/poll"
)

// get GETs path on r's API, with the admin token when admin is true, and
// returns the status code and body.
func get(t *testing.T, r *Root, path string, admin bool) (int, string) {
	t.Helper()
	client := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{
		TLSClientConfig: &tls.Config{RootCAs: r.ca.Pool(), MinVersion: tls.VersionTLS12},
	}}
	defer client.CloseIdleConnections()
	req, err := http.NewRequest(http.MethodGet, r.Server()+path, nil)
	if err != nil {
		t.Fatal(err)
	}
	if admin {
		req.Header.Set("Authorization", "Bearer "+r.token)
	}
	resp, err := client.Do(req)
	if err != nil {
		t.Fatalf("GET %s%s: %v", r.Server(), path, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, string(b)
}

func memberList(t *testing.T, r *Root) MemberList {
	t.Helper()
	code, body := get(t, r, MembersPath, true)
	var ml MemberList
	if err := json.Unmarshal([]byte(body), &ml); code != http.StatusOK || err != nil {
		t.Fatalf("GET %s: %d %v: %s", MembersPath, code, err, body)
	}
	return ml
}

// metricValue returns the value of the sample named series (name and
// labels as exposed) in a /metrics text.
func metricValue(text, series string) (string, bool) {
	m := regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(series) + ` (\S+)$`).FindStringSubmatch(text)
	if m == nil {
		return "", false
	}
	return m[1], true
}

// Every replica serves its view of the members and its Raft status
// (MembersPath, admin only), exports Raft metrics, and a replica that is
// left alone (no leader) fails /readyz.
func TestRootReplicasMembersHealthMetrics(t *testing.T) {
	if testing.Short() {
		t.Skip("runs three replicas")
	}
	rs := startReplicas(t, 3)
	leader := leaderOf(t, rs)
	createConfigMap(t, rs[leader], "one")
	follower := (leader + 1) % 3

	// Every replica knows the leader once it has heard from it, and is
	// ready once it has the CRDs the leader installs.
	poll.True(t, "every replica to be ready, know the leader and see all members alive", func() bool {
		for _, r := range rs {
			ml := memberList(t, r.Root)
			alive := 0
			for _, m := range ml.Members {
				if m.Alive {
					alive++
				}
			}
			if ml.Leader != rs[leader].cfg.Name || alive != 3 || ml.Status.Ready != "ok" {
				return false
			}
		}
		return true
	})
	ml := memberList(t, rs[follower].Root)
	if ml.Self != rs[follower].cfg.Name || ml.Kind != "MemberList" || len(ml.Members) != 3 {
		t.Fatalf("members from %s: %+v", rs[follower].cfg.Name, ml)
	}
	for i, m := range ml.Members {
		r := rs[i] // sorted by name: root-0, root-1, root-2
		if m.Name != r.cfg.Name || m.APIURL != r.Server() || !m.Voter || m.Leader != (i == leader) || m.RaftAddr == "" {
			t.Errorf("member %d: %+v, want %s at %s, leader %v", i, m, r.cfg.Name, r.Server(), i == leader)
		}
	}
	if st := ml.Status; st.State != "Follower" || st.Revision == 0 || st.CommitIndex < st.Revision || st.NumPeers != 2 || st.LastContactSeconds < 0 || st.Ready != "ok" {
		t.Errorf("follower status %+v", st)
	}
	if code, body := get(t, rs[follower].Root, MembersPath, false); code != http.StatusUnauthorized || strings.Contains(body, "root-") {
		t.Errorf("members without credentials: %d %s", code, body)
	}

	// Raft metrics, on the leader and on a follower.
	for _, tc := range []struct {
		i     int
		state string
	}{{leader, "Leader"}, {follower, "Follower"}} {
		code, text := get(t, rs[tc.i].Root, "/metrics", true)
		if code != http.StatusOK {
			t.Fatalf("/metrics: %d %s", code, text)
		}
		for series, want := range map[string]string{
			`canopy_raft_state{state="` + tc.state + `"}`: "1",
			`canopy_raft_state{state="Candidate"}`:        "0",
			"canopy_raft_num_peers":                       "2",
			"canopy_raft_members":                         "3",
			"canopy_raft_members_alive":                   "3",
			"canopy_raft_snapshot_restores_total":         "0",
		} {
			if got, ok := metricValue(text, series); !ok || got != want {
				t.Errorf("%s: %s = %q (present %v), want %s", rs[tc.i].cfg.Name, series, got, ok, want)
			}
		}
		for _, series := range []string{"canopy_raft_term", "canopy_raft_commit_index", "canopy_raft_applied_index", "canopy_raft_last_log_index", "canopy_raft_first_log_index"} {
			if got, ok := metricValue(text, series); !ok || got == "0" {
				t.Errorf("%s: %s = %q (present %v), want > 0", rs[tc.i].cfg.Name, series, got, ok)
			}
		}
		if got, ok := metricValue(text, "canopy_raft_last_contact_seconds"); !ok || (tc.state == "Leader" && got != "0") {
			t.Errorf("%s: canopy_raft_last_contact_seconds = %q (present %v)", rs[tc.i].cfg.Name, got, ok)
		}
	}

	// Alone, a replica knows no leader: /readyz fails and says why; /livez
	// still answers.
	if code, body := get(t, rs[follower].Root, "/readyz", false); code != http.StatusOK {
		t.Fatalf("/readyz before: %d %s", code, body)
	}
	for i, r := range rs {
		if i != follower {
			r.stop()
		}
	}
	poll.True(t, "/readyz to fail on the replica left alone", func() bool {
		code, _ := get(t, rs[follower].Root, "/readyz", false)
		return code != http.StatusOK
	})
	code, body := get(t, rs[follower].Root, "/readyz", false)
	if code != http.StatusServiceUnavailable || !strings.Contains(body, "no known Raft leader") {
		t.Errorf("/readyz alone: %d %q", code, body)
	}
	if code, body := get(t, rs[follower].Root, "/livez", false); code != http.StatusOK {
		t.Errorf("/livez alone: %d %s", code, body)
	}
	if ml := memberList(t, rs[follower].Root); ml.Leader != "" || !strings.Contains(ml.Status.Ready, "no known Raft leader") {
		t.Errorf("members alone: leader %q, ready %q", ml.Leader, ml.Status.Ready)
	}
}
