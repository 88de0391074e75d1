package kubeapi

// Validation of built-in kinds beyond their metadata: what kube-apiserver's
// strategies check on create and update for the kinds people write most,
// with kube's field paths and messages (k8s.io/kubernetes pkg/apis/*/validation,
// which Canopy cannot depend on). Covered:
//
//   - ConfigMap: data and binaryData keys, a key in both, the total size,
//     and the immutable flag.
//   - Deployment, ReplicaSet, StatefulSet, DaemonSet: replicas and the other
//     counts, the selector (required, valid, not empty, matching the
//     template's labels, immutable), the update strategy, and the pod
//     template.
//   - Job: counts, completion mode, restart policy, the pod template, and a
//     selector when the client sets one (the server does not generate
//     Jobs' selectors).
//   - Pod templates: labels and annotations; the pod spec's containers and
//     init containers (name, image, ports, env names, volume mounts, pull
//     and termination message policies, resources, probes), volumes (names
//     and exactly one source), restart and DNS policies, node selector,
//     service account, host and subdomain names.
//
// Not covered: Pods themselves, Services and the other kinds, the content of
// each volume source, security contexts, affinity, tolerations, topology
// spread constraints, and the rules that depend on feature gates.

import (
	"encoding/json"
	"fmt"
	"math"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"sync"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	apivalidation "k8s.io/apimachinery/pkg/api/validation"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	metav1validation "k8s.io/apimachinery/pkg/apis/meta/v1/validation"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// maxConfigMapSize is kube's bound on the data of a ConfigMap (MaxSecretSize).
const maxConfigMapSize = 1 << 20

// validateKind returns the errors kube's strategy reports for obj beyond
// its metadata: on create (old nil) or on update of the main resource.
// Kinds without such rules here return nil.
func validateKind(sv *served, obj, old *unstructured.Unstructured) field.ErrorList {
	if sv.crd != nil {
		return nil
	}
	switch sv.gvk() {
	case corev1.SchemeGroupVersion.WithKind("ConfigMap"):
		return validateConfigMap(obj, old)
	case appsv1.SchemeGroupVersion.WithKind("Deployment"):
		return validateTyped(obj, old, validateDeployment)
	case appsv1.SchemeGroupVersion.WithKind("ReplicaSet"):
		return validateTyped(obj, old, validateReplicaSet)
	case appsv1.SchemeGroupVersion.WithKind("StatefulSet"):
		return validateTyped(obj, old, validateStatefulSet)
	case appsv1.SchemeGroupVersion.WithKind("DaemonSet"):
		return validateTyped(obj, old, validateDaemonSet)
	case batchv1.SchemeGroupVersion.WithKind("Job"):
		return validateTyped(obj, old, validateJob)
	}
	return nil
}

// validateTyped decodes obj into its Go type and runs validate, with the
// fields of old's spec that must not change (nil on create). Objects reach
// it normalized, so decoding does not fail; if it does, the object is left
// to the checks that follow.
func validateTyped[T any](obj, old *unstructured.Unstructured, validate func(obj *T, old *immutableSpec) field.ErrorList) field.ErrorList {
	var o T
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(obj.Object, &o); err != nil {
		return nil
	}
	if old == nil {
		return validate(&o, nil)
	}
	var prev immutableSpec
	if spec, ok := old.Object["spec"].(map[string]any); ok {
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(spec, &prev); err != nil {
			return nil
		}
	}
	return validate(&o, &prev)
}

// immutableSpec holds the fields of the workloads' specs that an update
// may not change: an update decodes only these of the stored object.
type immutableSpec struct {
	Selector             *metav1.LabelSelector          `json:"selector"`
	VolumeClaimTemplates []corev1.PersistentVolumeClaim `json:"volumeClaimTemplates"`
	ServiceName          string                         `json:"serviceName"`
	PodManagementPolicy  appsv1.PodManagementPolicyType `json:"podManagementPolicy"`
	CompletionMode       *batchv1.CompletionMode        `json:"completionMode"`
	PodFailurePolicy     *batchv1.PodFailurePolicy      `json:"podFailurePolicy"`
	BackoffLimitPerIndex *int32                         `json:"backoffLimitPerIndex"`
	ManagedBy            *string                        `json:"managedBy"`
	SuccessPolicy        *batchv1.SuccessPolicy         `json:"successPolicy"`
}

// validateConfigMap works on the object as stored (data values are
// strings, binaryData values base64): ConfigMaps are the most written
// kind, and need no decoding into their Go type.
func validateConfigMap(cm, old *unstructured.Unstructured) field.ErrorList {
	var errs field.ErrorList
	data, _, _ := unstructured.NestedMap(cm.Object, "data")
	binary, _, _ := unstructured.NestedMap(cm.Object, "binaryData")
	if old != nil {
		if immutable, _, _ := unstructured.NestedBool(old.Object, "immutable"); immutable {
			if now, _, _ := unstructured.NestedBool(cm.Object, "immutable"); !now {
				errs = append(errs, field.Forbidden(field.NewPath("immutable"), "field is immutable when `immutable` is set"))
			}
			oldData, _, _ := unstructured.NestedMap(old.Object, "data")
			if !reflect.DeepEqual(data, oldData) {
				errs = append(errs, field.Forbidden(field.NewPath("data"), "field is immutable when `immutable` is set"))
			}
			oldBinary, _, _ := unstructured.NestedMap(old.Object, "binaryData")
			if !reflect.DeepEqual(binary, oldBinary) {
				errs = append(errs, field.Forbidden(field.NewPath("binaryData"), "field is immutable when `immutable` is set"))
			}
		}
	}
	total := 0
	for key, value := range data {
		for _, msg := range validation.IsConfigMapKey(key) {
			errs = append(errs, field.Invalid(field.NewPath("data").Key(key), key, msg))
		}
		if _, ok := binary[key]; ok {
			errs = append(errs, field.Invalid(field.NewPath("data").Key(key), key, "duplicate of key present in binaryData"))
		}
		s, _ := value.(string)
		total += len(s)
	}
	for key, value := range binary {
		for _, msg := range validation.IsConfigMapKey(key) {
			errs = append(errs, field.Invalid(field.NewPath("binaryData").Key(key), key, msg))
		}
		s, _ := value.(string)
		total += base64DecodedLen(s)
	}
	if total > maxConfigMapSize {
		errs = append(errs, field.TooLong(field.NewPath(""), "", maxConfigMapSize))
	}
	return errs
}

// base64DecodedLen is the length of the bytes a padded base64 string holds.
func base64DecodedLen(s string) int {
	n := len(s) / 4 * 3
	switch {
	case strings.HasSuffix(s, "=="):
		n -= 2
	case strings.HasSuffix(s, "="):
		n--
	}
	return n
}

// validateSelector checks a workload's required selector as kube's apps
// validation does (Deployment, ReplicaSet, StatefulSet): present, valid and
// not empty ("empty selector is invalid for "+kind). It returns the
// selector parsed, or nil with an Invalid error saying invalidMsg when it
// does not parse (then the template is not checked against it).
func validateSelector(sel *metav1.LabelSelector, path *field.Path, kind, invalidMsg string) (labels.Selector, field.ErrorList) {
	var errs field.ErrorList
	if sel == nil {
		errs = append(errs, field.Required(path, ""))
	} else {
		errs = append(errs, metav1validation.ValidateLabelSelector(sel, metav1validation.LabelSelectorValidationOptions{}, path)...)
		if len(sel.MatchLabels)+len(sel.MatchExpressions) == 0 {
			errs = append(errs, field.Invalid(path, sel, "empty selector is invalid for "+kind))
		}
	}
	selector, err := metav1.LabelSelectorAsSelector(sel)
	if err != nil {
		return nil, append(errs, field.Invalid(path, sel, invalidMsg))
	}
	return selector, errs
}

// validateTemplateForReplicas is kube's ValidatePodTemplateSpecForReplicaSet
// (Deployments and ReplicaSets): the selector must match the template's
// labels, and the pods must restart always.
func validateTemplateForReplicas(t *corev1.PodTemplateSpec, selector labels.Selector, path *field.Path) field.ErrorList {
	var errs field.ErrorList
	if !selector.Empty() && !selector.Matches(labels.Set(t.Labels)) {
		errs = append(errs, field.Invalid(path.Child("metadata", "labels"), t.Labels, "`selector` does not match template `labels`"))
	}
	errs = append(errs, validatePodTemplateSpec(t, path)...)
	// kube's message says ReplicaSet for Deployments too.
	return append(errs, validateRestartAlways(&t.Spec, path.Child("spec"), "ReplicaSet")...)
}

// validateRestartAlways is what the controllers that keep pods running
// (ReplicaSet, DaemonSet, StatefulSet) require of their template's spec: a
// restart policy Always and no active deadline.
func validateRestartAlways(spec *corev1.PodSpec, path *field.Path, kind string) field.ErrorList {
	var errs field.ErrorList
	if spec.RestartPolicy != corev1.RestartPolicyAlways {
		errs = append(errs, field.NotSupported(path.Child("restartPolicy"), spec.RestartPolicy, []string{string(corev1.RestartPolicyAlways)}))
	}
	if spec.ActiveDeadlineSeconds != nil {
		errs = append(errs, field.Forbidden(path.Child("activeDeadlineSeconds"), "activeDeadlineSeconds in "+kind+" is not Supported"))
	}
	return errs
}

func validateDeployment(d *appsv1.Deployment, old *immutableSpec) field.ErrorList {
	spec, path := &d.Spec, field.NewPath("spec")
	errs := apivalidation.ValidateNonnegativeField(int64(ptrValue(spec.Replicas)), path.Child("replicas"))
	selector, serrs := validateSelector(spec.Selector, path.Child("selector"), "deployment", "invalid label selector")
	errs = append(errs, serrs...)
	if selector != nil {
		errs = append(errs, validateTemplateForReplicas(&spec.Template, selector, path.Child("template"))...)
	}
	errs = append(errs, validateDeploymentStrategy(&spec.Strategy, path.Child("strategy"))...)
	errs = append(errs, apivalidation.ValidateNonnegativeField(int64(spec.MinReadySeconds), path.Child("minReadySeconds"))...)
	if spec.RevisionHistoryLimit != nil {
		errs = append(errs, apivalidation.ValidateNonnegativeField(int64(*spec.RevisionHistoryLimit), path.Child("revisionHistoryLimit"))...)
	}
	if spec.ProgressDeadlineSeconds != nil {
		errs = append(errs, apivalidation.ValidateNonnegativeField(int64(*spec.ProgressDeadlineSeconds), path.Child("progressDeadlineSeconds"))...)
		if *spec.ProgressDeadlineSeconds <= spec.MinReadySeconds {
			errs = append(errs, field.Invalid(path.Child("progressDeadlineSeconds"), spec.ProgressDeadlineSeconds, "must be greater than minReadySeconds"))
		}
	}
	if old != nil {
		errs = append(errs, apivalidation.ValidateImmutableField(spec.Selector, old.Selector, path.Child("selector"))...)
	}
	return errs
}

func validateDeploymentStrategy(s *appsv1.DeploymentStrategy, path *field.Path) field.ErrorList {
	var errs field.ErrorList
	switch s.Type {
	case appsv1.RecreateDeploymentStrategyType:
		if s.RollingUpdate != nil {
			errs = append(errs, field.Forbidden(path.Child("rollingUpdate"), "may not be specified when strategy `type` is 'Recreate'"))
		}
	case appsv1.RollingUpdateDeploymentStrategyType:
		if s.RollingUpdate == nil {
			errs = append(errs, field.Required(path.Child("rollingUpdate"), "this should be defaulted and never be nil"))
			break
		}
		ru, rp := s.RollingUpdate, path.Child("rollingUpdate")
		unavailable, surge := intOrZero(ru.MaxUnavailable), intOrZero(ru.MaxSurge)
		errs = append(errs, validatePositiveIntOrPercent(unavailable, rp.Child("maxUnavailable"))...)
		errs = append(errs, validatePositiveIntOrPercent(surge, rp.Child("maxSurge"))...)
		if intOrPercentValue(unavailable) == 0 && intOrPercentValue(surge) == 0 {
			errs = append(errs, field.Invalid(rp.Child("maxUnavailable"), unavailable, "may not be 0 when `maxSurge` is 0"))
		}
		errs = append(errs, notMoreThan100Percent(unavailable, rp.Child("maxUnavailable"))...)
	default:
		errs = append(errs, field.NotSupported(path, internalForm(*s), []string{string(appsv1.RecreateDeploymentStrategyType), string(appsv1.RollingUpdateDeploymentStrategyType)}))
	}
	return errs
}

func validateReplicaSet(rs *appsv1.ReplicaSet, old *immutableSpec) field.ErrorList {
	spec, path := &rs.Spec, field.NewPath("spec")
	errs := apivalidation.ValidateNonnegativeField(int64(ptrValue(spec.Replicas)), path.Child("replicas"))
	errs = append(errs, apivalidation.ValidateNonnegativeField(int64(spec.MinReadySeconds), path.Child("minReadySeconds"))...)
	// kube's message says deployment for ReplicaSets too.
	selector, serrs := validateSelector(spec.Selector, path.Child("selector"), "deployment", "invalid label selector")
	errs = append(errs, serrs...)
	if selector != nil {
		errs = append(errs, validateTemplateForReplicas(&spec.Template, selector, path.Child("template"))...)
	}
	if old != nil {
		errs = append(errs, apivalidation.ValidateImmutableField(spec.Selector, old.Selector, path.Child("selector"))...)
	}
	return errs
}

func validateDaemonSet(ds *appsv1.DaemonSet, old *immutableSpec) field.ErrorList {
	spec, path := &ds.Spec, field.NewPath("spec")
	var errs field.ErrorList
	if old != nil {
		errs = append(errs, apivalidation.ValidateImmutableField(spec.Selector, old.Selector, path.Child("selector"))...)
	}
	errs = append(errs, metav1validation.ValidateLabelSelector(spec.Selector, metav1validation.LabelSelectorValidationOptions{}, path.Child("selector"))...)
	if selector, err := metav1.LabelSelectorAsSelector(spec.Selector); err == nil && !selector.Matches(labels.Set(spec.Template.Labels)) {
		errs = append(errs, field.Invalid(path.Child("template", "metadata", "labels"), spec.Template.Labels, "`selector` does not match template `labels`"))
	}
	if spec.Selector != nil && len(spec.Selector.MatchLabels)+len(spec.Selector.MatchExpressions) == 0 {
		errs = append(errs, field.Invalid(path.Child("selector"), spec.Selector, "empty selector is invalid for daemonset"))
	}
	errs = append(errs, validatePodTemplateSpec(&spec.Template, path.Child("template"))...)
	errs = append(errs, validateRestartAlways(&spec.Template.Spec, path.Child("template", "spec"), "DaemonSet")...)
	errs = append(errs, apivalidation.ValidateNonnegativeField(int64(spec.MinReadySeconds), path.Child("minReadySeconds"))...)
	us, up := &spec.UpdateStrategy, path.Child("updateStrategy")
	switch us.Type {
	case appsv1.OnDeleteDaemonSetStrategyType:
	case appsv1.RollingUpdateDaemonSetStrategyType:
		if us.RollingUpdate == nil {
			errs = append(errs, field.Required(up.Child("rollingUpdate"), ""))
			break
		}
		rp := up.Child("rollingUpdate")
		unavailable, surge := intOrZero(us.RollingUpdate.MaxUnavailable), intOrZero(us.RollingUpdate.MaxSurge)
		errs = append(errs, validatePositiveIntOrPercent(unavailable, rp.Child("maxUnavailable"))...)
		errs = append(errs, validatePositiveIntOrPercent(surge, rp.Child("maxSurge"))...)
		errs = append(errs, notMoreThan100Percent(unavailable, rp.Child("maxUnavailable"))...)
		errs = append(errs, notMoreThan100Percent(surge, rp.Child("maxSurge"))...)
		hasUnavailable, hasSurge := intOrPercentValue(unavailable) != 0, intOrPercentValue(surge) != 0
		switch {
		case hasUnavailable && hasSurge:
			errs = append(errs, field.Invalid(rp.Child("maxSurge"), surge, "may not be set when maxUnavailable is non-zero"))
		case !hasUnavailable && !hasSurge:
			errs = append(errs, field.Required(rp.Child("maxUnavailable"), "cannot be 0 when maxSurge is 0"))
		}
	default:
		errs = append(errs, field.NotSupported(up, internalForm(*us), []string{string(appsv1.RollingUpdateDaemonSetStrategyType), string(appsv1.OnDeleteDaemonSetStrategyType)}))
	}
	if spec.RevisionHistoryLimit != nil {
		errs = append(errs, apivalidation.ValidateNonnegativeField(int64(*spec.RevisionHistoryLimit), path.Child("revisionHistoryLimit"))...)
	}
	return errs
}

func validateStatefulSet(ss *appsv1.StatefulSet, old *immutableSpec) field.ErrorList {
	spec, path := &ss.Spec, field.NewPath("spec")
	var errs field.ErrorList
	switch spec.PodManagementPolicy {
	case "":
		errs = append(errs, field.Required(path.Child("podManagementPolicy"), ""))
	case appsv1.OrderedReadyPodManagement, appsv1.ParallelPodManagement:
	default:
		errs = append(errs, field.Invalid(path.Child("podManagementPolicy"), spec.PodManagementPolicy, "must be 'OrderedReady' or 'Parallel'"))
	}
	us, up := &spec.UpdateStrategy, path.Child("updateStrategy")
	switch us.Type {
	case "":
		errs = append(errs, field.Required(up, ""))
	case appsv1.OnDeleteStatefulSetStrategyType:
		if us.RollingUpdate != nil {
			errs = append(errs, field.Invalid(up.Child("rollingUpdate"), internalForm(*us.RollingUpdate), "only allowed for updateStrategy 'RollingUpdate'"))
		}
	case appsv1.RollingUpdateStatefulSetStrategyType:
		if ru := us.RollingUpdate; ru != nil {
			rp := up.Child("rollingUpdate")
			errs = append(errs, apivalidation.ValidateNonnegativeField(int64(ptrValue(ru.Partition)), rp.Child("partition"))...)
			if ru.MaxUnavailable != nil {
				mp := rp.Child("maxUnavailable")
				errs = append(errs, validatePositiveIntOrPercent(*ru.MaxUnavailable, mp)...)
				if intOrPercentValue(*ru.MaxUnavailable) == 0 {
					errs = append(errs, field.Invalid(mp, *ru.MaxUnavailable, "cannot be 0"))
				}
				errs = append(errs, notMoreThan100Percent(*ru.MaxUnavailable, mp)...)
			}
		}
	default:
		errs = append(errs, field.Invalid(up, internalForm(*us), "must be 'RollingUpdate' or 'OnDelete'"))
	}
	if p := spec.PersistentVolumeClaimRetentionPolicy; p != nil {
		pp := path.Child("persistentVolumeClaimRetentionPolicy")
		for _, c := range []struct {
			name  string
			value appsv1.PersistentVolumeClaimRetentionPolicyType
		}{{"whenDeleted", p.WhenDeleted}, {"whenScaled", p.WhenScaled}} {
			switch c.value {
			case appsv1.RetainPersistentVolumeClaimRetentionPolicyType, appsv1.DeletePersistentVolumeClaimRetentionPolicyType:
			default:
				errs = append(errs, field.NotSupported(pp.Child(c.name), c.value, []string{string(appsv1.RetainPersistentVolumeClaimRetentionPolicyType), string(appsv1.DeletePersistentVolumeClaimRetentionPolicyType)}))
			}
		}
	}
	errs = append(errs, apivalidation.ValidateNonnegativeField(int64(ptrValue(spec.Replicas)), path.Child("replicas"))...)
	errs = append(errs, apivalidation.ValidateNonnegativeField(int64(spec.MinReadySeconds), path.Child("minReadySeconds"))...)
	if spec.Ordinals != nil {
		errs = append(errs, apivalidation.ValidateNonnegativeField(int64(spec.Ordinals.Start), path.Child("ordinals.start"))...)
	}
	if spec.ServiceName != "" {
		errs = append(errs, dns1123Label(spec.ServiceName, path.Child("serviceName"))...)
	}
	selector, serrs := validateSelector(spec.Selector, path.Child("selector"), "statefulset", "")
	errs = append(errs, serrs...)
	if selector != nil {
		// The controller sets the pods' hostname and subdomain, and adds a
		// volume per claim template: the template is checked as it will be.
		t := spec.Template.DeepCopy()
		t.Spec.Hostname, t.Spec.Subdomain = "", ""
		if len(spec.VolumeClaimTemplates) > 0 {
			claims := map[string]bool{}
			var vols []corev1.Volume
			for _, c := range spec.VolumeClaimTemplates {
				if !claims[c.Name] {
					claims[c.Name] = true
					vols = append(vols, corev1.Volume{Name: c.Name, VolumeSource: corev1.VolumeSource{
						PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: c.Name}}})
				}
			}
			for _, v := range t.Spec.Volumes {
				if !claims[v.Name] {
					vols = append(vols, v)
				}
			}
			t.Spec.Volumes = vols
		}
		tp := path.Child("template")
		if !selector.Empty() && !selector.Matches(labels.Set(t.Labels)) {
			errs = append(errs, field.Invalid(tp.Child("metadata", "labels"), t.Labels, "`selector` does not match template `labels`"))
		}
		errs = append(errs, validatePodTemplateSpec(t, tp)...)
		errs = append(errs, metav1validation.ValidateLabels(t.Labels, tp.Child("labels"))...)
		errs = append(errs, apivalidation.ValidateAnnotations(t.Annotations, tp.Child("annotations"))...)
	}
	errs = append(errs, validateRestartAlways(&spec.Template.Spec, path.Child("template", "spec"), "StatefulSet")...)
	if old != nil {
		errs = append(errs, apivalidation.ValidateImmutableField(spec.Selector, old.Selector, path.Child("selector"))...)
		errs = append(errs, apivalidation.ValidateImmutableField(spec.VolumeClaimTemplates, old.VolumeClaimTemplates, path.Child("volumeClaimTemplates"))...)
		errs = append(errs, apivalidation.ValidateImmutableField(spec.ServiceName, old.ServiceName, path.Child("serviceName"))...)
		errs = append(errs, apivalidation.ValidateImmutableField(spec.PodManagementPolicy, old.PodManagementPolicy, path.Child("podManagementPolicy"))...)
	}
	return errs
}

