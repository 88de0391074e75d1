package vcluster

import (
	"context"
	"encoding/binary"
	"fmt"
	"hash/fnv"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

const kubeletVersion = "v1.34.0"

func nodeNames(o Options) []string {
	names := make([]string, o.Nodes)
	for i := range names {
		names[i] = fmt.Sprintf("%s-node-%d", o.Name, i)
	}
	return names
}

func nodeIP(i int) string { return fmt.Sprintf("10.0.%d.%d", i/250, i%250+1) }

// registerNodes creates the cluster's nodes, Ready, as kubelets register.
func (c *Cluster) registerNodes(ctx context.Context) error {
	core, _, _, err := newClients(c)
	if err != nil {
		return err
	}
	now := metav1.Now()
	for i, name := range nodeNames(c.opts) {
		capacity := corev1.ResourceList{
			corev1.ResourceCPU:              resource.MustParse("4"),
			corev1.ResourceMemory:           resource.MustParse("16Gi"),
			corev1.ResourcePods:             resource.MustParse("110"),
			corev1.ResourceEphemeralStorage: resource.MustParse("100Gi"),
		}
		node := &corev1.Node{
			ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{
				"kubernetes.io/hostname": name, "kubernetes.io/os": "linux", "kubernetes.io/arch": "amd64",
				"node.kubernetes.io/instance-type": "vcluster", "canopy.dev/vcluster": c.opts.Name,
			}},
			Spec: corev1.NodeSpec{PodCIDR: fmt.Sprintf("10.244.%d.0/24", i%256), ProviderID: "vcluster://" + c.opts.Name + "/" + name},
			Status: corev1.NodeStatus{
				Capacity: capacity, Allocatable: capacity, Phase: corev1.NodeRunning,
				Conditions: []corev1.NodeCondition{
					nodeCondition(corev1.NodeMemoryPressure, corev1.ConditionFalse, "KubeletHasSufficientMemory", now),
					nodeCondition(corev1.NodeDiskPressure, corev1.ConditionFalse, "KubeletHasNoDiskPressure", now),
					nodeCondition(corev1.NodePIDPressure, corev1.ConditionFalse, "KubeletHasSufficientPID", now),
					nodeCondition(corev1.NodeReady, corev1.ConditionTrue, "KubeletReady", now),
				},
				Addresses: []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: nodeIP(i)}, {Type: corev1.NodeHostName, Address: name}},
				NodeInfo: corev1.NodeSystemInfo{
					KubeletVersion: kubeletVersion, ContainerRuntimeVersion: "containerd://2.1.0",
					OperatingSystem: "linux", Architecture: "amd64", OSImage: "Canopy virtual node",
					KernelVersion: "6.0.0-vcluster", MachineID: name, SystemUUID: name, BootID: name,
				},
			},
		}
		created, err := core.Nodes().Create(ctx, node, metav1.CreateOptions{FieldManager: "kubelet"})
		if err != nil {
			return err
		}
		if len(created.Status.Conditions) == 0 {
			created.Status = node.Status
			if _, err := core.Nodes().UpdateStatus(ctx, created, metav1.UpdateOptions{FieldManager: "kubelet"}); err != nil {
				return err
			}
		}
	}
	return nil
}

func nodeCondition(t corev1.NodeConditionType, s corev1.ConditionStatus, reason string, now metav1.Time) corev1.NodeCondition {
	return corev1.NodeCondition{Type: t, Status: s, Reason: reason, LastHeartbeatTime: now, LastTransitionTime: now}
}

// pickNode schedules round-robin over the nodes.
func (k *controller) pickNode() string {
	if len(k.nodes) == 0 {
		return ""
	}
	n := k.nodes[k.nextNode%len(k.nodes)]
	k.nextNode++
	return n
}

// fails reports whether the pod ns/name is one of the FailureRate that
// fail: a hash of Seed and the name, so the same names fail every run.
func (k *controller) fails(ns, name string) bool {
	r := k.c.opts.FailureRate
	if r <= 0 {
		return false
	}
	if r >= 1 {
		return true
	}
	h := fnv.New64a()
	var seed [8]byte
	binary.LittleEndian.PutUint64(seed[:], uint64(k.c.opts.Seed))
	h.Write(seed[:])
	h.Write([]byte(ns))
	h.Write([]byte{'/'})
	h.Write([]byte(name))
	return float64(mix64(h.Sum64())>>11)/float64(uint64(1)<<53) < r
}

