package sim

import (
	"context"
	"runtime/pprof"
	"testing"
	"time"

	"github.com/canopy-dev/canopy/relay/apiserver/vcluster"
)

// The CPU split names a tier by its label, and the part of a tier that
// carries the virtual clusters' label on its own: "edge" and
// "edge: virtual-cluster" are two figures.
func TestCPUByLabelSplitsParts(t *testing.T) {
	p := startProfile()
	if !p.on {
		t.Fatal("a CPU profile is already running in this process")
	}
	burn := func(labels ...string) {
		pprof.Do(context.Background(), pprof.Labels(labels...), func(context.Context) {
			for end := time.Now().Add(300 * time.Millisecond); time.Now().Before(end); {
			}
		})
	}
	burn(tierLabel, "edge")
	burn(tierLabel, "edge", vcluster.ProfileLabel, vcluster.ProfileValue)
	by, _ := p.stop()
	if by["edge"] == 0 || by["edge: "+vcluster.ProfileValue] == 0 {
		t.Fatalf("split %v: want both edge and edge: %s", by, vcluster.ProfileValue)
	}
}