func validateJob(j *batchv1.Job, old *immutableSpec) field.ErrorList {
	spec, path := &j.Spec, field.NewPath("spec")
	var errs field.ErrorList
	for _, c := range []struct {
		name  string
		value *int32
	}{
		{"parallelism", spec.Parallelism}, {"completions", spec.Completions},
	} {
		if c.value != nil {
			errs = append(errs, apivalidation.ValidateNonnegativeField(int64(*c.value), path.Child(c.name))...)
		}
	}
	if spec.ActiveDeadlineSeconds != nil {
		errs = append(errs, apivalidation.ValidateNonnegativeField(*spec.ActiveDeadlineSeconds, path.Child("activeDeadlineSeconds"))...)
	}
	for _, c := range []struct {
		name  string
		value *int32
	}{
		{"backoffLimit", spec.BackoffLimit}, {"ttlSecondsAfterFinished", spec.TTLSecondsAfterFinished},
		{"backoffLimitPerIndex", spec.BackoffLimitPerIndex}, {"maxFailedIndexes", spec.MaxFailedIndexes},
	} {
		if c.value != nil {
			errs = append(errs, apivalidation.ValidateNonnegativeField(int64(*c.value), path.Child(c.name))...)
		}
	}
	if spec.MaxFailedIndexes != nil && spec.BackoffLimitPerIndex == nil {
		errs = append(errs, field.Required(path.Child("backoffLimitPerIndex"), "when maxFailedIndexes is specified"))
	}
	indexed := spec.CompletionMode != nil && *spec.CompletionMode == batchv1.IndexedCompletion
	if m := spec.CompletionMode; m != nil {
		if *m != batchv1.NonIndexedCompletion && *m != batchv1.IndexedCompletion {
			errs = append(errs, field.NotSupported(path.Child("completionMode"), m, []string{string(batchv1.NonIndexedCompletion), string(batchv1.IndexedCompletion)}))
		}
		if indexed && spec.Completions == nil {
			errs = append(errs, field.Required(path.Child("completions"), "when completion mode is Indexed"))
		}
	}
	if !indexed {
		if spec.BackoffLimitPerIndex != nil {
			errs = append(errs, field.Invalid(path.Child("backoffLimitPerIndex"), *spec.BackoffLimitPerIndex, "requires indexed completion mode"))
		}
		if spec.MaxFailedIndexes != nil {
			errs = append(errs, field.Invalid(path.Child("maxFailedIndexes"), *spec.MaxFailedIndexes, "requires indexed completion mode"))
		}
	}
	errs = append(errs, validatePodTemplateSpec(&spec.Template, path.Child("template"))...)
	switch rp := spec.Template.Spec.RestartPolicy; {
	case rp == corev1.RestartPolicyAlways || rp == "":
		errs = append(errs, field.Required(path.Child("template", "spec", "restartPolicy"), `valid values: "OnFailure", "Never"`))
	case rp != corev1.RestartPolicyOnFailure && rp != corev1.RestartPolicyNever:
		errs = append(errs, field.NotSupported(path.Child("template", "spec", "restartPolicy"), rp, []string{string(corev1.RestartPolicyOnFailure), string(corev1.RestartPolicyNever)}))
	case spec.PodFailurePolicy != nil && rp != corev1.RestartPolicyNever:
		errs = append(errs, field.Invalid(path.Child("template", "spec", "restartPolicy"), rp, `only "Never" is supported when podFailurePolicy is specified`))
	}
	// kube generates the selector of a Job (and its pods' labels); this
	// server does not, so only a selector the client set is checked.
	if spec.Selector != nil {
		errs = append(errs, metav1validation.ValidateLabelSelector(spec.Selector, metav1validation.LabelSelectorValidationOptions{}, path.Child("selector"))...)
		if selector, err := metav1.LabelSelectorAsSelector(spec.Selector); err == nil && !selector.Matches(labels.Set(spec.Template.Labels)) {
			errs = append(errs, field.Invalid(path.Child("template", "metadata", "labels"), spec.Template.Labels, "`selector` does not match template `labels`"))
		}
	}
	if old != nil {
		errs = append(errs, apivalidation.ValidateImmutableField(spec.Selector, old.Selector, path.Child("selector"))...)
		errs = append(errs, apivalidation.ValidateImmutableField(spec.CompletionMode, old.CompletionMode, path.Child("completionMode"))...)
		errs = append(errs, apivalidation.ValidateImmutableField(spec.PodFailurePolicy, old.PodFailurePolicy, path.Child("podFailurePolicy"))...)
		errs = append(errs, apivalidation.ValidateImmutableField(spec.BackoffLimitPerIndex, old.BackoffLimitPerIndex, path.Child("backoffLimitPerIndex"))...)
		errs = append(errs, apivalidation.ValidateImmutableField(spec.ManagedBy, old.ManagedBy, path.Child("managedBy"))...)
		errs = append(errs, apivalidation.ValidateImmutableField(spec.SuccessPolicy, old.SuccessPolicy, path.Child("successPolicy"))...)
	}
	return errs
}

