package e2e

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/canopy-dev/canopy/relay/backup"
	"github.com/canopy-dev/canopy/relay/layout"
	"github.com/canopy-dev/canopy/relay/store"
	"github.com/canopy-dev/canopy/test/kubecluster"
	"github.com/canopy-dev/canopy/test/poll"
	"github.com/canopy-dev/canopy/test/procs"
	"github.com/canopy-dev/canopy/test/relaybin"
)

// backupObjects is what the admin writes before the backup: objects of
// built-in kinds, a CRD and its custom resources, RBAC, an inventory and a
// placement (whose objects the root writes into the downsync space).
const backupObjects = `
apiVersion: v1
kind: Namespace
metadata: {name: shop}
---
apiVersion: v1
kind: ConfigMap
metadata: {name: settings, namespace: shop}
data: {color: blue}
---
apiVersion: v1
kind: Secret
metadata: {name: password, namespace: shop}
stringData: {password: hunter2}
---
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata: {name: gadgets.example.com}
spec:
  group: example.com
  scope: Namespaced
  names: {plural: gadgets, singular: gadget, kind: Gadget}
  versions:
  - name: v1
    served: true
    storage: true
    schema:
      openAPIV3Schema:
        type: object
        properties:
          spec: {type: object, properties: {size: {type: integer}}}
---
apiVersion: v1
kind: ServiceAccount
metadata: {name: backup-operator, namespace: shop}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata: {name: backup, labels: {edge.canopy.dev/space-rbac: "true"}}
rules:
- nonResourceURLs: [/canopy/v1/backup]
  verbs: [get]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: Role
metadata: {name: shop-reader, namespace: shop}
rules:
- apiGroups: [""]
  resources: [configmaps]
  verbs: [get, list]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata: {name: shop-reader, namespace: shop}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: Role, name: shop-reader}
subjects:
- {kind: ServiceAccount, name: backup-operator, namespace: shop}
---
apiVersion: edge.canopy.dev/v1alpha1
kind: EdgePlacement
metadata: {name: shop}
spec:
  locationSelectors: [{matchLabels: {zone: a}}]
  downsync: [{apiGroup: "", resources: [configmaps], namespaces: [shop]}]
`

const backupGadgets = `
apiVersion: example.com/v1
kind: Gadget
metadata: {name: small, namespace: shop}
spec: {size: 1}
---
apiVersion: example.com/v1
kind: Gadget
metadata: {name: large, namespace: shop}
spec: {size: 9}
`

const backupInventory = `
apiVersion: edge.canopy.dev/v1alpha1
kind: Location
metadata: {name: zone-a, labels: {zone: a}}
spec: {instanceSelector: {matchLabels: {zone: a}}}
`

const backupRBACBinding = `
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata: {name: backup-operator, labels: {edge.canopy.dev/space-rbac: "true"}}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: backup}
subjects:
- {kind: ServiceAccount, name: backup-operator, namespace: shop}
`

// restoreSpaces are the spaces whose every object the restored root must
// serve as the backup holds it.
var restoreSpaces = []string{layout.DefaultSpace, layout.InventorySpace, layout.DownsyncSpace}

