package e2e

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/canopy-dev/canopy/test/kubecluster"
	"github.com/canopy-dev/canopy/test/procs"
	"github.com/canopy-dev/canopy/test/relaybin"
)

func TestMain(m *testing.M) { relaybin.Main(m) }

// startRelayProcess starts `relay --role=root` on dataDir and the given
// addresses and waits until its kubeconfig exists and it answers /readyz.
func startRelayProcess(t *testing.T, dataDir, apiAddr, linkAddr string) *procs.Process {
	t.Helper()
	return startRootBinary(t, relaybin.For(t), dataDir, apiAddr, linkAddr)
}

// startRootBinary is startRelayProcess with the relay binary bin.
func startRootBinary(t *testing.T, bin, dataDir, apiAddr, linkAddr string) *procs.Process {
	t.Helper()
	p := procs.Start(t, "root", exec.Command(bin, "--role=root", "--name=root", "--data-dir="+dataDir,
		"--api-addr="+apiAddr, "--link-addr="+linkAddr))
	kubeconfig := filepath.Join(dataDir, "admin.kubeconfig")
	p.Until(t, "the relay serving", func() error {
		if _, err := os.Stat(kubeconfig); err != nil {
			return err
		}
		out, err := kubecluster.RunKubectl(t, filepath.Join(dataDir, "..", "home"), kubeconfig, "", nil, "get", "--raw=/readyz")
		if err != nil {
			return err
		}
		if strings.TrimSpace(out) != "ok" {
			return fmt.Errorf("readyz: %q", out)
		}
		return nil
	})
	return p
}

func clientsetFor(t *testing.T, kubeconfig string) *kubernetes.Clientset {
	t.Helper()
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		t.Fatalf("load %s: %v", kubeconfig, err)
	}
	cfg.QPS, cfg.Burst = 1000, 1000
	cfg.Timeout = 10 * time.Second
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return cs
}

// crashPayload is the data every ConfigMap of the crash test carries; it is
// large enough that a torn write would show.
var crashPayload = strings.Repeat("0123456789abcdef", 256)