// validatePodTemplateSpec is kube's ValidatePodTemplateSpec, for the checks
// listed at the top of this file. Note kube's paths: the template's labels
// are "template.labels", not "template.metadata.labels".
func validatePodTemplateSpec(t *corev1.PodTemplateSpec, path *field.Path) field.ErrorList {
	errs := metav1validation.ValidateLabels(t.Labels, path.Child("labels"))
	errs = append(errs, apivalidation.ValidateAnnotations(t.Annotations, path.Child("annotations"))...)
	errs = append(errs, validatePodSpec(&t.Spec, path.Child("spec"))...)
	if len(t.Spec.EphemeralContainers) > 0 {
		errs = append(errs, field.Forbidden(path.Child("spec", "ephemeralContainers"), "ephemeral containers not allowed in pod template"))
	}
	return errs
}

func validatePodSpec(spec *corev1.PodSpec, path *field.Path) field.ErrorList {
	var errs field.ErrorList
	if spec.TerminationGracePeriodSeconds == nil {
		errs = append(errs, field.Required(path.Child("terminationGracePeriodSeconds"), ""))
	}
	vols, verrs := validateVolumes(spec.Volumes, path.Child("volumes"))
	errs = append(errs, verrs...)
	errs = append(errs, validateContainers(spec.Containers, vols, path.Child("containers"))...)
	errs = append(errs, validateInitContainers(spec.InitContainers, spec.Containers, vols, path.Child("initContainers"))...)
	errs = append(errs, oneOf(path.Child("restartPolicy"), string(spec.RestartPolicy), false,
		string(corev1.RestartPolicyAlways), string(corev1.RestartPolicyOnFailure), string(corev1.RestartPolicyNever))...)
	errs = append(errs, oneOf(path.Child("dnsPolicy"), string(spec.DNSPolicy), false,
		string(corev1.DNSClusterFirstWithHostNet), string(corev1.DNSClusterFirst), string(corev1.DNSDefault), string(corev1.DNSNone))...)
	errs = append(errs, metav1validation.ValidateLabels(spec.NodeSelector, path.Child("nodeSelector"))...)
	if spec.ServiceAccountName != "" {
		for _, msg := range apivalidation.ValidateServiceAccountName(spec.ServiceAccountName, false) {
			errs = append(errs, field.Invalid(path.Child("serviceAccountName"), spec.ServiceAccountName, msg))
		}
	}
	if spec.NodeName != "" {
		for _, msg := range apivalidation.NameIsDNSSubdomain(spec.NodeName, false) {
			errs = append(errs, field.Invalid(path.Child("nodeName"), spec.NodeName, msg))
		}
	}
	if s := spec.ActiveDeadlineSeconds; s != nil && (*s < 1 || *s > math.MaxInt32) {
		errs = append(errs, field.Invalid(path.Child("activeDeadlineSeconds"), *s, validation.InclusiveRangeError(1, math.MaxInt32)))
	}
	if spec.Hostname != "" {
		errs = append(errs, dns1123Label(spec.Hostname, path.Child("hostname"))...)
	}
	if spec.Subdomain != "" {
		errs = append(errs, dns1123Label(spec.Subdomain, path.Child("subdomain"))...)
	}
	return errs
}