// TestBackupAndRestoreCommands: a root process with objects in several
// spaces (CRDs and custom resources, RBAC, an inventory from a joined
// edge, placed objects) is backed up with `relay backup` while writes go
// on, by its admin and by a ServiceAccount whose RBAC allows it. `relay
// restore` refuses a damaged or cut backup and a data directory that holds
// a root, and seeds a new one from the good backup; a root started there
// serves every object of the backup with its resourceVersion, none written
// after it, writes past the backup's revision, and takes back the edge.
func TestBackupAndRestoreCommands(t *testing.T) {
	t.Parallel()
	bin := relaybin.For(t)
	base := t.TempDir()
	rootDir, link := filepath.Join(base, "root"), procs.FreeAddr(t)
	root := startRelayProcess(t, rootDir, procs.FreeAddr(t), link)
	kubeconfig := filepath.Join(rootDir, "admin.kubeconfig")
	home := filepath.Join(base, "home")
	kubectl := func(stdin string, args ...string) string {
		t.Helper()
		out, err := kubecluster.RunKubectl(t, home, kubeconfig, stdin, nil, args...)
		if err != nil {
			t.Fatalf("kubectl %s: %v", strings.Join(args, " "), err)
		}
		return out
	}
	relay := func(args ...string) (stdout, stderr string, code int) {
		t.Helper()
		cmd := exec.Command(bin, args...)
		var o, e procs.Buffer
		cmd.Stdout, cmd.Stderr = &o, &e
		err := cmd.Run()
		if ee, ok := err.(*exec.ExitError); ok {
			code = ee.ExitCode()
		} else if err != nil {
			t.Fatalf("relay %s: %v", strings.Join(args, " "), err)
		}
		return o.String(), e.String(), code
	}

	token, stderr, code := relay("token", "create", "--data-dir="+rootDir)
	if code != 0 {
		t.Fatalf("relay token create: %d %s", code, stderr)
	}
	edge := startChildProcess(t, "--role=edge", "--name=edge-1", "--data-dir="+filepath.Join(base, "edge-1"),
		"--parent="+link, "--virtual-cluster", "--labels=zone=a", "--join-token="+strings.TrimSpace(token))
	kubectl(backupObjects, "apply", "-f", "-")
	poll.Until(t, "the gadgets applied once their CRD is served", func() error {
		_, err := kubecluster.RunKubectl(t, home, kubeconfig, backupGadgets, nil, "apply", "-f", "-")
		return err
	})
	kubectl(backupInventory, "--context=inventory", "apply", "-f", "-")
	// The edge applies the placed ConfigMap: the inventory, the placement
	// and the downsync space all hold something.
	poll.Until(t, "the edge to hold the placed objects", func() error {
		st, err := edge.inbox()
		if err != nil || !st.Connected || st.Objects == 0 {
			return fmt.Errorf("edge inbox %+v, %v", st, err)
		}
		return nil
	}, poll.For(60*time.Second))

	// A ServiceAccount may back up only once RBAC allows it.
	saKubeconfig := bareKubeconfigFrom(t, kubeconfig, layout.DefaultSpace)
	saToken := strings.TrimSpace(kubectl("", "create", "token", "backup-operator", "-n", "shop"))
	cfg, err := clientcmd.LoadFromFile(saKubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	cfg.AuthInfos["nobody"].Token = saToken
	if err := clientcmd.WriteToFile(*cfg, saKubeconfig); err != nil {
		t.Fatal(err)
	}
	denied := filepath.Join(base, "denied.backup")
	if _, stderr, code := relay("backup", "--kubeconfig="+saKubeconfig, "--out="+denied); code != 1 || !strings.Contains(stderr, `403 Forbidden: forbidden: User "system:serviceaccount:shop:backup-operator" cannot get path "/canopy/v1/backup"`) || strings.Count(stderr, "\n") != 1 {
		t.Fatalf("backup without RBAC: exit %d, stderr %q; want 1 and one line saying the path is forbidden", code, stderr)
	}
	if _, err := os.Stat(denied); !os.IsNotExist(err) {
		t.Fatalf("a refused backup left %s: %v", denied, err)
	}
	kubectl(backupRBACBinding, "apply", "-f", "-")

	// Writers go on while both backups are taken.
	cs := clientsetFor(t, kubeconfig)
	var mu sync.Mutex
	writes := map[string]int64{} // name → resourceVersion
	stop := make(chan struct{})
	var wg sync.WaitGroup
	stopWriting := sync.OnceFunc(func() { close(stop); wg.Wait() })
	t.Cleanup(stopWriting) // before the root stops
	wg.Go(func() {
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			name := fmt.Sprint("load-", i)
			cm, err := cs.CoreV1().ConfigMaps("default").Create(context.Background(), &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name}, Data: map[string]string{"i": name}}, metav1.CreateOptions{})
			if err != nil {
				t.Errorf("create %s: %v", name, err)
				return
			}
			rv, _ := strconv.ParseInt(cm.ResourceVersion, 10, 64)
			mu.Lock()
			writes[name] = rv
			mu.Unlock()
		}
	})
	written := func() int {
		mu.Lock()
		defer mu.Unlock()
		return len(writes)
	}
	poll.Until(t, "20 writes", func() error {
		if written() < 20 {
			return fmt.Errorf("%d writes so far", written())
		}
		return nil
	})
	// The binding takes effect once the authorizer has seen it.
	saFile := filepath.Join(base, "sa.backup")
	poll.Until(t, "a backup by the ServiceAccount", func() error {
		if out, stderr, code := relay("backup", "--kubeconfig="+saKubeconfig, "--out="+saFile); code != 0 {
			return fmt.Errorf("backup by the ServiceAccount: exit %d: %s%s", code, out, stderr)
		}
		return nil
	})
	file := filepath.Join(base, "root.backup")
	out, stderr, code := relay("backup", "--data-dir="+rootDir, "--out="+file)
	if code != 0 {
		t.Fatalf("relay backup: exit %d: %s%s", code, out, stderr)
	}
	m := regexp.MustCompile(`^backup of root at revision (\d+) written to (\S+) \(\d+ bytes\)\n$`).FindStringSubmatch(out)
	if m == nil || m[2] != file {
		t.Fatalf("relay backup printed %q", out)
	}
	rev, _ := strconv.ParseInt(m[1], 10, 64)
	after := written()
	poll.Until(t, "20 writes after the backup", func() error {
		if written() < after+20 {
			return fmt.Errorf("%d writes after the backup so far", written()-after)
		}
		return nil
	})
	stopWriting()
	if info, err := os.Stat(file); err != nil || info.Mode().Perm() != 0o600 {
		t.Fatalf("%s: %v, mode %v; want 0600", file, err, info.Mode())
	}
	var inboxBefore inboxStatus
	poll.Until(t, "the edge connected, holding objects", func() error {
		inboxBefore, err = edge.inbox()
		if err != nil || !inboxBefore.Connected || inboxBefore.Objects == 0 {
			return fmt.Errorf("edge inbox %+v, %v", inboxBefore, err)
		}
		return nil
	})
	if err := root.Stop(t); err != nil {
		t.Fatalf("root: %v", err)
	}

	// Refusals: each leaves its data directory unwritten.
	bundle := filepath.Join(base, "pki.bundle")
	pkiOut, err := exec.Command(bin, "pki", "export", "--data-dir="+rootDir).Output()
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(bundle, pkiOut, 0o600); err != nil {
		t.Fatal(err)
	}
	good, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	flipped := append([]byte(nil), good...)
	flipped[len(flipped)/2] ^= 0x10
	for _, bad := range []struct {
		name string
		data []byte
		want string
	}{
		{"damaged.backup", flipped, "backup: damaged or truncated: the SHA-256 checksum does not match"},
		{"cut.backup", good[:len(good)-100], "backup: damaged or truncated"},
		{"empty.backup", nil, "backup: not a Canopy backup"},
	} {
		path := filepath.Join(base, bad.name)
		if err := os.WriteFile(path, bad.data, 0o600); err != nil {
			t.Fatal(err)
		}
		dir := filepath.Join(base, "restore-"+bad.name)
		_, stderr, code := relay("restore", "--from="+path, "--data-dir="+dir, "--pki="+bundle)
		if code != 1 || !strings.HasPrefix(stderr, "relay: "+path+": "+bad.want) || strings.Count(stderr, "\n") != 1 {
			t.Errorf("restore of %s: exit %d, stderr %q; want 1 and one line naming it: %q", bad.name, code, stderr, bad.want)
		}
		if _, err := os.Stat(dir); !os.IsNotExist(err) {
			t.Errorf("a refused restore wrote %s: %v", dir, err)
		}
	}
	if _, stderr, code := relay("restore", "--from="+file, "--data-dir="+rootDir, "--pki="+bundle); code != 1 || !strings.Contains(stderr, "holds a root's state already") {
		t.Errorf("restore into the root's own data dir: exit %d, stderr %q", code, stderr)
	}
	newDir := filepath.Join(base, "restored")
	if _, stderr, code := relay("restore", "--from="+file, "--data-dir="+newDir); code != 1 || !strings.Contains(stderr, "relay: --pki: "+newDir+" holds no root credentials") {
		t.Errorf("restore without credentials: exit %d, stderr %q", code, stderr)
	}
	if _, err := os.Stat(newDir); !os.IsNotExist(err) {
		t.Errorf("a refused restore wrote %s: %v", newDir, err)
	}

	// The ServiceAccount's backup is of the same root and was checked.
	if h, err := checkBackupFile(saFile); err != nil || h.Relay != "root" || h.Revision < rev-int64(written()) {
		t.Fatalf("the ServiceAccount's backup: %+v, %v", h, err)
	}

	// Restore and start a root there, on the old root's link address.
	const bump = 1_000_000
	out, stderr, code = relay("restore", "--from="+file, "--data-dir="+newDir, "--pki="+bundle, fmt.Sprint("--bump-revision=", bump))
	if code != 0 || !strings.Contains(out, fmt.Sprintf("at revision %d", rev)) || !strings.Contains(out, fmt.Sprintf("writes past revision %d", rev+bump)) {
		t.Fatalf("relay restore: exit %d: %s%s", code, out, stderr)
	}
	startRelayProcess(t, newDir, procs.FreeAddr(t), link)
	newKubeconfig := filepath.Join(newDir, "admin.kubeconfig")

	h, want, err := loadBackupFile(file)
	if err != nil {
		t.Fatal(err)
	}
	defer want.Close()
	if h.Revision != rev {
		t.Fatalf("backup header at revision %d, relay backup printed %d", h.Revision, rev)
	}
	rewritten := checkRestored(t, newKubeconfig, want, rev+bump)
	t.Logf("backup at revision %d: every object served as backed up; %d rewritten by the restored root since", rev, rewritten)

	// Writes acknowledged before the backup are there; later ones are not.
	rcs := clientsetFor(t, newKubeconfig)
	var in, out2 int
	for name, wrv := range writes {
		cm, err := rcs.CoreV1().ConfigMaps("default").Get(context.Background(), name, metav1.GetOptions{})
		switch {
		case wrv <= rev && err != nil:
			t.Errorf("%s, written at %d before the backup at %d: %v", name, wrv, rev, err)
		case wrv <= rev && cm.ResourceVersion != strconv.FormatInt(wrv, 10):
			t.Errorf("%s at resourceVersion %s, written at %d", name, cm.ResourceVersion, wrv)
		case wrv > rev && !apierrors.IsNotFound(err):
			t.Errorf("%s, written at %d after the backup at %d: %v, want NotFound", name, wrv, rev, err)
		case wrv <= rev:
			in++
		default:
			out2++
		}
	}
	if in == 0 || out2 == 0 {
		t.Errorf("%d writes before the backup, %d after: want some of each", in, out2)
	}
	cm, err := rcs.CoreV1().ConfigMaps("default").Create(context.Background(), &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "after-restore"}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got, _ := strconv.ParseInt(cm.ResourceVersion, 10, 64); got <= rev+bump {
		t.Errorf("first write after the restore at resourceVersion %d, want past %d", got, rev+bump)
	}
	// The edge, whose key the restored registry holds, links to the new
	// root, resyncs (its cursor is of the old root's history) and holds
	// what it held before.
	poll.Until(t, "the edge back on the restored root", func() error {
		st, err := edge.inbox()
		if err != nil || !st.Connected || st.Hash != inboxBefore.Hash {
			return fmt.Errorf("edge inbox %+v (%v), want connected with the inbox it had before, %+v", st, err, inboxBefore)
		}
		return nil
	}, poll.For(60*time.Second))
}

