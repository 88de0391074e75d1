package server

import (
	"path/filepath"
	"testing"

	"github.com/canopy-dev/canopy/relay/pki"
)

// The fields a relay installed by deploy/ uses: a root's ServingNames
// (--tls-san) and an edge's InCluster. Bad values are refused, naming the
// field, before anything is created.
func TestOpenRefusesBadDeployFields(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "root")
	_, err := Open(Config{Name: "root", DataDir: dir, ServingNames: []string{"canopy-root.canopy.svc", "Not_A_Name", "192.0.2.1"}}, quiet)
	refused(t, err, dir, []string{`ServingNames[1]: Invalid value: "Not_A_Name": must be an IP address or a lower-case DNS name`})

	_, err = OpenChild(ChildConfig{Role: pki.RoleEdge, Name: "e1", DataDir: dir, Parents: []string{"root:7443"}, InCluster: true, VirtualCluster: true}, quiet)
	refused(t, err, dir, []string{`InCluster: Forbidden: an edge syncs one cluster`})
	_, err = OpenChild(ChildConfig{Role: pki.RoleRegion, Name: "r1", DataDir: dir, Parents: []string{"root:7443"}, InCluster: true}, quiet)
	refused(t, err, dir, []string{`InCluster: Forbidden: only for an edge`})
}
