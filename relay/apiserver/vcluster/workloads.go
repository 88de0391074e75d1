package vcluster

import (
	"context"
	"encoding/json"
	"fmt"
	"hash/fnv"
	"maps"
	"slices"
	"strconv"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/intstr"
	utilrand "k8s.io/apimachinery/pkg/util/rand"
)

const (
	podTemplateHashLabel = appsv1.DefaultDeploymentUniqueLabelKey // "pod-template-hash"
	revisionAnnotation   = "deployment.kubernetes.io/revision"
	desiredAnnotation    = "deployment.kubernetes.io/desired-replicas"
	maxAnnotation        = "deployment.kubernetes.io/max-replicas"
)

func replicasOf(p *int32) int32 {
	if p == nil {
		return 1
	}
	return *p
}

func selectorOf(s *metav1.LabelSelector) (labels.Selector, error) {
	if s == nil {
		return labels.Everything(), nil
	}
	return metav1.LabelSelectorAsSelector(s)
}

// templateHash is the pod-template-hash of a Deployment's template, as the
// deployment controller computes it (a stable hash, safely encoded).
func templateHash(t *corev1.PodTemplateSpec, collisions *int32) string {
	b, _ := json.Marshal(t)
	h := fnv.New32a()
	h.Write(b)
	if collisions != nil {
		fmt.Fprint(h, *collisions)
	}
	return utilrand.SafeEncodeString(strconv.FormatUint(uint64(h.Sum32()), 10))
}

// setCondition sets a condition of type t, keeping its transition time
// when its status does not change.
func setCondition[C any](conds []C, c C, same func(a, b *C) (sameType, sameStatus bool), keep func(dst, src *C)) []C {
	for i := range conds {
		st, ss := same(&conds[i], &c)
		if !st {
			continue
		}
		if ss {
			keep(&c, &conds[i])
		}
		conds[i] = c
		return conds
	}
	return append(conds, c)
}

func setDeploymentCondition(conds []appsv1.DeploymentCondition, c appsv1.DeploymentCondition) []appsv1.DeploymentCondition {
	return setCondition(conds, c, func(a, b *appsv1.DeploymentCondition) (bool, bool) {
		return a.Type == b.Type, a.Status == b.Status
	}, func(dst, src *appsv1.DeploymentCondition) {
		dst.LastTransitionTime = src.LastTransitionTime
		if src.Reason == dst.Reason && src.Message == dst.Message {
			dst.LastUpdateTime = src.LastUpdateTime
		}
	})
}

// syncDeployment keeps one ReplicaSet per pod template: the current one
// at spec.replicas, the old ones scaled to zero once the current one is
// available (at once for the Recreate strategy), and the status summed
// from them.
func (k *controller) syncDeployment(ctx context.Context, key workKey) error {
	var d appsv1.Deployment
	ok, err := k.get(key, &d)
	if err != nil || !ok || d.DeletionTimestamp != nil {
		return err
	}
	sel, err := selectorOf(d.Spec.Selector)
	if err != nil {
		return nil // invalid selector: nothing a controller can do
	}
	rss, err := list[appsv1.ReplicaSet](k, resReplicaSets, d.Namespace, sel, string(d.UID))
	if err != nil {
		return err
	}
	desired := replicasOf(d.Spec.Replicas)
	hash := templateHash(&d.Spec.Template, d.Status.CollisionCount)
	var cur *appsv1.ReplicaSet
	maxRev := 0
	for _, rs := range rss {
		if rs.Labels[podTemplateHashLabel] == hash {
			cur = rs
		}
		if r, err := strconv.Atoi(rs.Annotations[revisionAnnotation]); err == nil && r > maxRev {
			maxRev = r
		}
	}
	if d.Spec.Paused {
		return k.deploymentStatus(ctx, &d, rss, cur)
	}
	if cur == nil {
		rs := newReplicaSet(&d, hash, maxRev+1, desired)
		created, err := k.apps.ReplicaSets(d.Namespace).Create(ctx, rs, metav1.CreateOptions{FieldManager: "deployment-controller"})
		if err = k.wrote(err); err != nil {
			return err
		}
		cur = created
		rss = append(rss, created)
	} else if replicasOf(cur.Spec.Replicas) != desired || cur.Annotations[desiredAnnotation] != strconv.Itoa(int(desired)) {
		rs := cur.DeepCopy()
		rs.Spec.Replicas = &desired
		if rs.Annotations == nil {
			rs.Annotations = map[string]string{}
		}
		rs.Annotations[desiredAnnotation] = strconv.Itoa(int(desired))
		rs.Annotations[maxAnnotation] = strconv.Itoa(int(desired))
		if _, err := k.apps.ReplicaSets(d.Namespace).Update(ctx, rs, metav1.UpdateOptions{FieldManager: "deployment-controller"}); k.wrote(err) != nil {
			return err
		}
	}
	recreate := d.Spec.Strategy.Type == appsv1.RecreateDeploymentStrategyType
	curAvailable := cur.Status.AvailableReplicas >= desired && cur.Status.ObservedGeneration >= cur.Generation
	for _, rs := range rss {
		if rs == cur || replicasOf(rs.Spec.Replicas) == 0 || !(recreate || curAvailable) {
			continue
		}
		old := rs.DeepCopy()
		zero := int32(0)
		old.Spec.Replicas = &zero
		if _, err := k.apps.ReplicaSets(d.Namespace).Update(ctx, old, metav1.UpdateOptions{FieldManager: "deployment-controller"}); k.wrote(err) != nil {
			return err
		}
	}
	return k.deploymentStatus(ctx, &d, rss, cur)
}

