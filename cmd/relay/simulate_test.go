package main

import (
	"strings"
	"testing"
)

// Bad flags of `relay simulate`: one line on stderr naming the flag, exit
// code 2, nothing on stdout, and no simulation started.
func TestSimulateBadFlags(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--bogus"}, "relay: unknown flag: --bogus"},
		{[]string{"--pprof=0.0.0.0:6060", "--topology=1x1"}, `relay: --pprof: "0.0.0.0:6060" is not a loopback address`},
		{[]string{"--pprof=6060", "--topology=1x1"}, `relay: --pprof: "6060" is not HOST:PORT`},
		{[]string{"extra"}, `relay: simulate: unexpected argument "extra"`},
		{[]string{"--topology=10x10"}, "relay: --topology: "},
		{[]string{"--topology=1x0x5"}, `relay: --topology: "1x0x5" is not a fan-out per tier`},
		{[]string{"--topology=banana"}, "relay: --topology: "},
		{[]string{"--topology=1x200x200"}, "relay: --topology: 1x200x200 has 40200 relays"},
		{[]string{"--scenario=meteor"}, `relay: --scenario: invalid value "meteor": must be one of rollout, churn`},
		{[]string{"--scenario=partition", "--topology=1x10"}, "relay: --scenario: partition needs regions"},
		{[]string{"--duration=soon"}, `relay: --duration: invalid value "soon"`},
		{[]string{"--duration=-1s"}, "relay: --duration: must not be negative"},
		{[]string{"--idle=-1s"}, "relay: --idle: must not be negative"},
		{[]string{"--status-window=5ms"}, "relay: --status-window: must be from 10ms to 1m0s, not 5ms"},
		{[]string{"--scenario=flat-vs-tree", "--idle=soon"}, `relay: --idle: invalid value "soon"`},
		{[]string{"--seed=-3"}, `relay: --seed: invalid value "-3"`},
		{[]string{"--network=carrier-pigeon"}, `relay: --network: invalid value "carrier-pigeon": must be memnet or udp`},
		{[]string{"--network=udp", "--topology=1x100x100"}, "relay: --network: udp needs about"},
		{[]string{"--network=udp", "--latency=5ms"}, "relay: --latency: needs --network=memnet"},
		{[]string{"--latency=fast"}, `relay: --latency: invalid value "fast"`},
		{[]string{"--loss=2"}, "relay: --loss: must be a share from 0 to below 1"},
		{[]string{"--loss=lots"}, `relay: --loss: invalid value "lots"`},
		{[]string{"--arrival=somewhere"}, `relay: --arrival: invalid value "somewhere"`},
		{[]string{"--objects=-1"}, "relay: --objects: must be from 0 to 1000"},
		{[]string{"--objects=5000"}, "relay: --objects: must be at most 1000"},
		{[]string{"--scenario=churn", "--objects=0"}, "relay: --objects: churn changes ConfigMaps"},
		{[]string{"--log-level=loud"}, `relay: --log-level: invalid value "loud"`},
		{[]string{"--rollout-object=pod"}, `relay: --rollout-object: invalid value "pod"`},
		{[]string{"--rollout-object=deployment", "--deployment=false"}, "relay: --rollout-object: deployment needs the Deployment"},
		{[]string{"--round-timeout=-1s"}, "relay: --round-timeout: must not be negative"},
		{[]string{"--objects=0"}, "relay: --objects: a rollout of a ConfigMap needs at least 1"},
		{[]string{"--scenario=status", "--failing=1"}, "relay: --failing: must be a share from 0 to below 1"},
		{[]string{"--scenario=status", "--failing=-0.1"}, "relay: --failing: must be a share from 0 to below 1"},
		{[]string{"--failing=0.2"}, "relay: --failing: only the status scenario has failing edges"},
		{[]string{"--scenario=status", "--topology=1x2x5", "--status-edges=10"}, "relay: --status-edges: must be from 1 to 9"},
		{[]string{"--scenario=status", "--topology=1x100"}, "relay: --scenario: status measures what reaches the root through regions"},
	} {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			t.Parallel()
			stdout, stderr, code := runRelay(t, append([]string{"simulate"}, tc.args...)...)
			wantUsageError(t, stdout, stderr, code, tc.want)
		})
	}
}
