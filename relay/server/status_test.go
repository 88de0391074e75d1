package server

import (
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/canopy-dev/canopy/relay/pki"
	"github.com/canopy-dev/canopy/test/poll"
)

// TestChildReadyz: a child's /readyz fails until it has joined (an edge)
// or serves its children (a region), while its /healthz is ok.
func TestChildReadyz(t *testing.T) {
	root := startTestRoot(t)
	token := joinToken(t, root)
	get := func(addr, path string) (int, string) {
		resp, err := http.Get("http://" + addr + path)
		if err != nil {
			return 0, err.Error()
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, strings.TrimSpace(string(b))
	}

	// An edge whose parent does not answer never joins.
	lonely := ChildConfig{Role: pki.RoleEdge, Name: "lonely", DataDir: t.TempDir(), Parents: []string{freeTCPPort(t)},
		JoinToken: token, VirtualCluster: true, StatusAddr: freeTCPPort(t)}
	startTestChild(t, lonely)
	poll.True(t, "the lonely edge's /healthz", func() bool { code, _ := get(lonely.StatusAddr, "/healthz"); return code == http.StatusOK })
	if code, body := get(lonely.StatusAddr, "/readyz"); code != http.StatusServiceUnavailable || body != "not ready: not joined yet" {
		t.Errorf("/readyz of an edge that has not joined: %d %q", code, body)
	}

	region := ChildConfig{Role: pki.RoleRegion, Name: "r1", DataDir: t.TempDir(), Parents: []string{root.LinkAddr()},
		JoinToken: token, LinkAddr: freeTCPPort(t), StatusAddr: freeTCPPort(t)}
	rc := startTestChild(t, region)
	poll.True(t, "the region ready", func() bool { code, _ := get(region.StatusAddr, "/readyz"); return code == http.StatusOK })
	if rc.LinkAddr() == "" {
		t.Error("the region is ready but does not serve its children")
	}

	edge := ChildConfig{Role: pki.RoleEdge, Name: "e1", DataDir: t.TempDir(), Parents: []string{region.LinkAddr},
		JoinToken: token, VirtualCluster: true, StatusAddr: freeTCPPort(t)}
	startTestChild(t, edge)
	poll.True(t, "the edge ready", func() bool { code, _ := get(edge.StatusAddr, "/readyz"); return code == http.StatusOK })
	if _, _, err := pki.LoadChildIdentity(edge.DataDir); err != nil {
		t.Errorf("the edge is ready without its certificate: %v", err)
	}
}