// syncPod is the scheduler and the kubelet for one pod: bind it if it has
// no node, wait ReadyDelay after first seeing it, then start it (Running
// and Ready), complete it (Succeeded, for pods that do not restart) or fail
// it.
func (k *controller) syncPod(ctx context.Context, key workKey) error {
	var pod corev1.Pod
	ok, err := k.get(key, &pod)
	if err != nil || !ok {
		delete(k.armed, key)
		return err
	}
	if pod.DeletionTimestamp != nil || (pod.Status.Phase != "" && pod.Status.Phase != corev1.PodPending) {
		delete(k.armed, key)
		return nil
	}
	if pod.Spec.NodeName == "" {
		pod.Spec.NodeName = k.pickNode()
		if pod.Spec.NodeName == "" {
			return nil // no nodes: stays Pending
		}
		_, err := k.core.Pods(pod.Namespace).Update(ctx, &pod, metav1.UpdateOptions{FieldManager: "scheduler"})
		return ignoreGone(k.wrote(err))
	}
	due, armed := k.armed[key]
	now := time.Now()
	if !armed {
		due = now.Add(k.c.opts.ReadyDelay)
		k.armed[key] = due
	}
	if now.Before(due) {
		if !armed {
			k.after(key, due.Sub(now))
		}
		return nil
	}
	delete(k.armed, key)
	failed := k.fails(pod.Namespace, pod.Name)
	k.podStatus(&pod, failed, metav1.NewTime(now))
	_, err = k.core.Pods(pod.Namespace).UpdateStatus(ctx, &pod, metav1.UpdateOptions{FieldManager: "kubelet"})
	if err = ignoreGone(k.wrote(err)); err != nil {
		k.armed[key] = due // retry: still due
		return err
	}
	switch {
	case pod.Status.Phase == corev1.PodSucceeded:
		k.c.stats.podsDone.Add(1)
	case failed:
		k.c.stats.podsFailed.Add(1)
	default:
		k.c.stats.podsReady.Add(1)
	}
	return nil
}

// ignoreGone treats an object deleted under a write as done.
func ignoreGone(err error) error {
	if apierrors.IsNotFound(err) {
		return nil
	}
	return err
}

// podStatus writes the status a kubelet would report once the pod's
// containers started (or failed to).
func (k *controller) podStatus(pod *corev1.Pod, failed bool, now metav1.Time) {
	restarts := pod.Spec.RestartPolicy == corev1.RestartPolicyAlways || pod.Spec.RestartPolicy == ""
	st := &pod.Status
	hostIP := k.hostIP(pod.Spec.NodeName)
	k.nextIP++
	podIP := fmt.Sprintf("10.244.%d.%d", (k.nextIP/250)%256, k.nextIP%250+1)
	st.HostIP, st.HostIPs = hostIP, []corev1.HostIP{{IP: hostIP}}
	st.PodIP, st.PodIPs = podIP, []corev1.PodIP{{IP: podIP}}
	st.StartTime = &now
	if st.QOSClass == "" {
		st.QOSClass = corev1.PodQOSBestEffort
	}
	st.InitContainerStatuses = nil
	for _, c := range pod.Spec.InitContainers {
		st.InitContainerStatuses = append(st.InitContainerStatuses, corev1.ContainerStatus{
			Name: c.Name, Image: c.Image, ImageID: imageID(c.Image), ContainerID: containerID(pod, c.Name),
			State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 0, Reason: "Completed", StartedAt: now, FinishedAt: now}},
		})
	}
	var phase corev1.PodPhase
	ready := corev1.ConditionFalse
	readyReason := ""
	st.ContainerStatuses = nil
	names := ""
	for _, c := range pod.Spec.Containers {
		cs := corev1.ContainerStatus{Name: c.Name, Image: c.Image, ImageID: imageID(c.Image), ContainerID: containerID(pod, c.Name)}
		f := false
		cs.Started = &f
		switch {
		case failed && restarts:
			cs.RestartCount = 1
			cs.State.Waiting = &corev1.ContainerStateWaiting{Reason: "CrashLoopBackOff",
				Message: fmt.Sprintf("back-off 10s restarting failed container=%s pod=%s_%s(%s)", c.Name, pod.Name, pod.Namespace, pod.UID)}
			cs.LastTerminationState.Terminated = &corev1.ContainerStateTerminated{ExitCode: 1, Reason: "Error", StartedAt: now, FinishedAt: now, ContainerID: cs.ContainerID}
		case failed:
			cs.State.Terminated = &corev1.ContainerStateTerminated{ExitCode: 1, Reason: "Error", StartedAt: now, FinishedAt: now, ContainerID: cs.ContainerID}
		case restarts:
			t := true
			cs.Ready, cs.Started = true, &t
			cs.State.Running = &corev1.ContainerStateRunning{StartedAt: now}
		default:
			cs.State.Terminated = &corev1.ContainerStateTerminated{ExitCode: 0, Reason: "Completed", StartedAt: now, FinishedAt: now, ContainerID: cs.ContainerID}
		}
		if !cs.Ready {
			if names != "" {
				names += " "
			}
			names += c.Name
		}
		st.ContainerStatuses = append(st.ContainerStatuses, cs)
	}
	switch {
	case failed && restarts:
		phase, readyReason = corev1.PodRunning, "ContainersNotReady"
	case failed:
		phase, readyReason = corev1.PodFailed, "PodFailed"
	case restarts:
		phase, ready = corev1.PodRunning, corev1.ConditionTrue
	default:
		phase, readyReason = corev1.PodSucceeded, "PodCompleted"
	}
	st.Phase = phase
	msg := ""
	if readyReason == "ContainersNotReady" {
		msg = "containers with unready status: [" + names + "]"
	}
	runningNow := corev1.ConditionTrue
	if phase != corev1.PodRunning {
		runningNow = corev1.ConditionFalse
	}
	st.Conditions = []corev1.PodCondition{
		{Type: corev1.PodReadyToStartContainers, Status: runningNow, LastTransitionTime: now},
		{Type: corev1.PodInitialized, Status: corev1.ConditionTrue, LastTransitionTime: now},
		{Type: corev1.PodReady, Status: ready, Reason: readyReason, Message: msg, LastTransitionTime: now},
		{Type: corev1.ContainersReady, Status: ready, Reason: readyReason, Message: msg, LastTransitionTime: now},
		{Type: corev1.PodScheduled, Status: corev1.ConditionTrue, LastTransitionTime: pod.CreationTimestamp},
	}
}

