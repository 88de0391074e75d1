package resources

import (
	"maps"
	"math"
	"net/netip"
	"regexp"
	"strings"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	batchv1 "k8s.io/api/batch/v1"
	certificatesv1 "k8s.io/api/certificates/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	flowcontrolv1 "k8s.io/api/flowcontrol/v1"
	networkingv1 "k8s.io/api/networking/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	resourcev1 "k8s.io/api/resource/v1"
	schedulingv1 "k8s.io/api/scheduling/v1"
	storagev1 "k8s.io/api/storage/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	"github.com/canopy-dev/canopy/relay/apiserver/resources/internal/apiregistration"
)

// Default applies Kubernetes' API defaults to a typed built-in object (as
// decoded by Info.New), in place, as kube-apiserver does before storing it.
// Objects of kinds without defaults are left unchanged.
//
// It mirrors the generated SetObjectDefaults_<Kind> functions of
// kube-apiserver 1.37: the hand-written SetDefaults_* functions of
// k8s.io/kubernetes/pkg/apis/<group>/<version>/defaults.go, applied to the
// object and to every struct nested in it, and the declarative defaults
// (+default markers) of the k8s.io/api types, with the feature gates a
// default 1.37 kube-apiserver enables. Defaults only fill what is unset:
// explicitly set values are kept, the few exceptions being kube's own (a
// Service with sessionAffinity None loses its sessionAffinityConfig; a
// Namespace's kubernetes.io/metadata.name label is always its name).
// Applying Default twice is the same as applying it once.
//
// Beyond defaulting proper, a Service also gets the fields kube's Service
// registry fills on create without an allocator, as a single-stack IPv4
// cluster does: spec.clusterIPs from spec.clusterIP, spec.ipFamilyPolicy and
// spec.ipFamilies. Cluster IPs and node ports themselves are not allocated.
//
// The items of a typed list (a PodList) are defaulted as objects of their
// kind. Default uses no clock and no randomness: defaults kube computes from
// the time of the request (a DeviceTaint's timeAdded) are left to the
// caller. obj must not be a nil pointer.
func Default(obj runtime.Object) {
	switch o := obj.(type) {
	// core/v1 (k8s.io/kubernetes/pkg/apis/core/v1).
	case *corev1.Pod:
		defaultPod(o)
	case *corev1.PodTemplate:
		// SetObjectDefaults_PodTemplate: the template's pod spec only.
		defaultPodSpec(&o.Template.Spec)
	case *corev1.ReplicationController:
		defaultReplicationController(o)
	case *corev1.Service:
		defaultService(o)
	case *corev1.Secret:
		// SetDefaults_Secret.
		if o.Type == "" {
			o.Type = corev1.SecretTypeOpaque
		}
	case *corev1.Namespace:
		defaultNamespace(o)
	case *corev1.Node:
		defaultNode(o)
	case *corev1.PersistentVolume:
		defaultPersistentVolume(o)
	case *corev1.PersistentVolumeClaim:
		defaultPersistentVolumeClaim(o)
	case *corev1.Endpoints:
		// SetDefaults_Endpoints.
		for i := range o.Subsets {
			for j := range o.Subsets[i].Ports {
				defaultProtocol(&o.Subsets[i].Ports[j].Protocol)
			}
		}
	case *corev1.LimitRange:
		for i := range o.Spec.Limits {
			defaultLimitRangeItem(&o.Spec.Limits[i])
		}
	case *corev1.ResourceQuota:
		// SetObjectDefaults_ResourceQuota: resource lists only.
		roundResourceList(o.Spec.Hard)
		roundResourceList(o.Status.Hard)
		roundResourceList(o.Status.Used)

	// apps/v1 (k8s.io/kubernetes/pkg/apis/apps/v1).
	case *appsv1.Deployment:
		defaultDeployment(o)
	case *appsv1.ReplicaSet:
		// SetDefaults_ReplicaSet.
		setDefault(&o.Spec.Replicas, 1)
		defaultPodSpec(&o.Spec.Template.Spec)
	case *appsv1.StatefulSet:
		defaultStatefulSet(o)
	case *appsv1.DaemonSet:
		defaultDaemonSet(o)

	// batch/v1 (k8s.io/kubernetes/pkg/apis/batch/v1).
	case *batchv1.Job:
		defaultJob(o)
	case *batchv1.CronJob:
		defaultCronJob(o)

	// autoscaling/v2 (k8s.io/kubernetes/pkg/apis/autoscaling/v2).
	case *autoscalingv2.HorizontalPodAutoscaler:
		defaultHorizontalPodAutoscaler(o)

	// networking.k8s.io/v1 (k8s.io/kubernetes/pkg/apis/networking/v1).
	case *networkingv1.NetworkPolicy:
		defaultNetworkPolicy(o)
	case *networkingv1.IngressClass:
		// SetDefaults_IngressClass.
		if p := o.Spec.Parameters; p != nil {
			setDefault(&p.Scope, networkingv1.IngressClassParametersReferenceScopeCluster)
		}

	// rbac.authorization.k8s.io/v1 (k8s.io/kubernetes/pkg/apis/rbac/v1).
	case *rbacv1.RoleBinding:
		// SetDefaults_RoleBinding and SetDefaults_Subject.
		defaultRoleBinding(&o.RoleRef, o.Subjects)
	case *rbacv1.ClusterRoleBinding:
		// SetDefaults_ClusterRoleBinding and SetDefaults_Subject.
		defaultRoleBinding(&o.RoleRef, o.Subjects)

	// scheduling.k8s.io/v1 (k8s.io/kubernetes/pkg/apis/scheduling/v1).
	case *schedulingv1.PriorityClass:
		// SetDefaults_PriorityClass.
		setDefault(&o.PreemptionPolicy, corev1.PreemptLowerPriority)

	// storage.k8s.io/v1 (k8s.io/kubernetes/pkg/apis/storage/v1).
	case *storagev1.StorageClass:
		// SetDefaults_StorageClass.
		setDefault(&o.ReclaimPolicy, corev1.PersistentVolumeReclaimDelete)
		setDefault(&o.VolumeBindingMode, storagev1.VolumeBindingImmediate)
	case *storagev1.CSIDriver:
		defaultCSIDriver(o)
	case *storagev1.VolumeAttachment:
		// SetObjectDefaults_VolumeAttachment: the volume sources of an
		// inline (migrated) persistent volume spec.
		if spec := o.Spec.Source.InlineVolumeSpec; spec != nil {
			defaultPersistentVolumeSpec(spec)
		}

	// discovery.k8s.io/v1 (k8s.io/kubernetes/pkg/apis/discovery/v1).
	case *discoveryv1.EndpointSlice:
		// SetDefaults_EndpointPort.
		for i := range o.Ports {
			p := &o.Ports[i]
			setDefault(&p.Name, "")
			setDefault(&p.Protocol, corev1.ProtocolTCP)
		}

	// flowcontrol.apiserver.k8s.io/v1 (k8s.io/kubernetes/pkg/apis/flowcontrol/v1).
	case *flowcontrolv1.FlowSchema:
		// SetDefaults_FlowSchemaSpec.
		if o.Spec.MatchingPrecedence == 0 {
			o.Spec.MatchingPrecedence = 1000
		}
	case *flowcontrolv1.PriorityLevelConfiguration:
		defaultPriorityLevelConfiguration(o)

	// admissionregistration.k8s.io/v1 (k8s.io/kubernetes/pkg/apis/admissionregistration/v1).
	case *admissionregistrationv1.ValidatingWebhookConfiguration:
		for i := range o.Webhooks {
			defaultValidatingWebhook(&o.Webhooks[i])
		}
	case *admissionregistrationv1.MutatingWebhookConfiguration:
		for i := range o.Webhooks {
			defaultMutatingWebhook(&o.Webhooks[i])
		}
	case *admissionregistrationv1.ValidatingAdmissionPolicy:
		// SetDefaults_ValidatingAdmissionPolicySpec and SetDefaults_MatchResources.
		setDefault(&o.Spec.FailurePolicy, admissionregistrationv1.Fail)
		defaultMatchResources(o.Spec.MatchConstraints)
	case *admissionregistrationv1.ValidatingAdmissionPolicyBinding:
		// SetDefaults_MatchResources.
		defaultMatchResources(o.Spec.MatchResources)
	case *admissionregistrationv1.MutatingAdmissionPolicy:
		// SetDefaults_MutatingAdmissionPolicySpec and SetDefaults_MatchResources.
		setDefault(&o.Spec.FailurePolicy, admissionregistrationv1.Fail)
		defaultMatchResources(o.Spec.MatchConstraints)
	case *admissionregistrationv1.MutatingAdmissionPolicyBinding:
		// SetDefaults_MatchResources.
		defaultMatchResources(o.Spec.MatchResources)

	// resource.k8s.io/v1 (k8s.io/kubernetes/pkg/apis/resource/v1).
	case *resourcev1.ResourceClaim:
		defaultDeviceClaim(&o.Spec.Devices)
		if a := o.Status.Allocation; a != nil {
			for i := range a.Devices.Results {
				defaultDeviceTolerations(a.Devices.Results[i].Tolerations)
			}
		}
	case *resourcev1.ResourceClaimTemplate:
		defaultDeviceClaim(&o.Spec.Spec.Devices)

	// certificates.k8s.io/v1: declarative default only.
	case *certificatesv1.PodCertificateRequest:
		setDefault(&o.Spec.MaxExpirationSeconds, 86400)

	// apiextensions.k8s.io/v1: kube's generated defaulters are importable.
	case *apiextensionsv1.CustomResourceDefinition:
		apiextensionsv1.SetObjectDefaults_CustomResourceDefinition(o)

	// apiregistration.k8s.io/v1 (k8s.io/kube-aggregator): SetDefaults_ServiceReference.
	case *apiregistration.APIService:
		if s := o.Spec.Service; s != nil {
			setDefault(&s.Port, 443)
		}

	case nil:
		// Nothing to default.
	default:
		// Lists (PodList, ...): their items, as kube's list defaulters do.
		if meta.IsListType(obj) {
			_ = meta.EachListItem(obj, func(item runtime.Object) error {
				Default(item)
				return nil
			})
		}
	}
}

