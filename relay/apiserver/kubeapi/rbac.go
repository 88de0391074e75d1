package kubeapi

import (
	"context"
	"encoding/json"

	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apiserver/pkg/authentication/user"

	"github.com/canopy-dev/canopy/relay/store"
)

// EscalationChecker is implemented by an Authorizer that checks writes of
// RBAC objects for privilege escalation, as kube's RBAC storage does
// (auth.Authorizer does). When Config.Authorizer implements it, every
// create and update of a Role, ClusterRole, RoleBinding or
// ClusterRoleBinding, dry runs included, goes through it after validation
// and before the store; its error is the answer.
type EscalationChecker interface {
	// ConfirmNoEscalation checks u's write of obj over old (nil on
	// create); obj carries the Key, Labels and Data it would be stored
	// with.
	ConfirmNoEscalation(ctx context.Context, u user.Info, obj, old *store.Object) error
}

// admitRBAC runs the Authorizer's escalation check, if it has one, on a
// create (old nil) or update of an RBAC object.
func (s *Server) admitRBAC(rq *request, sv *served, obj *unstructured.Unstructured, old *store.Object) error {
	ec, ok := s.cfg.Authorizer.(EscalationChecker)
	if !ok || sv.group != rbacv1.GroupName {
		return nil
	}
	data, err := json.Marshal(obj.Object)
	if err != nil {
		return err
	}
	next := &store.Object{Key: rq.key(sv, obj.GetName()), Data: data, Labels: labels.Set(obj.GetLabels()), UID: string(obj.GetUID())}
	return ec.ConfirmNoEscalation(rq.r.Context(), rq.user, next, old)
}