func newReplicaSet(d *appsv1.Deployment, hash string, revision int, replicas int32) *appsv1.ReplicaSet {
	t := true
	tmpl := d.Spec.Template.DeepCopy()
	tmpl.Labels = maps.Clone(tmpl.Labels)
	if tmpl.Labels == nil {
		tmpl.Labels = map[string]string{}
	}
	tmpl.Labels[podTemplateHashLabel] = hash
	sel := d.Spec.Selector.DeepCopy()
	if sel == nil {
		sel = &metav1.LabelSelector{}
	}
	sel.MatchLabels = maps.Clone(sel.MatchLabels)
	if sel.MatchLabels == nil {
		sel.MatchLabels = map[string]string{}
	}
	sel.MatchLabels[podTemplateHashLabel] = hash
	return &appsv1.ReplicaSet{
		ObjectMeta: metav1.ObjectMeta{
			Name: d.Name + "-" + hash, Namespace: d.Namespace, Labels: maps.Clone(tmpl.Labels),
			Annotations: map[string]string{
				revisionAnnotation: strconv.Itoa(revision),
				desiredAnnotation:  strconv.Itoa(int(replicas)),
				maxAnnotation:      strconv.Itoa(int(replicas)),
			},
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "Deployment", Name: d.Name, UID: d.UID, Controller: &t, BlockOwnerDeletion: &t}},
		},
		Spec: appsv1.ReplicaSetSpec{Replicas: &replicas, MinReadySeconds: d.Spec.MinReadySeconds, Selector: sel, Template: *tmpl},
	}
}