// setDefault points *p at a new v when *p is nil.
func setDefault[T any](p **T, v T) {
	if *p == nil {
		*p = &v
	}
}

// defaultProtocol sets an unset port protocol to TCP, the declarative
// default of every port type in core/v1.
func defaultProtocol(p *corev1.Protocol) {
	if *p == "" {
		*p = corev1.ProtocolTCP
	}
}

// roundResourceList mirrors SetDefaults_ResourceList, applied to every
// ResourceList of every core/v1 type: quantities are rounded up to milli
// precision.
func roundResourceList(list corev1.ResourceList) {
	for name, q := range list {
		q.RoundUp(resource.Milli)
		list[name] = q
	}
}

// roundResourceRequirements rounds the limits and requests of r.
func roundResourceRequirements(r *corev1.ResourceRequirements) {
	roundResourceList(r.Limits)
	roundResourceList(r.Requests)
}

// --- core/v1: pods and pod specs ---

// defaultPod mirrors SetObjectDefaults_Pod: SetDefaults_Pod, which only
// pods get (not pod templates), then the pod spec and the status's
// resource lists.
func defaultPod(pod *corev1.Pod) {
	spec := &pod.Spec
	// SetDefaults_Pod: a container's requests default to its limits.
	for _, cs := range [][]corev1.Container{spec.Containers, spec.InitContainers} {
		for i := range cs {
			r := &cs[i].Resources
			if r.Limits == nil {
				continue
			}
			if r.Requests == nil {
				r.Requests = corev1.ResourceList{}
			}
			for name, q := range r.Limits {
				if _, ok := r.Requests[name]; !ok {
					r.Requests[name] = q.DeepCopy()
				}
			}
		}
	}
	// Pod-level resources (PodLevelResources, beta and on by default since
	// 1.34), after the container requests above.
	defaultHugePagePodLimits(pod)
	defaultPodLevelRequests(pod)
	setDefault(&spec.EnableServiceLinks, corev1.DefaultEnableServiceLinks)
	if spec.HostNetwork {
		// With host networking, container ports are host ports.
		for _, cs := range [][]corev1.Container{spec.Containers, spec.InitContainers} {
			for i := range cs {
				for j := range cs[i].Ports {
					if p := &cs[i].Ports[j]; p.HostPort == 0 {
						p.HostPort = p.ContainerPort
					}
				}
			}
		}
	}

	defaultPodSpec(spec)

	st := &pod.Status
	roundResourceList(st.AllocatedResources)
	if st.Resources != nil {
		roundResourceRequirements(st.Resources)
	}
	for _, statuses := range [][]corev1.ContainerStatus{st.InitContainerStatuses, st.ContainerStatuses, st.EphemeralContainerStatuses} {
		for i := range statuses {
			roundResourceList(statuses[i].AllocatedResources)
			if r := statuses[i].Resources; r != nil {
				roundResourceRequirements(r)
			}
		}
	}
}

// defaultHugePagePodLimits mirrors kube's defaultHugePagePodLimits: when the
// pod sets pod-level resources, a hugepage resource the containers limit
// but the pod neither limits nor requests gets the containers' aggregated
// limit as pod-level limit.
func defaultHugePagePodLimits(pod *corev1.Pod) {
	r := pod.Spec.Resources
	if r == nil || (len(r.Limits) == 0 && len(r.Requests) == 0) {
		return
	}
	limits := r.Limits
	if limits == nil {
		limits = corev1.ResourceList{}
	}
	for name, q := range aggregateContainerResources(pod, func(c *corev1.Container) corev1.ResourceList { return c.Resources.Limits }) {
		if !isHugePageResource(name) {
			continue
		}
		if _, ok := r.Requests[name]; ok {
			continue
		}
		if _, ok := limits[name]; !ok {
			limits[name] = q.DeepCopy()
		}
	}
	if len(limits) > 0 {
		r.Limits = limits
	}
}

