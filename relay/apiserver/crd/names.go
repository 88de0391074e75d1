package crd

import (
	"fmt"
	"slices"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	utilerrors "k8s.io/apimachinery/pkg/util/errors"
	"k8s.io/apimachinery/pkg/util/sets"
)

// Reasons and messages of the conditions kube's naming and establishing
// controllers write.
const (
	reasonNoConflicts          = "NoConflicts"
	messageNoConflicts         = "no conflicts found"
	reasonInitialNamesAccepted = "InitialNamesAccepted"
	messageNamesAccepted       = "the initial names have been accepted"
)

// CheckNames reports whether the names crd requests are free in its space,
// as kube's naming controller decides. A requested plural, singular or short
// name conflicts when a CRD of the same group has accepted it as one of its
// resource names (status.acceptedNames plural, singular or short names), and
// a kind or listKind when one has accepted it as a kind or listKind; names
// crd has already accepted remain its own. others may include crd (matched
// by name); that copy is skipped.
//
// When accepted is false, reason and message are those of the
// NamesAccepted=False condition kube sets ("PluralConflict",
// `"widgets" is already in use`, ...); when several names conflict, the last
// checked wins, as in kube. When accepted is true they are "NoConflicts" and
// "no conflicts found".
func CheckNames(crd *apiextensionsv1.CustomResourceDefinition, others []*apiextensionsv1.CustomResourceDefinition) (accepted bool, reason, message string) {
	resources, kinds := sets.New[string](), sets.New[string]()
	// The naming controller counts the CRD's own accepted names as taken.
	for _, o := range append([]*apiextensionsv1.CustomResourceDefinition{crd}, others...) {
		if o.Spec.Group != crd.Spec.Group || (o != crd && o.Name == crd.Name) {
			continue
		}
		n := o.Status.AcceptedNames
		resources.Insert(n.Plural, n.Singular)
		resources.Insert(n.ShortNames...)
		kinds.Insert(n.Kind, n.ListKind)
	}

	requested, current := crd.Spec.Names, crd.Status.AcceptedNames
	accepted, reason, message = true, reasonNoConflicts, messageNoConflicts
	conflict := func(r string, err error) {
		if err != nil {
			accepted, reason, message = false, r, err.Error()
		}
	}
	conflict("PluralConflict", freshOrAccepted(requested.Plural, current.Plural, resources))
	conflict("SingularConflict", freshOrAccepted(requested.Singular, current.Singular, resources))
	if !slices.Equal(requested.ShortNames, current.ShortNames) {
		var errs []error
		for _, s := range requested.ShortNames {
			if !slices.Contains(current.ShortNames, s) {
				errs = append(errs, freshOrAccepted(s, "", resources))
			}
		}
		conflict("ShortNamesConflict", utilerrors.NewAggregate(errs))
	}
	conflict("KindConflict", freshOrAccepted(requested.Kind, current.Kind, kinds))
	conflict("ListKindConflict", freshOrAccepted(requested.ListKind, current.ListKind, kinds))
	return accepted, reason, message
}

// freshOrAccepted is the naming controller's equalToAcceptedOrFresh.
func freshOrAccepted(requested, accepted string, used sets.Set[string]) error {
	if requested == accepted || !used.Has(requested) {
		return nil
	}
	return fmt.Errorf("%q is already in use", requested)
}

// Established sets crd's status as kube's naming and establishing controllers
// leave it once its names are accepted: acceptedNames = spec.names,
// NamesAccepted=True (NoConflicts) and Established=True
// (InitialNamesAccepted), with now as the transition time of a condition
// that changes, and the storage version in storedVersions. The server calls
// it after CheckNames accepted the names.
func Established(crd *apiextensionsv1.CustomResourceDefinition, now metav1.Time) {
	crd.Status.AcceptedNames = *crd.Spec.Names.DeepCopy()
	setCondition(crd, apiextensionsv1.NamesAccepted, reasonNoConflicts, messageNoConflicts, now)
	setCondition(crd, apiextensionsv1.Established, reasonInitialNamesAccepted, messageNamesAccepted, now)
	for _, v := range crd.Spec.Versions {
		if v.Storage {
			if !slices.Contains(crd.Status.StoredVersions, v.Name) {
				crd.Status.StoredVersions = append(crd.Status.StoredVersions, v.Name)
			}
			break
		}
	}
}

// setCondition sets a True condition as apihelpers.SetCRDCondition does, with
// an explicit clock.
func setCondition(crd *apiextensionsv1.CustomResourceDefinition, typ apiextensionsv1.CustomResourceDefinitionConditionType, reason, message string, now metav1.Time) {
	i := slices.IndexFunc(crd.Status.Conditions, func(c apiextensionsv1.CustomResourceDefinitionCondition) bool {
		return c.Type == typ
	})
	if i < 0 {
		crd.Status.Conditions = append(crd.Status.Conditions, apiextensionsv1.CustomResourceDefinitionCondition{Type: typ})
		i = len(crd.Status.Conditions) - 1
	}
	c := &crd.Status.Conditions[i]
	if c.Status != apiextensionsv1.ConditionTrue || c.LastTransitionTime.IsZero() {
		c.LastTransitionTime = now
	}
	c.Status, c.Reason, c.Message = apiextensionsv1.ConditionTrue, reason, message
}
