package resources

import (
	"fmt"
	"strings"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	batchv1 "k8s.io/api/batch/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// Tables of apps, batch, autoscaling and policy kinds.

var deploymentTable = &table{
	columns: []metav1.TableColumnDefinition{
		nameColumn,
		column("Ready", "string", "Number of the pod with ready state"),
		column("Up-to-date", "string", appsv1.DeploymentStatus{}.SwaggerDoc()["updatedReplicas"]),
		column("Available", "string", appsv1.DeploymentStatus{}.SwaggerDoc()["availableReplicas"]),
		ageColumn,
		containersColumn,
		imagesColumn,
		wide("Selector", "string", appsv1.DeploymentSpec{}.SwaggerDoc()["selector"]),
	},
	cells: func(o object, now time.Time) []any {
		names, images := containerCells(o, "spec", "template", "spec", "containers")
		// kube prints a deployment's selector with selector.String()
		// ("" when empty), not FormatLabelSelector.
		selector := "<invalid>"
		if sel, err := o.labelSelector("spec", "selector"); err == nil {
			if s, err := metav1.LabelSelectorAsSelector(sel); err == nil {
				selector = s.String()
			}
		}
		return []any{
			o.name(), fmt.Sprintf("%d/%d", o.int("status", "readyReplicas"), o.int("spec", "replicas")),
			o.int("status", "updatedReplicas"), o.int("status", "availableReplicas"), o.age(now),
			names, images, selector,
		}
	},
}

var replicaSetTable = &table{
	columns: []metav1.TableColumnDefinition{
		nameColumn,
		column("Desired", "integer", appsv1.ReplicaSetSpec{}.SwaggerDoc()["replicas"]),
		column("Current", "integer", appsv1.ReplicaSetStatus{}.SwaggerDoc()["replicas"]),
		column("Ready", "integer", appsv1.ReplicaSetStatus{}.SwaggerDoc()["readyReplicas"]),
		ageColumn,
		containersColumn,
		imagesColumn,
		wide("Selector", "string", appsv1.ReplicaSetSpec{}.SwaggerDoc()["selector"]),
	},
	cells: func(o object, now time.Time) []any {
		names, images := containerCells(o, "spec", "template", "spec", "containers")
		return []any{
			o.name(), o.int("spec", "replicas"), o.int("status", "replicas"), o.int("status", "readyReplicas"), o.age(now),
			names, images, o.formatLabelSelector("spec", "selector"),
		}
	},
}

var statefulSetTable = &table{
	columns: []metav1.TableColumnDefinition{
		nameColumn,
		column("Ready", "string", "Number of the pod with ready state"),
		ageColumn,
		containersColumn,
		imagesColumn,
	},
	cells: func(o object, now time.Time) []any {
		names, images := containerCells(o, "spec", "template", "spec", "containers")
		return []any{
			o.name(), fmt.Sprintf("%d/%d", o.int("status", "readyReplicas"), o.int("spec", "replicas")), o.age(now),
			names, images,
		}
	},
}

var daemonSetTable = &table{
	columns: []metav1.TableColumnDefinition{
		nameColumn,
		column("Desired", "integer", appsv1.DaemonSetStatus{}.SwaggerDoc()["desiredNumberScheduled"]),
		column("Current", "integer", appsv1.DaemonSetStatus{}.SwaggerDoc()["currentNumberScheduled"]),
		column("Ready", "integer", appsv1.DaemonSetStatus{}.SwaggerDoc()["numberReady"]),
		column("Up-to-date", "integer", appsv1.DaemonSetStatus{}.SwaggerDoc()["updatedNumberScheduled"]),
		column("Available", "integer", appsv1.DaemonSetStatus{}.SwaggerDoc()["numberAvailable"]),
		column("Node Selector", "string", "NodeSelector is a selector which must be true for the pod to fit on a node."),
		ageColumn,
		containersColumn,
		imagesColumn,
		wide("Selector", "string", appsv1.DaemonSetSpec{}.SwaggerDoc()["selector"]),
	},
	cells: func(o object, now time.Time) []any {
		names, images := containerCells(o, "spec", "template", "spec", "containers")
		status := o.obj("status")
		return []any{
			o.name(), status.int("desiredNumberScheduled"), status.int("currentNumberScheduled"), status.int("numberReady"),
			status.int("updatedNumberScheduled"), status.int("numberAvailable"),
			o.formatLabels("spec", "template", "spec", "nodeSelector"), o.age(now),
			names, images, o.formatLabelSelector("spec", "selector"),
		}
	},
}

var controllerRevisionTable = &table{
	columns: []metav1.TableColumnDefinition{
		nameColumn,
		column("Controller", "string", "Controller of the object"),
		column("Revision", "string", appsv1.ControllerRevision{}.SwaggerDoc()["revision"]),
		ageColumn,
	},
	cells: func(o object, now time.Time) []any {
		controller := "<none>"
		for _, ref := range o.list("metadata", "ownerReferences") {
			if !ref.bool("controller") {
				continue
			}
			// "daemonset.apps/name": the lower-cased group kind, then the name.
			gv, _ := schema.ParseGroupVersion(ref.str("apiVersion"))
			gk := schema.GroupKind{Group: gv.Group, Kind: ref.str("kind")}
			controller = ref.str("name")
			if !gk.Empty() {
				controller = strings.ToLower(gk.String()) + "/" + controller
			}
			break
		}
		return []any{o.name(), controller, o.int("revision"), o.age(now)}
	},
}

var jobTable = &table{
	columns: []metav1.TableColumnDefinition{
		nameColumn,
		column("Status", "string", "Status of the job."),
		column("Completions", "string", batchv1.JobStatus{}.SwaggerDoc()["succeeded"]),
		column("Duration", "string", "Time required to complete the job."),
		ageColumn,
		containersColumn,
		imagesColumn,
		wide("Selector", "string", batchv1.JobSpec{}.SwaggerDoc()["selector"]),
	},
	cells: jobCells,
}

// jobCells computes a job's row. STATUS is Complete, Failed, Terminating,
// Suspended, FailureTarget or Running, the first that applies; COMPLETIONS
// is succeeded/completions ("/1 of P" for a work queue with parallelism P);
// DURATION runs from start to completion, or to now while running.
func jobCells(o object, now time.Time) []any {
	conditions := o.list("status", "conditions")
	is := func(kind batchv1.JobConditionType) bool { return conditionTrue(conditions, string(kind)) }
	var status string
	switch {
	case is(batchv1.JobComplete):
		status = "Complete"
	case is(batchv1.JobFailed):
		status = "Failed"
	case o.deleting():
		status = "Terminating"
	case is(batchv1.JobSuspended):
		status = "Suspended"
	case is(batchv1.JobFailureTarget):
		status = "FailureTarget"
	default:
		status = "Running"
	}

	succeeded := o.int("status", "succeeded")
	var completions string
	switch {
	case o.has("spec", "completions"):
		completions = fmt.Sprintf("%d/%d", succeeded, o.int("spec", "completions"))
	case o.int("spec", "parallelism") > 1:
		completions = fmt.Sprintf("%d/1 of %d", succeeded, o.int("spec", "parallelism"))
	default:
		completions = fmt.Sprintf("%d/1", succeeded)
	}

	var took string
	start, done := o.time("status", "startTime"), o.time("status", "completionTime")
	switch {
	case !o.has("status", "startTime"):
	case !o.has("status", "completionTime"):
		took = HumanDuration(now.Sub(start))
	default:
		took = HumanDuration(done.Sub(start))
	}

	names, images := containerCells(o, "spec", "template", "spec", "containers")
	return []any{o.name(), status, completions, took, o.age(now), names, images, o.formatLabelSelector("spec", "selector")}
}

var cronJobTable = &table{
	columns: []metav1.TableColumnDefinition{
		nameColumn,
		column("Schedule", "string", batchv1.CronJobSpec{}.SwaggerDoc()["schedule"]),
		column("Timezone", "string", batchv1.CronJobSpec{}.SwaggerDoc()["timeZone"]),
		column("Suspend", "boolean", batchv1.CronJobSpec{}.SwaggerDoc()["suspend"]),
		column("Active", "integer", batchv1.CronJobStatus{}.SwaggerDoc()["active"]),
		column("Last Schedule", "string", batchv1.CronJobStatus{}.SwaggerDoc()["lastScheduleTime"]),
		ageColumn,
		containersColumn,
		imagesColumn,
		wide("Selector", "string", batchv1.JobSpec{}.SwaggerDoc()["selector"]),
	},
	cells: func(o object, now time.Time) []any {
		last := "<none>"
		if o.has("status", "lastScheduleTime") {
			last = since(o.time("status", "lastScheduleTime"), now)
		}
		timeZone := "<none>"
		if o.has("spec", "timeZone") {
			timeZone = o.str("spec", "timeZone")
		}
		names, images := containerCells(o, "spec", "jobTemplate", "spec", "template", "spec", "containers")
		return []any{
			o.name(), o.str("spec", "schedule"), timeZone, boolPtr(o, "spec", "suspend"), int64(o.len("status", "active")),
			last, o.age(now), names, images, o.formatLabelSelector("spec", "jobTemplate", "spec", "selector"),
		}
	},
}

// boolPtr prints a *bool as kube does: "True", "False" or "<unset>".
func boolPtr(o object, path ...string) string {
	switch {
	case !o.has(path...):
		return "<unset>"
	case o.bool(path...):
		return "True"
	}
	return "False"
}

var hpaTable = &table{
	columns: []metav1.TableColumnDefinition{
		nameColumn,
		column("Reference", "string", autoscalingv2.HorizontalPodAutoscalerSpec{}.SwaggerDoc()["scaleTargetRef"]),
		column("Targets", "string", autoscalingv2.HorizontalPodAutoscalerSpec{}.SwaggerDoc()["metrics"]),
		column("MinPods", "string", autoscalingv2.HorizontalPodAutoscalerSpec{}.SwaggerDoc()["minReplicas"]),
		column("MaxPods", "string", autoscalingv2.HorizontalPodAutoscalerSpec{}.SwaggerDoc()["maxReplicas"]),
		column("Replicas", "string", autoscalingv2.HorizontalPodAutoscalerStatus{}.SwaggerDoc()["currentReplicas"]),
		ageColumn,
	},
	cells: func(o object, now time.Time) []any {
		spec := o.obj("spec")
		ref := spec.str("scaleTargetRef", "kind") + "/" + spec.str("scaleTargetRef", "name")
		minPods := "<unset>"
		if spec.has("minReplicas") {
			minPods = fmt.Sprint(spec.int("minReplicas"))
		}
		return []any{
			o.name(), ref, hpaTargets(spec.list("metrics"), o.list("status", "currentMetrics")), minPods,
			spec.int("maxReplicas"), o.int("status", "currentReplicas"), o.age(now),
		}
	},
}

// hpaTargets is the TARGETS cell: current/target per metric, the first two
// metrics then "+ N more...".
func hpaTargets(specs, statuses []object) string {
	if len(specs) == 0 {
		return "<none>"
	}
	const limit = 2
	var list []string
	for i, spec := range specs {
		var status object
		if i < len(statuses) {
			status = statuses[i]
		}
		list = append(list, hpaTarget(spec, status))
	}
	if len(list) > limit {
		return fmt.Sprintf("%s + %d more...", strings.Join(list[:limit], ", "), len(list)-limit)
	}
	return strings.Join(list, ", ")
}

// hpaTarget formats one metric. Values are quantities; an absent quantity
// prints "<nil>" as a nil *resource.Quantity does in kube.
func hpaTarget(spec, status object) string {
	switch autoscalingv2.MetricSourceType(spec.str("type")) {
	case autoscalingv2.ExternalMetricSourceType, autoscalingv2.ObjectMetricSourceType:
		key := "external"
		if spec.str("type") == string(autoscalingv2.ObjectMetricSourceType) {
			key = "object"
		}
		target, current := spec.obj(key, "target"), status.obj(key, "current")
		if target.has("averageValue") {
			cur := "<unknown>"
			if current.has("averageValue") {
				cur = current.quantityPtr("averageValue")
			}
			return fmt.Sprintf("%s/%s (avg)", cur, target.quantityPtr("averageValue"))
		}
		cur := "<unknown>"
		if status.has(key) {
			cur = current.quantityPtr("value")
		}
		return fmt.Sprintf("%s/%s", cur, target.quantityPtr("value"))
	case autoscalingv2.PodsMetricSourceType:
		cur := "<unknown>"
		if status.has("pods") {
			cur = status.quantityPtr("pods", "current", "averageValue")
		}
		return fmt.Sprintf("%s/%s", cur, spec.quantityPtr("pods", "target", "averageValue"))
	case autoscalingv2.ResourceMetricSourceType, autoscalingv2.ContainerResourceMetricSourceType:
		key := "resource"
		if spec.str("type") == string(autoscalingv2.ContainerResourceMetricSourceType) {
			key = "containerResource"
		}
		name, target, current := spec.str(key, "name"), spec.obj(key, "target"), status.obj(key, "current")
		if target.has("averageValue") {
			cur := "<unknown>"
			if status.has(key) {
				cur = current.quantityPtr("averageValue")
			}
			return fmt.Sprintf("%s: %s/%s", name, cur, target.quantityPtr("averageValue"))
		}
		cur := "<unknown>"
		if current.has("averageUtilization") {
			cur = fmt.Sprintf("%d%%", current.int("averageUtilization"))
		}
		want := "<auto>"
		if target.has("averageUtilization") {
			want = fmt.Sprintf("%d%%", target.int("averageUtilization"))
		}
		return fmt.Sprintf("%s: %s/%s", name, cur, want)
	}
	return "<unknown type>"
}

var pdbTable = &table{
	columns: []metav1.TableColumnDefinition{
		nameColumn,
		column("Min Available", "string", "The minimum number of pods that must be available."),
		column("Max Unavailable", "string", "The maximum number of pods that may be unavailable."),
		column("Allowed Disruptions", "integer", "Calculated number of pods that may be disrupted at this time."),
		ageColumn,
	},
	cells: func(o object, now time.Time) []any {
		orNA := func(key string) string {
			if !o.has("spec", key) {
				return "N/A"
			}
			return o.intOrString("spec", key)
		}
		return []any{o.name(), orNA("minAvailable"), orNA("maxUnavailable"), o.int("status", "disruptionsAllowed"), o.age(now)}
	},
}