// defaultPodLevelRequests mirrors kube's defaultPodRequests: when the pod
// sets pod-level limits, unset pod-level requests default to the
// containers' aggregated requests (CPU and memory), then to the pod-level
// limits.
func defaultPodLevelRequests(pod *corev1.Pod) {
	r := pod.Spec.Resources
	if r == nil || len(r.Limits) == 0 {
		return
	}
	requests := r.Requests
	if requests == nil {
		requests = corev1.ResourceList{}
	}
	for name, q := range aggregateContainerResources(pod, func(c *corev1.Container) corev1.ResourceList { return c.Resources.Requests }) {
		// Supported at pod level and overcommittable: CPU and memory.
		if _, ok := requests[name]; !ok && isPodLevelResource(name) && !isHugePageResource(name) {
			requests[name] = q.DeepCopy()
		}
	}
	for name, q := range r.Limits {
		if _, ok := requests[name]; !ok && isPodLevelResource(name) {
			requests[name] = q.DeepCopy()
		}
	}
	if len(requests) > 0 {
		r.Requests = requests
	}
}

// isPodLevelResource reports whether pod-level resources may name the
// resource: CPU, memory and hugepages.
func isPodLevelResource(name corev1.ResourceName) bool {
	return name == corev1.ResourceCPU || name == corev1.ResourceMemory || isHugePageResource(name)
}

func isHugePageResource(name corev1.ResourceName) bool {
	return strings.HasPrefix(string(name), corev1.ResourceHugePagesPrefix)
}

// aggregateContainerResources computes what the pod's containers need
// together, as k8s.io/component-helpers/resource aggregates container
// requests or limits: the sum over the regular containers and the
// restartable init containers (sidecars), or, when larger, what any other
// init container needs alongside the sidecars started before it.
func aggregateContainerResources(pod *corev1.Pod, get func(*corev1.Container) corev1.ResourceList) corev1.ResourceList {
	total := corev1.ResourceList{}
	for i := range pod.Spec.Containers {
		addResources(total, get(&pod.Spec.Containers[i]))
	}
	sidecars := corev1.ResourceList{}
	initPeak := corev1.ResourceList{}
	for i := range pod.Spec.InitContainers {
		c := &pod.Spec.InitContainers[i]
		need := corev1.ResourceList{}
		if c.RestartPolicy != nil && *c.RestartPolicy == corev1.ContainerRestartPolicyAlways {
			addResources(total, get(c))
			addResources(sidecars, get(c))
			addResources(need, sidecars)
		} else {
			addResources(need, get(c))
			addResources(need, sidecars)
		}
		maxResources(initPeak, need)
	}
	maxResources(total, initPeak)
	return total
}

// addResources adds the quantities of more to list.
func addResources(list, more corev1.ResourceList) {
	for name, q := range more {
		if sum, ok := list[name]; ok {
			sum.Add(q)
			list[name] = sum
		} else {
			list[name] = q.DeepCopy()
		}
	}
}

// maxResources raises the quantities of list to those of other where
// other's are larger.
func maxResources(list, other corev1.ResourceList) {
	for name, q := range other {
		if cur, ok := list[name]; !ok || q.Cmp(cur) > 0 {
			list[name] = q.DeepCopy()
		}
	}
}

// defaultPodSpec mirrors SetDefaults_PodSpec and the defaults of everything
// a pod spec holds (volumes, containers, resource lists), as every
// generated defaulter of a kind embedding a pod spec applies them.
func defaultPodSpec(spec *corev1.PodSpec) {
	if spec.DNSPolicy == "" {
		spec.DNSPolicy = corev1.DNSClusterFirst
	}
	if spec.RestartPolicy == "" {
		spec.RestartPolicy = corev1.RestartPolicyAlways
	}
	setDefault(&spec.SecurityContext, corev1.PodSecurityContext{})
	setDefault(&spec.TerminationGracePeriodSeconds, corev1.DefaultTerminationGracePeriodSeconds)
	if spec.SchedulerName == "" {
		spec.SchedulerName = corev1.DefaultSchedulerName
	}
	for i := range spec.Volumes {
		defaultVolume(&spec.Volumes[i])
	}
	for i := range spec.InitContainers {
		defaultContainer(&spec.InitContainers[i])
	}
	for i := range spec.Containers {
		defaultContainer(&spec.Containers[i])
	}
	for i := range spec.EphemeralContainers {
		// SetDefaults_EphemeralContainer: the same as a container's.
		defaultContainer((*corev1.Container)(&spec.EphemeralContainers[i].EphemeralContainerCommon))
	}
	roundResourceList(spec.Overhead)
	if spec.Resources != nil {
		roundResourceRequirements(spec.Resources)
	}
}

// defaultContainer mirrors SetDefaults_Container and the defaults of what a
// container holds: ports, environment, resources, probes and lifecycle
// hooks.
func defaultContainer(c *corev1.Container) {
	if c.ImagePullPolicy == "" {
		c.ImagePullPolicy = defaultPullPolicy(c.Image)
	}
	if c.TerminationMessagePath == "" {
		c.TerminationMessagePath = corev1.TerminationMessagePathDefault
	}
	if c.TerminationMessagePolicy == "" {
		c.TerminationMessagePolicy = corev1.TerminationMessageReadFile
	}
	for i := range c.Ports {
		defaultProtocol(&c.Ports[i].Protocol)
	}
	for i := range c.Env {
		if from := c.Env[i].ValueFrom; from != nil {
			if from.FieldRef != nil {
				defaultFieldRef(from.FieldRef)
			}
			if from.FileKeyRef != nil {
				setDefault(&from.FileKeyRef.Optional, false)
			}
		}
	}
	roundResourceRequirements(&c.Resources)
	for _, p := range []*corev1.Probe{c.LivenessProbe, c.ReadinessProbe, c.StartupProbe} {
		if p != nil {
			defaultProbe(p)
		}
	}
	if l := c.Lifecycle; l != nil {
		for _, h := range []*corev1.LifecycleHandler{l.PostStart, l.PreStop} {
			if h != nil && h.HTTPGet != nil {
				defaultHTTPGet(h.HTTPGet)
			}
		}
	}
}

