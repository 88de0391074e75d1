package server

import (
	"encoding/json"
	"errors"
	"github.com/canopy-dev/canopy/relay/destproxy"
	"net/http"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	apierrors "k8s.io/apimachinery/pkg/api/errors"

	"github.com/canopy-dev/canopy/consensus"
	"github.com/canopy-dev/canopy/relay/console"
)

// MembersPath is where a root serves its replicas as it sees them
// (MemberList, JSON; `relay members` reads it). Like /metrics it needs an
// authenticated user allowed to get this non-resource URL in the default
// space.
const MembersPath = "/canopy/v1/members"

// MemberList is what MembersPath answers: the replicas as the answering
// replica (Self) sees them, and its own Raft status.
type MemberList struct {
	Kind       string `json:"kind"`
	APIVersion string `json:"apiVersion"`
	// Self is the answering replica's name (its Raft node id).
	Self string `json:"self"`
	// Leader is the leader's name as Self knows it; empty during an
	// election or when Self is cut off from the others.
	Leader  string       `json:"leader,omitempty"`
	Members []MemberInfo `json:"members"`
	// Status is Self's Raft status.
	Status ReplicaStatus `json:"status"`
}

// MemberInfo is one replica: from the Raft configuration (Voter) and from
// gossip (Alive, APIURL).
type MemberInfo struct {
	Name     string `json:"name"`
	RaftAddr string `json:"raftAddr,omitempty"`
	// APIURL is the replica's kube API (gossiped; empty if not seen yet).
	APIURL string `json:"apiURL,omitempty"`
	Voter  bool   `json:"voter"`
	Leader bool   `json:"leader"`
	Alive  bool   `json:"alive"`
}

// ReplicaStatus is consensus.Status as served (see its fields' docs).
type ReplicaStatus struct {
	State             string `json:"state"`
	Term              uint64 `json:"term"`
	FirstLogIndex     uint64 `json:"firstLogIndex"`
	LastLogIndex      uint64 `json:"lastLogIndex"`
	CommitIndex       uint64 `json:"commitIndex"`
	AppliedIndex      uint64 `json:"appliedIndex"`
	Revision          uint64 `json:"revision"`
	LastSnapshotIndex uint64 `json:"lastSnapshotIndex"`
	SnapshotsRestored uint64 `json:"snapshotsRestored"`
	// LastContactSeconds: since the leader was last heard from; 0 on the
	// leader, -1 if never.
	LastContactSeconds float64 `json:"lastContactSeconds"`
	NumPeers           int     `json:"numPeers"`
	// Ready is "ok" or why /readyz fails on this replica.
	Ready string `json:"ready"`
}

// MemberList returns the replicas as this root sees them and its status.
func (r *Root) MemberList() MemberList {
	out := MemberList{Kind: "MemberList", APIVersion: "canopy.dev/v1", Self: r.cfg.Name, Members: []MemberInfo{}}
	for _, m := range r.node.Members() {
		mi := MemberInfo{Name: m.ID, RaftAddr: m.RaftAddr, APIURL: string(m.Meta), Voter: m.Voter, Leader: m.Leader, Alive: m.Alive}
		if m.ID == r.cfg.Name && mi.APIURL == "" {
			mi.APIURL = r.server
		}
		if m.Leader {
			out.Leader = m.ID
		}
		out.Members = append(out.Members, mi)
	}
	st := r.node.Status()
	out.Status = ReplicaStatus{
		State: st.State, Term: st.Term, FirstLogIndex: st.FirstLogIndex, LastLogIndex: st.LastLogIndex,
		CommitIndex: st.CommitIndex, AppliedIndex: st.AppliedIndex, Revision: st.Revision,
		LastSnapshotIndex: st.LastSnapshotIndex, SnapshotsRestored: st.SnapshotsRestored,
		LastContactSeconds: contactSeconds(st.LastContact), NumPeers: st.NumPeers, Ready: "ok",
	}
	if err := r.replicaReady(); err != nil {
		out.Status.Ready = err.Error()
	}
	return out
}

func contactSeconds(d time.Duration) float64 {
	if d < 0 {
		return -1
	}
	return d.Seconds()
}

// errNoLeader is /readyz's answer on a replica that knows no leader.
var errNoLeader = errors.New("no known Raft leader: this replica is cut off from the others, or an election is under way")

// replicaReady is /readyz's check: the authorizer has synced (checked by
// the caller), the log can be written (not while the disk is full), a
// replica knows a leader (one cut off from the others does not, and could
// serve only stale reads), and the CRDs are there.
func (r *Root) replicaReady() error {
	if err := r.node.LogError(); err != nil {
		return err
	}
	if r.cfg.HA.Enabled() {
		if _, ok := r.node.Leader(); !ok {
			return errNoLeader
		}
	}
	return r.startupCRDsReady()
}

// handler is the root's HTTP handler: the kube API (the spaces of the
// root's store; backed spaces are passed to their backends), the
// destinations, the console's assets (its data comes from the kube API),
// MembersPath and BackupPath.
func (r *Root) handler() http.Handler {
	assets := console.Handler()
	return http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		switch p := req.URL.Path; {
		case strings.HasPrefix(p+"/", console.Prefix):
			assets.ServeHTTP(w, req)
		case p == MembersPath:
			r.serveMembers(w, req)
		case p == BackupPath:
			r.serveBackup(w, req)
		case strings.HasPrefix(p, destproxy.Prefix):
			r.destinations.ServeHTTP(w, req)
		case r.backed.serve(w, req):
		default:
			r.api.ServeHTTP(w, req)
		}
	})
}

