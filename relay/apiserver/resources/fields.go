package resources

import (
	"strconv"

	"k8s.io/apimachinery/pkg/fields"
)

// Field-selector fields, beyond metadata.name and metadata.namespace, that
// kube-apiserver offers per kind (each registry's GetAttrs). A selector on a
// field not listed here is an error in kube ("field label not supported").

// podFields: kube offers status.podIP for the primary IP only; it has no
// status.podIPs field (the conversion accepts the label, but no pod ever
// carries a value for it), so neither do we.
func podFields(m map[string]any) fields.Set {
	o := object(m)
	spec, status := o.obj("spec"), o.obj("status")
	return fields.Set{
		"spec.nodeName":            spec.str("nodeName"),
		"spec.restartPolicy":       spec.str("restartPolicy"),
		"spec.schedulerName":       spec.str("schedulerName"),
		"spec.serviceAccountName":  spec.str("serviceAccountName"),
		"spec.hostNetwork":         strconv.FormatBool(spec.bool("hostNetwork")),
		"status.phase":             status.str("phase"),
		"status.podIP":             podIP(status),
		"status.nominatedNodeName": status.str("nominatedNodeName"),
	}
}

// coreEventFields: source is the source component, or the reporting
// component when the event has none.
func coreEventFields(m map[string]any) fields.Set {
	o := object(m)
	ref := o.obj("involvedObject")
	return fields.Set{
		"involvedObject.kind":            ref.str("kind"),
		"involvedObject.namespace":       ref.str("namespace"),
		"involvedObject.name":            ref.str("name"),
		"involvedObject.uid":             ref.str("uid"),
		"involvedObject.apiVersion":      ref.str("apiVersion"),
		"involvedObject.resourceVersion": ref.str("resourceVersion"),
		"involvedObject.fieldPath":       ref.str("fieldPath"),
		"reason":                         o.str("reason"),
		"reportingComponent":             o.str("reportingComponent"),
		"source":                         cmpOr(o.str("source", "component"), o.str("reportingComponent")),
		"type":                           o.str("type"),
	}
}

// eventsV1Fields are the fields events.k8s.io/v1 accepts, under its own
// names (kube maps regarding.* to involvedObject.* and reportingController
// to reportingComponent before matching).
func eventsV1Fields(m map[string]any) fields.Set {
	o := object(m)
	ref := o.obj("regarding")
	return fields.Set{
		"regarding.kind":            ref.str("kind"),
		"regarding.namespace":       ref.str("namespace"),
		"regarding.name":            ref.str("name"),
		"regarding.uid":             ref.str("uid"),
		"regarding.apiVersion":      ref.str("apiVersion"),
		"regarding.resourceVersion": ref.str("resourceVersion"),
		"regarding.fieldPath":       ref.str("fieldPath"),
		"reason":                    o.str("reason"),
		"reportingController":       o.str("reportingController"),
		"type":                      o.str("type"),
	}
}

func secretFields(m map[string]any) fields.Set {
	return fields.Set{"type": object(m).str("type")}
}

// namespaceFields: kube keeps a bare "name" field for backward
// compatibility.
func namespaceFields(m map[string]any) fields.Set {
	o := object(m)
	return fields.Set{"status.phase": o.str("status", "phase"), "name": o.name()}
}

func nodeFields(m map[string]any) fields.Set {
	return fields.Set{"spec.unschedulable": strconv.FormatBool(object(m).bool("spec", "unschedulable"))}
}

func serviceFields(m map[string]any) fields.Set {
	o := object(m)
	return fields.Set{"spec.clusterIP": o.str("spec", "clusterIP"), "spec.type": o.str("spec", "type")}
}

// replicasFields serves replicasets and replicationcontrollers.
func replicasFields(m map[string]any) fields.Set {
	return fields.Set{"status.replicas": strconv.FormatInt(object(m).int("status", "replicas"), 10)}
}

func jobFields(m map[string]any) fields.Set {
	return fields.Set{"status.successful": strconv.FormatInt(object(m).int("status", "succeeded"), 10)}
}

// signerNameFields serves certificatesigningrequests and clustertrustbundles.
func signerNameFields(m map[string]any) fields.Set {
	return fields.Set{"spec.signerName": object(m).str("spec", "signerName")}
}

func podCertificateRequestFields(m map[string]any) fields.Set {
	spec := object(m).obj("spec")
	return fields.Set{
		"spec.signerName": spec.str("signerName"),
		"spec.podName":    spec.str("podName"),
		"spec.nodeName":   spec.str("nodeName"),
	}
}

func resourceSliceFields(m map[string]any) fields.Set {
	spec := object(m).obj("spec")
	return fields.Set{
		"spec.nodeName":  spec.str("nodeName"),
		"spec.driver":    spec.str("driver"),
		"spec.pool.name": spec.str("pool", "name"),
	}
}
