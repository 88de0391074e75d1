package resources

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	certificatesv1 "k8s.io/api/certificates/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	flowcontrolv1 "k8s.io/api/flowcontrol/v1"
	networkingv1 "k8s.io/api/networking/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	schedulingv1 "k8s.io/api/scheduling/v1"
	storagev1 "k8s.io/api/storage/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// Tables of the networking, rbac, storage, coordination, scheduling, node,
// certificates, admissionregistration, flowcontrol, discovery, resource and
// apiregistration kinds.

var ingressTable = &table{
	columns: []metav1.TableColumnDefinition{
		nameColumn,
		column("Class", "string", "The name of the IngressClass resource that should be used for additional configuration"),
		column("Hosts", "string", "Hosts that incoming requests are matched against before the ingress rule"),
		column("Address", "string", "Address is a list containing ingress points for the load-balancer"),
		column("Ports", "string", "Ports of TLS configurations that open"),
		ageColumn,
	},
	cells: func(o object, now time.Time) []any {
		class := "<none>"
		if o.has("spec", "ingressClassName") {
			class = o.str("spec", "ingressClassName")
		}
		ports := "80"
		if o.len("spec", "tls") > 0 {
			ports = "80, 443"
		}
		address := strings.Join(loadBalancerIngress(o.list("status", "loadBalancer", "ingress")), ",")
		return []any{o.name(), class, ingressHosts(o.list("spec", "rules")), address, ports, o.age(now)}
	},
}

// ingressHosts lists up to three rule hosts, "*" when no rule names one.
func ingressHosts(rules []object) string {
	const limit = 3
	var list []string
	more := false
	for _, r := range rules {
		if len(list) == limit {
			more = true
		}
		if !more && r.str("host") != "" {
			list = append(list, r.str("host"))
		}
	}
	if len(list) == 0 {
		return "*"
	}
	if more {
		return fmt.Sprintf("%s + %d more...", strings.Join(list, ","), len(rules)-limit)
	}
	return strings.Join(list, ",")
}

var ingressClassTable = &table{
	columns: []metav1.TableColumnDefinition{
		nameColumn,
		column("Controller", "string", "Controller that is responsible for handling this class"),
		column("Parameters", "string", "A reference to a resource with additional parameters"),
		ageColumn,
	},
	cells: func(o object, now time.Time) []any {
		params := "<none>"
		if p := o.obj("spec", "parameters"); p != nil {
			params = p.str("kind")
			if p.has("apiGroup") {
				params += "." + p.str("apiGroup")
			}
			params += "/" + p.str("name")
		}
		return []any{o.name(), o.str("spec", "controller"), params, o.age(now)}
	},
}

var networkPolicyTable = &table{
	columns: []metav1.TableColumnDefinition{
		nameColumn,
		column("Pod-Selector", "string", networkingv1.NetworkPolicySpec{}.SwaggerDoc()["podSelector"]),
		ageColumn,
	},
	cells: func(o object, now time.Time) []any {
		// podSelector is not a pointer in kube: absent means empty.
		selector := "<none>"
		if o.has("spec", "podSelector") {
			selector = o.formatLabelSelector("spec", "podSelector")
		}
		return []any{o.name(), selector, o.age(now)}
	},
}

var serviceCIDRTable = &table{
	columns: []metav1.TableColumnDefinition{
		nameColumn,
		column("CIDRs", "string", networkingv1.ServiceCIDRSpec{}.SwaggerDoc()["cidrs"]),
		ageColumn,
	},
	cells: func(o object, now time.Time) []any {
		return []any{o.name(), strings.Join(o.strings("spec", "cidrs"), ","), o.age(now)}
	},
}

