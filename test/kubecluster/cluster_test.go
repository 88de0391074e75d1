package kubecluster

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/utils/ptr"

	"github.com/canopy-dev/canopy/test/poll"
)

// TestMinimal runs two API-only clusters side by side: each stores what it
// is given, and neither sees the other's objects. On the first: a user's
// kubeconfig authenticates as that user, and the apiserver stops and
// starts again on its port with every object kept.
func TestMinimal(t *testing.T) {
	t.Parallel()
	a := Start(t, Options{Minimal: true})
	csA := a.Clientset(t)
	ctx := t.Context()

	t.Run("ConfigMapRoundTrip", func(t *testing.T) {
		// Through the kubeconfig file, as a tool given the path would.
		cfg, err := clientcmd.BuildConfigFromFlags("", a.Kubeconfig)
		if err != nil {
			t.Fatal(err)
		}
		cs := kubernetes.NewForConfigOrDie(cfg)
		want := map[string]string{"greeting": "hello"}
		if _, err := cs.CoreV1().ConfigMaps("default").Create(ctx, configMap("hello", want), metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		got, err := csA.CoreV1().ConfigMaps("default").Get(ctx, "hello", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if got.Data["greeting"] != "hello" || got.UID == "" || got.ResourceVersion == "" {
			t.Fatalf("read back %+v", got)
		}
	})

	t.Run("IndependentClusters", func(t *testing.T) {
		b := Start(t, Options{Minimal: true})
		if a.Host == b.Host || a.Dir == b.Dir {
			t.Fatalf("clusters share an address or a directory: %s %s, %s %s", a.Host, a.Dir, b.Host, b.Dir)
		}
		csB := b.Clientset(t)
		if _, err := csA.CoreV1().ConfigMaps("default").Create(ctx, configMap("only-in-a", map[string]string{"from": "a"}), metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		if _, err := csB.CoreV1().ConfigMaps("default").Get(ctx, "only-in-a", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
			t.Fatalf("cluster b sees cluster a's ConfigMap: err=%v", err)
		}
		if _, err := csB.CoreV1().ConfigMaps("default").Create(ctx, configMap("only-in-a", map[string]string{"from": "b"}), metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		got, err := csA.CoreV1().ConfigMaps("default").Get(ctx, "only-in-a", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if got.Data["from"] != "a" {
			t.Fatalf("cluster b's write reached cluster a: %v", got.Data)
		}
		// Stopping one leaves the other serving.
		b.Stop()
		if _, err := csA.CoreV1().Namespaces().Get(ctx, "default", metav1.GetOptions{}); err != nil {
			t.Fatalf("cluster a after stopping b: %v", err)
		}
	})

	t.Run("UserKubeconfig", func(t *testing.T) {
		path := a.UserKubeconfig(t, "alice", "devs", "qa")
		cfg, err := clientcmd.BuildConfigFromFlags("", path)
		if err != nil {
			t.Fatal(err)
		}
		cs := kubernetes.NewForConfigOrDie(cfg)
		r, err := cs.AuthenticationV1().SelfSubjectReviews().Create(ctx, &authenticationv1.SelfSubjectReview{}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		u := r.Status.UserInfo
		for _, g := range []string{"devs", "qa", "system:authenticated"} {
			if !slices.Contains(u.Groups, g) {
				t.Errorf("groups %v lack %s", u.Groups, g)
			}
		}
		if u.Username != "alice" || slices.Contains(u.Groups, "system:masters") {
			t.Errorf("authenticated as %s in %v, want alice in devs and qa", u.Username, u.Groups)
		}
		// Nothing is granted to alice: her reads are refused.
		if _, err := cs.CoreV1().ConfigMaps("default").List(ctx, metav1.ListOptions{}); !apierrors.IsForbidden(err) {
			t.Errorf("alice listing ConfigMaps: %v, want Forbidden", err)
		}
	})

	t.Run("APIServerRestart", func(t *testing.T) {
		kept, err := csA.CoreV1().ConfigMaps("default").Create(ctx, configMap("kept", map[string]string{"across": "restart"}), metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if err := a.StartAPIServer(ctx); err == nil {
			t.Fatal("StartAPIServer of a running apiserver: no error")
		}
		a.StopAPIServer()
		short, cancel := context.WithTimeout(ctx, 5*time.Second)
		_, err = csA.CoreV1().ConfigMaps("default").Get(short, "kept", metav1.GetOptions{})
		cancel()
		if err == nil {
			t.Fatal("a read while the apiserver is stopped succeeded")
		}
		if st := apierrors.APIStatus(nil); errors.As(err, &st) {
			t.Fatalf("a read while the apiserver is stopped got an answer from a server: %v", err)
		}
		a.StopAPIServer() // stopping a stopped apiserver does nothing

		start, cancel := context.WithTimeout(ctx, 2*time.Minute)
		defer cancel()
		began := time.Now()
		if err := a.StartAPIServer(start); err != nil {
			t.Fatal(err)
		}
		t.Logf("kube-apiserver ready again in %v", time.Since(began).Round(time.Millisecond))
		// The client made before the stop, on the same address with the
		// same certificates, reads the ConfigMap as it was.
		got, err := csA.CoreV1().ConfigMaps("default").Get(ctx, "kept", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if got.UID != kept.UID || got.ResourceVersion != kept.ResourceVersion || got.Data["across"] != "restart" {
			t.Fatalf("after the restart: %+v, want %+v", got, kept)
		}
		// Stop kills the new process: nothing answers afterwards.
		a.Stop()
		if err := getOK(ctx, insecureClient(), a.Host+"/readyz"); err == nil {
			t.Error("the restarted apiserver answers after Stop")
		}
		if err := a.StartAPIServer(ctx); err == nil {
			t.Error("StartAPIServer after Stop: no error")
		}
	})
}

// TestEtcdMembers runs an API-only cluster on three etcd members: they form
// one cluster, kube-apiserver stores in it, and Stop ends every member.
func TestEtcdMembers(t *testing.T) {
	t.Parallel()
	c := Start(t, Options{Minimal: true, EtcdMembers: 3})
	ctx := t.Context()
	if len(c.etcdURLs) != 3 {
		t.Fatalf("etcd client URLs %v, want 3", c.etcdURLs)
	}
	want := slices.Sorted(slices.Values(c.etcdURLs))

	// Every member knows all three, each by its own client URL.
	for _, u := range c.etcdURLs {
		var list struct {
			Members []struct {
				Name       string   `json:"name"`
				ClientURLs []string `json:"clientURLs"`
			} `json:"members"`
		}
		if err := etcdPost(ctx, u+"/v3/cluster/member/list", map[string]any{}, &list); err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, m := range list.Members {
			got = append(got, m.ClientURLs...)
		}
		slices.Sort(got)
		if len(list.Members) != 3 || !slices.Equal(got, want) {
			t.Errorf("member %s lists %d members with client URLs %v, want 3 with %v", u, len(list.Members), got, want)
		}
	}

	cs := c.Clientset(t)
	if _, err := cs.CoreV1().ConfigMaps("default").Create(ctx, configMap("replicated", map[string]string{"on": "three"}), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	got, err := cs.CoreV1().ConfigMaps("default").Get(ctx, "replicated", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got.Data["on"] != "three" || got.UID == "" {
		t.Fatalf("read back %+v", got)
	}
	// kube-apiserver stored it in that cluster: every member serves the
	// key (a linearizable read, as etcd's clients make by default).
	const key = "/registry/configmaps/default/replicated"
	for _, u := range c.etcdURLs {
		var rng struct {
			Kvs []struct {
				Key []byte `json:"key"` // base64 in JSON, decoded by encoding/json
			} `json:"kvs"`
		}
		if err := etcdPost(ctx, u+"/v3/kv/range", map[string]any{"key": []byte(key), "keys_only": true}, &rng); err != nil {
			t.Fatal(err)
		}
		if len(rng.Kvs) != 1 || string(rng.Kvs[0].Key) != key {
			t.Errorf("member %s: range %s = %+v, want the ConfigMap's key", u, key, rng.Kvs)
		}
	}

	c.Stop()
	for _, u := range c.etcdURLs {
		if err := getOK(ctx, nil, u+"/health"); err == nil {
			t.Errorf("etcd member %s still answers after Stop", u)
		}
	}
}

// etcdPost calls etcd's JSON gateway (a gRPC method as POST /v3/…): in
// is the request message, out receives the response.
func etcdPost(ctx context.Context, url string, in, out any) error {
	body, err := json.Marshal(in)
	if err != nil {
		return err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return err
	}
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("POST %s: %s: %s", url, resp.Status, b)
	}
	if err := json.Unmarshal(b, out); err != nil {
		return fmt.Errorf("POST %s: %w: %s", url, err, b)
	}
	return nil
}

// TestFull runs a Deployment on a full cluster: the controller manager
// makes its Pods, the scheduler places them on kwok's fake Nodes, and kwok
// reports them Running and Ready.
func TestFull(t *testing.T) {
	t.Parallel()
	c := Start(t, Options{Nodes: 2})
	cs := c.Clientset(t)
	ctx := t.Context()

	labels := map[string]string{"app": "web"}
	dep := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: "web"},
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To[int32](2),
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: corev1.PodSpec{
					Containers: []corev1.Container{{Name: "web", Image: "registry.k8s.io/pause:3.10"}},
				},
			},
		},
	}
	if _, err := cs.AppsV1().Deployments("default").Create(ctx, dep, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	poll.Until(t, "deployment web with 2 pods Running", func() error {
		d, err := cs.AppsV1().Deployments("default").Get(ctx, "web", metav1.GetOptions{})
		if err != nil {
			return err
		}
		if d.Status.ReadyReplicas != 2 {
			return fmt.Errorf("deployment: %d ready replicas", d.Status.ReadyReplicas)
		}
		pods, err := cs.CoreV1().Pods("default").List(ctx, metav1.ListOptions{LabelSelector: "app=web"})
		if err != nil {
			return err
		}
		running := 0
		for _, p := range pods.Items {
			if p.Status.Phase == corev1.PodRunning && slices.Contains(c.Nodes, p.Spec.NodeName) {
				running++
			}
		}
		if running != 2 {
			return fmt.Errorf("%d of %d pods Running on a fake node", running, len(pods.Items))
		}
		return nil
	}, poll.For(2*time.Minute))
}

func configMap(name string, data map[string]string) *corev1.ConfigMap {
	return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name}, Data: data}
}
