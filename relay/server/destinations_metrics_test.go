package server

import (
	"fmt"
	"net/http"
	"testing"

	"github.com/canopy-dev/canopy/relay/pki"
	"github.com/canopy-dev/canopy/test/poll"
)

// The root's /metrics counts the destinations below it by state, and an
// edge that stops moves from connected to disconnected.
func TestDestinationsMetric(t *testing.T) {
	root := startTestRoot(t)
	token := joinToken(t, root)
	region := startTestChild(t, ChildConfig{Role: pki.RoleRegion, Name: "r1", DataDir: t.TempDir(),
		Parents: []string{root.LinkAddr()}, JoinToken: token, LinkAddr: "127.0.0.1:0", InMemory: true})
	poll.True(t, "region serving", func() bool { return region.Uplink().Connected() && region.LinkAddr() != "" })
	stop := map[string]func(){}
	for _, name := range []string{"e1", "e2"} {
		stop[name] = serveInBackground(t, name, startChildOnly(t, ChildConfig{Role: pki.RoleEdge, Name: name, DataDir: t.TempDir(),
			Parents: []string{region.LinkAddr()}, JoinToken: token, VirtualCluster: true, InMemory: true}).Serve)
	}
	shows := func(connected, disconnected int) func() error {
		return func() error {
			code, text := get(t, root, "/metrics", true)
			if code != http.StatusOK {
				return fmt.Errorf("/metrics: %d %s", code, text)
			}
			c, _ := metricValue(text, `canopy_destinations{state="connected"}`)
			d, _ := metricValue(text, `canopy_destinations{state="disconnected"}`)
			if c != fmt.Sprint(connected) || d != fmt.Sprint(disconnected) {
				return fmt.Errorf("connected %q, disconnected %q", c, d)
			}
			return nil
		}
	}
	poll.Until(t, "2 destinations connected", shows(2, 0))
	stop["e1"]()
	poll.Until(t, "e1 disconnected", shows(1, 1))
}