var ipAddressTable = &table{
	columns: []metav1.TableColumnDefinition{
		nameColumn,
		column("ParentRef", "string", networkingv1.IPAddressSpec{}.SwaggerDoc()["parentRef"]),
	},
	cells: func(o object, now time.Time) []any {
		parent := "<none>"
		if ref := o.obj("spec", "parentRef"); ref != nil {
			parent = strings.ToLower(schema.GroupResource{Group: ref.str("group"), Resource: ref.str("resource")}.String())
			if ns := ref.str("namespace"); ns != "" {
				parent += "/" + ns
			}
			parent += "/" + ref.str("name")
		}
		// kube computes an age here but has no column for it.
		return []any{o.name(), parent}
	},
}

var roleBindingTable = &table{
	columns: []metav1.TableColumnDefinition{
		nameColumn,
		column("Role", "string", rbacv1.RoleBinding{}.SwaggerDoc()["roleRef"]),
		ageColumn,
		wide("Users", "string", "Users in the roleBinding"),
		wide("Groups", "string", "Groups in the roleBinding"),
		wide("ServiceAccounts", "string", "ServiceAccounts in the roleBinding"),
	},
	cells: func(o object, now time.Time) []any {
		var users, groups, sas []string
		for _, s := range o.list("subjects") {
			switch s.str("kind") {
			case rbacv1.UserKind:
				users = append(users, s.str("name"))
			case rbacv1.GroupKind:
				groups = append(groups, s.str("name"))
			case rbacv1.ServiceAccountKind:
				sas = append(sas, s.str("namespace")+"/"+s.str("name"))
			}
		}
		role := o.str("roleRef", "kind") + "/" + o.str("roleRef", "name")
		return []any{
			o.name(), role, o.age(now),
			strings.Join(users, ", "), strings.Join(groups, ", "), strings.Join(sas, ", "),
		}
	},
}

var storageClassTable = &table{
	columns: []metav1.TableColumnDefinition{
		nameColumn,
		column("Provisioner", "string", storagev1.StorageClass{}.SwaggerDoc()["provisioner"]),
		column("ReclaimPolicy", "string", storagev1.StorageClass{}.SwaggerDoc()["reclaimPolicy"]),
		column("VolumeBindingMode", "string", storagev1.StorageClass{}.SwaggerDoc()["volumeBindingMode"]),
		column("AllowVolumeExpansion", "string", storagev1.StorageClass{}.SwaggerDoc()["allowVolumeExpansion"]),
		ageColumn,
	},
	cells: func(o object, now time.Time) []any {
		name := o.name()
		a := o.stringMap("metadata", "annotations")
		if a["storageclass.kubernetes.io/is-default-class"] == "true" || a["storageclass.beta.kubernetes.io/is-default-class"] == "true" {
			name += " (default)"
		}
		reclaim := "Delete"
		if o.has("reclaimPolicy") {
			reclaim = o.str("reclaimPolicy")
		}
		binding := string(storagev1.VolumeBindingImmediate)
		if o.has("volumeBindingMode") {
			binding = o.str("volumeBindingMode")
		}
		return []any{name, o.str("provisioner"), reclaim, binding, o.bool("allowVolumeExpansion"), o.age(now)}
	},
}

var volumeAttachmentTable = &table{
	columns: []metav1.TableColumnDefinition{
		nameColumn,
		{Name: "Attacher", Type: "string", Format: "name", Description: storagev1.VolumeAttachmentSpec{}.SwaggerDoc()["attacher"]},
		column("PV", "string", storagev1.VolumeAttachmentSource{}.SwaggerDoc()["persistentVolumeName"]),
		column("Node", "string", storagev1.VolumeAttachmentSpec{}.SwaggerDoc()["nodeName"]),
		column("Attached", "boolean", storagev1.VolumeAttachmentStatus{}.SwaggerDoc()["attached"]),
		ageColumn,
	},
	cells: func(o object, now time.Time) []any {
		spec := o.obj("spec")
		return []any{
			o.name(), spec.str("attacher"), spec.str("source", "persistentVolumeName"), spec.str("nodeName"),
			o.bool("status", "attached"), o.age(now),
		}
	},
}