// defaultProbe mirrors SetDefaults_Probe, SetDefaults_HTTPGetAction and the
// declarative default of a gRPC probe's service.
func defaultProbe(p *corev1.Probe) {
	if p.TimeoutSeconds == 0 {
		p.TimeoutSeconds = 1
	}
	if p.PeriodSeconds == 0 {
		p.PeriodSeconds = 10
	}
	if p.SuccessThreshold == 0 {
		p.SuccessThreshold = 1
	}
	if p.FailureThreshold == 0 {
		p.FailureThreshold = 3
	}
	if p.HTTPGet != nil {
		defaultHTTPGet(p.HTTPGet)
	}
	if p.GRPC != nil {
		setDefault(&p.GRPC.Service, "")
	}
}

// defaultHTTPGet mirrors SetDefaults_HTTPGetAction.
func defaultHTTPGet(a *corev1.HTTPGetAction) {
	if a.Path == "" {
		a.Path = "/"
	}
	if a.Scheme == "" {
		a.Scheme = corev1.URISchemeHTTP
	}
}

// defaultFieldRef mirrors SetDefaults_ObjectFieldSelector.
func defaultFieldRef(f *corev1.ObjectFieldSelector) {
	if f.APIVersion == "" {
		f.APIVersion = "v1"
	}
}

// defaultVolume mirrors SetDefaults_Volume and the defaults of the volume
// sources.
func defaultVolume(v *corev1.Volume) {
	src := &v.VolumeSource
	if ptr.AllPtrFieldsNil(src) {
		src.EmptyDir = &corev1.EmptyDirVolumeSource{}
	}
	if img := src.Image; img != nil && img.PullPolicy == "" {
		img.PullPolicy = defaultPullPolicy(img.Reference)
	}
	if s := src.HostPath; s != nil {
		// SetDefaults_HostPathVolumeSource.
		setDefault(&s.Type, corev1.HostPathUnset)
	}
	if s := src.Secret; s != nil {
		setDefault(&s.DefaultMode, corev1.SecretVolumeSourceDefaultMode)
	}
	if s := src.ConfigMap; s != nil {
		setDefault(&s.DefaultMode, corev1.ConfigMapVolumeSourceDefaultMode)
	}
	if s := src.DownwardAPI; s != nil {
		setDefault(&s.DefaultMode, corev1.DownwardAPIVolumeSourceDefaultMode)
		defaultDownwardAPIFiles(s.Items)
	}
	if s := src.Projected; s != nil {
		setDefault(&s.DefaultMode, corev1.ProjectedVolumeSourceDefaultMode)
		for i := range s.Sources {
			p := &s.Sources[i]
			if p.DownwardAPI != nil {
				defaultDownwardAPIFiles(p.DownwardAPI.Items)
			}
			if p.ServiceAccountToken != nil {
				// SetDefaults_ServiceAccountTokenProjection: an hour.
				setDefault(&p.ServiceAccountToken.ExpirationSeconds, 3600)
			}
		}
	}
	if s := src.Ephemeral; s != nil && s.VolumeClaimTemplate != nil {
		defaultPersistentVolumeClaimSpec(&s.VolumeClaimTemplate.Spec)
	}
	// Declarative defaults of the in-tree volume plugins.
	if s := src.ISCSI; s != nil && s.ISCSIInterface == "" {
		s.ISCSIInterface = "default"
	}
	if s := src.RBD; s != nil {
		defaultRBD(&s.RBDPool, &s.RadosUser, &s.Keyring)
	}
	if s := src.AzureDisk; s != nil {
		defaultAzureDisk(s)
	}
	if s := src.ScaleIO; s != nil {
		defaultScaleIO(&s.StorageMode, &s.FSType)
	}
}

func defaultDownwardAPIFiles(files []corev1.DownwardAPIVolumeFile) {
	for i := range files {
		if files[i].FieldRef != nil {
			defaultFieldRef(files[i].FieldRef)
		}
	}
}

func defaultRBD(pool, user, keyring *string) {
	if *pool == "" {
		*pool = "rbd"
	}
	if *user == "" {
		*user = "admin"
	}
	if *keyring == "" {
		*keyring = "/etc/ceph/keyring"
	}
}

func defaultAzureDisk(s *corev1.AzureDiskVolumeSource) {
	setDefault(&s.CachingMode, corev1.AzureDataDiskCachingReadWrite)
	setDefault(&s.FSType, "ext4")
	setDefault(&s.ReadOnly, false)
	setDefault(&s.Kind, corev1.AzureSharedBlobDisk)
}

func defaultScaleIO(storageMode, fsType *string) {
	if *storageMode == "" {
		*storageMode = "ThinProvisioned"
	}
	if *fsType == "" {
		*fsType = "xfs"
	}
}

// defaultPullPolicy returns the image pull policy SetDefaults_Container
// gives image: Always when the reference names the tag "latest", or neither
// a tag nor a digest; IfNotPresent otherwise, including for a reference
// that does not parse.
func defaultPullPolicy(image string) corev1.PullPolicy {
	if tag, ok := imageTag(image); ok && tag == "latest" {
		return corev1.PullAlways
	}
	return corev1.PullIfNotPresent
}

// Image references, by the grammar of github.com/distribution/reference.
var (
	imageReference = func() *regexp.Regexp {
		const (
			alnum           = `[a-z0-9]+`
			pathComponent   = alnum + `(?:(?:[._]|__|-+)` + alnum + `)*`
			domainComponent = `(?:[a-zA-Z0-9]|[a-zA-Z0-9][a-zA-Z0-9-]*[a-zA-Z0-9])`
			host            = `(?:` + domainComponent + `(?:\.` + domainComponent + `)*|\[[a-fA-F0-9:]+\])`
			name            = `(?:` + host + `(?::[0-9]+)?/)?` + pathComponent + `(?:/` + pathComponent + `)*`
			tag             = `[\w][\w.-]{0,127}`
			digest          = `[A-Za-z][A-Za-z0-9]*(?:[-_+.][A-Za-z][A-Za-z0-9]*)*:[0-9a-fA-F]{32,}`
		)
		return regexp.MustCompile(`^(` + name + `)(?::(` + tag + `))?(?:@(` + digest + `))?$`)
	}()
	hexIdentifier = regexp.MustCompile(`^[a-f0-9]{64}$`)
	// digestHex is the length of the lower-case hex encoding of each
	// digest algorithm a reference may use.
	digestHex = map[string]int{"sha256": 64, "sha384": 96, "sha512": 128}
)