// volumeSources are the fields of VolumeSource in the order kube checks
// them (validateVolumeSource): a second one set is the one refused.
var volumeSources = []string{
	"emptyDir", "hostPath", "gitRepo", "gcePersistentDisk", "awsElasticBlockStore", "secret", "nfs",
	"iscsi", "glusterfs", "flocker", "persistentVolumeClaim", "rbd", "cinder", "cephfs", "quobyte",
	"downwardAPI", "fc", "flexVolume", "configMap", "azureFile", "vsphereVolume", "photonPersistentDisk",
	"portworxVolume", "azureDisk", "storageos", "projected", "scaleIO", "csi", "ephemeral", "image",
}

// volumeSourceFields are the indices of VolumeSource's fields in the
// order of volumeSources, found once by their json names.
var volumeSourceFields = sync.OnceValue(func() []int {
	byName := map[string]int{}
	t := reflect.TypeFor[corev1.VolumeSource]()
	for i := range t.NumField() {
		name, _, _ := strings.Cut(t.Field(i).Tag.Get("json"), ",")
		byName[name] = i
	}
	out := make([]int, len(volumeSources))
	for i, name := range volumeSources {
		out[i] = byName[name]
	}
	return out
})

func validateVolumes(volumes []corev1.Volume, path *field.Path) (map[string]bool, field.ErrorList) {
	var errs field.ErrorList
	names := map[string]bool{}
	for i, vol := range volumes {
		idx := path.Index(i)
		var el field.ErrorList
		src, n := reflect.ValueOf(&vol.VolumeSource).Elem(), 0
		for i, f := range volumeSourceFields() {
			if src.Field(f).IsNil() {
				continue
			}
			if n++; n > 1 {
				el = append(el, field.Forbidden(idx.Child(volumeSources[i]), "may not specify more than 1 volume type"))
			}
		}
		if n == 0 {
			el = append(el, field.Required(idx, "must specify a volume type"))
		}
		if vol.Name == "" {
			el = append(el, field.Required(idx.Child("name"), ""))
		} else {
			el = append(el, dns1123Label(vol.Name, idx.Child("name"))...)
		}
		if names[vol.Name] {
			el = append(el, field.Duplicate(idx.Child("name"), vol.Name))
		}
		if len(el) == 0 {
			names[vol.Name] = true
		}
		errs = append(errs, el...)
	}
	return names, errs
}

