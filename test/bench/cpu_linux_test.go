package bench

import (
	"os"
	"testing"
	"time"
)

func TestProcessCPU(t *testing.T) {
	before, err := ProcessCPU(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(50 * time.Millisecond); time.Now().Before(deadline); {
	}
	after, err := ProcessCPU(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	// 50 ms of spinning by the wall clock: on a busy machine less of it is
	// on a CPU, but not less than a fifth.
	if d := after - before; d < 10*time.Millisecond {
		t.Errorf("50 ms of spinning counted %v of CPU", d)
	}
	if _, err := ProcessCPU(os.Getpid(), 1<<30); err == nil {
		t.Error("no error for a process that does not exist")
	}
}

func TestBenchSelects(t *testing.T) {
	for _, c := range []struct {
		pattern, target string
		want            bool
	}{
		{"API", "kube", true},
		{"", "canopy-3", true},
		{"API/target=canopy-1/op=watch", "canopy-1", true},
		{"API/target=canopy-1/op=watch", "kube", false},
		{"API/target=(kube|canopy-1)/op=create$", "kube-3", true}, // unanchored, as testing matches
		{"API/target=(kube|canopy-1)$/op=create$", "kube-3", false},
		{"API/target=kube$", "canopy-1", false},
	} {
		if got := benchSelects(c.pattern, c.target); got != c.want {
			t.Errorf("benchSelects(%q, %q) = %v, want %v", c.pattern, c.target, got, c.want)
		}
	}
}
