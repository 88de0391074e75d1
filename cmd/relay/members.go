package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strconv"
	"sync"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	"k8s.io/client-go/rest"

	"github.com/canopy-dev/canopy/relay/server"
)

func newMembersCommand() *cobra.Command {
	var (
		root    rootFlags
		output  string
		timeout time.Duration
	)
	cmd := &cobra.Command{
		Use:   "members [--data-dir=DIR | --kubeconfig=FILE] [--server=URL] [-o table|json]",
		Short: "Show the replicas of a root: leader, health and applied index",
		Long: `members asks a root replica (the server of the kubeconfig's current
context, or --server) which replicas it knows, then asks each of them for its
own state, and prints one line per replica:

  NAME       the replica's name (its Raft node id)
  RAFT       its Raft address
  API        its kube API URL
  VOTER      whether it votes in the Raft configuration
  LEADER     whether it is the leader, as the replica asked knows it
  ALIVE      whether gossip sees it alive, as the replica asked knows it
  HEALTH     ok, not-ready (its /readyz fails: no known leader, or still
             catching up), unreachable (its API does not answer) or down
             (not alive to gossip, and its API does not answer)
  STATE      its Raft state (Leader, Follower, Candidate)
  APPLIED    the last log index it has applied: its store's revision

-o json prints all of it, with each replica's Raft indexes and why it is
not ready. The admin kubeconfig a root writes (DIR/admin.kubeconfig) works
for every replica: they share the CA and the admin token. Exit status: 0
when the replica asked answered, whatever the others' health, 1 otherwise.`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if output != "table" && output != "json" {
				return usageError{flagErrorf("output", "must be table or json, not %q", output)}
			}
			if timeout <= 0 {
				return usageError{flagErrorf("timeout", "must be positive, not %s", timeout)}
			}
			rc, err := root.restConfig()
			if err != nil {
				return err
			}
			rc.Timeout = timeout
			view, err := readMembers(cmd.Context(), rc)
			if err != nil {
				return err
			}
			if output == "json" {
				enc := json.NewEncoder(cmd.OutOrStdout())
				enc.SetIndent("", "  ")
				return enc.Encode(view)
			}
			return writeMembersTable(cmd.OutOrStdout(), view)
		},
	}
	f := cmd.Flags()
	root.add(f, "ask")
	f.StringVarP(&output, "output", "o", "table", "output format: table or json")
	f.DurationVar(&timeout, "timeout", 5*time.Second, "how long to wait for each replica's answer")
	return cmd
}

// membersView is what `relay members` prints: the asked replica's view of
// the members, each with what the member said of itself.
type membersView struct {
	// Server is the URL of the replica asked; Self is its name.
	Server  string       `json:"server"`
	Self    string       `json:"self"`
	Leader  string       `json:"leader,omitempty"`
	Members []memberView `json:"members"`
}

type memberView struct {
	server.MemberInfo
	// Health is ok, not-ready, unreachable or down (see the command's help).
	Health string `json:"health"`
	// Status is what the member says of itself (nil when unreachable).
	Status *server.ReplicaStatus `json:"status,omitempty"`
	// Error is why the member could not be asked.
	Error string `json:"error,omitempty"`
}

// readMembers asks the replica of rc for the members, then each member for
// its own status, concurrently.
func readMembers(ctx context.Context, rc *rest.Config) (membersView, error) {
	base, err := server.APIBase(rc.Host)
	if err != nil {
		return membersView{}, err
	}
	asked, err := server.GetMembers(ctx, rc, base)
	if err != nil {
		return membersView{}, fmt.Errorf("asking %s: %w", base, err)
	}
	view := membersView{Server: base, Self: asked.Self, Leader: asked.Leader, Members: make([]memberView, len(asked.Members))}
	var wg sync.WaitGroup
	for i, m := range asked.Members {
		mv := &view.Members[i]
		mv.MemberInfo = m
		if m.Name == asked.Self {
			st := asked.Status
			mv.Status = &st
			mv.Health = health(mv)
			continue
		}
		if m.APIURL == "" {
			mv.Error = "API URL not known (not seen by gossip)"
			mv.Health = health(mv)
			continue
		}
		wg.Go(func() {
			mb, err := server.APIBase(m.APIURL)
			var ml server.MemberList
			if err == nil {
				ml, err = server.GetMembers(ctx, rc, mb)
			}
			if err == nil && ml.Self != m.Name {
				err = fmt.Errorf("%s answers as %q", mb, ml.Self)
			}
			if err != nil {
				mv.Error = err.Error()
			} else {
				mv.Status = &ml.Status
			}
			mv.Health = health(mv)
		})
	}
	wg.Wait()
	return view, nil
}

func health(m *memberView) string {
	switch {
	case m.Status != nil && m.Status.Ready == "ok":
		return "ok"
	case m.Status != nil:
		return "not-ready"
	case !m.Alive:
		return "down"
	default:
		return "unreachable"
	}
}

func writeMembersTable(w io.Writer, view membersView) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "NAME\tRAFT\tAPI\tVOTER\tLEADER\tALIVE\tHEALTH\tSTATE\tAPPLIED")
	yes := func(b bool) string {
		if b {
			return "yes"
		}
		return "no"
	}
	for _, m := range view.Members {
		state, applied := "-", "-"
		if m.Status != nil {
			state, applied = m.Status.State, strconv.FormatUint(m.Status.Revision, 10)
		}
		api := m.APIURL
		if api == "" {
			api = "-"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", m.Name, m.RaftAddr, api,
			yes(m.Voter), yes(m.Leader), yes(m.Alive), m.Health, state, applied)
	}
	return tw.Flush()
}
