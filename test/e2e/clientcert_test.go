package e2e

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/canopy-dev/canopy/relay/pki"
	"github.com/canopy-dev/canopy/test/poll"
	edgev1alpha1 "github.com/canopy-dev/canopy/topology/api/v1alpha1"
)

// A client certificate issued by the root's CA authenticates its CN as the
// user and its O entries as groups; RBAC then decides what it may do.
func testClientCertificate(t *testing.T, r *root, admin *kubernetes.Clientset) {
	ctx := context.Background()
	ca, err := pki.LoadOrCreateCA(pki.Dir(r.dir))
	if err != nil {
		t.Fatal(err)
	}
	certPEM, keyPEM, err := ca.IssueClient("alice", []string{"devs"}, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	base := r.restConfig(t, "default")
	cfg := &rest.Config{Host: base.Host, QPS: -1, TLSClientConfig: rest.TLSClientConfig{
		CAData: base.TLSClientConfig.CAData, CertData: certPEM, KeyData: keyPEM,
	}}
	if len(cfg.TLSClientConfig.CAData) == 0 {
		cfg.TLSClientConfig.CAData = ca.CertPEM
	}
	alice, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	review, err := alice.AuthenticationV1().SelfSubjectReviews().Create(ctx, &authenticationv1.SelfSubjectReview{}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("self subject review with a client certificate: %v", err)
	}
	ui := review.Status.UserInfo
	if ui.Username != "alice" || !slices.Contains(ui.Groups, "devs") || !slices.Contains(ui.Groups, "system:authenticated") {
		t.Fatalf("identity from certificate = %+v, want alice in devs and system:authenticated", ui)
	}

	ns := "cert-ns"
	createNamespace(t, admin, ns)
	if _, err := alice.CoreV1().ConfigMaps(ns).List(ctx, metav1.ListOptions{}); !apierrors.IsForbidden(err) {
		t.Fatalf("list before any grant: err %v, want Forbidden", err)
	}
	// Denaturing: a RoleBinding in a workload description space is a
	// workload for the destinations; it grants nothing here. The
	// authorizer takes RBAC changes in order, so once the labelled
	// binding below (the space's own) is in effect, the first has been
	// seen too.
	workload := &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "devs-view-at-the-edge", Namespace: ns},
		RoleRef:    rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "ClusterRole", Name: "view"},
		Subjects:   []rbacv1.Subject{{Kind: "Group", APIGroup: "rbac.authorization.k8s.io", Name: "devs"}},
	}
	if _, err := admin.RbacV1().RoleBindings(ns).Create(ctx, workload, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	barrier := &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "alice-views-ns2", Namespace: "default", Labels: map[string]string{edgev1alpha1.SpaceRBACLabel: "true"}},
		RoleRef:    rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "ClusterRole", Name: "view"},
		Subjects:   []rbacv1.Subject{{Kind: "User", APIGroup: "rbac.authorization.k8s.io", Name: "alice"}},
	}
	if _, err := admin.RbacV1().RoleBindings("default").Create(ctx, barrier, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	poll.Until(t, "alice to list ConfigMaps in default", func() error {
		_, err := alice.CoreV1().ConfigMaps("default").List(ctx, metav1.ListOptions{})
		return err
	})
	if _, err := alice.CoreV1().ConfigMaps(ns).List(ctx, metav1.ListOptions{}); !apierrors.IsForbidden(err) {
		t.Fatalf("list after an unlabelled RoleBinding in a WDS: err %v, want Forbidden (it is inert here)", err)
	}
	rb := &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "devs-view", Namespace: ns, Labels: map[string]string{edgev1alpha1.SpaceRBACLabel: "true"}},
		RoleRef:    rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "ClusterRole", Name: "view"},
		Subjects:   []rbacv1.Subject{{Kind: "Group", APIGroup: "rbac.authorization.k8s.io", Name: "devs"}},
	}
	if _, err := admin.RbacV1().RoleBindings(ns).Create(ctx, rb, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	poll.Until(t, "alice to list ConfigMaps in the namespace", func() error {
		_, err := alice.CoreV1().ConfigMaps(ns).List(ctx, metav1.ListOptions{})
		return err
	})
	if _, err := alice.CoreV1().ConfigMaps(ns).Create(ctx, benchConfigMap("nope"), metav1.CreateOptions{}); !apierrors.IsForbidden(err) {
		t.Fatalf("create with view only: err %v, want Forbidden", err)
	}

	// A certificate from another CA is not a credential.
	other, err := pki.LoadOrCreateCA(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	fakeCert, fakeKey, err := other.IssueClient("mallory", []string{"system:masters"}, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	cfg.TLSClientConfig.CertData, cfg.TLSClientConfig.KeyData = fakeCert, fakeKey
	mallory, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	_, err = mallory.CoreV1().Namespaces().List(ctx, metav1.ListOptions{})
	if err == nil {
		t.Fatal("a certificate from a foreign CA was accepted")
	}
	if !apierrors.IsUnauthorized(err) {
		// The TLS handshake may refuse the certificate before HTTP.
		t.Logf("foreign certificate refused: %v", fmt.Sprint(err))
	}
}