func validateContainers(containers []corev1.Container, vols map[string]bool, path *field.Path) field.ErrorList {
	if len(containers) == 0 {
		return field.ErrorList{field.Required(path, "")}
	}
	var errs field.ErrorList
	names := sets.Set[string]{}
	for i := range containers {
		c, idx := &containers[i], path.Index(i)
		errs = append(errs, validateContainerCommon(c, vols, idx)...)
		if names.Has(c.Name) {
			errs = append(errs, field.Duplicate(idx.Child("name"), c.Name))
		} else {
			names.Insert(c.Name)
		}
		errs = append(errs, validateProbe(c.LivenessProbe, idx.Child("livenessProbe"), true)...)
		errs = append(errs, validateProbe(c.ReadinessProbe, idx.Child("readinessProbe"), false)...)
		if p := c.ReadinessProbe; p != nil && p.TerminationGracePeriodSeconds != nil {
			errs = append(errs, field.Invalid(idx.Child("readinessProbe", "terminationGracePeriodSeconds"), p.TerminationGracePeriodSeconds, "must not be set for readinessProbes"))
		}
		errs = append(errs, validateProbe(c.StartupProbe, idx.Child("startupProbe"), true)...)
	}
	return errs
}

func validateInitContainers(containers, regular []corev1.Container, vols map[string]bool, path *field.Path) field.ErrorList {
	var errs field.ErrorList
	names := sets.Set[string]{}
	for _, c := range regular {
		names.Insert(c.Name)
	}
	for i := range containers {
		c, idx := &containers[i], path.Index(i)
		errs = append(errs, validateContainerCommon(c, vols, idx)...)
		always := c.RestartPolicy != nil && *c.RestartPolicy == corev1.ContainerRestartPolicyAlways
		if names.Has(c.Name) {
			errs = append(errs, field.Duplicate(idx.Child("name"), c.Name))
		} else if c.Name != "" {
			names.Insert(c.Name)
		}
		if always {
			errs = append(errs, validateProbe(c.LivenessProbe, idx.Child("livenessProbe"), true)...)
			errs = append(errs, validateProbe(c.ReadinessProbe, idx.Child("readinessProbe"), false)...)
			errs = append(errs, validateProbe(c.StartupProbe, idx.Child("startupProbe"), true)...)
			continue
		}
		const msg = "may not be set for init containers without restartPolicy=Always"
		if c.Lifecycle != nil {
			errs = append(errs, field.Forbidden(idx.Child("lifecycle"), msg))
		}
		if c.LivenessProbe != nil {
			errs = append(errs, field.Forbidden(idx.Child("livenessProbe"), msg))
		}
		if c.ReadinessProbe != nil {
			errs = append(errs, field.Forbidden(idx.Child("readinessProbe"), msg))
		}
		if c.StartupProbe != nil {
			errs = append(errs, field.Forbidden(idx.Child("startupProbe"), msg))
		}
	}
	return errs
}