// imageTag returns the tag of an image reference as kube's ParseImageName
// reads it: "latest" when the reference has neither a tag nor a digest. ok
// is false when the reference does not parse.
func imageTag(image string) (tag string, ok bool) {
	if hexIdentifier.MatchString(image) {
		return "", false
	}
	// Normalize as docker does: a first path element that does not look
	// like a host name is a repository on docker.io.
	domain, rest := "docker.io", image
	if i := strings.IndexByte(image, '/'); i >= 0 {
		first := image[:i]
		if strings.ContainsAny(first, ".:") || first == "localhost" || strings.ToLower(first) != first {
			domain, rest = first, image[i+1:]
		}
	}
	repository, _, _ := strings.Cut(rest, ":")
	if strings.ToLower(repository) != repository {
		return "", false
	}
	m := imageReference.FindStringSubmatch(domain + "/" + rest)
	if m == nil || len(m[1]) > 255 {
		return "", false
	}
	tag, digest := m[2], m[3]
	if digest != "" {
		algorithm, hex, _ := strings.Cut(digest, ":")
		if n, known := digestHex[algorithm]; !known || len(hex) != n || strings.ToLower(hex) != hex {
			return "", false
		}
	}
	if tag == "" && digest == "" {
		tag = "latest"
	}
	return tag, true
}

// --- core/v1: other kinds ---

// defaultReplicationController mirrors SetDefaults_ReplicationController
// and the declarative default of spec.replicas.
func defaultReplicationController(rc *corev1.ReplicationController) {
	if t := rc.Spec.Template; t != nil && t.Labels != nil {
		if len(rc.Spec.Selector) == 0 {
			rc.Spec.Selector = maps.Clone(t.Labels)
		}
		if len(rc.Labels) == 0 {
			rc.Labels = maps.Clone(t.Labels)
		}
	}
	setDefault(&rc.Spec.Replicas, 1)
	if t := rc.Spec.Template; t != nil {
		defaultPodSpec(&t.Spec)
	}
}

// defaultService mirrors SetDefaults_Service and the declarative default of
// the ports' protocol, then fills the IP family fields as kube's Service
// registry does on create.
func defaultService(svc *corev1.Service) {
	spec := &svc.Spec
	if spec.SessionAffinity == "" {
		spec.SessionAffinity = corev1.ServiceAffinityNone
	}
	switch spec.SessionAffinity {
	case corev1.ServiceAffinityNone:
		spec.SessionAffinityConfig = nil
	case corev1.ServiceAffinityClientIP:
		if c := spec.SessionAffinityConfig; c == nil || c.ClientIP == nil || c.ClientIP.TimeoutSeconds == nil {
			spec.SessionAffinityConfig = &corev1.SessionAffinityConfig{
				ClientIP: &corev1.ClientIPConfig{TimeoutSeconds: ptr.To(corev1.DefaultClientIPServiceAffinitySeconds)},
			}
		}
	}
	if spec.Type == "" {
		spec.Type = corev1.ServiceTypeClusterIP
	}
	for i := range spec.Ports {
		p := &spec.Ports[i]
		defaultProtocol(&p.Protocol)
		if p.TargetPort == intstr.FromInt32(0) || p.TargetPort == intstr.FromString("") {
			p.TargetPort = intstr.FromInt32(p.Port)
		}
	}
	externallyAccessible := spec.Type == corev1.ServiceTypeLoadBalancer || spec.Type == corev1.ServiceTypeNodePort ||
		(spec.Type == corev1.ServiceTypeClusterIP && len(spec.ExternalIPs) > 0)
	if externallyAccessible && spec.ExternalTrafficPolicy == "" {
		spec.ExternalTrafficPolicy = corev1.ServiceExternalTrafficPolicyCluster
	}
	switch spec.Type {
	case corev1.ServiceTypeClusterIP, corev1.ServiceTypeNodePort, corev1.ServiceTypeLoadBalancer:
		setDefault(&spec.InternalTrafficPolicy, corev1.ServiceInternalTrafficPolicyCluster)
	}
	if spec.Type == corev1.ServiceTypeLoadBalancer {
		setDefault(&spec.AllocateLoadBalancerNodePorts, true)
		for i := range svc.Status.LoadBalancer.Ingress {
			if ing := &svc.Status.LoadBalancer.Ingress[i]; ing.IP != "" {
				setDefault(&ing.IPMode, corev1.LoadBalancerIPModeVIP)
			}
		}
	}
	defaultServiceIPFamilies(spec)
}

// defaultServiceIPFamilies fills spec.clusterIPs, spec.ipFamilyPolicy and
// spec.ipFamilies as kube's Service registry does on create
// (normalizeClusterIPs and initIPFamilyFields in
// k8s.io/kubernetes/pkg/registry/core/service/storage), for a cluster whose
// service network is single-stack IPv4. Unlike the defaults above it is not
// kube defaulting: kube runs it only on create and, on update, keeps the
// stored policy when the new object omits it.
func defaultServiceIPFamilies(spec *corev1.ServiceSpec) {
	if spec.Type == corev1.ServiceTypeExternalName {
		return
	}
	if spec.ClusterIP != "" && len(spec.ClusterIPs) == 0 {
		spec.ClusterIPs = []string{spec.ClusterIP}
	}
	headlessSelectorless := spec.ClusterIP == corev1.ClusterIPNone && len(spec.Selector) == 0
	if spec.IPFamilyPolicy == nil {
		if headlessSelectorless {
			spec.IPFamilyPolicy = ptr.To(corev1.IPFamilyPolicyRequireDualStack)
		} else {
			spec.IPFamilyPolicy = ptr.To(corev1.IPFamilyPolicySingleStack)
		}
	}
	// The families of the given cluster IPs, in order.
	for i, ip := range spec.ClusterIPs {
		if ip == corev1.ClusterIPNone {
			break
		}
		if i < len(spec.IPFamilies) {
			continue
		}
		addr, err := netip.ParseAddr(ip)
		if err != nil {
			break // invalid: left to validation
		}
		family := corev1.IPv4Protocol
		if addr.Unmap().Is6() {
			family = corev1.IPv6Protocol
		}
		spec.IPFamilies = append(spec.IPFamilies, family)
	}
	if len(spec.IPFamilies) == 0 {
		spec.IPFamilies = []corev1.IPFamily{corev1.IPv4Protocol}
	}
	// A headless service without selector may front endpoints of both
	// families, even on a single-stack cluster.
	if headlessSelectorless && len(spec.IPFamilies) == 1 && *spec.IPFamilyPolicy != corev1.IPFamilyPolicySingleStack {
		other := corev1.IPv6Protocol
		if spec.IPFamilies[0] == corev1.IPv6Protocol {
			other = corev1.IPv4Protocol
		}
		spec.IPFamilies = append(spec.IPFamilies, other)
	}
}

// defaultNamespace mirrors SetDefaults_Namespace and
// SetDefaults_NamespaceStatus.
func defaultNamespace(ns *corev1.Namespace) {
	if ns.Name != "" {
		if ns.Labels == nil {
			ns.Labels = map[string]string{}
		}
		ns.Labels[corev1.LabelMetadataName] = ns.Name
	}
	if ns.Status.Phase == "" {
		ns.Status.Phase = corev1.NamespaceActive
	}
}

// defaultNode mirrors SetDefaults_NodeStatus: allocatable defaults to
// capacity.
func defaultNode(node *corev1.Node) {
	st := &node.Status
	if st.Allocatable == nil && st.Capacity != nil {
		st.Allocatable = st.Capacity.DeepCopy()
	}
	roundResourceList(st.Capacity)
	roundResourceList(st.Allocatable)
}