func (k *controller) deploymentStatus(ctx context.Context, d *appsv1.Deployment, rss []*appsv1.ReplicaSet, cur *appsv1.ReplicaSet) error {
	desired := replicasOf(d.Spec.Replicas)
	st := *d.Status.DeepCopy()
	st.ObservedGeneration = d.Generation
	st.Replicas, st.ReadyReplicas, st.AvailableReplicas, st.UpdatedReplicas = 0, 0, 0, 0
	for _, rs := range rss {
		st.Replicas += rs.Status.Replicas
		st.ReadyReplicas += rs.Status.ReadyReplicas
		st.AvailableReplicas += rs.Status.AvailableReplicas
	}
	if cur != nil {
		st.UpdatedReplicas = cur.Status.Replicas
	}
	st.UnavailableReplicas = max(0, desired-st.AvailableReplicas)
	if st.Replicas > desired {
		st.UnavailableReplicas = max(0, st.Replicas-st.AvailableReplicas)
	}
	maxUnavailable := int32(0)
	if d.Spec.Strategy.Type != appsv1.RecreateDeploymentStrategyType {
		mu := intstr.FromString("25%")
		if ru := d.Spec.Strategy.RollingUpdate; ru != nil && ru.MaxUnavailable != nil {
			mu = *ru.MaxUnavailable
		}
		v, _ := intstr.GetScaledValueFromIntOrPercent(&mu, int(desired), false)
		maxUnavailable = int32(min(v, int(desired)))
	}
	now := metav1.Now()
	avail := appsv1.DeploymentCondition{Type: appsv1.DeploymentAvailable, LastUpdateTime: now, LastTransitionTime: now}
	if st.AvailableReplicas >= desired-maxUnavailable {
		avail.Status, avail.Reason, avail.Message = corev1.ConditionTrue, "MinimumReplicasAvailable", "Deployment has minimum availability."
	} else {
		avail.Status, avail.Reason, avail.Message = corev1.ConditionFalse, "MinimumReplicasUnavailable", "Deployment does not have minimum availability."
	}
	st.Conditions = setDeploymentCondition(st.Conditions, avail)
	prog := appsv1.DeploymentCondition{Type: appsv1.DeploymentProgressing, Status: corev1.ConditionTrue, LastUpdateTime: now, LastTransitionTime: now}
	name := ""
	if cur != nil {
		name = cur.Name
	}
	if st.UpdatedReplicas == desired && st.Replicas == desired && st.AvailableReplicas == desired && cur != nil && cur.Status.ObservedGeneration >= cur.Generation {
		prog.Reason, prog.Message = "NewReplicaSetAvailable", fmt.Sprintf("ReplicaSet %q has successfully progressed.", name)
	} else {
		prog.Reason, prog.Message = "ReplicaSetUpdated", fmt.Sprintf("ReplicaSet %q is progressing.", name)
	}
	if d.Spec.Paused {
		prog.Status, prog.Reason, prog.Message = corev1.ConditionUnknown, "DeploymentPaused", "Deployment is paused"
	}
	st.Conditions = setDeploymentCondition(st.Conditions, prog)
	// Keep the order kube writes them in: Available, then Progressing.
	slices.SortStableFunc(st.Conditions, func(a, b appsv1.DeploymentCondition) int {
		return condRank(a.Type) - condRank(b.Type)
	})
	if equality.Semantic.DeepEqual(st, d.Status) {
		return nil
	}
	d.Status = st
	_, err := k.apps.Deployments(d.Namespace).UpdateStatus(ctx, d, metav1.UpdateOptions{FieldManager: "deployment-controller"})
	return ignoreGone(k.wrote(err))
}

func condRank(t appsv1.DeploymentConditionType) int {
	switch t {
	case appsv1.DeploymentAvailable:
		return 0
	case appsv1.DeploymentProgressing:
		return 1
	}
	return 2
}

// syncReplicaSet keeps spec.replicas active pods, deleting the surplus
// (unready and newest first), and reports them in status.
func (k *controller) syncReplicaSet(ctx context.Context, key workKey) error {
	var rs appsv1.ReplicaSet
	ok, err := k.get(key, &rs)
	if err != nil || !ok || rs.DeletionTimestamp != nil {
		return err
	}
	sel, err := selectorOf(rs.Spec.Selector)
	if err != nil {
		return nil
	}
	pods, err := list[corev1.Pod](k, resPods, rs.Namespace, sel, string(rs.UID))
	if err != nil {
		return err
	}
	pods = slices.DeleteFunc(pods, func(p *corev1.Pod) bool { return !active(p) })
	want := int(replicasOf(rs.Spec.Replicas))
	if err := k.statusReplicaSet(ctx, &rs, pods); err != nil {
		return err
	}
	owner := ownerRef("apps/v1", "ReplicaSet", rs.Name, rs.UID)
	for i := len(pods); i < want; i++ {
		pod := k.newPod(rs.Namespace, rs.Name+"-"+k.suffix(5), &rs.Spec.Template, owner, nil, k.pickNode())
		_, err := k.core.Pods(rs.Namespace).Create(ctx, pod, metav1.CreateOptions{FieldManager: "replicaset-controller"})
		if err = k.wrote(err); err != nil {
			return err
		}
	}
	if len(pods) > want {
		slices.SortStableFunc(pods, func(a, b *corev1.Pod) int {
			if ra, rb := podReady(a), podReady(b); ra != rb {
				if ra {
					return 1
				}
				return -1
			}
			return b.CreationTimestamp.Compare(a.CreationTimestamp.Time)
		})
		for _, p := range pods[:len(pods)-want] {
			if err := k.deletePod(ctx, p); err != nil {
				return err
			}
		}
	}
	return nil
}