var csiNodeTable = &table{
	columns: []metav1.TableColumnDefinition{
		nameColumn,
		column("Drivers", "integer", "Drivers indicates the number of CSI drivers registered on the node"),
		ageColumn,
	},
	cells: func(o object, now time.Time) []any {
		return []any{o.name(), int64(o.len("spec", "drivers")), o.age(now)}
	},
}

var csiDriverTable = &table{
	columns: []metav1.TableColumnDefinition{
		nameColumn,
		column("AttachRequired", "boolean", storagev1.CSIDriverSpec{}.SwaggerDoc()["attachRequired"]),
		column("PodInfoOnMount", "boolean", storagev1.CSIDriverSpec{}.SwaggerDoc()["podInfoOnMount"]),
		column("StorageCapacity", "boolean", storagev1.CSIDriverSpec{}.SwaggerDoc()["storageCapacity"]),
		column("TokenRequests", "string", storagev1.CSIDriverSpec{}.SwaggerDoc()["tokenRequests"]),
		column("RequiresRepublish", "boolean", storagev1.CSIDriverSpec{}.SwaggerDoc()["requiresRepublish"]),
		column("Modes", "string", storagev1.CSIDriverSpec{}.SwaggerDoc()["volumeLifecycleModes"]),
		ageColumn,
	},
	cells: func(o object, now time.Time) []any {
		spec := o.obj("spec")
		attachRequired := true
		if spec.has("attachRequired") {
			attachRequired = spec.bool("attachRequired")
		}
		tokenRequests := "<unset>"
		if spec.has("tokenRequests") {
			var audiences []string
			for _, t := range spec.list("tokenRequests") {
				audiences = append(audiences, t.str("audience"))
			}
			tokenRequests = strings.Join(audiences, ",")
		}
		return []any{
			o.name(), attachRequired, spec.bool("podInfoOnMount"), spec.bool("storageCapacity"), tokenRequests,
			spec.bool("requiresRepublish"), orNone(strings.Join(spec.strings("volumeLifecycleModes"), ",")), o.age(now),
		}
	},
}

var csiStorageCapacityTable = &table{
	columns: []metav1.TableColumnDefinition{
		nameColumn,
		column("StorageClassName", "string", storagev1.CSIStorageCapacity{}.SwaggerDoc()["storageClassName"]),
		column("Capacity", "string", storagev1.CSIStorageCapacity{}.SwaggerDoc()["capacity"]),
	},
	cells: func(o object, _ time.Time) []any {
		capacity := "<unset>"
		if o.has("capacity") {
			capacity = o.quantity("capacity")
		}
		return []any{o.name(), o.str("storageClassName"), capacity}
	},
}

var leaseTable = &table{
	columns: []metav1.TableColumnDefinition{
		nameColumn,
		column("Holder", "string", coordinationv1.LeaseSpec{}.SwaggerDoc()["holderIdentity"]),
		ageColumn,
	},
	cells: func(o object, now time.Time) []any {
		return []any{o.name(), o.str("spec", "holderIdentity"), o.age(now)}
	},
}

var priorityClassTable = &table{
	columns: []metav1.TableColumnDefinition{
		nameColumn,
		column("Value", "integer", schedulingv1.PriorityClass{}.SwaggerDoc()["value"]),
		column("Global-Default", "boolean", schedulingv1.PriorityClass{}.SwaggerDoc()["globalDefault"]),
		ageColumn,
		column("PreemptionPolicy", "string", schedulingv1.PriorityClass{}.SwaggerDoc()["preemptionPolicy"]),
	},
	cells: func(o object, now time.Time) []any {
		return []any{o.name(), o.int("value"), o.bool("globalDefault"), o.age(now), o.str("preemptionPolicy")}
	},
}

