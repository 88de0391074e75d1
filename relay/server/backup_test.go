package server

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"strconv"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/canopy-dev/canopy/relay/backup"
	"github.com/canopy-dev/canopy/relay/store"
)

// Every replica serves a backup, to its admin only. One asked of a
// follower right after a write through the leader holds that write: the
// follower waits for the leader's read index before it takes the snapshot.
func TestBackupFromAnyReplica(t *testing.T) {
	if testing.Short() {
		t.Skip("runs three replicas")
	}
	rs := startReplicas(t, 3)
	leader := leaderOf(t, rs)
	follower := rs[(leader+1)%3].Root
	cs := adminClient(t, rs[leader].Root, "default")
	rc, err := clientcmd.BuildConfigFromFlags("", follower.KubeconfigPath())
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	for i := range 10 {
		name := fmt.Sprint("cm-", i)
		cm, err := cs.CoreV1().ConfigMaps("default").Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		var buf bytes.Buffer
		if _, err := GetBackup(ctx, rc, follower.Server(), &buf); err != nil {
			t.Fatalf("backup from %s: %v", follower.cfg.Name, err)
		}
		h, st, err := backup.Load(&buf, store.Options{})
		if err != nil {
			t.Fatalf("backup from %s: %v", follower.cfg.Name, err)
		}
		o, err := st.Get(store.Key{Space: "default", Resource: store.Resource{Resource: "configmaps"}, Namespace: "default", Name: name})
		st.Close()
		if err != nil {
			t.Fatalf("backup of revision %d from %s, right after %s was created at %s: %v", h.Revision, follower.cfg.Name, name, cm.ResourceVersion, err)
		}
		if rv := strconv.FormatInt(o.Revision, 10); rv != cm.ResourceVersion || h.Relay != follower.cfg.Name {
			t.Fatalf("backup by %q holds %s at revision %s, want %s by %s", h.Relay, name, rv, cm.ResourceVersion, follower.cfg.Name)
		}
	}

	if code, body := get(t, follower, BackupPath, false); code != http.StatusUnauthorized {
		t.Errorf("backup without credentials: %d %s", code, body)
	}
	req, _ := http.NewRequest(http.MethodPost, follower.Server()+BackupPath, nil)
	req.Header.Set("Authorization", "Bearer "+follower.token)
	hc, err := rest.HTTPClientFor(rc)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := hc.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusMethodNotAllowed {
		t.Errorf("POST %s: %s, want 405", BackupPath, resp.Status)
	}
}