// defaultPersistentVolume mirrors SetDefaults_PersistentVolume and the
// defaults of the volume sources.
func defaultPersistentVolume(pv *corev1.PersistentVolume) {
	if pv.Status.Phase == "" {
		pv.Status.Phase = corev1.VolumePending
	}
	if pv.Spec.PersistentVolumeReclaimPolicy == "" {
		pv.Spec.PersistentVolumeReclaimPolicy = corev1.PersistentVolumeReclaimRetain
	}
	setDefault(&pv.Spec.VolumeMode, corev1.PersistentVolumeFilesystem)
	defaultPersistentVolumeSpec(&pv.Spec)
}

// defaultPersistentVolumeSpec applies the defaults every persistent volume
// spec gets, including an inline one: capacity rounding and the volume
// sources' defaults.
func defaultPersistentVolumeSpec(spec *corev1.PersistentVolumeSpec) {
	roundResourceList(spec.Capacity)
	src := &spec.PersistentVolumeSource
	if s := src.HostPath; s != nil {
		setDefault(&s.Type, corev1.HostPathUnset)
	}
	if s := src.ISCSI; s != nil && s.ISCSIInterface == "" {
		s.ISCSIInterface = "default"
	}
	if s := src.RBD; s != nil {
		defaultRBD(&s.RBDPool, &s.RadosUser, &s.Keyring)
	}
	if s := src.AzureDisk; s != nil {
		defaultAzureDisk(s)
	}
	if s := src.ScaleIO; s != nil {
		defaultScaleIO(&s.StorageMode, &s.FSType)
	}
}

// defaultPersistentVolumeClaim mirrors SetObjectDefaults_PersistentVolumeClaim
// (SetDefaults_PersistentVolumeClaim and SetDefaults_PersistentVolumeClaimSpec),
// which a StatefulSet's volume claim templates get too.
func defaultPersistentVolumeClaim(pvc *corev1.PersistentVolumeClaim) {
	if pvc.Status.Phase == "" {
		pvc.Status.Phase = corev1.ClaimPending
	}
	defaultPersistentVolumeClaimSpec(&pvc.Spec)
	roundResourceList(pvc.Status.Capacity)
	roundResourceList(pvc.Status.AllocatedResources)
}

func defaultPersistentVolumeClaimSpec(spec *corev1.PersistentVolumeClaimSpec) {
	setDefault(&spec.VolumeMode, corev1.PersistentVolumeFilesystem)
	roundResourceList(spec.Resources.Limits)
	roundResourceList(spec.Resources.Requests)
}

// defaultLimitRangeItem mirrors SetDefaults_LimitRangeItem: for containers,
// the default limit falls back to max, and the default request to the
// default limit, then to min.
func defaultLimitRangeItem(item *corev1.LimitRangeItem) {
	if item.Type == corev1.LimitTypeContainer {
		if item.Default == nil {
			item.Default = corev1.ResourceList{}
		}
		if item.DefaultRequest == nil {
			item.DefaultRequest = corev1.ResourceList{}
		}
		fill := func(list, from corev1.ResourceList) {
			for name, q := range from {
				if _, ok := list[name]; !ok {
					list[name] = q.DeepCopy()
				}
			}
		}
		fill(item.Default, item.Max)
		fill(item.DefaultRequest, item.Default)
		fill(item.DefaultRequest, item.Min)
	}
	for _, list := range []corev1.ResourceList{item.Max, item.Min, item.Default, item.DefaultRequest, item.MaxLimitRequestRatio} {
		roundResourceList(list)
	}
}

// --- apps/v1 ---

// defaultDeployment mirrors SetDefaults_Deployment.
func defaultDeployment(d *appsv1.Deployment) {
	setDefault(&d.Spec.Replicas, 1)
	s := &d.Spec.Strategy
	if s.Type == "" {
		s.Type = appsv1.RollingUpdateDeploymentStrategyType
	}
	if s.Type == appsv1.RollingUpdateDeploymentStrategyType {
		setDefault(&s.RollingUpdate, appsv1.RollingUpdateDeployment{})
		setDefault(&s.RollingUpdate.MaxUnavailable, intstr.FromString("25%"))
		setDefault(&s.RollingUpdate.MaxSurge, intstr.FromString("25%"))
	}
	setDefault(&d.Spec.RevisionHistoryLimit, 10)
	setDefault(&d.Spec.ProgressDeadlineSeconds, 600)
	defaultPodSpec(&d.Spec.Template.Spec)
}

// defaultStatefulSet mirrors SetDefaults_StatefulSet, with
// MaxUnavailableStatefulSet (beta, on by default since 1.35) and
// StatefulSetAutoDeletePVC (GA) enabled, and the defaults of the volume
// claim templates.
func defaultStatefulSet(ss *appsv1.StatefulSet) {
	spec := &ss.Spec
	if spec.PodManagementPolicy == "" {
		spec.PodManagementPolicy = appsv1.OrderedReadyPodManagement
	}
	u := &spec.UpdateStrategy
	if u.Type == "" {
		u.Type = appsv1.RollingUpdateStatefulSetStrategyType
		setDefault(&u.RollingUpdate, appsv1.RollingUpdateStatefulSetStrategy{})
	}
	// An explicit RollingUpdate type without parameters stays without.
	if u.Type == appsv1.RollingUpdateStatefulSetStrategyType && u.RollingUpdate != nil {
		setDefault(&u.RollingUpdate.Partition, 0)
		setDefault(&u.RollingUpdate.MaxUnavailable, intstr.FromInt32(1))
	}
	setDefault(&spec.PersistentVolumeClaimRetentionPolicy, appsv1.StatefulSetPersistentVolumeClaimRetentionPolicy{})
	if p := spec.PersistentVolumeClaimRetentionPolicy; p.WhenDeleted == "" {
		p.WhenDeleted = appsv1.RetainPersistentVolumeClaimRetentionPolicyType
	}
	if p := spec.PersistentVolumeClaimRetentionPolicy; p.WhenScaled == "" {
		p.WhenScaled = appsv1.RetainPersistentVolumeClaimRetentionPolicyType
	}
	setDefault(&spec.Replicas, 1)
	setDefault(&spec.RevisionHistoryLimit, 10)
	defaultPodSpec(&spec.Template.Spec)
	for i := range spec.VolumeClaimTemplates {
		defaultPersistentVolumeClaim(&spec.VolumeClaimTemplates[i])
	}
}