var runtimeClassTable = &table{
	columns: []metav1.TableColumnDefinition{nameColumn, column("Handler", "string", "Handler is the name of the underlying runtime and configuration."), ageColumn},
	cells: func(o object, now time.Time) []any {
		return []any{o.name(), o.str("handler"), o.age(now)}
	},
}

var csrTable = &table{
	columns: []metav1.TableColumnDefinition{
		nameColumn,
		ageColumn,
		column("SignerName", "string", certificatesv1.CertificateSigningRequestSpec{}.SwaggerDoc()["signerName"]),
		column("Requestor", "string", certificatesv1.CertificateSigningRequestSpec{}.SwaggerDoc()["request"]),
		column("RequestedDuration", "string", certificatesv1.CertificateSigningRequestSpec{}.SwaggerDoc()["expirationSeconds"]),
		column("Condition", "string", certificatesv1.CertificateSigningRequestStatus{}.SwaggerDoc()["conditions"]),
	},
	cells: func(o object, now time.Time) []any {
		duration := "<none>"
		if o.has("spec", "expirationSeconds") {
			duration = HumanDuration(time.Duration(o.int("spec", "expirationSeconds")) * time.Second)
		}
		return []any{
			o.name(), o.age(now), orNone(o.str("spec", "signerName")), o.str("spec", "username"), duration, csrCondition(o),
		}
	},
}

// csrCondition is Denied, Approved or Pending, then ",Failed" and ",Issued"
// as they apply.
func csrCondition(o object) string {
	var approved, denied, failed bool
	for _, c := range o.list("status", "conditions") {
		switch certificatesv1.RequestConditionType(c.str("type")) {
		case certificatesv1.CertificateApproved:
			approved = true
		case certificatesv1.CertificateDenied:
			denied = true
		case certificatesv1.CertificateFailed:
			failed = true
		}
	}
	status := "Pending"
	switch {
	case denied:
		status = "Denied"
	case approved:
		status = "Approved"
	}
	if failed {
		status += ",Failed"
	}
	if o.str("status", "certificate") != "" {
		status += ",Issued"
	}
	return status
}

var clusterTrustBundleTable = &table{
	columns: []metav1.TableColumnDefinition{
		nameColumn,
		column("SignerName", "string", certificatesv1.ClusterTrustBundleSpec{}.SwaggerDoc()["signerName"]),
	},
	cells: func(o object, _ time.Time) []any {
		return []any{o.name(), orNone(o.str("spec", "signerName"))}
	},
}

var webhookConfigurationTable = &table{
	columns: []metav1.TableColumnDefinition{
		nameColumn,
		column("Webhooks", "integer", "Webhooks indicates the number of webhooks registered in this configuration"),
		ageColumn,
	},
	cells: func(o object, now time.Time) []any {
		return []any{o.name(), int64(o.len("webhooks")), o.age(now)}
	},
}

// paramKind is "<unset>" or apiVersion/kind.
func paramKind(o object) string {
	if !o.has("spec", "paramKind") {
		return "<unset>"
	}
	return o.str("spec", "paramKind", "apiVersion") + "/" + o.str("spec", "paramKind", "kind")
}

var validatingAdmissionPolicyTable = &table{
	columns: []metav1.TableColumnDefinition{
		nameColumn,
		column("Validations", "integer", "Validations indicates the number of validation rules defined in this configuration"),
		column("ParamKind", "string", "ParamKind specifies the kind of resources used to parameterize this policy"),
		ageColumn,
	},
	cells: func(o object, now time.Time) []any {
		return []any{o.name(), int64(o.len("spec", "validations")), paramKind(o), o.age(now)}
	},
}

var mutatingAdmissionPolicyTable = &table{
	columns: []metav1.TableColumnDefinition{
		nameColumn,
		column("Mutations", "integer", "Mutation indicates the number of mutations rules defined in this configuration"),
		column("ParamKind", "string", "ParamKind specifies the kind of resources used to parameterize this policy"),
		ageColumn,
	},
	cells: func(o object, now time.Time) []any {
		return []any{o.name(), int64(o.len("spec", "mutations")), paramKind(o), o.age(now)}
	},
}