func (k *controller) deletePod(ctx context.Context, p *corev1.Pod) error {
	err := k.core.Pods(p.Namespace).Delete(ctx, p.Name, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &p.UID}})
	return ignoreGone(k.wrote(err))
}

func (k *controller) statusReplicaSet(ctx context.Context, rs *appsv1.ReplicaSet, pods []*corev1.Pod) error {
	st := *rs.Status.DeepCopy()
	st.Replicas = int32(len(pods))
	st.FullyLabeledReplicas = st.Replicas
	st.ReadyReplicas, st.AvailableReplicas = 0, 0
	for _, p := range pods {
		if podReady(p) {
			st.ReadyReplicas++
			st.AvailableReplicas++
		}
	}
	st.ObservedGeneration = rs.Generation
	if equality.Semantic.DeepEqual(st, rs.Status) {
		return nil
	}
	rs.Status = st
	_, err := k.apps.ReplicaSets(rs.Namespace).UpdateStatus(ctx, rs, metav1.UpdateOptions{FieldManager: "replicaset-controller"})
	return ignoreGone(k.wrote(err))
}

// syncStatefulSet keeps pods <name>-0 … <name>-(replicas-1); with the
// default OrderedReady policy it creates the next one only when all lower
// ones are Ready and removes the highest first, one at a time.
func (k *controller) syncStatefulSet(ctx context.Context, key workKey) error {
	var s appsv1.StatefulSet
	ok, err := k.get(key, &s)
	if err != nil || !ok || s.DeletionTimestamp != nil {
		return err
	}
	sel, err := selectorOf(s.Spec.Selector)
	if err != nil {
		return nil
	}
	pods, err := list[corev1.Pod](k, resPods, s.Namespace, sel, string(s.UID))
	if err != nil {
		return err
	}
	want := int(replicasOf(s.Spec.Replicas))
	ordered := s.Spec.PodManagementPolicy != appsv1.ParallelPodManagement
	revision := s.Name + "-" + templateHash(&s.Spec.Template, s.Status.CollisionCount)
	byOrdinal := map[int]*corev1.Pod{}
	for _, p := range pods {
		if len(p.Name) <= len(s.Name)+1 || !active(p) {
			continue
		}
		if n, err := strconv.Atoi(p.Name[len(s.Name)+1:]); err == nil {
			byOrdinal[n] = p
		}
	}
	// Status from what is there now.
	st := *s.Status.DeepCopy()
	st.ObservedGeneration = s.Generation
	st.Replicas, st.ReadyReplicas, st.AvailableReplicas, st.CurrentReplicas, st.UpdatedReplicas = 0, 0, 0, 0, 0
	for _, p := range pods {
		if !active(p) {
			continue
		}
		st.Replicas++
		st.CurrentReplicas++
		st.UpdatedReplicas++
		if podReady(p) {
			st.ReadyReplicas++
			st.AvailableReplicas++
		}
	}
	st.CurrentRevision, st.UpdateRevision = revision, revision
	if !equality.Semantic.DeepEqual(st, s.Status) {
		s2 := s.DeepCopy()
		s2.Status = st
		if _, err := k.apps.StatefulSets(s.Namespace).UpdateStatus(ctx, s2, metav1.UpdateOptions{FieldManager: "statefulset-controller"}); ignoreGone(k.wrote(err)) != nil {
			return err
		}
	}
	owner := ownerRef("apps/v1", "StatefulSet", s.Name, s.UID)
	for i := 0; i < want; i++ {
		p := byOrdinal[i]
		if p != nil {
			if ordered && !podReady(p) {
				return nil // wait for it
			}
			continue
		}
		name := fmt.Sprintf("%s-%d", s.Name, i)
		pod := k.newPod(s.Namespace, name, &s.Spec.Template, owner, map[string]string{
			appsv1.StatefulSetPodNameLabel:        name,
			appsv1.PodIndexLabel:                  strconv.Itoa(i),
			appsv1.ControllerRevisionHashLabelKey: revision,
		}, k.pickNode())
		pod.Spec.Hostname, pod.Spec.Subdomain = name, s.Spec.ServiceName
		_, err := k.core.Pods(s.Namespace).Create(ctx, pod, metav1.CreateOptions{FieldManager: "statefulset-controller"})
		if err = k.wrote(err); err != nil {
			return ignoreExists(err)
		}
		if ordered {
			return nil
		}
	}
	ordinals := slices.Sorted(maps.Keys(byOrdinal))
	slices.Reverse(ordinals)
	for _, n := range ordinals {
		if n < want {
			break
		}
		if err := k.deletePod(ctx, byOrdinal[n]); err != nil || ordered {
			return err
		}
	}
	return nil
}