// defaultDaemonSet mirrors SetDefaults_DaemonSet.
func defaultDaemonSet(ds *appsv1.DaemonSet) {
	u := &ds.Spec.UpdateStrategy
	if u.Type == "" {
		u.Type = appsv1.RollingUpdateDaemonSetStrategyType
	}
	if u.Type == appsv1.RollingUpdateDaemonSetStrategyType {
		setDefault(&u.RollingUpdate, appsv1.RollingUpdateDaemonSet{})
		setDefault(&u.RollingUpdate.MaxUnavailable, intstr.FromInt32(1))
		setDefault(&u.RollingUpdate.MaxSurge, intstr.FromInt32(0))
	}
	setDefault(&ds.Spec.RevisionHistoryLimit, 10)
	defaultPodSpec(&ds.Spec.Template.Spec)
}

// --- batch/v1 ---

// defaultJob mirrors SetDefaults_Job, with JobPodReplacementPolicy (GA)
// enabled, and the defaults of the pod failure policy and the pod template.
func defaultJob(job *batchv1.Job) {
	spec := &job.Spec
	// A non-parallel job may leave both unset: both default to 1.
	if spec.Completions == nil && spec.Parallelism == nil {
		spec.Completions = ptr.To[int32](1)
	}
	setDefault(&spec.Parallelism, 1)
	if spec.BackoffLimitPerIndex != nil {
		setDefault(&spec.BackoffLimit, math.MaxInt32)
	} else {
		setDefault(&spec.BackoffLimit, 6)
	}
	if labels := spec.Template.Labels; labels != nil && len(job.Labels) == 0 {
		job.Labels = maps.Clone(labels)
	}
	setDefault(&spec.CompletionMode, batchv1.NonIndexedCompletion)
	setDefault(&spec.Suspend, false)
	if spec.PodFailurePolicy != nil {
		setDefault(&spec.PodReplacementPolicy, batchv1.Failed)
	} else {
		setDefault(&spec.PodReplacementPolicy, batchv1.TerminatingOrFailed)
	}
	setDefault(&spec.ManualSelector, false)
	defaultJobSpecParts(spec)
}

// defaultJobSpecParts applies the defaults of what a job spec holds, which
// a CronJob's job template gets too (SetDefaults_Job itself applies to
// Jobs only): SetDefaults_PodFailurePolicyOnPodConditionsPattern and the
// pod spec's.
func defaultJobSpecParts(spec *batchv1.JobSpec) {
	if p := spec.PodFailurePolicy; p != nil {
		for i := range p.Rules {
			for j := range p.Rules[i].OnPodConditions {
				if c := &p.Rules[i].OnPodConditions[j]; c.Status == "" {
					c.Status = corev1.ConditionTrue
				}
			}
		}
	}
	defaultPodSpec(&spec.Template.Spec)
}

// defaultCronJob mirrors SetDefaults_CronJob.
func defaultCronJob(cj *batchv1.CronJob) {
	spec := &cj.Spec
	if spec.ConcurrencyPolicy == "" {
		spec.ConcurrencyPolicy = batchv1.AllowConcurrent
	}
	setDefault(&spec.Suspend, false)
	setDefault(&spec.SuccessfulJobsHistoryLimit, 3)
	setDefault(&spec.FailedJobsHistoryLimit, 1)
	defaultJobSpecParts(&spec.JobTemplate.Spec)
}

// --- autoscaling/v2 ---

// defaultHorizontalPodAutoscaler mirrors SetDefaults_HorizontalPodAutoscaler
// and SetDefaults_HorizontalPodAutoscalerBehavior: one replica at least, a
// CPU utilization target of 80% when no metric is given, and, when a
// behavior is given, every unset scaling rule field filled with the
// controller's historical behavior.
func defaultHorizontalPodAutoscaler(hpa *autoscalingv2.HorizontalPodAutoscaler) {
	spec := &hpa.Spec
	setDefault(&spec.MinReplicas, 1)
	if len(spec.Metrics) == 0 {
		spec.Metrics = []autoscalingv2.MetricSpec{{
			Type: autoscalingv2.ResourceMetricSourceType,
			Resource: &autoscalingv2.ResourceMetricSource{
				Name: corev1.ResourceCPU,
				Target: autoscalingv2.MetricTarget{
					Type:               autoscalingv2.UtilizationMetricType,
					AverageUtilization: ptr.To[int32](80),
				},
			},
		}}
	}
	if b := spec.Behavior; b != nil {
		b.ScaleUp = mergeScalingRules(b.ScaleUp, autoscalingv2.HPAScalingRules{
			StabilizationWindowSeconds: ptr.To[int32](0),
			SelectPolicy:               ptr.To(autoscalingv2.MaxChangePolicySelect),
			Policies: []autoscalingv2.HPAScalingPolicy{
				{Type: autoscalingv2.PodsScalingPolicy, Value: 4, PeriodSeconds: 15},
				{Type: autoscalingv2.PercentScalingPolicy, Value: 100, PeriodSeconds: 15},
			},
		})
		// The scale-down stabilization window stays unset: the controller's
		// --horizontal-pod-autoscaler-downscale-stabilization applies.
		b.ScaleDown = mergeScalingRules(b.ScaleDown, autoscalingv2.HPAScalingRules{
			SelectPolicy: ptr.To(autoscalingv2.MaxChangePolicySelect),
			Policies: []autoscalingv2.HPAScalingPolicy{
				{Type: autoscalingv2.PercentScalingPolicy, Value: 100, PeriodSeconds: 15},
			},
		})
	}
}

// mergeScalingRules returns defaults with the fields set in rules (which
// may be nil) taking precedence.
func mergeScalingRules(rules *autoscalingv2.HPAScalingRules, defaults autoscalingv2.HPAScalingRules) *autoscalingv2.HPAScalingRules {
	if rules == nil {
		return &defaults
	}
	if rules.SelectPolicy != nil {
		defaults.SelectPolicy = rules.SelectPolicy
	}
	if rules.StabilizationWindowSeconds != nil {
		defaults.StabilizationWindowSeconds = rules.StabilizationWindowSeconds
	}
	if rules.Policies != nil {
		defaults.Policies = rules.Policies
	}
	if rules.Tolerance != nil {
		defaults.Tolerance = rules.Tolerance
	}
	return &defaults
}

// --- networking.k8s.io/v1 ---

// defaultNetworkPolicy mirrors SetDefaults_NetworkPolicy (a policy without
// policyTypes is an Ingress policy, and an Egress one too when it has
// egress rules) and SetDefaults_NetworkPolicyPort.
func defaultNetworkPolicy(np *networkingv1.NetworkPolicy) {
	spec := &np.Spec
	if len(spec.PolicyTypes) == 0 {
		spec.PolicyTypes = []networkingv1.PolicyType{networkingv1.PolicyTypeIngress}
		if len(spec.Egress) > 0 {
			spec.PolicyTypes = append(spec.PolicyTypes, networkingv1.PolicyTypeEgress)
		}
	}
	ports := func(ps []networkingv1.NetworkPolicyPort) {
		for i := range ps {
			setDefault(&ps[i].Protocol, corev1.ProtocolTCP)
		}
	}
	for i := range spec.Ingress {
		ports(spec.Ingress[i].Ports)
	}
	for i := range spec.Egress {
		ports(spec.Egress[i].Ports)
	}
}

