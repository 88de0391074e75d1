package syncer

import (
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/canopy-dev/canopy/relay/apiserver/vcluster"
	"github.com/canopy-dev/canopy/test/poll"
)

// TestRefusedObjectIsLogged: an object the cluster refuses (403, as RBAC
// or an admission webhook answers) is logged once with the cluster's
// answer, however often the syncer retries it, and again when the answer
// changes; the other objects are applied.
func TestRefusedObjectIsLogged(t *testing.T) {
	var mu sync.Mutex
	why := "secrets are not for this cluster"
	c := startVirtualCluster(t, vcluster.Options{Reject: func(resource, _, name string) error {
		mu.Lock()
		defer mu.Unlock()
		if name == "refused" {
			return errors.New(why)
		}
		return nil
	}})
	h := newHarness(t, c, "edge-1")
	logFile, err := os.Create(filepath.Join(t.TempDir(), "syncer.log"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { logFile.Close() }) // after the syncer stops (registered before it)
	h.tweak = func(cfg *Config) { cfg.Logger = slog.New(slog.NewTextHandler(logFile, nil)) }
	logs := func() string {
		b, err := os.ReadFile(logFile.Name())
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	h.put(namespace("app"), configMap("app", "fine", map[string]any{"a": "1"}), configMap("app", "refused", map[string]any{"a": "1"}))
	h.start()
	h.waitStatus("1 refused, 2 applied", func(s DestinationState) bool { return s.Applied == 2 && s.FailedCount == 1 })
	logged := func() int { return strings.Count(logs(), `msg="object not applied"`) }
	poll.Until(t, "the refusal logged", func() error {
		if logged() != 1 {
			return errors.New("not yet")
		}
		return nil
	})
	line := logs()
	if !strings.Contains(line, "app/refused") || !strings.Contains(line, why) || !strings.Contains(line, "level=WARN") {
		t.Errorf("log %q: want a WARN naming the object and the cluster's answer", line)
	}
	// Retries (the worker backs off from 20 ms) and further passes log
	// nothing more.
	passes := h.s.passes.Load()
	h.put(configMap("app", "other", map[string]any{"a": "1"}))
	h.waitStatus("3 applied", func(s DestinationState) bool { return s.Applied == 3 && s.FailedCount == 1 })
	poll.Until(t, "more passes", func() error {
		if h.s.passes.Load() < passes+3 {
			return errors.New("not yet")
		}
		return nil
	})
	if n := logged(); n != 1 {
		t.Errorf("%d lines for one refusal after %d more passes:\n%s", n, h.s.passes.Load()-passes, logs())
	}
	mu.Lock()
	why = "still no"
	mu.Unlock()
	poll.Until(t, "the new answer logged", func() error {
		if logged() != 2 || !strings.Contains(logs(), "still no") {
			return errors.New("not yet")
		}
		return nil
	})
}