func checkBackupFile(path string) (backup.Header, error) {
	f, err := os.Open(path)
	if err != nil {
		return backup.Header{}, err
	}
	defer f.Close()
	return backup.Check(f)
}

func loadBackupFile(path string) (backup.Header, *store.Store, error) {
	f, err := os.Open(path)
	if err != nil {
		return backup.Header{}, nil, err
	}
	defer f.Close()
	return backup.Load(f, store.Options{})
}

// checkRestored checks that the root of kubeconfig serves every object
// that want holds in restoreSpaces with its resourceVersion, or, for an
// object its own controllers rewrote since, a resourceVersion past
// restored, and returns how many were rewritten. Objects users write
// (ConfigMaps, Secrets, custom resources, RBAC) must be as backed up.
func checkRestored(t *testing.T, kubeconfig string, want *store.Store, restored int64) (rewritten int) {
	t.Helper()
	asWritten := map[string]bool{"configmaps": true, "secrets": true, "gadgets": true, "roles": true, "rolebindings": true,
		"clusterrolebindings": true, "serviceaccounts": true, "locations": true}
	kinds := map[string]bool{}
	for _, space := range restoreSpaces {
		rc, err := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(
			&clientcmd.ClientConfigLoadingRules{ExplicitPath: kubeconfig},
			&clientcmd.ConfigOverrides{CurrentContext: space}).ClientConfig()
		if err != nil {
			t.Fatal(err)
		}
		rc.QPS = -1
		dc := dynamic.NewForConfigOrDie(rc)
		_, lists, err := discovery.NewDiscoveryClientForConfigOrDie(rc).ServerGroupsAndResources()
		if err != nil {
			t.Fatalf("discovery of %s: %v", space, err)
		}
		versions := map[store.Resource]string{}
		for _, l := range lists {
			gv, _ := schema.ParseGroupVersion(l.GroupVersion)
			for _, r := range l.APIResources {
				if !strings.Contains(r.Name, "/") {
					versions[store.Resource{Group: gv.Group, Resource: r.Name}] = gv.Version
				}
			}
		}
		res, err := want.List(store.ListOptions{Space: space})
		if err != nil {
			t.Fatal(err)
		}
		if len(res.Items) == 0 {
			t.Errorf("the backup holds nothing in space %s", space)
		}
		for _, o := range res.Items {
			k := o.Key
			v, ok := versions[k.Resource]
			if !ok {
				// The downsync space holds the placements, Locations and
				// SyncTargets the edges need, which only its children
				// read: the caller checks them at the edge.
				if space != layout.DownsyncSpace || k.Resource.Group != "edge.canopy.dev" {
					t.Errorf("%s: the restored root does not serve %s in %s", k, k.Resource, space)
				}
				continue
			}
			kinds[k.Resource.Resource] = true
			gvr := schema.GroupVersionResource{Group: k.Resource.Group, Version: v, Resource: k.Resource.Resource}
			got, err := dc.Resource(gvr).Namespace(k.Namespace).Get(context.Background(), k.Name, metav1.GetOptions{})
			if err != nil {
				t.Errorf("%s in the backup: %v", k, err)
				continue
			}
			rv, _ := strconv.ParseInt(got.GetResourceVersion(), 10, 64)
			switch {
			case rv == o.Revision:
			case rv > restored && !asWritten[k.Resource.Resource]:
				rewritten++
			default:
				t.Errorf("%s at resourceVersion %d, backed up at %d", k, rv, o.Revision)
			}
		}
	}
	for _, kind := range []string{"namespaces", "configmaps", "secrets", "customresourcedefinitions", "gadgets", "roles", "rolebindings",
		"clusterroles", "clusterrolebindings", "serviceaccounts", "edgeplacements", "locations", "synctargets"} {
		if !kinds[kind] {
			t.Errorf("the backup holds no %s in %v", kind, restoreSpaces)
		}
	}
	return rewritten
}