// syncDaemonSet keeps one pod on every node.
func (k *controller) syncDaemonSet(ctx context.Context, key workKey) error {
	var ds appsv1.DaemonSet
	ok, err := k.get(key, &ds)
	if err != nil || !ok || ds.DeletionTimestamp != nil {
		return err
	}
	sel, err := selectorOf(ds.Spec.Selector)
	if err != nil {
		return nil
	}
	pods, err := list[corev1.Pod](k, resPods, ds.Namespace, sel, string(ds.UID))
	if err != nil {
		return err
	}
	nodes, err := list[corev1.Node](k, resNodes, "", nil, "")
	if err != nil {
		return err
	}
	onNode := map[string][]*corev1.Pod{}
	for _, p := range pods {
		if active(p) {
			onNode[p.Spec.NodeName] = append(onNode[p.Spec.NodeName], p)
		}
	}
	hash := templateHash(&ds.Spec.Template, ds.Status.CollisionCount)
	st := *ds.Status.DeepCopy()
	st.ObservedGeneration = ds.Generation
	st.DesiredNumberScheduled = int32(len(nodes))
	st.CurrentNumberScheduled, st.NumberReady, st.NumberAvailable, st.UpdatedNumberScheduled, st.NumberMisscheduled = 0, 0, 0, 0, 0
	nodeSet := map[string]bool{}
	for _, n := range nodes {
		nodeSet[n.Name] = true
	}
	for node, ps := range onNode {
		if !nodeSet[node] {
			st.NumberMisscheduled += int32(len(ps))
			continue
		}
		st.CurrentNumberScheduled++
		st.UpdatedNumberScheduled++
		if podReady(ps[0]) {
			st.NumberReady++
			st.NumberAvailable++
		}
	}
	st.NumberUnavailable = max(0, st.DesiredNumberScheduled-st.NumberAvailable)
	if !equality.Semantic.DeepEqual(st, ds.Status) {
		d2 := ds.DeepCopy()
		d2.Status = st
		if _, err := k.apps.DaemonSets(ds.Namespace).UpdateStatus(ctx, d2, metav1.UpdateOptions{FieldManager: "daemonset-controller"}); ignoreGone(k.wrote(err)) != nil {
			return err
		}
	}
	owner := ownerRef("apps/v1", "DaemonSet", ds.Name, ds.UID)
	for _, n := range nodes {
		if len(onNode[n.Name]) > 0 {
			continue
		}
		pod := k.newPod(ds.Namespace, ds.Name+"-"+k.suffix(5), &ds.Spec.Template, owner,
			map[string]string{appsv1.ControllerRevisionHashLabelKey: hash}, n.Name)
		_, err := k.core.Pods(ds.Namespace).Create(ctx, pod, metav1.CreateOptions{FieldManager: "daemonset-controller"})
		if err = k.wrote(err); err != nil {
			return err
		}
	}
	for node, ps := range onNode {
		extra := ps[1:]
		if !nodeSet[node] {
			extra = ps
		}
		for _, p := range extra {
			if err := k.deletePod(ctx, p); err != nil {
				return err
			}
		}
	}
	return nil
}

func setJobCondition(conds []batchv1.JobCondition, c batchv1.JobCondition) []batchv1.JobCondition {
	return setCondition(conds, c, func(a, b *batchv1.JobCondition) (bool, bool) {
		return a.Type == b.Type, a.Status == b.Status
	}, func(dst, src *batchv1.JobCondition) {
		dst.LastTransitionTime = src.LastTransitionTime
		dst.LastProbeTime = src.LastProbeTime
	})
}

func jobFinished(j *batchv1.Job) bool {
	for _, c := range j.Status.Conditions {
		if (c.Type == batchv1.JobComplete || c.Type == batchv1.JobFailed) && c.Status == corev1.ConditionTrue {
			return true
		}
	}
	return false
}

