package resources

import (
	"cmp"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// Verb sets as discovery lists them (sorted).
var (
	allVerbs = []string{"create", "delete", "deletecollection", "get", "list", "patch", "update", "watch"}
	// Namespaces cannot be deleted as a collection.
	noCollectionDelete = []string{"create", "delete", "get", "list", "patch", "update", "watch"}
	// Reviews (tokenreviews, subjectaccessreviews, ...) are virtual: a
	// create evaluates the request and stores nothing.
	createOnly = []string{"create"}
)

// Categories kube assigns.
var (
	all           = []string{"all"}
	apiExtensions = []string{"api-extensions"}
)

// entry is one line of the catalogue; newCatalog turns it into an Info.
type entry struct {
	group, version, resource, kind string
	namespaced                     bool
	verbs                          []string // nil: allVerbs
	short, categories              []string
	status, scale                  bool
	sub                            []Subresource
	fields                         func(map[string]any) fields.Set
	table                          TableConvertor // nil: DefaultTable
}

// entries returns the catalogue: every resource a default kube-apiserver
// 1.37 serves, at its preferred version, with the scope, verbs, short names,
// categories and subresources kube-apiserver's discovery reports.
//
// Not served (yet), and why:
//   - core/v1 bindings and pods/binding: scheduling is done by the edge
//     clusters' own schedulers, never at the root.
//   - core/v1 componentstatuses: deprecated; there are no components to probe.
//   - pods/log, pods/exec, pods/attach, pods/portforward, pods/proxy,
//     pods/eviction, pods/ephemeralcontainers, pods/resize, pods/checkpoint,
//     nodes/proxy, services/proxy: they need a kubelet or a network path to
//     the workload, which the root does not have.
//   - autoscaling/v1 horizontalpodautoscalers: served by kube as well, but
//     autoscaling/v2 is the preferred version and the one served here.
//   - every alpha and beta group version: kube-apiserver serves none by
//     default (KEP-3136; the last legacy beta resources went in 1.32).
func entries() []entry {
	return []entry{
		// core/v1
		{group: "", version: "v1", resource: "configmaps", kind: "ConfigMap", namespaced: true, short: names("cm"), table: configMapTable},
		{group: "", version: "v1", resource: "endpoints", kind: "Endpoints", namespaced: true, short: names("ep"), table: endpointsTable},
		{group: "", version: "v1", resource: "events", kind: "Event", namespaced: true, short: names("ev"), fields: coreEventFields, table: coreEventTable},
		{group: "", version: "v1", resource: "limitranges", kind: "LimitRange", namespaced: true, short: names("limits")},
		{group: "", version: "v1", resource: "namespaces", kind: "Namespace", verbs: noCollectionDelete, short: names("ns"), status: true,
			sub: []Subresource{{Name: "finalize", Verbs: []string{"update"}}}, fields: namespaceFields, table: namespaceTable},
		{group: "", version: "v1", resource: "nodes", kind: "Node", short: names("no"), status: true, fields: nodeFields, table: nodeTable},
		{group: "", version: "v1", resource: "persistentvolumeclaims", kind: "PersistentVolumeClaim", namespaced: true, short: names("pvc"), status: true, table: pvcTable},
		{group: "", version: "v1", resource: "persistentvolumes", kind: "PersistentVolume", short: names("pv"), status: true, table: pvTable},
		{group: "", version: "v1", resource: "pods", kind: "Pod", namespaced: true, short: names("po"), categories: all, status: true, fields: podFields, table: podTable},
		{group: "", version: "v1", resource: "podtemplates", kind: "PodTemplate", namespaced: true, table: podTemplateTable},
		{group: "", version: "v1", resource: "replicationcontrollers", kind: "ReplicationController", namespaced: true, short: names("rc"), categories: all, status: true, scale: true,
			fields: replicasFields, table: replicationControllerTable},
		{group: "", version: "v1", resource: "resourcequotas", kind: "ResourceQuota", namespaced: true, short: names("quota"), status: true, table: resourceQuotaTable},
		{group: "", version: "v1", resource: "secrets", kind: "Secret", namespaced: true, fields: secretFields, table: secretTable},
		{group: "", version: "v1", resource: "serviceaccounts", kind: "ServiceAccount", namespaced: true, short: names("sa"),
			sub: []Subresource{{Name: "token", Group: "authentication.k8s.io", Version: "v1", Kind: "TokenRequest", Verbs: createOnly}}, table: serviceAccountTable},
		{group: "", version: "v1", resource: "services", kind: "Service", namespaced: true, short: names("svc"), categories: all, status: true, fields: serviceFields, table: serviceTable},

		// admissionregistration.k8s.io/v1
		{group: "admissionregistration.k8s.io", version: "v1", resource: "mutatingadmissionpolicies", kind: "MutatingAdmissionPolicy", categories: apiExtensions, table: mutatingAdmissionPolicyTable},
		{group: "admissionregistration.k8s.io", version: "v1", resource: "mutatingadmissionpolicybindings", kind: "MutatingAdmissionPolicyBinding", categories: apiExtensions, table: policyBindingTable},
		{group: "admissionregistration.k8s.io", version: "v1", resource: "mutatingwebhookconfigurations", kind: "MutatingWebhookConfiguration", categories: apiExtensions, table: webhookConfigurationTable},
		{group: "admissionregistration.k8s.io", version: "v1", resource: "validatingadmissionpolicies", kind: "ValidatingAdmissionPolicy", categories: apiExtensions, status: true, table: validatingAdmissionPolicyTable},
		{group: "admissionregistration.k8s.io", version: "v1", resource: "validatingadmissionpolicybindings", kind: "ValidatingAdmissionPolicyBinding", categories: apiExtensions, table: policyBindingTable},
		{group: "admissionregistration.k8s.io", version: "v1", resource: "validatingwebhookconfigurations", kind: "ValidatingWebhookConfiguration", categories: apiExtensions, table: webhookConfigurationTable},

		// apiextensions.k8s.io/v1 (kube's apiextensions-apiserver prints CRDs
		// with the generic NAME, CREATED AT table).
		{group: "apiextensions.k8s.io", version: "v1", resource: "customresourcedefinitions", kind: "CustomResourceDefinition", short: names("crd", "crds"), categories: apiExtensions, status: true},

		// apiregistration.k8s.io/v1
		{group: "apiregistration.k8s.io", version: "v1", resource: "apiservices", kind: "APIService", categories: apiExtensions, status: true, table: apiServiceTable},

		// apps/v1
		{group: "apps", version: "v1", resource: "controllerrevisions", kind: "ControllerRevision", namespaced: true, table: controllerRevisionTable},
		{group: "apps", version: "v1", resource: "daemonsets", kind: "DaemonSet", namespaced: true, short: names("ds"), categories: all, status: true, table: daemonSetTable},
		{group: "apps", version: "v1", resource: "deployments", kind: "Deployment", namespaced: true, short: names("deploy"), categories: all, status: true, scale: true, table: deploymentTable},
		{group: "apps", version: "v1", resource: "replicasets", kind: "ReplicaSet", namespaced: true, short: names("rs"), categories: all, status: true, scale: true,
			fields: replicasFields, table: replicaSetTable},
		{group: "apps", version: "v1", resource: "statefulsets", kind: "StatefulSet", namespaced: true, short: names("sts"), categories: all, status: true, scale: true, table: statefulSetTable},

		// authentication.k8s.io/v1
		{group: "authentication.k8s.io", version: "v1", resource: "selfsubjectreviews", kind: "SelfSubjectReview", verbs: createOnly},
		{group: "authentication.k8s.io", version: "v1", resource: "tokenreviews", kind: "TokenReview", verbs: createOnly},

		// authorization.k8s.io/v1
		{group: "authorization.k8s.io", version: "v1", resource: "localsubjectaccessreviews", kind: "LocalSubjectAccessReview", namespaced: true, verbs: createOnly},
		{group: "authorization.k8s.io", version: "v1", resource: "selfsubjectaccessreviews", kind: "SelfSubjectAccessReview", verbs: createOnly},
		{group: "authorization.k8s.io", version: "v1", resource: "selfsubjectrulesreviews", kind: "SelfSubjectRulesReview", verbs: createOnly},
		{group: "authorization.k8s.io", version: "v1", resource: "subjectaccessreviews", kind: "SubjectAccessReview", verbs: createOnly},

		// autoscaling/v2
		{group: "autoscaling", version: "v2", resource: "horizontalpodautoscalers", kind: "HorizontalPodAutoscaler", namespaced: true, short: names("hpa"), categories: all, status: true, table: hpaTable},

		// batch/v1
		{group: "batch", version: "v1", resource: "cronjobs", kind: "CronJob", namespaced: true, short: names("cj"), categories: all, status: true, table: cronJobTable},
		{group: "batch", version: "v1", resource: "jobs", kind: "Job", namespaced: true, categories: all, status: true, fields: jobFields, table: jobTable},

		// certificates.k8s.io/v1
		{group: "certificates.k8s.io", version: "v1", resource: "certificatesigningrequests", kind: "CertificateSigningRequest", short: names("csr"), status: true,
			sub: []Subresource{{Name: "approval", Verbs: []string{"get", "patch", "update"}}}, fields: signerNameFields, table: csrTable},
		{group: "certificates.k8s.io", version: "v1", resource: "clustertrustbundles", kind: "ClusterTrustBundle", fields: signerNameFields, table: clusterTrustBundleTable},
		{group: "certificates.k8s.io", version: "v1", resource: "podcertificaterequests", kind: "PodCertificateRequest", namespaced: true, status: true, fields: podCertificateRequestFields},

		// coordination.k8s.io/v1
		{group: "coordination.k8s.io", version: "v1", resource: "leases", kind: "Lease", namespaced: true, table: leaseTable},

		// discovery.k8s.io/v1
		{group: "discovery.k8s.io", version: "v1", resource: "endpointslices", kind: "EndpointSlice", namespaced: true, table: endpointSliceTable},

		// events.k8s.io/v1: in kube the same stored events as core/v1 events,
		// seen through another schema.
		{group: "events.k8s.io", version: "v1", resource: "events", kind: "Event", namespaced: true, short: names("ev"), fields: eventsV1Fields, table: eventsV1Table},

		// flowcontrol.apiserver.k8s.io/v1
		{group: "flowcontrol.apiserver.k8s.io", version: "v1", resource: "flowschemas", kind: "FlowSchema", status: true, table: flowSchemaTable},
		{group: "flowcontrol.apiserver.k8s.io", version: "v1", resource: "prioritylevelconfigurations", kind: "PriorityLevelConfiguration", status: true, table: priorityLevelTable},

		// networking.k8s.io/v1
		{group: "networking.k8s.io", version: "v1", resource: "ingressclasses", kind: "IngressClass", table: ingressClassTable},
		{group: "networking.k8s.io", version: "v1", resource: "ingresses", kind: "Ingress", namespaced: true, short: names("ing"), status: true, table: ingressTable},
		{group: "networking.k8s.io", version: "v1", resource: "ipaddresses", kind: "IPAddress", short: names("ip"), table: ipAddressTable},
		{group: "networking.k8s.io", version: "v1", resource: "networkpolicies", kind: "NetworkPolicy", namespaced: true, short: names("netpol"), table: networkPolicyTable},
		{group: "networking.k8s.io", version: "v1", resource: "servicecidrs", kind: "ServiceCIDR", status: true, table: serviceCIDRTable},

		// node.k8s.io/v1
		{group: "node.k8s.io", version: "v1", resource: "runtimeclasses", kind: "RuntimeClass", table: runtimeClassTable},

		// policy/v1
		{group: "policy", version: "v1", resource: "poddisruptionbudgets", kind: "PodDisruptionBudget", namespaced: true, short: names("pdb"), status: true, table: pdbTable},

		// rbac.authorization.k8s.io/v1 (roles print with the generic table,
		// as in kube).
		{group: "rbac.authorization.k8s.io", version: "v1", resource: "clusterrolebindings", kind: "ClusterRoleBinding", table: roleBindingTable},
		{group: "rbac.authorization.k8s.io", version: "v1", resource: "clusterroles", kind: "ClusterRole"},
		{group: "rbac.authorization.k8s.io", version: "v1", resource: "rolebindings", kind: "RoleBinding", namespaced: true, table: roleBindingTable},
		{group: "rbac.authorization.k8s.io", version: "v1", resource: "roles", kind: "Role", namespaced: true},

		// resource.k8s.io/v1
		{group: "resource.k8s.io", version: "v1", resource: "deviceclasses", kind: "DeviceClass", table: nameAgeTable},
		{group: "resource.k8s.io", version: "v1", resource: "devicetaintrules", kind: "DeviceTaintRule", status: true},
		{group: "resource.k8s.io", version: "v1", resource: "resourceclaims", kind: "ResourceClaim", namespaced: true, status: true, table: resourceClaimTable},
		{group: "resource.k8s.io", version: "v1", resource: "resourceclaimtemplates", kind: "ResourceClaimTemplate", namespaced: true, table: nameAgeTable},
		{group: "resource.k8s.io", version: "v1", resource: "resourceslices", kind: "ResourceSlice", fields: resourceSliceFields, table: resourceSliceTable},

		// scheduling.k8s.io/v1
		{group: "scheduling.k8s.io", version: "v1", resource: "priorityclasses", kind: "PriorityClass", short: names("pc"), table: priorityClassTable},

		// storage.k8s.io/v1
		{group: "storage.k8s.io", version: "v1", resource: "csidrivers", kind: "CSIDriver", table: csiDriverTable},
		{group: "storage.k8s.io", version: "v1", resource: "csinodes", kind: "CSINode", table: csiNodeTable},
		{group: "storage.k8s.io", version: "v1", resource: "csistoragecapacities", kind: "CSIStorageCapacity", namespaced: true, table: csiStorageCapacityTable},
		{group: "storage.k8s.io", version: "v1", resource: "storageclasses", kind: "StorageClass", short: names("sc"), table: storageClassTable},
		{group: "storage.k8s.io", version: "v1", resource: "volumeattachments", kind: "VolumeAttachment", status: true, table: volumeAttachmentTable},
		{group: "storage.k8s.io", version: "v1", resource: "volumeattributesclasses", kind: "VolumeAttributesClass", short: names("vac")},

		// storagemigration.k8s.io/v1
		{group: "storagemigration.k8s.io", version: "v1", resource: "storageversionmigrations", kind: "StorageVersionMigration", status: true},
	}
}

func names(s ...string) []string { return s }

// builtinScale is the scale subresource of every built-in that has one:
// replicas at .spec.replicas and .status.replicas, and the selector computed
// from .spec.selector.
var builtinScale = ScaleInfo{
	SpecReplicasPath:   ".spec.replicas",
	StatusReplicasPath: ".status.replicas",
	LabelSelectorPath:  ".spec.selector",
}

// newCatalog builds the Infos from entries, checks each kind against the
// scheme and sorts them: core group first, then by group, then by resource.
func newCatalog() []*Info {
	es := entries()
	infos := make([]*Info, 0, len(es))
	for _, e := range es {
		gvk := schema.GroupVersionKind{Group: e.group, Version: e.version, Kind: e.kind}
		info := &Info{
			Group:        e.group,
			Version:      e.version,
			Resource:     e.resource,
			Kind:         e.kind,
			ListKind:     e.kind + "List",
			Singular:     strings.ToLower(e.kind),
			Namespaced:   e.namespaced,
			Verbs:        e.verbs,
			ShortNames:   e.short,
			Categories:   e.categories,
			Status:       e.status,
			Strategic:    true,
			New:          newFunc(gvk),
			Fields:       e.fields,
			Subresources: e.sub,
			Table:        e.table,
		}
		if info.Verbs == nil {
			info.Verbs = allVerbs
		}
		if e.scale {
			s := builtinScale
			info.Scale = &s
		}
		if info.Table == nil {
			info.Table = DefaultTable()
		}
		if !slices.Contains(info.Verbs, "list") {
			// Reviews cannot be listed and have no list type.
			info.ListKind = ""
		}
		for _, k := range []string{info.Kind, info.ListKind} {
			if k != "" && !scheme.Recognizes(gvk.GroupVersion().WithKind(k)) {
				panic("resources: kind not in scheme: " + gvk.GroupVersion().WithKind(k).String())
			}
		}
		infos = append(infos, info)
	}
	slices.SortFunc(infos, func(a, b *Info) int {
		return cmp.Or(cmp.Compare(a.Group, b.Group), cmp.Compare(a.Resource, b.Resource))
	})
	return infos
}

// newFunc returns a constructor of gvk's Go type from the scheme.
func newFunc(gvk schema.GroupVersionKind) func() runtime.Object {
	return func() runtime.Object {
		obj, err := scheme.New(gvk)
		if err != nil {
			// newCatalog checked that the scheme recognizes gvk.
			panic("resources: " + err.Error())
		}
		obj.GetObjectKind().SetGroupVersionKind(gvk)
		return obj
	}
}
