package main

import (
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/canopy-dev/canopy/relay/pki"
	"github.com/canopy-dev/canopy/test/poll"
)

// TestRootDiskFull runs a root on a small tmpfs (issue 26: a write failed
// with 500 "segment is sealed", then every write with "not the leader",
// /readyz stayed ok, and the root stayed stuck until restarted once space
// was freed). The log's first segment (64 MiB, preallocated) fits; when it
// is full the next one does not: the write that needs it fails with 507
// naming ENOSPC, so do later ones, and /readyz fails with the cause. Once
// the tmpfs grows, /readyz is ok and writes succeed without a restart;
// every acknowledged ConfigMap is there after one.
func TestRootDiskFull(t *testing.T) {
	if testing.Short() {
		t.Skip("starts relay processes")
	}
	if os.Geteuid() != 0 {
		t.Skip("mounts a tmpfs: needs root")
	}
	mnt := t.TempDir()
	if out, err := exec.Command("mount", "-t", "tmpfs", "-o", "size=80m", "tmpfs", mnt).CombinedOutput(); err != nil {
		t.Fatalf("mount tmpfs: %v: %s", err, out)
	}
	// Registered before the relay's own cleanup, so it runs after it.
	t.Cleanup(func() {
		if out, err := exec.Command("umount", mnt).CombinedOutput(); err != nil {
			t.Errorf("umount %s: %v: %s", mnt, err, out)
		}
	})
	dir := filepath.Join(mnt, "root")
	args := []string{"--role=root", "--name=root", "--data-dir=" + dir, "--api-addr=127.0.0.1:0", "--link-addr=127.0.0.1:0"}
	root := startRelay(t, "root", args...)
	root.waitLog("root relay serving")

	rc, err := clientcmd.BuildConfigFromFlags("", filepath.Join(dir, pki.AdminKubeconfigFile))
	if err != nil {
		t.Fatal(err)
	}
	rc.QPS, rc.Burst = 1000, 1000
	cs, err := kubernetes.NewForConfig(rc)
	if err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	data := strings.Repeat("x", 900<<10)
	var acked []string
	create := func(name string) error {
		cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name}, Data: map[string]string{"d": data}}
		_, err := cs.CoreV1().ConfigMaps("default").Create(ctx, cm, metav1.CreateOptions{})
		if err == nil {
			acked = append(acked, name)
		}
		return err
	}
	// /readyz of the root, not of a space (the kubeconfig's server URL
	// names one).
	tr, err := rest.TransportFor(rc)
	if err != nil {
		t.Fatal(err)
	}
	u, err := url.Parse(rc.Host)
	if err != nil {
		t.Fatal(err)
	}
	u.Path = "/readyz"
	readyz := func() (string, error) {
		resp, err := (&http.Client{Transport: tr}).Get(u.String())
		if err != nil {
			return "", err
		}
		defer resp.Body.Close()
		body, err := io.ReadAll(resp.Body)
		if err == nil && resp.StatusCode != http.StatusOK {
			err = fmt.Errorf("status %d", resp.StatusCode)
		}
		return string(body), err
	}

	var full error
	for i := range 120 { // 64 MiB is about 73 of them
		if full = create(fmt.Sprintf("cm-%03d", i)); full != nil {
			break
		}
	}
	if full == nil {
		t.Fatalf("%d writes of 900 KiB fit in an 80 MiB tmpfs", len(acked))
	}
	for i := range 3 {
		err := full
		if i > 0 {
			err = create(fmt.Sprintf("full-%d", i))
		}
		var st apierrors.APIStatus
		if !errors.As(err, &st) || st.Status().Code != 507 || !strings.Contains(st.Status().Message, "no space left on device") {
			t.Fatalf("write %d on a full disk (after %d acknowledged): %v, want a 507 naming ENOSPC", i, len(acked), err)
		}
	}
	if body, err := readyz(); err == nil || !strings.Contains(body, "no space left on device") {
		t.Fatalf("/readyz on a full disk: %q (%v), want a failure naming ENOSPC", body, err)
	}

	if out, err := exec.Command("mount", "-o", "remount,size=300m", mnt).CombinedOutput(); err != nil {
		t.Fatalf("growing the tmpfs: %v: %s", err, out)
	}
	poll.Until(t, "/readyz to pass once space returned", func() error {
		if body, err := readyz(); err != nil {
			return fmt.Errorf("%q (%v)", body, err)
		}
		return nil
	})
	if err := create("after"); err != nil {
		t.Fatalf("a write once space returned: %v", err)
	}

	root.stop()
	root = startRelay(t, "root", args...)
	root.waitLog("root relay serving")
	if rc, err = clientcmd.BuildConfigFromFlags("", filepath.Join(dir, pki.AdminKubeconfigFile)); err != nil {
		t.Fatal(err)
	}
	if cs, err = kubernetes.NewForConfig(rc); err != nil {
		t.Fatal(err)
	}
	list, err := cs.CoreV1().ConfigMaps("default").List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	have := map[string]bool{}
	for _, cm := range list.Items {
		have[cm.Name] = len(cm.Data["d"]) == len(data)
	}
	for _, name := range acked {
		if !have[name] {
			t.Errorf("acknowledged ConfigMap %s lost after a restart", name)
		}
	}
	for i := range 3 {
		if _, ok := have[fmt.Sprintf("full-%d", i)]; ok {
			t.Errorf("ConfigMap full-%d, refused with 507, exists", i)
		}
	}
	t.Logf("%d ConfigMaps acknowledged", len(acked))
	root.stop()
}