// TestProcess runs the relay binary: start, kubectl against it, kill -9
// during a stream of writes, restart on the same data directory.
func TestProcess(t *testing.T) {
	t.Parallel()
	kubecluster.Kubectl(t)
	base := t.TempDir()
	dataDir := filepath.Join(base, "data")
	home := filepath.Join(base, "home")
	if err := os.MkdirAll(home, 0o700); err != nil {
		t.Fatal(err)
	}
	apiAddr, linkAddr := procs.FreeAddr(t), procs.FreeAddr(t)
	kubeconfig := filepath.Join(dataDir, "admin.kubeconfig")
	kubectl := func(kubeconfig string, args ...string) (string, error) {
		return kubecluster.RunKubectl(t, home, kubeconfig, "", nil, args...)
	}

	p := startRelayProcess(t, dataDir, apiAddr, linkAddr)

	// kubectl against the process, in both spaces.
	out, err := kubectl(kubeconfig, "get", "namespaces", "-o", "name")
	if err != nil || !strings.Contains(out, "namespace/default") {
		t.Fatalf("kubectl get namespaces: %q %v", out, err)
	}
	if out, err := kubectl(kubeconfig, "--context=inventory", "get", "namespaces", "-o", "name"); err != nil || !strings.Contains(out, "namespace/default") {
		t.Errorf("kubectl --context=inventory get namespaces: %q %v", out, err)
	}
	if out, err := kubectl(kubeconfig, "version"); err != nil || !strings.Contains(out, "Server Version: v1.") {
		t.Errorf("kubectl version: %q %v", out, err)
	}

	// relay kubeconfig prints a working kubeconfig, whole or for one space.
	relayKubeconfig := func(args ...string) string {
		t.Helper()
		var stdout, stderr bytes.Buffer
		cmd := exec.Command(relaybin.For(t), append([]string{"kubeconfig", "--data-dir=" + dataDir}, args...)...)
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		if err := cmd.Run(); err != nil {
			t.Fatalf("relay kubeconfig %v: %v: %s", args, err, stderr.String())
		}
		path := filepath.Join(base, fmt.Sprintf("printed-%d.kubeconfig", time.Now().UnixNano()))
		if err := os.WriteFile(path, stdout.Bytes(), 0o600); err != nil {
			t.Fatal(err)
		}
		return path
	}
	printed := relayKubeconfig()
	if out, err := kubectl(printed, "get", "namespaces", "-o", "name"); err != nil || !strings.Contains(out, "namespace/default") {
		t.Errorf("kubectl with the printed kubeconfig: %q %v", out, err)
	}
	printedInv := relayKubeconfig("--space=inventory")
	if cfg, err := clientcmd.LoadFromFile(printedInv); err != nil || cfg.CurrentContext != "inventory" {
		t.Errorf("relay kubeconfig --space=inventory: current context %v (%v)", cfg, err)
	}
	if _, err := kubectl(printedInv, "create", "namespace", "only-in-inventory"); err != nil {
		t.Errorf("kubectl with the printed inventory kubeconfig: %v", err)
	}
	if out, err := kubectl(kubeconfig, "get", "namespaces", "-o", "name"); err != nil || strings.Contains(out, "only-in-inventory") {
		t.Errorf("the printed inventory kubeconfig wrote into the default space: %q %v", out, err)
	}
	// Keep a copy of the first kubeconfig: it must still work after the
	// restart (same CA, same token, same address).
	oldKubeconfig := filepath.Join(base, "old.kubeconfig")
	oldBytes, err := os.ReadFile(kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(oldKubeconfig, oldBytes, 0o600); err != nil {
		t.Fatal(err)
	}

	// Crash: writers create ConfigMaps as fast as they can; kill -9 after
	// about two seconds.
	cs := clientsetFor(t, kubeconfig)
	const ns = "crash"
	createNamespace(t, cs, ns)
	var (
		mu    sync.Mutex
		acked = map[string]string{} // name -> resourceVersion
	)
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for w := range 8 {
		wg.Go(func() {
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				name := fmt.Sprintf("w%d-%06d", w, i)
				ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
				cm, err := cs.CoreV1().ConfigMaps(ns).Create(ctx, configMap(ns, name, map[string]string{"writer": strconv.Itoa(w)},
					map[string]string{"name": name, "seq": strconv.Itoa(i), "payload": crashPayload}), metav1.CreateOptions{})
				cancel()
				if err != nil {
					// After the kill every write fails; wait for stop.
					<-stop
					return
				}
				mu.Lock()
				acked[name] = cm.ResourceVersion
				mu.Unlock()
			}
		})
	}
	<-time.After(2 * time.Second)
	if err := p.Kill(t); err == nil {
		t.Errorf("relay exited cleanly on SIGKILL?")
	}
	close(stop)
	wg.Wait()
	mu.Lock()
	nAcked := len(acked)
	mu.Unlock()
	if nAcked < 50 {
		t.Fatalf("only %d writes acknowledged before the kill; the test needs a stream of writes", nAcked)
	}
	t.Logf("%d creates acknowledged before kill -9", nAcked)

	// Restart on the same data directory and addresses.
	p = startRelayProcess(t, dataDir, apiAddr, linkAddr)
	cs = clientsetFor(t, kubeconfig)
	ctx := t.Context()
	list, err := cs.CoreV1().ConfigMaps(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatalf("list after restart: %v", err)
	}
	listed := map[string]corev1.ConfigMap{}
	var maxRV uint64
	for _, cm := range list.Items {
		listed[cm.Name] = cm
		rv, err := strconv.ParseUint(cm.ResourceVersion, 10, 64)
		if err != nil {
			t.Errorf("%s: resourceVersion %q", cm.Name, cm.ResourceVersion)
		}
		maxRV = max(maxRV, rv)
	}
	missing := 0
	for name, rv := range acked {
		cm, ok := listed[name]
		if !ok {
			missing++
			if missing <= 10 {
				t.Errorf("acknowledged create of %s (rv %s) lost in the crash", name, rv)
			}
			continue
		}
		if cm.ResourceVersion != rv {
			t.Errorf("%s: resourceVersion %s after restart, %s when acknowledged", name, cm.ResourceVersion, rv)
		}
	}
	if missing > 0 {
		t.Errorf("%d of %d acknowledged creates lost", missing, len(acked))
	}
	// Nothing half-applied: every stored object is whole, and get agrees
	// with list.
	extra := 0
	for name, cm := range listed {
		if _, ok := acked[name]; !ok {
			extra++ // committed, but the acknowledgement was lost in the kill
		}
		if cm.Data["name"] != name || cm.Data["payload"] != crashPayload || cm.Labels["writer"] == "" || cm.UID == "" {
			t.Errorf("%s is not whole after the crash: labels %v, name %q, payload %d bytes", name, cm.Labels, cm.Data["name"], len(cm.Data["payload"]))
		}
		got, err := cs.CoreV1().ConfigMaps(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			t.Errorf("get %s after restart: %v (list has it)", name, err)
			continue
		}
		if got.ResourceVersion != cm.ResourceVersion || got.UID != cm.UID || got.Data["payload"] != cm.Data["payload"] {
			t.Errorf("get and list disagree on %s: rv %s/%s uid %s/%s", name, got.ResourceVersion, cm.ResourceVersion, got.UID, cm.UID)
		}
	}
	t.Logf("%d objects after restart, %d committed without an acknowledgement", len(listed), extra)
	// Gaps in a writer's sequence would mean a later write survived an
	// earlier lost one: writes are applied in order.
	last := map[string]int{}
	for name := range listed {
		var w, i int
		if _, err := fmt.Sscanf(name, "w%d-%06d", &w, &i); err == nil {
			last[strconv.Itoa(w)] = max(last[strconv.Itoa(w)], i)
		}
	}
	for w, hi := range last {
		for i := 0; i <= hi; i++ {
			if _, ok := listed[fmt.Sprintf("w%s-%06d", w, i)]; !ok {
				t.Errorf("writer %s: w%s-%06d missing while w%s-%06d survived", w, w, i, w, hi)
				break
			}
		}
	}
	// The revision keeps growing after the restart.
	if lrv, _ := strconv.ParseUint(list.ResourceVersion, 10, 64); lrv < maxRV {
		t.Errorf("list resourceVersion %d is older than an item's %d", lrv, maxRV)
	}
	after, err := cs.CoreV1().ConfigMaps(ns).Create(ctx, configMap(ns, "after-restart", nil, nil), metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("create after restart: %v", err)
	}
	if rv, _ := strconv.ParseUint(after.ResourceVersion, 10, 64); rv <= maxRV {
		t.Errorf("resourceVersion went backwards after the restart: %d <= %d", rv, maxRV)
	}
	if _, err := cs.CoreV1().Namespaces().Get(ctx, "only-in-inventory", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("inventory namespace visible in default after restart: %v", err)
	}

	// Same CA and token: the kubeconfig from before the crash still works,
	// and the one written now is the same.
	if out, err := kubectl(oldKubeconfig, "get", "configmap", "after-restart", "-n", ns, "-o", "name"); err != nil || strings.TrimSpace(out) != "configmap/after-restart" {
		t.Errorf("the kubeconfig from before the restart: %q %v", out, err)
	}
	if out, err := kubectl(printedInv, "get", "namespace", "only-in-inventory", "-o", "name"); err != nil || strings.TrimSpace(out) != "namespace/only-in-inventory" {
		t.Errorf("the printed inventory kubeconfig after the restart: %q %v", out, err)
	}
	oldCfg, err := clientcmd.Load(oldBytes)
	if err != nil {
		t.Fatal(err)
	}
	newCfg, err := clientcmd.LoadFromFile(kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	for name, c := range oldCfg.Contexts {
		nc, ok := newCfg.Contexts[name]
		if !ok {
			t.Errorf("context %s gone after the restart", name)
			continue
		}
		oc, ncl := oldCfg.Clusters[c.Cluster], newCfg.Clusters[nc.Cluster]
		if ncl == nil || oc.Server != ncl.Server || !bytes.Equal(oc.CertificateAuthorityData, ncl.CertificateAuthorityData) {
			t.Errorf("context %s: cluster changed across the restart", name)
		}
		if oa, na := oldCfg.AuthInfos[c.AuthInfo], newCfg.AuthInfos[nc.AuthInfo]; na == nil || oa.Token != na.Token {
			t.Errorf("context %s: token changed across the restart", name)
		}
	}

	// SIGTERM is a clean shutdown.
	if err := p.Stop(t); err != nil {
		t.Errorf("relay exit on SIGTERM: %v\n%s", err, p.Output())
	}
}
