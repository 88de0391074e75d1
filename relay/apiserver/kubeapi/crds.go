package kubeapi

import (
	"encoding/json"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/canopy-dev/canopy/relay/apiserver/crd"
	"github.com/canopy-dev/canopy/relay/apiserver/resources"
	"github.com/canopy-dev/canopy/relay/store"
)

var crdGR = schema.GroupResource{Group: "apiextensions.k8s.io", Resource: "customresourcedefinitions"}

// crdCleanupFinalizer holds a CRD until its custom resources are deleted.
const crdCleanupFinalizer = "customresourcecleanup.apiextensions.k8s.io"

// admitCRD validates a CRD being created (old nil) or updated, defaults it,
// and, as kube's naming and establishing controllers would, accepts its
// names and marks it Established when no other CRD of the space claims them.
// obj is rewritten in place.
func (s *Server) admitCRD(rq *request, obj, old *unstructured.Unstructured) error {
	var c apiextensionsv1.CustomResourceDefinition
	if err := fromUnstructured(obj, &c); err != nil {
		return apierrors.NewBadRequest(err.Error())
	}
	crd.Default(&c)
	var prev *apiextensionsv1.CustomResourceDefinition
	if old != nil {
		prev = &apiextensionsv1.CustomResourceDefinition{}
		if err := fromUnstructured(old, prev); err != nil {
			return err
		}
	}
	_, errs := crd.Compile(&c, prev)
	errs = append(errs, validateCRDGroup(&c)...)
	if len(errs) > 0 {
		return apierrors.NewInvalid(schema.GroupKind{Group: crdGR.Group, Kind: "CustomResourceDefinition"}, c.Name, errs)
	}
	if old == nil {
		c.Finalizers = addFinalizer(c.Finalizers, crdCleanupFinalizer)
	}
	if c.DeletionTimestamp == nil && rq.info.Subresource != "status" {
		others, err := s.otherCRDs(rq.space, c.Name)
		if err != nil {
			return err
		}
		if ok, reason, msg := crd.CheckNames(&c, others); ok {
			crd.Established(&c, metav1.NewTime(time.Now()))
		} else {
			setCRDCondition(&c, apiextensionsv1.NamesAccepted, apiextensionsv1.ConditionFalse, reason, msg)
		}
	}
	m, err := toUnstructuredMap(&c)
	if err != nil {
		return err
	}
	obj.Object = m
	obj.SetAPIVersion("apiextensions.k8s.io/v1")
	obj.SetKind("CustomResourceDefinition")
	return nil
}

// validateCRDGroup refuses a CRD in a group of the built-in API
// (ingresses.networking.k8s.io, widgets.apps): its custom resources would
// share their store keys with the built-in objects, and deleting the CRD
// would delete those. kube-apiserver asks only for an approval annotation
// on *.k8s.io groups; the root refuses every group it serves as built-in,
// on create and on update.
func validateCRDGroup(c *apiextensionsv1.CustomResourceDefinition) field.ErrorList {
	if !resources.BuiltinGroup(c.Spec.Group) {
		return nil
	}
	return field.ErrorList{field.Invalid(field.NewPath("spec", "group"), c.Spec.Group,
		"is a group of the built-in API: a CustomResourceDefinition may not define resources in it")}
}

func setCRDCondition(c *apiextensionsv1.CustomResourceDefinition, t apiextensionsv1.CustomResourceDefinitionConditionType, st apiextensionsv1.ConditionStatus, reason, msg string) {
	cond := apiextensionsv1.CustomResourceDefinitionCondition{Type: t, Status: st, Reason: reason, Message: msg, LastTransitionTime: metav1.Now()}
	for i := range c.Status.Conditions {
		if c.Status.Conditions[i].Type == t {
			if c.Status.Conditions[i].Status == st {
				cond.LastTransitionTime = c.Status.Conditions[i].LastTransitionTime
			}
			c.Status.Conditions[i] = cond
			return
		}
	}
	c.Status.Conditions = append(c.Status.Conditions, cond)
}

func (s *Server) otherCRDs(space, except string) ([]*apiextensionsv1.CustomResourceDefinition, error) {
	list, err := s.store.List(store.ListOptions{Space: space, Resource: crdResource})
	if err != nil {
		return nil, err
	}
	var out []*apiextensionsv1.CustomResourceDefinition
	for _, it := range list.Items {
		if it.Key.Name == except {
			continue
		}
		var c apiextensionsv1.CustomResourceDefinition
		if err := json.Unmarshal(it.Data, &c); err == nil {
			out = append(out, &c)
		}
	}
	return out, nil
}

func fromUnstructured(u *unstructured.Unstructured, into any) error {
	b, err := json.Marshal(u.Object)
	if err != nil {
		return err
	}
	return json.Unmarshal(b, into)
}