func (k *controller) hostIP(node string) string {
	for i, n := range k.nodes {
		if n == node {
			return nodeIP(i)
		}
	}
	return nodeIP(0)
}

func imageID(image string) string {
	h := fnv.New64a()
	h.Write([]byte(image))
	return fmt.Sprintf("%s@sha256:%016x%016x%016x%016x", image, h.Sum64(), h.Sum64()^1, h.Sum64()^2, h.Sum64()^3)
}

func containerID(pod *corev1.Pod, name string) string {
	h := fnv.New64a()
	h.Write([]byte(pod.UID))
	h.Write([]byte(name))
	return fmt.Sprintf("containerd://%016x%016x", h.Sum64(), h.Sum64()^uint64(len(name)))
}

// podReady reports whether a pod is Ready.
func podReady(p *corev1.Pod) bool {
	if p.Status.Phase != corev1.PodRunning {
		return false
	}
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// active reports whether a pod counts toward its controller's replicas.
func active(p *corev1.Pod) bool {
	return p.DeletionTimestamp == nil && p.Status.Phase != corev1.PodSucceeded && p.Status.Phase != corev1.PodFailed
}

// newPod builds a pod from a template, controlled by owner.
func (k *controller) newPod(ns, name string, tmpl *corev1.PodTemplateSpec, owner metav1.OwnerReference, extraLabels map[string]string, node string) *corev1.Pod {
	t := true
	owner.Controller, owner.BlockOwnerDeletion = &t, &t
	pod := &corev1.Pod{
		ObjectMeta: *tmpl.ObjectMeta.DeepCopy(),
		Spec:       *tmpl.Spec.DeepCopy(),
	}
	pod.Name, pod.Namespace, pod.GenerateName = name, ns, ""
	pod.OwnerReferences = []metav1.OwnerReference{owner}
	if pod.Labels == nil && len(extraLabels) > 0 {
		pod.Labels = map[string]string{}
	}
	for k, v := range extraLabels {
		pod.Labels[k] = v
	}
	if pod.Spec.NodeName == "" {
		pod.Spec.NodeName = node
	}
	return pod
}

func ownerRef(apiVersion, kind, name string, uid types.UID) metav1.OwnerReference {
	return metav1.OwnerReference{APIVersion: apiVersion, Kind: kind, Name: name, UID: uid}
}

func ignoreExists(err error) error {
	if apierrors.IsAlreadyExists(err) {
		return nil
	}
	return err
}

// mix64 is splitmix64's finalizer: FNV's high bits are poorly spread for
// short, similar names.
func mix64(x uint64) uint64 {
	x ^= x >> 30
	x *= 0xbf58476d1ce4e5b9
	x ^= x >> 27
	x *= 0x94d049bb133111eb
	return x ^ x>>31
}