// syncJob runs pods until spec.completions succeeded (Complete) or more
// than spec.backoffLimit failed (Failed), at most spec.parallelism at a
// time. Failed pods are replaced at once: there is no retry back-off.
func (k *controller) syncJob(ctx context.Context, key workKey) error {
	var j batchv1.Job
	ok, err := k.get(key, &j)
	if err != nil || !ok || j.DeletionTimestamp != nil || jobFinished(&j) {
		return err
	}
	pods, err := list[corev1.Pod](k, resPods, j.Namespace, nil, string(j.UID))
	if err != nil {
		return err
	}
	var running, succeeded, failed, ready int32
	for _, p := range pods {
		switch {
		case p.Status.Phase == corev1.PodSucceeded:
			succeeded++
		case p.Status.Phase == corev1.PodFailed:
			failed++
		case p.DeletionTimestamp == nil:
			running++
			if podReady(p) {
				ready++
			}
		}
	}
	completions := int32(1)
	if j.Spec.Completions != nil {
		completions = *j.Spec.Completions
	}
	parallelism := int32(1)
	if j.Spec.Parallelism != nil {
		parallelism = *j.Spec.Parallelism
	}
	backoff := int32(6)
	if j.Spec.BackoffLimit != nil {
		backoff = *j.Spec.BackoffLimit
	}
	suspended := j.Spec.Suspend != nil && *j.Spec.Suspend
	now := metav1.Now()
	st := *j.Status.DeepCopy()
	if st.StartTime == nil && !suspended {
		st.StartTime = &now
	}
	st.Active, st.Succeeded, st.Failed, st.Ready = running, succeeded, failed, &ready
	zero := int32(0)
	st.Terminating = &zero
	switch {
	case succeeded >= completions:
		st.Conditions = setJobCondition(st.Conditions, batchv1.JobCondition{Type: batchv1.JobSuccessCriteriaMet, Status: corev1.ConditionTrue,
			Reason: batchv1.JobReasonCompletionsReached, Message: "Reached expected number of succeeded pods", LastProbeTime: now, LastTransitionTime: now})
		st.Conditions = setJobCondition(st.Conditions, batchv1.JobCondition{Type: batchv1.JobComplete, Status: corev1.ConditionTrue,
			Reason: batchv1.JobReasonCompletionsReached, Message: "Reached expected number of succeeded pods", LastProbeTime: now, LastTransitionTime: now})
		st.CompletionTime = &now
	case failed > backoff:
		st.Conditions = setJobCondition(st.Conditions, batchv1.JobCondition{Type: batchv1.JobFailureTarget, Status: corev1.ConditionTrue,
			Reason: batchv1.JobReasonBackoffLimitExceeded, Message: "Job has reached the specified backoff limit", LastProbeTime: now, LastTransitionTime: now})
		st.Conditions = setJobCondition(st.Conditions, batchv1.JobCondition{Type: batchv1.JobFailed, Status: corev1.ConditionTrue,
			Reason: batchv1.JobReasonBackoffLimitExceeded, Message: "Job has reached the specified backoff limit", LastProbeTime: now, LastTransitionTime: now})
	case !suspended:
		owner := ownerRef("batch/v1", "Job", j.Name, j.UID)
		extra := map[string]string{
			batchv1.ControllerUidLabel: string(j.UID), batchv1.JobNameLabel: j.Name,
			"controller-uid": string(j.UID), "job-name": j.Name,
		}
		for n := min(parallelism, completions-succeeded) - running; n > 0; n-- {
			pod := k.newPod(j.Namespace, j.Name+"-"+k.suffix(5), &j.Spec.Template, owner, extra, k.pickNode())
			_, err := k.core.Pods(j.Namespace).Create(ctx, pod, metav1.CreateOptions{FieldManager: "job-controller"})
			if err = k.wrote(err); err != nil {
				return err
			}
		}
	}
	if equality.Semantic.DeepEqual(st, j.Status) {
		return nil
	}
	j.Status = st
	_, err = k.batch.Jobs(j.Namespace).UpdateStatus(ctx, &j, metav1.UpdateOptions{FieldManager: "job-controller"})
	return ignoreGone(k.wrote(err))
}
