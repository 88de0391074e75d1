package vcluster

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	corev1apply "k8s.io/client-go/applyconfigurations/core/v1"
	"k8s.io/client-go/kubernetes"
)

// rejectLog records what Reject was asked, and rejects the ConfigMaps of
// namespace "blocked" while on.
type rejectLog struct {
	mu    sync.Mutex
	on    bool
	asked []string
}

func (l *rejectLog) reject(resource, namespace, name string) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.asked = append(l.asked, resource+" "+namespace+"/"+name)
	if l.on && resource == "configmaps" && namespace == "blocked" {
		return errors.New("edge-7 rejects " + name)
	}
	return nil
}

func (l *rejectLog) set(on bool) {
	l.mu.Lock()
	l.on = on
	l.mu.Unlock()
}

func (l *rejectLog) saw(what string) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Contains(l.asked, what)
}

// wantRejected checks err is the 403 of a rejection of name.
func wantRejected(t *testing.T, op string, err error, name string) {
	t.Helper()
	if !apierrors.IsForbidden(err) {
		t.Fatalf("%s: %v, want 403 Forbidden", op, err)
	}
	msg := err.Error()
	if !strings.Contains(msg, "edge-7 rejects "+name) || !strings.Contains(msg, `admission webhook "`+RejectWebhook+`" denied the request`) {
		t.Fatalf("%s: message %q", op, msg)
	}
}

// Options.Reject: a create, update, merge patch or server-side apply of
// an object it refuses answers 403 with its message, as an admission
// webhook would, and changes nothing; namespaces, other objects, reads
// and deletes go through. With JSON and protobuf bodies.
func TestReject(t *testing.T) {
	for _, ct := range []string{runtime.ContentTypeJSON, runtime.ContentTypeProtobuf} {
		t.Run(ct, func(t *testing.T) {
			log := &rejectLog{on: true}
			c, _ := startCluster(t, Options{Reject: log.reject})
			cfg := c.RESTConfig()
			cfg.QPS, cfg.Burst, cfg.ContentType = 1000, 1000, ct
			cs, err := kubernetes.NewForConfig(cfg)
			if err != nil {
				t.Fatal(err)
			}
			ctx := context.Background()

			// The namespace itself is not refused.
			if _, err := cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "blocked"}}, metav1.CreateOptions{}); err != nil {
				t.Fatalf("creating the namespace: %v", err)
			}
			if !log.saw("namespaces /blocked") {
				t.Errorf("Reject was not asked about the namespace's create: %v", log.asked)
			}
			cms := cs.CoreV1().ConfigMaps("blocked")
			cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "cm"}, Data: map[string]string{"v": "1"}}
			_, err = cms.Create(ctx, cm, metav1.CreateOptions{})
			wantRejected(t, "create", err, "cm")
			if _, err := cms.Get(ctx, "cm", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
				t.Fatalf("a rejected create was stored: %v", err)
			}
			apply := corev1apply.ConfigMap("cm", "blocked").WithData(map[string]string{"v": "1"})
			_, err = cms.Apply(ctx, apply, metav1.ApplyOptions{FieldManager: "test", Force: true})
			wantRejected(t, "server-side apply (create)", err, "cm")
			if _, err := cms.Get(ctx, "cm", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
				t.Fatalf("a rejected apply was stored: %v", err)
			}
			// Elsewhere, and once Reject lets it through, it is stored.
			if _, err := cs.CoreV1().ConfigMaps("default").Create(ctx, cm, metav1.CreateOptions{}); err != nil {
				t.Fatalf("create in another namespace: %v", err)
			}
			log.set(false)
			if _, err := cms.Apply(ctx, apply, metav1.ApplyOptions{FieldManager: "test", Force: true}); err != nil {
				t.Fatalf("apply once accepted: %v", err)
			}
			log.set(true)

			// Update, merge patch and apply of the existing object are
			// refused and leave it as it was.
			cur, err := cms.Get(ctx, "cm", metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			upd := cur.DeepCopy()
			upd.Data["v"] = "2"
			_, err = cms.Update(ctx, upd, metav1.UpdateOptions{})
			wantRejected(t, "update", err, "cm")
			_, err = cms.Patch(ctx, "cm", types.MergePatchType, []byte(`{"data":{"v":"3"}}`), metav1.PatchOptions{})
			wantRejected(t, "merge patch", err, "cm")
			_, err = cms.Apply(ctx, corev1apply.ConfigMap("cm", "blocked").WithData(map[string]string{"v": "4"}), metav1.ApplyOptions{FieldManager: "test", Force: true})
			wantRejected(t, "server-side apply (update)", err, "cm")
			after, err := cms.Get(ctx, "cm", metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if after.ResourceVersion != cur.ResourceVersion || after.Data["v"] != "1" {
				t.Fatalf("a rejected write changed the object: resourceVersion %s → %s, data %v", cur.ResourceVersion, after.ResourceVersion, after.Data)
			}
			if !log.saw("configmaps blocked/cm") {
				t.Errorf("Reject was not asked with the object's resource, namespace and name: %v", log.asked)
			}
			// Deletes are not admission's to refuse here.
			if err := cms.Delete(ctx, "cm", metav1.DeleteOptions{}); err != nil {
				t.Fatalf("delete: %v", err)
			}
		})
	}
}

// The Status a rejection answers with carries the 403 and its details.
func TestRejectStatus(t *testing.T) {
	_, cs := startCluster(t, Options{Reject: func(resource, namespace, name string) error {
		if resource == "deployments.apps" {
			return errors.New("no deployments here")
		}
		return nil
	}})
	_, err := cs.AppsV1().Deployments("default").Create(context.Background(), newDeployment("web", 1), metav1.CreateOptions{})
	var se *apierrors.StatusError
	if !errors.As(err, &se) {
		t.Fatalf("create: %v, want a StatusError", err)
	}
	st := se.ErrStatus
	if st.Code != 403 || st.Reason != metav1.StatusReasonForbidden || st.Details == nil || st.Details.Name != "web" || st.Details.Group != "apps" ||
		!strings.HasSuffix(st.Message, "denied the request: no deployments here") {
		t.Fatalf("status %+v", st)
	}
}