// policyBindingTable serves validating and mutating admission policy
// bindings.
var policyBindingTable = &table{
	columns: []metav1.TableColumnDefinition{
		nameColumn,
		column("PolicyName", "string", "PolicyName indicates the policy definition which the policy binding binded to"),
		column("ParamRef", "string", "ParamRef indicates the param resource which sets the configration param"),
		ageColumn,
	},
	cells: func(o object, now time.Time) []any {
		param := "<unset>"
		if ref := o.obj("spec", "paramRef"); ref != nil {
			switch {
			case ref.str("name") != "" && ref.str("namespace") != "":
				param = ref.str("namespace") + "/" + ref.str("name")
			case ref.str("name") != "":
				// The param may be cluster-scoped or in any namespace.
				param = "*/" + ref.str("name")
			case ref.has("selector"):
				param = labelSelectorString(ref, "selector")
			}
		}
		return []any{o.name(), o.str("spec", "policyName"), param, o.age(now)}
	},
}

// labelSelectorString prints a metav1.LabelSelector with its String method
// (the Go struct dump kube shows for a binding's paramRef selector).
func labelSelectorString(o object, path ...string) string {
	sel, err := o.labelSelector(path...)
	if err != nil || sel == nil {
		return "<error>"
	}
	return sel.String()
}

var flowSchemaTable = &table{
	columns: []metav1.TableColumnDefinition{
		nameColumn,
		column("PriorityLevel", "string", flowcontrolv1.PriorityLevelConfigurationReference{}.SwaggerDoc()["name"]),
		column("MatchingPrecedence", "string", flowcontrolv1.FlowSchemaSpec{}.SwaggerDoc()["matchingPrecedence"]),
		column("DistinguisherMethod", "string", flowcontrolv1.FlowSchemaSpec{}.SwaggerDoc()["distinguisherMethod"]),
		ageColumn,
		column("MissingPL", "string", "references a broken or non-existent PriorityLevelConfiguration"),
	},
	cells: func(o object, now time.Time) []any {
		spec := o.obj("spec")
		distinguisher := "<none>"
		if spec.has("distinguisherMethod") {
			distinguisher = spec.str("distinguisherMethod", "type")
		}
		missing := "?"
		if c := o.condition(string(flowcontrolv1.FlowSchemaConditionDangling)); c != nil {
			missing = c.str("status")
		}
		return []any{
			o.name(), spec.str("priorityLevelConfiguration", "name"), spec.int("matchingPrecedence"), distinguisher,
			o.age(now), missing,
		}
	},
}

var priorityLevelTable = &table{
	columns: []metav1.TableColumnDefinition{
		nameColumn,
		column("Type", "string", flowcontrolv1.PriorityLevelConfigurationSpec{}.SwaggerDoc()["type"]),
		column("NominalConcurrencyShares", "string", flowcontrolv1.LimitedPriorityLevelConfiguration{}.SwaggerDoc()["nominalConcurrencyShares"]),
		column("Queues", "string", flowcontrolv1.QueuingConfiguration{}.SwaggerDoc()["queues"]),
		column("HandSize", "string", flowcontrolv1.QueuingConfiguration{}.SwaggerDoc()["handSize"]),
		column("QueueLengthLimit", "string", flowcontrolv1.QueuingConfiguration{}.SwaggerDoc()["queueLengthLimit"]),
		ageColumn,
	},
	cells: func(o object, now time.Time) []any {
		var shares, queues, handSize, queueLength any = "<none>", "<none>", "<none>", "<none>"
		if limited := o.obj("spec", "limited"); limited != nil {
			shares = limited.int("nominalConcurrencyShares")
			if q := limited.obj("limitResponse", "queuing"); q != nil {
				queues, handSize, queueLength = q.int("queues"), q.int("handSize"), q.int("queueLengthLimit")
			}
		}
		return []any{o.name(), o.str("spec", "type"), shares, queues, handSize, queueLength, o.age(now)}
	},
}

