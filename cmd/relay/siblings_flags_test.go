package main

import (
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/canopy-dev/canopy/relay/pki"
	"github.com/canopy-dev/canopy/relay/server"
)

// Sibling flags of a region (--peer-addr, --join) and --parent-timeout:
// bad combinations are one line naming the flag, exit 2.
func TestSiblingFlagErrors(t *testing.T) {
	region := []string{"--role=region", "--name=r1", "--parent=127.0.0.1:7443", "--link-addr=127.0.0.1:7444"}
	edge := []string{"--role=edge", "--name=e1", "--parent=127.0.0.1:7443", "--virtual-cluster"}
	with := func(base []string, args ...string) []string { return append(slices.Clone(base), args...) }
	for _, tc := range []struct {
		args []string
		want string
	}{
		{with(region, "--join=127.0.0.1:7946"), "relay: --join: a region joins its siblings from its own gossip address: give --peer-addr too"},
		{with(region, "--peer-addr=nonsense"), `relay: --peer-addr: "nonsense" is not host:port`},
		{with(region, "--peer-addr=127.0.0.1:7444"), "relay: --peer-addr: 127.0.0.1:7444 collides with --link-addr=127.0.0.1:7444"},
		{with(region, "--peer-addr=0.0.0.0:7444"), "relay: --peer-addr: 0.0.0.0:7444 collides with --link-addr=127.0.0.1:7444"},
		{with(region, "--peer-addr=127.0.0.1:7946", "--join=:7947"), `relay: --join: ":7947" has no host to dial`},
		{with(region, "--peer-addr=127.0.0.1:7946", "--join=r2:x"), `relay: --join: port "x" in "r2:x" is not a number`},
		{with(region, "--peer-addr=127.0.0.1:7946", "--raft-addr=127.0.0.1:7001"), "relay: --raft-addr: not used with --role=region, only with --role=root"},
		{with(region, "--parent-timeout=10ms"), "relay: --parent-timeout: must be at least 1s, not 10ms"},
		{with(edge, "--peer-addr=127.0.0.1:7946"), "relay: --peer-addr: not used with --role=edge, only with --role=root or --role=region"},
		{with(edge, "--join=127.0.0.1:7946"), "relay: --join: not used with --role=edge, only with --role=root or --role=region"},
		{with(edge, "--parent-timeout=soon"), `relay: --parent-timeout: invalid value "soon"`},
		{[]string{"--parent-timeout=5s"}, "relay: --parent-timeout: not used with --role=root, only with --role=region or --role=edge"},
		{with(region, "--status-window=1ms"), "relay: --status-window: must be from 10ms to 1m0s, not 1ms"},
		{[]string{"--status-window=2m"}, "relay: --status-window: must be from 10ms to 1m0s, not 2m0s"},
		{with(edge, "--status-window=1s"), "relay: --status-window: not used with --role=edge, only with --role=root or --role=region"},
		// A root keeps its own rule: gossip is for replicas.
		{[]string{"--peer-addr=127.0.0.1:7002"}, "--peer-addr: only for a replicated root: give --raft-addr too"},
	} {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			t.Parallel()
			stdout, stderr, code := runRelay(t, tc.args...)
			wantUsageError(t, stdout, stderr, code, tc.want)
		})
	}
}

func TestSiblingChildConfig(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want server.ChildConfig
	}{
		{
			[]string{"--role=region", "--name=r1", "--parent=root:7443", "--link-addr=127.0.0.1:7444",
				"--peer-addr=127.0.0.1:7946", "--join=10.0.0.2:7946,10.0.0.3:7946", "--parent-timeout=6s", "--status-window=1s"},
			server.ChildConfig{Role: pki.RoleRegion, Name: "r1", DataDir: "data/r1", Parents: []string{"root:7443"},
				LinkAddr: "127.0.0.1:7444", PeerAddr: "127.0.0.1:7946", Join: []string{"10.0.0.2:7946", "10.0.0.3:7946"},
				ParentTimeout: 6 * time.Second, StatusWindow: time.Second},
		},
		// The first region of a group has no one to join yet.
		{
			[]string{"--role=region", "--name=r2", "--parent=root:7443", "--link-addr=127.0.0.1:7444", "--peer-addr=:7946"},
			server.ChildConfig{Role: pki.RoleRegion, Name: "r2", DataDir: "data/r2", Parents: []string{"root:7443"},
				LinkAddr: "127.0.0.1:7444", PeerAddr: ":7946"},
		},
		{
			[]string{"--role=edge", "--name=e1", "--parent=10.0.0.1:7444,10.0.0.2:7444", "--virtual-cluster", "--parent-timeout=3s"},
			server.ChildConfig{Role: pki.RoleEdge, Name: "e1", DataDir: "data/e1", Parents: []string{"10.0.0.1:7444", "10.0.0.2:7444"},
				VirtualCluster: true, ParentTimeout: 3 * time.Second},
		},
	} {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			got, _ := childConfigOf(t, tc.args...)
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("config %+v, want %+v", got, tc.want)
			}
		})
	}
}
