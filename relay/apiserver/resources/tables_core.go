package resources

import (
	"fmt"
	"net"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Tables of core/v1 kinds. Column names, types and order are kube's
// (pkg/printers/internalversion); so is the way each cell is computed.

var podTable = &table{
	columns: []metav1.TableColumnDefinition{
		nameColumn,
		column("Ready", "string", "The aggregate readiness state of this pod for accepting traffic."),
		column("Status", "string", "The aggregate status of the containers in this pod."),
		column("Restarts", "string", "The number of times the containers in this pod have been restarted and when the last container in this pod has restarted."),
		ageColumn,
		wide("IP", "string", corev1.PodStatus{}.SwaggerDoc()["podIP"]),
		wide("Node", "string", corev1.PodSpec{}.SwaggerDoc()["nodeName"]),
		wide("Nominated Node", "string", corev1.PodStatus{}.SwaggerDoc()["nominatedNodeName"]),
		wide("Readiness Gates", "string", corev1.PodSpec{}.SwaggerDoc()["readinessGates"]),
	},
	cells: podCells,
}

// podCells computes a pod's row. STATUS is the phase, overridden in turn by
// the pod's reason, a scheduling gate, the first init container that has
// not finished, the state of the regular containers (last one wins), and
// finally "Terminating" (or "Unknown" for a pod lost with its node) while
// the pod is being deleted. READY and RESTARTS count regular containers and
// restartable init containers (sidecars); RESTARTS carries "(5m ago)" after
// the last restart.
func podCells(pod object, now time.Time) []any {
	spec, status := pod.obj("spec"), pod.obj("status")
	conditions := status.list("conditions")
	total := len(spec.list("containers"))
	ready := 0
	restarts := 0
	var lastRestart time.Time

	phase := status.str("phase")
	reason := phase
	if r := status.str("reason"); r != "" {
		reason = r
	}
	for _, c := range conditions {
		if c.str("type") == string(corev1.PodScheduled) && c.str("reason") == corev1.PodReasonSchedulingGated {
			reason = corev1.PodReasonSchedulingGated
		}
	}

	initContainers := spec.list("initContainers")
	sidecar := make(map[string]bool)
	for _, c := range initContainers {
		if c.str("restartPolicy") == string(corev1.ContainerRestartPolicyAlways) {
			sidecar[c.str("name")] = true
			total++
		}
	}

	sidecarRestarts := 0
	var lastSidecarRestart time.Time
	initializing := false
	for i, c := range status.list("initContainerStatuses") {
		n := int(c.int("restartCount"))
		finished := c.time("lastState", "terminated", "finishedAt")
		restarts += n
		lastRestart = later(lastRestart, finished)
		isSidecar := sidecar[c.str("name")]
		if isSidecar {
			sidecarRestarts += n
			lastSidecarRestart = later(lastSidecarRestart, finished)
		}
		terminated, waiting := c.obj("state", "terminated"), c.obj("state", "waiting")
		switch {
		case terminated != nil && terminated.int("exitCode") == 0:
			continue
		case isSidecar && c.bool("started"):
			if c.bool("ready") {
				ready++
			}
			continue
		case terminated != nil:
			// Initialization failed.
			switch {
			case terminated.str("reason") != "":
				reason = "Init:" + terminated.str("reason")
			case terminated.int("signal") != 0:
				reason = fmt.Sprintf("Init:Signal:%d", terminated.int("signal"))
			default:
				reason = fmt.Sprintf("Init:ExitCode:%d", terminated.int("exitCode"))
			}
		case waiting != nil && waiting.str("reason") != "" && waiting.str("reason") != "PodInitializing":
			reason = "Init:" + waiting.str("reason")
		default:
			reason = fmt.Sprintf("Init:%d/%d", i, len(initContainers))
		}
		initializing = true
		break
	}

	if !initializing || conditionTrue(conditions, string(corev1.PodInitialized)) {
		restarts, lastRestart = sidecarRestarts, lastSidecarRestart
		hasRunning := false
		statuses := status.list("containerStatuses")
		for i := len(statuses) - 1; i >= 0; i-- {
			c := statuses[i]
			restarts += int(c.int("restartCount"))
			lastRestart = later(lastRestart, c.time("lastState", "terminated", "finishedAt"))
			terminated, waiting := c.obj("state", "terminated"), c.obj("state", "waiting")
			switch {
			case waiting != nil && waiting.str("reason") != "":
				reason = waiting.str("reason")
			case terminated != nil && terminated.str("reason") != "":
				reason = terminated.str("reason")
			case terminated != nil && terminated.int("signal") != 0:
				reason = fmt.Sprintf("Signal:%d", terminated.int("signal"))
			case terminated != nil:
				reason = fmt.Sprintf("ExitCode:%d", terminated.int("exitCode"))
			case c.bool("ready") && c.has("state", "running"):
				hasRunning = true
				ready++
			}
		}
		// A pod whose last container completed while another still runs
		// is not "Completed".
		if reason == "Completed" && hasRunning {
			if conditionTrue(conditions, string(corev1.PodReady)) {
				reason = "Running"
			} else {
				reason = "NotReady"
			}
		}
	}

	if pod.deleting() {
		switch {
		case status.str("reason") == "NodeLost":
			reason = "Unknown"
		case phase != string(corev1.PodSucceeded) && phase != string(corev1.PodFailed):
			reason = "Terminating"
		}
	}

	restartsCell := strconv.Itoa(restarts)
	if restarts != 0 && !lastRestart.IsZero() {
		restartsCell = fmt.Sprintf("%d (%s ago)", restarts, since(lastRestart, now))
	}

	podIP := podIP(status)
	if podIP == "" {
		podIP = "<none>"
	}
	readinessGates := "<none>"
	if gates := spec.list("readinessGates"); len(gates) > 0 {
		n := 0
		for _, g := range gates {
			for _, c := range conditions {
				if c.str("type") == g.str("conditionType") {
					if c.str("status") == string(corev1.ConditionTrue) {
						n++
					}
					break
				}
			}
		}
		readinessGates = fmt.Sprintf("%d/%d", n, len(gates))
	}
	return []any{
		pod.name(), fmt.Sprintf("%d/%d", ready, total), reason, restartsCell, pod.age(now),
		podIP, orNone(spec.str("nodeName")), orNone(status.str("nominatedNodeName")), readinessGates,
	}
}

// podIP is the pod's primary IP: status.podIPs[0], or status.podIP for an
// object written without podIPs (kube's conversion fills one from the other).
func podIP(status object) string {
	if ips := status.list("podIPs"); len(ips) > 0 {
		return ips[0].str("ip")
	}
	return status.str("podIP")
}

// conditionTrue reports whether the first condition of the given type has
// status "True".
func conditionTrue(conditions []object, kind string) bool {
	for _, c := range conditions {
		if c.str("type") == kind {
			return c.str("status") == string(corev1.ConditionTrue)
		}
	}
	return false
}

func later(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}

// orNone returns s, or "<none>" when s is empty.
func orNone(s string) string {
	if s == "" {
		return "<none>"
	}
	return s
}

// containerCells lays out the names and images of the containers at path,
// comma separated.
func containerCells(o object, path ...string) (names, images string) {
	cs := o.list(path...)
	n, im := make([]string, len(cs)), make([]string, len(cs))
	for i, c := range cs {
		n[i], im[i] = c.str("name"), c.str("image")
	}
	return strings.Join(n, ","), strings.Join(im, ",")
}

var podTemplateTable = &table{
	columns: []metav1.TableColumnDefinition{
		nameColumn,
		column("Containers", "string", "Names of each container in the template."),
		column("Images", "string", "Images referenced by each container in the template."),
		column("Pod Labels", "string", "The labels for the pod template."),
	},
	cells: func(o object, _ time.Time) []any {
		names, images := containerCells(o, "template", "spec", "containers")
		return []any{o.name(), names, images, o.formatLabels("template", "metadata", "labels")}
	},
}

var replicationControllerTable = &table{
	columns: []metav1.TableColumnDefinition{
		nameColumn,
		column("Desired", "integer", corev1.ReplicationControllerSpec{}.SwaggerDoc()["replicas"]),
		column("Current", "integer", corev1.ReplicationControllerStatus{}.SwaggerDoc()["replicas"]),
		column("Ready", "integer", corev1.ReplicationControllerStatus{}.SwaggerDoc()["readyReplicas"]),
		ageColumn,
		containersColumn,
		imagesColumn,
		wide("Selector", "string", corev1.ReplicationControllerSpec{}.SwaggerDoc()["selector"]),
	},
	cells: func(o object, now time.Time) []any {
		names, images := containerCells(o, "spec", "template", "spec", "containers")
		return []any{
			o.name(), o.int("spec", "replicas"), o.int("status", "replicas"), o.int("status", "readyReplicas"), o.age(now),
			names, images, o.formatLabels("spec", "selector"),
		}
	},
}

var serviceTable = &table{
	columns: []metav1.TableColumnDefinition{
		nameColumn,
		column("Type", "string", corev1.ServiceSpec{}.SwaggerDoc()["type"]),
		column("Cluster-IP", "string", corev1.ServiceSpec{}.SwaggerDoc()["clusterIP"]),
		column("External-IP", "string", corev1.ServiceSpec{}.SwaggerDoc()["externalIPs"]),
		column("Port(s)", "string", corev1.ServiceSpec{}.SwaggerDoc()["ports"]),
		ageColumn,
		wide("Selector", "string", corev1.ServiceSpec{}.SwaggerDoc()["selector"]),
	},
	cells: func(o object, now time.Time) []any {
		spec := o.obj("spec")
		clusterIP := "<none>"
		if ips := spec.strings("clusterIPs"); len(ips) > 0 {
			clusterIP = ips[0]
		} else if ip := spec.str("clusterIP"); ip != "" {
			// Written without clusterIPs; kube's conversion fills one
			// from the other.
			clusterIP = ip
		}
		ports := make([]string, 0, spec.len("ports"))
		for _, p := range spec.list("ports") {
			if np := p.int("nodePort"); np > 0 {
				ports = append(ports, fmt.Sprintf("%d:%d/%s", p.int("port"), np, p.str("protocol")))
			} else {
				ports = append(ports, fmt.Sprintf("%d/%s", p.int("port"), p.str("protocol")))
			}
		}
		portsCell := strings.Join(ports, ",")
		if portsCell == "" {
			portsCell = "<none>"
		}
		return []any{
			o.name(), spec.str("type"), clusterIP, serviceExternalIP(o), portsCell, o.age(now),
			o.formatLabels("spec", "selector"),
		}
	},
}

// serviceExternalIP is the EXTERNAL-IP cell: the external IPs, plus the load
// balancer's ingress points for a LoadBalancer ("<pending>" while it has
// none), or the external name of an ExternalName service.
func serviceExternalIP(svc object) string {
	externalIPs := svc.strings("spec", "externalIPs")
	switch corev1.ServiceType(svc.str("spec", "type")) {
	case corev1.ServiceTypeClusterIP, corev1.ServiceTypeNodePort:
		if len(externalIPs) > 0 {
			return strings.Join(externalIPs, ",")
		}
		return "<none>"
	case corev1.ServiceTypeLoadBalancer:
		lb := loadBalancerIngress(svc.list("status", "loadBalancer", "ingress"))
		if len(externalIPs) > 0 {
			return strings.Join(append(lb, externalIPs...), ",")
		}
		if len(lb) > 0 {
			return strings.Join(lb, ",")
		}
		return "<pending>"
	case corev1.ServiceTypeExternalName:
		return svc.str("spec", "externalName")
	}
	return "<unknown>"
}

// loadBalancerIngress returns the ingress points (IP, else hostname) of a
// load balancer status, sorted and without duplicates. kube truncates the
// joined list to 16 characters unless printing wide; server-side tables are
// always wide, so it never does here.
func loadBalancerIngress(ingress []object) []string {
	var out []string
	for _, in := range ingress {
		switch {
		case in.str("ip") != "":
			out = append(out, in.str("ip"))
		case in.str("hostname") != "":
			out = append(out, in.str("hostname"))
		}
	}
	slices.Sort(out)
	return slices.Compact(out)
}

var endpointsTable = &table{
	columns: []metav1.TableColumnDefinition{
		nameColumn,
		column("Endpoints", "string", corev1.Endpoints{}.SwaggerDoc()["subsets"]),
		ageColumn,
	},
	cells: func(o object, now time.Time) []any {
		return []any{o.name(), formatEndpoints(o.list("subsets")), o.age(now)}
	},
}

// formatEndpoints lists up to three address:port pairs (addresses alone for
// subsets without ports), then "+ N more...".
func formatEndpoints(subsets []object) string {
	if len(subsets) == 0 {
		return "<none>"
	}
	const limit = 3
	var list []string
	count := 0
	more := false
	add := func(s string) {
		if len(list) == limit {
			more = true
			return
		}
		list = append(list, s)
	}
	for _, ss := range subsets {
		addresses := ss.list("addresses")
		ports := ss.list("ports")
		if len(ports) == 0 {
			count += len(addresses)
			for _, a := range addresses {
				add(a.str("ip"))
			}
			continue
		}
		for _, p := range ports {
			count += len(addresses)
			for _, a := range addresses {
				add(net.JoinHostPort(a.str("ip"), strconv.FormatInt(p.int("port"), 10)))
			}
		}
	}
	out := strings.Join(list, ",")
	if more {
		return fmt.Sprintf("%s + %d more...", out, count-limit)
	}
	return out
}

var nodeTable = &table{
	columns: []metav1.TableColumnDefinition{
		nameColumn,
		column("Status", "string", "The status of the node"),
		column("Roles", "string", "The roles of the node"),
		ageColumn,
		column("Version", "string", corev1.NodeSystemInfo{}.SwaggerDoc()["kubeletVersion"]),
		wide("Internal-IP", "string", corev1.NodeStatus{}.SwaggerDoc()["addresses"]),
		wide("External-IP", "string", corev1.NodeStatus{}.SwaggerDoc()["addresses"]),
		wide("OS-Image", "string", corev1.NodeSystemInfo{}.SwaggerDoc()["osImage"]),
		wide("Kernel-Version", "string", corev1.NodeSystemInfo{}.SwaggerDoc()["kernelVersion"]),
		wide("Container-Runtime", "string", corev1.NodeSystemInfo{}.SwaggerDoc()["containerRuntimeVersion"]),
	},
	cells: nodeCells,
}

// nodeCells computes a node's row. STATUS is Ready or NotReady from the
// Ready condition ("Unknown" without one), plus SchedulingDisabled when
// cordoned. ROLES come from node-role.kubernetes.io/<role> labels and the
// kubernetes.io/role label.
func nodeCells(o object, now time.Time) []any {
	// The last Ready condition counts, as in kube's printer.
	ready := ""
	for _, c := range o.list("status", "conditions") {
		if c.str("type") == string(corev1.NodeReady) {
			ready = "NotReady"
			if c.str("status") == string(corev1.ConditionTrue) {
				ready = "Ready"
			}
		}
	}
	status := []string{cmpOr(ready, "Unknown")}
	if o.bool("spec", "unschedulable") {
		status = append(status, "SchedulingDisabled")
	}

	var roles []string
	for k, v := range o.stringMap("metadata", "labels") {
		switch {
		case strings.HasPrefix(k, "node-role.kubernetes.io/"):
			if role := strings.TrimPrefix(k, "node-role.kubernetes.io/"); role != "" {
				roles = append(roles, role)
			}
		case k == "kubernetes.io/role" && v != "":
			roles = append(roles, v)
		}
	}
	slices.Sort(roles)
	roles = slices.Compact(roles)

	address := func(kind corev1.NodeAddressType) string {
		for _, a := range o.list("status", "addresses") {
			if a.str("type") == string(kind) {
				return a.str("address")
			}
		}
		return "<none>"
	}
	info := o.obj("status", "nodeInfo")
	unknown := func(s string) string {
		if s == "" {
			return "<unknown>"
		}
		return s
	}
	return []any{
		o.name(), strings.Join(status, ","), orNone(strings.Join(roles, ",")), o.age(now), info.str("kubeletVersion"),
		address(corev1.NodeInternalIP), address(corev1.NodeExternalIP),
		unknown(info.str("osImage")), unknown(info.str("kernelVersion")), unknown(info.str("containerRuntimeVersion")),
	}
}

// eventColumns are kube's, for core/v1 and events.k8s.io/v1 events alike:
// LAST SEEN first, NAME only with -o wide.
var eventColumns = []metav1.TableColumnDefinition{
	column("Last Seen", "string", corev1.Event{}.SwaggerDoc()["lastTimestamp"]),
	column("Type", "string", corev1.Event{}.SwaggerDoc()["type"]),
	column("Reason", "string", corev1.Event{}.SwaggerDoc()["reason"]),
	column("Object", "string", corev1.Event{}.SwaggerDoc()["involvedObject"]),
	wide("Subobject", "string", corev1.ObjectReference{}.SwaggerDoc()["fieldPath"]),
	wide("Source", "string", corev1.Event{}.SwaggerDoc()["source"]),
	column("Message", "string", corev1.Event{}.SwaggerDoc()["message"]),
	wide("First Seen", "string", corev1.Event{}.SwaggerDoc()["firstTimestamp"]),
	wide("Count", "string", corev1.Event{}.SwaggerDoc()["count"]),
	{Name: "Name", Type: "string", Format: "name", Priority: 1, Description: objectMetaDocs["name"]},
}

// event is the part of an event the table shows, read from either schema.
type event struct {
	name                               string
	firstTimestamp, lastTimestamp      time.Time
	eventTime                          time.Time
	count                              int64
	series                             object
	regarding                          object
	kind, reason, message              string
	source                             object
	reportingController, reportingInst string
}

var coreEventTable = &table{columns: eventColumns, cells: func(o object, now time.Time) []any {
	return eventCells(event{
		name:                o.name(),
		firstTimestamp:      o.time("firstTimestamp"),
		lastTimestamp:       o.time("lastTimestamp"),
		eventTime:           o.time("eventTime"),
		count:               o.int("count"),
		series:              o.obj("series"),
		regarding:           o.obj("involvedObject"),
		kind:                o.str("type"),
		reason:              o.str("reason"),
		message:             o.str("message"),
		source:              o.obj("source"),
		reportingController: o.str("reportingComponent"),
		reportingInst:       o.str("reportingInstance"),
	}, now)
}}

var eventsV1Table = &table{columns: eventColumns, cells: func(o object, now time.Time) []any {
	return eventCells(event{
		name:                o.name(),
		firstTimestamp:      o.time("deprecatedFirstTimestamp"),
		lastTimestamp:       o.time("deprecatedLastTimestamp"),
		eventTime:           o.time("eventTime"),
		count:               o.int("deprecatedCount"),
		series:              o.obj("series"),
		regarding:           o.obj("regarding"),
		kind:                o.str("type"),
		reason:              o.str("reason"),
		message:             o.str("note"),
		source:              o.obj("deprecatedSource"),
		reportingController: o.str("reportingController"),
		reportingInst:       o.str("reportingInstance"),
	}, now)
}}

// eventCells computes an event's row. LAST SEEN falls back to the first
// timestamp, which falls back to eventTime; a series overrides both the
// last time and the count; a singleton event without a count counts 1.
func eventCells(e event, now time.Time) []any {
	first := since(e.firstTimestamp, now)
	if e.firstTimestamp.IsZero() {
		first = since(e.eventTime, now)
	}
	last := since(e.lastTimestamp, now)
	if e.lastTimestamp.IsZero() {
		last = first
	}
	count := e.count
	if e.series != nil {
		last = since(e.series.time("lastObservedTime"), now)
		count = e.series.int("count")
	} else if count == 0 {
		count = 1
	}
	target := strings.ToLower(e.regarding.str("kind"))
	if n := e.regarding.str("name"); n != "" {
		target += "/" + n
	}
	component := cmpOr(e.source.str("component"), e.reportingController)
	source := component
	if instance := cmpOr(e.source.str("host"), e.reportingInst); instance != "" {
		source = component + ", " + instance
	}
	return []any{
		last, e.kind, e.reason, target, e.regarding.str("fieldPath"), source,
		strings.TrimSpace(e.message), first, count, e.name,
	}
}

// cmpOr returns the first non-empty string.
func cmpOr(ss ...string) string {
	for _, s := range ss {
		if s != "" {
			return s
		}
	}
	return ""
}

var namespaceTable = &table{
	columns: []metav1.TableColumnDefinition{nameColumn, column("Status", "string", "The status of the namespace"), ageColumn},
	cells: func(o object, now time.Time) []any {
		return []any{o.name(), o.str("status", "phase"), o.age(now)}
	},
}

var secretTable = &table{
	columns: []metav1.TableColumnDefinition{
		nameColumn,
		column("Type", "string", corev1.Secret{}.SwaggerDoc()["type"]),
		column("Data", "string", corev1.Secret{}.SwaggerDoc()["data"]),
		ageColumn,
	},
	cells: func(o object, now time.Time) []any {
		return []any{o.name(), o.str("type"), int64(o.len("data")), o.age(now)}
	},
}

var configMapTable = &table{
	columns: []metav1.TableColumnDefinition{nameColumn, column("Data", "string", corev1.ConfigMap{}.SwaggerDoc()["data"]), ageColumn},
	cells: func(o object, now time.Time) []any {
		return []any{o.name(), int64(o.len("data") + o.len("binaryData")), o.age(now)}
	},
}

var serviceAccountTable = &table{
	columns: []metav1.TableColumnDefinition{nameColumn, column("Secrets", "string", corev1.ServiceAccount{}.SwaggerDoc()["secrets"]), ageColumn},
	cells: func(o object, now time.Time) []any {
		return []any{o.name(), int64(o.len("secrets")), o.age(now)}
	},
}

var pvTable = &table{
	columns: []metav1.TableColumnDefinition{
		nameColumn,
		column("Capacity", "string", corev1.PersistentVolumeSpec{}.SwaggerDoc()["capacity"]),
		column("Access Modes", "string", corev1.PersistentVolumeSpec{}.SwaggerDoc()["accessModes"]),
		column("Reclaim Policy", "string", corev1.PersistentVolumeSpec{}.SwaggerDoc()["persistentVolumeReclaimPolicy"]),
		column("Status", "string", corev1.PersistentVolumeStatus{}.SwaggerDoc()["phase"]),
		column("Claim", "string", corev1.PersistentVolumeSpec{}.SwaggerDoc()["claimRef"]),
		column("StorageClass", "string", "StorageClass of the pv"),
		column("VolumeAttributesClass", "string", "VolumeAttributesClass of the pv"),
		column("Reason", "string", corev1.PersistentVolumeStatus{}.SwaggerDoc()["reason"]),
		ageColumn,
		wide("VolumeMode", "string", corev1.PersistentVolumeSpec{}.SwaggerDoc()["volumeMode"]),
	},
	cells: func(o object, now time.Time) []any {
		spec := o.obj("spec")
		claim := ""
		if ref := spec.obj("claimRef"); ref != nil {
			claim = ref.str("namespace") + "/" + ref.str("name")
		}
		phase := o.str("status", "phase")
		if o.deleting() {
			phase = "Terminating"
		}
		class := spec.str("storageClassName")
		if a := o.obj("metadata", "annotations"); a.has(corev1.BetaStorageClassAnnotation) {
			class = a.str(corev1.BetaStorageClassAnnotation)
		}
		return []any{
			o.name(), spec.quantity("capacity", string(corev1.ResourceStorage)), accessModes(spec.strings("accessModes")),
			spec.str("persistentVolumeReclaimPolicy"), phase, claim, class, unsetOr(spec, "volumeAttributesClassName"),
			o.str("status", "reason"), o.age(now), unsetOr(spec, "volumeMode"),
		}
	},
}

var pvcTable = &table{
	columns: []metav1.TableColumnDefinition{
		nameColumn,
		column("Status", "string", corev1.PersistentVolumeClaimStatus{}.SwaggerDoc()["phase"]),
		column("Volume", "string", corev1.PersistentVolumeClaimSpec{}.SwaggerDoc()["volumeName"]),
		column("Capacity", "string", corev1.PersistentVolumeClaimStatus{}.SwaggerDoc()["capacity"]),
		column("Access Modes", "string", corev1.PersistentVolumeClaimStatus{}.SwaggerDoc()["accessModes"]),
		column("StorageClass", "string", "StorageClass of the pvc"),
		column("VolumeAttributesClass", "string", "VolumeAttributesClass of the pvc"),
		ageColumn,
		wide("VolumeMode", "string", corev1.PersistentVolumeClaimSpec{}.SwaggerDoc()["volumeMode"]),
	},
	cells: func(o object, now time.Time) []any {
		spec := o.obj("spec")
		phase := o.str("status", "phase")
		if o.deleting() {
			phase = "Terminating"
		}
		// Capacity and access modes are shown once the claim is bound.
		capacity, modes := "", ""
		if spec.str("volumeName") != "" {
			capacity = o.quantity("status", "capacity", string(corev1.ResourceStorage))
			modes = accessModes(o.strings("status", "accessModes"))
		}
		class := spec.str("storageClassName")
		if a := o.obj("metadata", "annotations"); a.has(corev1.BetaStorageClassAnnotation) {
			class = a.str(corev1.BetaStorageClassAnnotation)
		}
		return []any{
			o.name(), phase, spec.str("volumeName"), capacity, modes, class, unsetOr(spec, "volumeAttributesClassName"),
			o.age(now), unsetOr(spec, "volumeMode"),
		}
	},
}

// unsetOr returns the string at key, or "<unset>" when the field is absent.
func unsetOr(o object, key string) string {
	if !o.has(key) {
		return "<unset>"
	}
	return o.str(key)
}

// accessModes abbreviates access modes as kube does (RWO, ROX, RWX, RWOP),
// in that order, without duplicates.
func accessModes(modes []string) string {
	var out []string
	for _, m := range []struct {
		mode  corev1.PersistentVolumeAccessMode
		short string
	}{
		{corev1.ReadWriteOnce, "RWO"},
		{corev1.ReadOnlyMany, "ROX"},
		{corev1.ReadWriteMany, "RWX"},
		{corev1.ReadWriteOncePod, "RWOP"},
	} {
		if slices.Contains(modes, string(m.mode)) {
			out = append(out, m.short)
		}
	}
	return strings.Join(out, ",")
}

var resourceQuotaTable = &table{
	columns: []metav1.TableColumnDefinition{
		nameColumn,
		column("Request", "string", "Request represents a minimum amount of cpu/memory that a container may consume."),
		column("Limit", "string", "Limits control the maximum amount of cpu/memory that a container may use independent of contention on the node."),
		ageColumn,
	},
	cells: func(o object, now time.Time) []any {
		hard := o.obj("status", "hard")
		names := make([]string, 0, len(hard))
		for name := range hard {
			names = append(names, name)
		}
		sort.Strings(names)
		var requests, limits []string
		for _, name := range names {
			s := fmt.Sprintf("%s: %s/%s", name, o.quantity("status", "used", name), hard.quantity(name))
			if prefix, _, ok := strings.Cut(name, "."); ok && prefix == "limits" {
				limits = append(limits, s)
			} else {
				requests = append(requests, s)
			}
		}
		return []any{o.name(), strings.Join(requests, ", "), strings.Join(limits, ", "), o.age(now)}
	},
}