func validateContainerCommon(c *corev1.Container, vols map[string]bool, path *field.Path) field.ErrorList {
	var errs field.ErrorList
	if c.Name == "" {
		errs = append(errs, field.Required(path.Child("name"), ""))
	} else {
		errs = append(errs, dns1123Label(c.Name, path.Child("name"))...)
	}
	if c.Image == "" {
		errs = append(errs, field.Required(path.Child("image"), ""))
	}
	errs = append(errs, oneOf(path.Child("terminationMessagePolicy"), string(c.TerminationMessagePolicy), false,
		string(corev1.TerminationMessageReadFile), string(corev1.TerminationMessageFallbackToLogsOnError))...)
	errs = append(errs, validateContainerPorts(c.Ports, path.Child("ports"))...)
	for i, ev := range c.Env {
		idx := path.Child("env").Index(i)
		if ev.Name == "" {
			errs = append(errs, field.Required(idx.Child("name"), ""))
			continue
		}
		for _, msg := range validation.IsRelaxedEnvVarName(ev.Name) {
			errs = append(errs, field.Invalid(idx.Child("name"), ev.Name, msg))
		}
	}
	mounts := sets.New[string]()
	for i, m := range c.VolumeMounts {
		idx := path.Child("volumeMounts").Index(i)
		if m.Name == "" {
			errs = append(errs, field.Required(idx.Child("name"), ""))
		}
		if !vols[m.Name] {
			errs = append(errs, field.NotFound(idx.Child("name"), m.Name))
		}
		if m.MountPath == "" {
			errs = append(errs, field.Required(idx.Child("mountPath"), ""))
		}
		if mounts.Has(m.MountPath) {
			errs = append(errs, field.Invalid(idx.Child("mountPath"), m.MountPath, "must be unique"))
		}
		mounts.Insert(m.MountPath)
	}
	// kube lists the supported pull policies sorted.
	errs = append(errs, oneOf(path.Child("imagePullPolicy"), string(c.ImagePullPolicy), true,
		string(corev1.PullAlways), string(corev1.PullIfNotPresent), string(corev1.PullNever))...)
	errs = append(errs, validateResourceRequirements(&c.Resources, path.Child("resources"))...)
	return errs
}