// --- rbac.authorization.k8s.io/v1 ---

// defaultRoleBinding fills the role reference's API group and each
// subject's (SetDefaults_Subject): users and groups are
// rbac.authorization.k8s.io subjects, service accounts core ones.
func defaultRoleBinding(ref *rbacv1.RoleRef, subjects []rbacv1.Subject) {
	if ref.APIGroup == "" {
		ref.APIGroup = rbacv1.GroupName
	}
	for i := range subjects {
		s := &subjects[i]
		if s.APIGroup == "" && (s.Kind == rbacv1.UserKind || s.Kind == rbacv1.GroupKind) {
			s.APIGroup = rbacv1.GroupName
		}
	}
}

// --- storage.k8s.io/v1 ---

// defaultCSIDriver mirrors SetDefaults_CSIDriver, with
// SELinuxMountReadWriteOncePod (on by default since 1.28) enabled.
func defaultCSIDriver(d *storagev1.CSIDriver) {
	spec := &d.Spec
	setDefault(&spec.AttachRequired, true)
	setDefault(&spec.PodInfoOnMount, false)
	setDefault(&spec.StorageCapacity, false)
	setDefault(&spec.FSGroupPolicy, storagev1.ReadWriteOnceWithFSTypeFSGroupPolicy)
	if len(spec.VolumeLifecycleModes) == 0 {
		spec.VolumeLifecycleModes = []storagev1.VolumeLifecycleMode{storagev1.VolumeLifecyclePersistent}
	}
	setDefault(&spec.RequiresRepublish, false)
	setDefault(&spec.SELinuxMount, false)
}

// --- flowcontrol.apiserver.k8s.io/v1 ---

// defaultPriorityLevelConfiguration mirrors
// SetDefaults_LimitedPriorityLevelConfiguration,
// SetDefaults_QueuingConfiguration and
// SetDefaults_ExemptPriorityLevelConfiguration.
func defaultPriorityLevelConfiguration(plc *flowcontrolv1.PriorityLevelConfiguration) {
	if l := plc.Spec.Limited; l != nil {
		setDefault(&l.NominalConcurrencyShares, 30)
		setDefault(&l.LendablePercent, 0)
		if q := l.LimitResponse.Queuing; q != nil {
			if q.HandSize == 0 {
				q.HandSize = 8
			}
			if q.Queues == 0 {
				q.Queues = 64
			}
			if q.QueueLengthLimit == 0 {
				q.QueueLengthLimit = 50
			}
		}
	}
	if e := plc.Spec.Exempt; e != nil {
		setDefault(&e.NominalConcurrencyShares, 0)
		setDefault(&e.LendablePercent, 0)
	}
}

// --- admissionregistration.k8s.io/v1 ---

// defaultValidatingWebhook mirrors SetDefaults_ValidatingWebhook,
// SetDefaults_ServiceReference and SetDefaults_Rule.
func defaultValidatingWebhook(w *admissionregistrationv1.ValidatingWebhook) {
	setDefault(&w.FailurePolicy, admissionregistrationv1.Fail)
	setDefault(&w.MatchPolicy, admissionregistrationv1.Equivalent)
	setDefault(&w.NamespaceSelector, metav1.LabelSelector{})
	setDefault(&w.ObjectSelector, metav1.LabelSelector{})
	setDefault(&w.TimeoutSeconds, 10)
	defaultWebhookClient(&w.ClientConfig, w.Rules)
}

// defaultMutatingWebhook mirrors SetDefaults_MutatingWebhook,
// SetDefaults_ServiceReference and SetDefaults_Rule.
func defaultMutatingWebhook(w *admissionregistrationv1.MutatingWebhook) {
	setDefault(&w.FailurePolicy, admissionregistrationv1.Fail)
	setDefault(&w.MatchPolicy, admissionregistrationv1.Equivalent)
	setDefault(&w.NamespaceSelector, metav1.LabelSelector{})
	setDefault(&w.ObjectSelector, metav1.LabelSelector{})
	setDefault(&w.TimeoutSeconds, 10)
	setDefault(&w.ReinvocationPolicy, admissionregistrationv1.NeverReinvocationPolicy)
	defaultWebhookClient(&w.ClientConfig, w.Rules)
}

func defaultWebhookClient(c *admissionregistrationv1.WebhookClientConfig, rules []admissionregistrationv1.RuleWithOperations) {
	if c.Service != nil {
		setDefault(&c.Service.Port, 443)
	}
	for i := range rules {
		setDefault(&rules[i].Scope, admissionregistrationv1.AllScopes)
	}
}

// defaultMatchResources mirrors SetDefaults_MatchResources and
// SetDefaults_Rule for an admission policy's (or binding's) match
// resources, which may be nil.
func defaultMatchResources(m *admissionregistrationv1.MatchResources) {
	if m == nil {
		return
	}
	setDefault(&m.MatchPolicy, admissionregistrationv1.Equivalent)
	setDefault(&m.NamespaceSelector, metav1.LabelSelector{})
	setDefault(&m.ObjectSelector, metav1.LabelSelector{})
	for _, rules := range [][]admissionregistrationv1.NamedRuleWithOperations{m.ResourceRules, m.ExcludeResourceRules} {
		for i := range rules {
			setDefault(&rules[i].Scope, admissionregistrationv1.AllScopes)
		}
	}
}

// --- resource.k8s.io/v1 ---

// defaultDeviceClaim mirrors SetDefaults_ExactDeviceRequest and
// SetDefaults_DeviceSubRequest (allocation mode ExactCount, of one device)
// and the declarative default of a toleration's operator.
func defaultDeviceClaim(c *resourcev1.DeviceClaim) {
	for i := range c.Requests {
		r := &c.Requests[i]
		if e := r.Exactly; e != nil {
			defaultDeviceCount(&e.AllocationMode, &e.Count)
			defaultDeviceTolerations(e.Tolerations)
		}
		for j := range r.FirstAvailable {
			s := &r.FirstAvailable[j]
			defaultDeviceCount(&s.AllocationMode, &s.Count)
			defaultDeviceTolerations(s.Tolerations)
		}
	}
}

func defaultDeviceCount(mode *resourcev1.DeviceAllocationMode, count *int64) {
	if *mode == "" {
		*mode = resourcev1.DeviceAllocationModeExactCount
	}
	if *mode == resourcev1.DeviceAllocationModeExactCount && *count == 0 {
		*count = 1
	}
}

func defaultDeviceTolerations(ts []resourcev1.DeviceToleration) {
	for i := range ts {
		if ts[i].Operator == "" {
			ts[i].Operator = resourcev1.DeviceTolerationOpEqual
		}
	}
}