// serveMembers answers MembersPath for a user allowed to get it.
func (r *Root) serveMembers(w http.ResponseWriter, req *http.Request) {
	if req.Method != http.MethodGet && req.Method != http.MethodHead {
		writeStatusError(w, apierrors.NewMethodNotSupported(nonResource("members"), req.Method))
		return
	}
	if r.authorizePath(w, req, MembersPath) {
		writeStatusJSON(w, http.StatusOK, r.MemberList())
	}
}

func writeStatusJSON(w http.ResponseWriter, code int, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_, _ = w.Write(append(b, '\n'))
}

// Raft metrics of a root replica (every root: a single root is a
// one-voter cluster).
var (
	descRaftState       = prometheus.NewDesc("canopy_raft_state", "Raft state of this replica: 1 for the current one of Leader, Follower, Candidate, Shutdown, 0 for the others.", []string{"state"}, nil)
	descRaftLeader      = prometheus.NewDesc("canopy_raft_leader", "Whether this replica is the Raft leader (1) or not (0).", nil, nil)
	descRaftTerm        = prometheus.NewDesc("canopy_raft_term", "Current Raft term.", nil, nil)
	descRaftFirstLog    = prometheus.NewDesc("canopy_raft_first_log_index", "First entry still in the Raft log (past 1 once a snapshot compacted it; 0 for an empty log).", nil, nil)
	descRaftLastLog     = prometheus.NewDesc("canopy_raft_last_log_index", "Last entry in the Raft log.", nil, nil)
	descRaftCommit      = prometheus.NewDesc("canopy_raft_commit_index", "Last Raft entry known to be committed.", nil, nil)
	descRaftApplied     = prometheus.NewDesc("canopy_raft_applied_index", "Last Raft entry applied (configuration entries included; canopy_store_revision is the last command).", nil, nil)
	descRaftSnapshot    = prometheus.NewDesc("canopy_raft_last_snapshot_index", "Last entry of the latest snapshot, taken here or installed from the leader (0: none).", nil, nil)
	descRaftRestores    = prometheus.NewDesc("canopy_raft_snapshot_restores_total", "Snapshots restored into the store since start: from disk at start, or sent by the leader.", nil, nil)
	descRaftContact     = prometheus.NewDesc("canopy_raft_last_contact_seconds", "Seconds since the leader was last heard from (0 on the leader; absent if never).", nil, nil)
	descRaftPeers       = prometheus.NewDesc("canopy_raft_num_peers", "Other voters in the Raft configuration.", nil, nil)
	descRaftMembers     = prometheus.NewDesc("canopy_raft_members", "Replicas this one knows (Raft configuration and gossip).", nil, nil)
	descRaftMembersLive = prometheus.NewDesc("canopy_raft_members_alive", "Replicas alive to gossip, this one included.", nil, nil)
)

var raftStates = []string{"Leader", "Follower", "Candidate", "Shutdown"}

// raftCollector exports a consensus node's Status and members.
type raftCollector struct{ node *consensus.Node }

// Describe implements prometheus.Collector.
func (c raftCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{descRaftState, descRaftLeader, descRaftTerm, descRaftFirstLog, descRaftLastLog,
		descRaftCommit, descRaftApplied, descRaftSnapshot, descRaftRestores, descRaftContact, descRaftPeers, descRaftMembers, descRaftMembersLive} {
		ch <- d
	}
}

// Collect implements prometheus.Collector.
func (c raftCollector) Collect(ch chan<- prometheus.Metric) {
	st := c.node.Status()
	gauge := func(d *prometheus.Desc, v float64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, labels...)
	}
	b := func(ok bool) float64 {
		if ok {
			return 1
		}
		return 0
	}
	for _, s := range raftStates {
		gauge(descRaftState, b(st.State == s), s)
	}
	gauge(descRaftLeader, b(st.State == "Leader"))
	gauge(descRaftTerm, float64(st.Term))
	gauge(descRaftFirstLog, float64(st.FirstLogIndex))
	gauge(descRaftLastLog, float64(st.LastLogIndex))
	gauge(descRaftCommit, float64(st.CommitIndex))
	gauge(descRaftApplied, float64(st.AppliedIndex))
	gauge(descRaftSnapshot, float64(st.LastSnapshotIndex))
	ch <- prometheus.MustNewConstMetric(descRaftRestores, prometheus.CounterValue, float64(st.SnapshotsRestored))
	if st.LastContact >= 0 {
		gauge(descRaftContact, st.LastContact.Seconds())
	}
	gauge(descRaftPeers, float64(st.NumPeers))
	members, alive := c.node.Members(), 0
	for _, m := range members {
		if m.Alive {
			alive++
		}
	}
	gauge(descRaftMembers, float64(len(members)))
	gauge(descRaftMembersLive, float64(alive))
}

// replicaURL returns the API URL of the replica name of this root, if it
// is alive ("" otherwise): a child links to one replica, and the others
// pass its destinations' requests there (destproxy.RootConfig.Replica).
func (r *Root) replicaURL(name string) string {
	for _, m := range r.node.Members() {
		if m.ID == name && m.Alive && len(m.Meta) > 0 {
			return string(m.Meta)
		}
	}
	return ""
}