// supportedPortProtocols, sorted as kube lists them.
var supportedPortProtocols = []string{string(corev1.ProtocolSCTP), string(corev1.ProtocolTCP), string(corev1.ProtocolUDP)}

func validateContainerPorts(ports []corev1.ContainerPort, path *field.Path) field.ErrorList {
	var errs field.ErrorList
	names := sets.Set[string]{}
	for i, p := range ports {
		idx := path.Index(i)
		if p.Name != "" {
			if msgs := validation.IsValidPortName(p.Name); len(msgs) > 0 {
				for _, msg := range msgs {
					errs = append(errs, field.Invalid(idx.Child("name"), p.Name, msg))
				}
			} else if names.Has(p.Name) {
				errs = append(errs, field.Duplicate(idx.Child("name"), p.Name))
			} else {
				names.Insert(p.Name)
			}
		}
		if p.ContainerPort == 0 {
			errs = append(errs, field.Required(idx.Child("containerPort"), ""))
		} else {
			for _, msg := range validation.IsValidPortNum(int(p.ContainerPort)) {
				errs = append(errs, field.Invalid(idx.Child("containerPort"), p.ContainerPort, msg))
			}
		}
		if p.HostPort != 0 {
			for _, msg := range validation.IsValidPortNum(int(p.HostPort)) {
				errs = append(errs, field.Invalid(idx.Child("hostPort"), p.HostPort, msg))
			}
		}
		if p.Protocol == "" {
			errs = append(errs, field.Required(idx.Child("protocol"), ""))
		} else if !slices.Contains(supportedPortProtocols, string(p.Protocol)) {
			errs = append(errs, field.NotSupported(idx.Child("protocol"), p.Protocol, supportedPortProtocols))
		}
	}
	return errs
}

// validateResourceRequirements checks that quantities are not negative and
// that requests fit the limits (equal them for resources that cannot be
// overcommitted: extended resources and huge pages).
func validateResourceRequirements(r *corev1.ResourceRequirements, path *field.Path) field.ErrorList {
	var errs field.ErrorList
	limPath, reqPath := path.Child("limits"), path.Child("requests")
	for _, name := range sortedResourceNames(r.Limits) {
		q := r.Limits[name]
		errs = append(errs, nonNegativeQuantity(q, limPath.Key(string(name)))...)
	}
	for _, name := range sortedResourceNames(r.Requests) {
		q := r.Requests[name]
		errs = append(errs, nonNegativeQuantity(q, reqPath.Key(string(name)))...)
		limit, ok := r.Limits[name]
		switch {
		case ok && q.Cmp(limit) != 0 && !overcommitAllowed(name):
			errs = append(errs, field.Invalid(reqPath, q.String(), fmt.Sprintf("must be equal to %s limit of %s", name, limit.String())))
		case ok && q.Cmp(limit) > 0:
			errs = append(errs, field.Invalid(reqPath, q.String(), fmt.Sprintf("must be less than or equal to %s limit of %s", name, limit.String())))
		case !ok && !overcommitAllowed(name):
			errs = append(errs, field.Required(limPath, "Limit must be set for non overcommitable resources"))
		}
	}
	return errs
}

func sortedResourceNames(l corev1.ResourceList) []corev1.ResourceName {
	return sets.List(sets.KeySet(l))
}

func nonNegativeQuantity(q resource.Quantity, path *field.Path) field.ErrorList {
	if q.Cmp(resource.Quantity{}) < 0 {
		return field.ErrorList{field.Invalid(path, q.String(), "must be greater than or equal to 0")}
	}
	return nil
}

// overcommitAllowed: native resources (no domain, or a kubernetes.io one)
// but huge pages.
func overcommitAllowed(name corev1.ResourceName) bool {
	s := string(name)
	if strings.HasPrefix(s, corev1.ResourceHugePagesPrefix) {
		return false
	}
	return !strings.Contains(s, "/") || strings.Contains(s, corev1.ResourceDefaultNamespacePrefix)
}

