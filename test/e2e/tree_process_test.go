package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/canopy-dev/canopy/test/poll"
	"github.com/canopy-dev/canopy/test/procs"
	"github.com/canopy-dev/canopy/test/relaybin"
)

// childProcess is a region or edge relay running as a process, with its
// status endpoint; start runs it again after a stop.
type childProcess struct {
	bin            string // the relay binary; empty: relaybin.For
	args           []string
	status         string
	*procs.Process // the running one, once started
}

func startChildProcess(t *testing.T, args ...string) *childProcess {
	t.Helper()
	p := &childProcess{args: args, status: procs.FreeAddr(t)}
	p.start(t)
	return p
}

func (p *childProcess) start(t *testing.T) {
	t.Helper()
	bin := p.bin
	if bin == "" {
		bin = relaybin.For(t)
	}
	p.Process = procs.Start(t, strings.Join(p.args[:2], " "), exec.Command(bin, append(p.args, "--status-addr="+p.status)...))
}

type inboxStatus struct {
	Objects   int    `json:"objects"`
	Hash      string `json:"hash"`
	Connected bool   `json:"connected"`
	Mailboxes map[string]struct {
		Objects int    `json:"objects"`
		Hash    string `json:"hash"`
	} `json:"mailboxes"`
}

func (p *childProcess) inbox() (inboxStatus, error) {
	var st inboxStatus
	resp, err := http.Get("http://" + p.status + "/debug/inbox")
	if err != nil {
		return st, err
	}
	defer resp.Body.Close()
	return st, json.NewDecoder(resp.Body).Decode(&st)
}

// A root, a region and an edge as three processes. While the admin writes
// into the region's mailbox, the region and then the edge are killed with
// SIGKILL and restarted (no token the second time): every write reaches
// the edge's inbox, and the region's and edge's inboxes end equal.
// startRootWithToken starts a root relay process in base/root and
// creates a join token: its data directory, link address and the token.
func startRootWithToken(t *testing.T, base string) (dir, link, token string) {
	t.Helper()
	dir, link = filepath.Join(base, "root"), procs.FreeAddr(t)
	startRelayProcess(t, dir, procs.FreeAddr(t), link)
	tok, err := exec.Command(relaybin.For(t), "token", "create", "--data-dir="+dir).Output()
	if err != nil {
		t.Fatalf("relay token create: %v", err)
	}
	return dir, link, strings.TrimSpace(string(tok))
}

func TestTreeProcessesSurviveKill9(t *testing.T) {
	t.Parallel()
	base := t.TempDir()
	rootDir, rootLink, token := startRootWithToken(t, base)
	regionLink := procs.FreeAddr(t)
	region := startChildProcess(t, "--role=region", "--name=region-a", "--data-dir="+filepath.Join(base, "region-a"),
		"--parent="+rootLink, "--link-addr="+regionLink, "--join-token="+token)
	edge := startChildProcess(t, "--role=edge", "--name=edge-1", "--data-dir="+filepath.Join(base, "edge-1"),
		"--parent="+regionLink, "--virtual-cluster", "--join-token="+token)

	// The admin writes into the root's downsync space; the region's
	// mailbox at the root and the edge's at the region are views of it.
	kubeconfig := filepath.Join(rootDir, "admin.kubeconfig")
	var cs *kubernetes.Clientset
	poll.Until(t, "the downsync space served", func() error {
		cc := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(
			&clientcmd.ClientConfigLoadingRules{ExplicitPath: kubeconfig},
			&clientcmd.ConfigOverrides{CurrentContext: "downsync"})
		rc, err := cc.ClientConfig()
		if err != nil {
			return err
		}
		rc.QPS = -1
		cs, err = kubernetes.NewForConfig(rc)
		return err
	})

	// Both have joined (the restarts below carry no token).
	poll.Until(t, "the region and the edge joined", func() error {
		for _, p := range []*childProcess{region, edge} {
			st, err := p.inbox()
			if err != nil {
				return err
			}
			if !st.Connected {
				return fmt.Errorf("%v not connected yet", p.args[:2])
			}
		}
		return nil
	})

	var written atomic.Int64
	write := func(from, to int) {
		for i := from; i < to; i++ {
			cm := &corev1.ConfigMap{
				ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("cm-%03d", i), Annotations: map[string]string{"edge.canopy.dev/destinations": "edge-1"}},
				Data:       map[string]string{"i": fmt.Sprint(i)},
			}
			if _, err := cs.CoreV1().ConfigMaps("default").Create(context.Background(), cm, metav1.CreateOptions{}); err != nil {
				t.Errorf("create %s: %v", cm.Name, err)
				return
			}
			written.Add(1)
			time.Sleep(5 * time.Millisecond) // the writes' pace
		}
	}
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { defer wg.Done(); write(0, 150) }()

	// The faults' schedule against the writes' pace: inputs, not waits.
	time.Sleep(300 * time.Millisecond)
	region.Kill(t)
	time.Sleep(200 * time.Millisecond)
	region.args = withoutToken(region.args)
	region.start(t)
	time.Sleep(500 * time.Millisecond)
	edge.Kill(t)
	time.Sleep(200 * time.Millisecond)
	edge.args = withoutToken(edge.args)
	edge.start(t)
	wg.Wait()
	if t.Failed() {
		return
	}

	poll.Until(t, "the region and the edge converged", func() error {
		r, err := region.inbox()
		if err != nil {
			return err
		}
		e, err := edge.inbox()
		if err != nil {
			return err
		}
		mb := r.Mailboxes["mailbox-edge-1"]
		if mb.Objects != int(written.Load()) {
			return fmt.Errorf("region's mailbox for edge-1 has %d objects, %d written", mb.Objects, written.Load())
		}
		if e.Hash != mb.Hash || e.Objects != mb.Objects || !e.Connected {
			return fmt.Errorf("edge inbox %d objects (hash %s, connected %v), region's mailbox for it %d (hash %s)",
				e.Objects, e.Hash, e.Connected, mb.Objects, mb.Hash)
		}
		return nil
	}, poll.For(60*time.Second))
}

func withoutToken(args []string) []string {
	var out []string
	for _, a := range args {
		if !strings.HasPrefix(a, "--join-token=") {
			out = append(out, a)
		}
	}
	return out
}
