package server

import (
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/canopy-dev/canopy/relay/pki"
)

// refused checks that err lists every problem in want (one line naming
// each field, in order) and nothing else, and that the data directory dir
// was not created.
func refused(t *testing.T, err error, dir string, want []string) {
	t.Helper()
	if err == nil {
		t.Fatal("a bad configuration was accepted")
	}
	lines := strings.Split(err.Error(), "\n")
	if lines[0] != "server: invalid configuration:" || len(lines)-1 != len(want) {
		t.Fatalf("error:\n%v\nwant one line after the first per problem: %q", err, want)
	}
	for i, w := range want {
		if !strings.HasPrefix(lines[i+1], w) {
			t.Errorf("problem %d: %q, want it to start with %q", i, lines[i+1], w)
		}
	}
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Errorf("the data directory %s was touched (%v)", dir, err)
	}
}

// Open refuses a root with every problem of its configuration, each
// naming its field, before it creates or opens anything.
func TestOpenRefusesABadConfig(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "root")
	_, err := Open(Config{Name: "Root_1", DataDir: dir, APIAddr: "127.0.0.1", LinkAddr: "127.0.0.1:0", StatusWindow: time.Hour,
		ChildCertValidity: -time.Hour, HA: Replication{RaftAddr: "127.0.0.1:7001", BootstrapExpect: 3, RaftMultiplier: 11}}, quiet)
	refused(t, err, dir, []string{
		`Name: Invalid value: "Root_1": a lowercase RFC 1123 label`,
		`APIAddr: Invalid value: "127.0.0.1": must be host:port`,
		`StatusWindow: Invalid value: "1h0m0s": must be from 10ms to 1m0s`,
		`ChildCertValidity: Invalid value: "-1h0m0s": must not be negative`,
		`HA.PeerAddr: Required value`,
		`HA.BootstrapExpect: Invalid value: 3: replicas cannot find each other without HA.Join`,
		`HA.RaftMultiplier: Invalid value: 11: must be from 1 to 10`,
	})

	// A single root takes none of a replica's fields.
	_, err = Open(Config{DataDir: dir, HA: Replication{PeerAddr: "127.0.0.1:7002", Join: []string{"10.0.0.2:7002"}}}, quiet)
	refused(t, err, dir, []string{`Name: Required value`, `HA.PeerAddr: Forbidden`, `HA.Join: Forbidden`})

	// Complete fills in the defaults, which Validate accepts.
	cfg := Config{Name: "root-1", DataDir: dir, HA: Replication{RaftAddr: "127.0.0.1:7001", PeerAddr: "127.0.0.1:7002"}}
	cfg.Complete()
	if cfg.StatusWindow != DefaultStatusWindow || cfg.HA.TreeName != DefaultTreeName {
		t.Errorf("completed: StatusWindow %s, HA.TreeName %q", cfg.StatusWindow, cfg.HA.TreeName)
	}
	if errs := cfg.Validate(); len(errs) > 0 {
		t.Errorf("a completed good configuration: %v", errs)
	}
}

// OpenChild refuses a region or edge with every problem of its
// configuration, each naming its field, before it creates or opens
// anything.
func TestOpenChildRefusesABadConfig(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "edge")
	_, err := OpenChild(ChildConfig{Name: "e1", DataDir: dir, Parents: []string{"root:7443", "nowhere"},
		Join: []string{"10.0.0.2:7946"}, ParentTimeout: -time.Second, Proxy: &url.URL{Scheme: "socks5", Host: "proxy:1080"},
		VirtualCluster: true, Kubeconfig: "kubeconfig", Labels: map[string]string{"zone!": "a"}, StoreHistory: -1,
		RenewBefore: -time.Hour, ChildCertValidity: -time.Hour}, quiet)
	refused(t, err, dir, []string{
		`Role: Unsupported value: "ChildRole(0)"`,
		`Parents[1]: Invalid value: "nowhere": must be host:port`,
		`Join: Forbidden: a region joins its siblings from its own gossip address`,
		`ParentTimeout: Invalid value: "-1s": must not be negative`,
		`RenewBefore: Invalid value: "-1h0m0s": must not be negative`,
		`ChildCertValidity: Invalid value: "-1h0m0s": must not be negative`,
		`Proxy: Invalid value: "socks5://proxy:1080": must be an http:// or https:// URL`,
		`Kubeconfig: Forbidden: an edge syncs one cluster`,
		`Labels: Invalid value: "zone!": name part must consist of alphanumeric characters`,
		`StoreHistory: Invalid value: -1: must not be negative`,
	})

	_, err = OpenChild(ChildConfig{Role: pki.RoleEdge, DataDir: dir, Kubeconfig: filepath.Join(dir, "kubeconfig"),
		RejectApply: func(string, string, string) error { return nil }, ChildCertValidity: time.Hour}, quiet)
	refused(t, err, dir, []string{
		`Name: Required value`,
		`Parents: Required value`,
		`ChildCertValidity: Forbidden: only for a region`,
		`Kubeconfig: Invalid value: "` + filepath.Join(dir, "kubeconfig") + `": must be a kubeconfig file that exists`,
		`RejectApply: Forbidden: only with VirtualCluster`,
	})

	cfg := ChildConfig{Role: pki.RoleEdge, Name: "e1", DataDir: dir, Parents: []string{"root:7443"}, InMemory: true}
	cfg.Complete()
	if cfg.StatusWindow != DefaultStatusWindow || cfg.StoreHistory != DefaultInMemoryEdgeHistory {
		t.Errorf("completed: StatusWindow %s, StoreHistory %d", cfg.StatusWindow, cfg.StoreHistory)
	}
	if errs := cfg.Validate(); len(errs) > 0 {
		t.Errorf("a completed good configuration: %v", errs)
	}
}