// validateProbe: one handler, counts not negative, and (liveness and
// startup probes) a success threshold of 1.
func validateProbe(p *corev1.Probe, path *field.Path, successOne bool) field.ErrorList {
	if p == nil {
		return nil
	}
	var errs field.ErrorList
	n := 0
	for _, h := range []struct {
		name string
		set  bool
	}{{"exec", p.Exec != nil}, {"httpGet", p.HTTPGet != nil}, {"tcpSocket", p.TCPSocket != nil}, {"grpc", p.GRPC != nil}} {
		if !h.set {
			continue
		}
		if n++; n > 1 {
			errs = append(errs, field.Forbidden(path.Child(h.name), "may not specify more than 1 handler type"))
		}
	}
	if n == 0 {
		errs = append(errs, field.Required(path, "must specify a handler type"))
	}
	for _, c := range []struct {
		name  string
		value int32
	}{
		{"initialDelaySeconds", p.InitialDelaySeconds}, {"timeoutSeconds", p.TimeoutSeconds}, {"periodSeconds", p.PeriodSeconds},
		{"successThreshold", p.SuccessThreshold}, {"failureThreshold", p.FailureThreshold},
	} {
		errs = append(errs, apivalidation.ValidateNonnegativeField(int64(c.value), path.Child(c.name))...)
	}
	if g := p.TerminationGracePeriodSeconds; g != nil && *g <= 0 {
		errs = append(errs, field.Invalid(path.Child("terminationGracePeriodSeconds"), *g, "must be greater than 0"))
	}
	if successOne && p.SuccessThreshold != 1 {
		errs = append(errs, field.Invalid(path.Child("successThreshold"), p.SuccessThreshold, "must be 1"))
	}
	return errs
}

// oneOf is kube's check of an enumerated string: Required when empty,
// NotSupported (listing the values, sorted if sorted) otherwise.
func oneOf(path *field.Path, value string, sorted bool, valid ...string) field.ErrorList {
	if value == "" {
		return field.ErrorList{field.Required(path, "")}
	}
	for _, v := range valid {
		if v == value {
			return nil
		}
	}
	if sorted {
		valid = sets.List(sets.New(valid...))
	}
	return field.ErrorList{field.NotSupported(path, value, valid)}
}

func dns1123Label(value string, path *field.Path) field.ErrorList {
	var errs field.ErrorList
	for _, msg := range validation.IsDNS1123Label(value) {
		errs = append(errs, field.Invalid(path, value, msg))
	}
	return errs
}

func validatePositiveIntOrPercent(v intstr.IntOrString, path *field.Path) field.ErrorList {
	var errs field.ErrorList
	switch v.Type {
	case intstr.String:
		for _, msg := range validation.IsValidPercent(v.StrVal) {
			errs = append(errs, field.Invalid(path, v, msg))
		}
	case intstr.Int:
		errs = append(errs, apivalidation.ValidateNonnegativeField(int64(v.IntValue()), path)...)
	default:
		errs = append(errs, field.Invalid(path, v, "must be an integer or percentage (e.g '5%%')"))
	}
	return errs
}

func percentValue(v intstr.IntOrString) (int, bool) {
	if v.Type != intstr.String || len(validation.IsValidPercent(v.StrVal)) != 0 {
		return 0, false
	}
	n, _ := strconv.Atoi(v.StrVal[:len(v.StrVal)-1])
	return n, true
}

func intOrPercentValue(v intstr.IntOrString) int {
	if n, ok := percentValue(v); ok {
		return n
	}
	return v.IntValue()
}

func notMoreThan100Percent(v intstr.IntOrString, path *field.Path) field.ErrorList {
	if n, ok := percentValue(v); ok && n > 100 {
		return field.ErrorList{field.Invalid(path, v, "must not be greater than 100%")}
	}
	return nil
}

func intOrZero(v *intstr.IntOrString) intstr.IntOrString {
	if v == nil {
		return intstr.FromInt32(0)
	}
	return *v
}

func ptrValue[T any](p *T) T {
	var zero T
	if p == nil {
		return zero
	}
	return *p
}

// internalForm renders a struct the way kube's messages show its internal
// types, which have no json tags: Go field names, in field order. Values
// that marshal themselves (quantities, int-or-strings, times) keep their
// JSON.
func internalForm(v any) json.RawMessage {
	return internalValue(reflect.ValueOf(v))
}

var jsonMarshaler = reflect.TypeFor[json.Marshaler]()

func internalValue(v reflect.Value) json.RawMessage {
	if !v.IsValid() {
		return json.RawMessage("null")
	}
	switch v.Kind() {
	case reflect.Pointer, reflect.Interface:
		if v.IsNil() {
			return json.RawMessage("null")
		}
		return internalValue(v.Elem())
	case reflect.Struct:
		if reflect.PointerTo(v.Type()).Implements(jsonMarshaler) {
			p := reflect.New(v.Type())
			p.Elem().Set(v)
			b, _ := json.Marshal(p.Interface())
			return b
		}
		var b strings.Builder
		b.WriteByte('{')
		for i := range v.NumField() {
			f := v.Type().Field(i)
			if !f.IsExported() {
				continue
			}
			if b.Len() > 1 {
				b.WriteByte(',')
			}
			name, _ := json.Marshal(f.Name)
			b.Write(name)
			b.WriteByte(':')
			b.Write(internalValue(v.Field(i)))
		}
		b.WriteByte('}')
		return json.RawMessage(b.String())
	case reflect.Slice:
		if v.IsNil() {
			return json.RawMessage("null")
		}
		var b strings.Builder
		b.WriteByte('[')
		for i := range v.Len() {
			if i > 0 {
				b.WriteByte(',')
			}
			b.Write(internalValue(v.Index(i)))
		}
		b.WriteByte(']')
		return json.RawMessage(b.String())
	}
	b, _ := json.Marshal(v.Interface())
	return b
}