var endpointSliceTable = &table{
	columns: []metav1.TableColumnDefinition{
		nameColumn,
		column("AddressType", "string", "addressType specifies the type of address carried by this EndpointSlice."),
		column("Ports", "string", "ports specifies the list of network ports exposed by each endpoint in this slice."),
		column("Endpoints", "string", "endpoints is a list of unique endpoints in this slice."),
		ageColumn,
	},
	cells: func(o object, now time.Time) []any {
		var ports []string
		for _, p := range o.list("ports") {
			switch {
			case p.has("port"):
				ports = append(ports, strconv.FormatInt(p.int("port"), 10))
			case p.has("name"):
				ports = append(ports, p.str("name"))
			default:
				ports = append(ports, "*")
			}
		}
		var addresses []string
		for _, e := range o.list("endpoints") {
			addresses = append(addresses, e.strings("addresses")...)
		}
		return []any{o.name(), o.str("addressType"), firstThree(ports), firstThree(addresses), o.age(now)}
	},
}

// firstThree joins up to three items with commas, then "+ N more...";
// "<unset>" when there are none.
func firstThree(items []string) string {
	const limit = 3
	switch {
	case len(items) == 0:
		return "<unset>"
	case len(items) > limit:
		return fmt.Sprintf("%s + %d more...", strings.Join(items[:limit], ","), len(items)-limit)
	}
	return strings.Join(items, ",")
}

var resourceClaimTable = &table{
	columns: []metav1.TableColumnDefinition{
		nameColumn,
		column("State", "string", "A summary of the current state (allocated, pending, reserved, etc.)."),
		ageColumn,
	},
	cells: func(o object, now time.Time) []any {
		var states []string
		if o.deleting() {
			states = append(states, "deleted")
		}
		switch {
		case !o.has("status", "allocation"):
			if !o.deleting() {
				states = append(states, "pending")
			}
		default:
			states = append(states, "allocated")
			if o.len("status", "reservedFor") > 0 {
				states = append(states, "reserved")
			}
		}
		return []any{o.name(), strings.Join(states, ","), o.age(now)}
	},
}

var resourceSliceTable = &table{
	columns: []metav1.TableColumnDefinition{
		nameColumn,
		column("Node", "string", "NodeName identifies the node which provides the resources in this pool."),
		column("Driver", "string", "Driver identifies the DRA driver providing the capacity information."),
		column("Pool", "string", "Name is used to identify the pool."),
		ageColumn,
	},
	cells: func(o object, now time.Time) []any {
		spec := o.obj("spec")
		return []any{o.name(), spec.str("nodeName"), spec.str("driver"), spec.str("pool", "name"), o.age(now)}
	},
}

// apiServiceTable is kube-aggregator's: SERVICE is namespace/name or
// "Local", AVAILABLE the Available condition's status, with its reason when
// it is not True.
var apiServiceTable = &table{
	columns: []metav1.TableColumnDefinition{
		nameColumn,
		column("Service", "string", "The reference to the service that hosts this API endpoint."),
		column("Available", "string", "Whether this service is available."),
		ageColumn,
	},
	cells: func(o object, now time.Time) []any {
		service := "Local"
		if s := o.obj("spec", "service"); s != nil {
			service = s.str("namespace") + "/" + s.str("name")
		}
		available := "Unknown"
		if c := o.condition("Available"); c != nil {
			available = c.str("status")
			if available != "True" && c.str("reason") != "" {
				available = fmt.Sprintf("%s (%s)", available, c.str("reason"))
			}
		}
		return []any{o.name(), service, available, o.age(now)}
	},
}
