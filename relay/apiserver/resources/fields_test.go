package resources

import (
	"maps"
	"testing"

	"k8s.io/apimachinery/pkg/fields"
)

func TestFields(t *testing.T) {
	for _, tc := range []struct {
		name            string
		group, resource string
		object          string
		want            fields.Set
	}{{
		name: "pod", resource: "pods",
		object: `
metadata: {name: web-1, namespace: default}
spec: {nodeName: node-1, restartPolicy: Always, schedulerName: default-scheduler, serviceAccountName: web, hostNetwork: true}
status: {phase: Running, podIP: 10.0.0.5, podIPs: [{ip: 10.0.0.5}, {ip: "fd00::5"}], nominatedNodeName: node-2}
`,
		want: fields.Set{
			"spec.nodeName": "node-1", "spec.restartPolicy": "Always", "spec.schedulerName": "default-scheduler",
			"spec.serviceAccountName": "web", "spec.hostNetwork": "true", "status.phase": "Running",
			"status.podIP": "10.0.0.5", "status.nominatedNodeName": "node-2",
		},
	}, {
		name: "empty pod", resource: "pods",
		object: `metadata: {name: p}`,
		want: fields.Set{
			"spec.nodeName": "", "spec.restartPolicy": "", "spec.schedulerName": "", "spec.serviceAccountName": "",
			"spec.hostNetwork": "false", "status.phase": "", "status.podIP": "", "status.nominatedNodeName": "",
		},
	}, {
		name: "event", resource: "events",
		object: `
metadata: {name: e, namespace: default}
involvedObject: {kind: Pod, namespace: default, name: web-1, uid: u-1, apiVersion: v1, resourceVersion: "42", fieldPath: "spec.containers{app}"}
reason: BackOff
type: Warning
reportingComponent: kubelet
`,
		want: fields.Set{
			"involvedObject.kind": "Pod", "involvedObject.namespace": "default", "involvedObject.name": "web-1",
			"involvedObject.uid": "u-1", "involvedObject.apiVersion": "v1", "involvedObject.resourceVersion": "42",
			"involvedObject.fieldPath": "spec.containers{app}", "reason": "BackOff", "reportingComponent": "kubelet",
			"source": "kubelet", "type": "Warning",
		},
	}, {
		name: "event with source", resource: "events",
		object: `{source: {component: scheduler}, reportingComponent: other}`,
		want: fields.Set{
			"involvedObject.kind": "", "involvedObject.namespace": "", "involvedObject.name": "",
			"involvedObject.uid": "", "involvedObject.apiVersion": "", "involvedObject.resourceVersion": "",
			"involvedObject.fieldPath": "", "reason": "", "reportingComponent": "other", "source": "scheduler", "type": "",
		},
	}, {
		name: "events.k8s.io event", group: "events.k8s.io", resource: "events",
		object: `{regarding: {kind: Node, name: n1}, reason: Rebooted, type: Normal, reportingController: kubelet}`,
		want: fields.Set{
			"regarding.kind": "Node", "regarding.namespace": "", "regarding.name": "n1", "regarding.uid": "",
			"regarding.apiVersion": "", "regarding.resourceVersion": "", "regarding.fieldPath": "",
			"reason": "Rebooted", "reportingController": "kubelet", "type": "Normal",
		},
	}, {
		name: "secret", resource: "secrets",
		object: `{metadata: {name: s}, type: kubernetes.io/service-account-token}`,
		want:   fields.Set{"type": "kubernetes.io/service-account-token"},
	}, {
		name: "namespace", resource: "namespaces",
		object: `{metadata: {name: prod}, status: {phase: Active}}`,
		want:   fields.Set{"status.phase": "Active", "name": "prod"},
	}, {
		name: "node", resource: "nodes",
		object: `{spec: {unschedulable: true}}`,
		want:   fields.Set{"spec.unschedulable": "true"},
	}, {
		name: "replicaset", group: "apps", resource: "replicasets",
		object: `{status: {replicas: 3}}`,
		want:   fields.Set{"status.replicas": "3"},
	}, {
		name: "replicationcontroller", resource: "replicationcontrollers",
		object: `{}`,
		want:   fields.Set{"status.replicas": "0"},
	}, {
		name: "job", group: "batch", resource: "jobs",
		object: `{status: {succeeded: 12}}`,
		want:   fields.Set{"status.successful": "12"},
	}, {
		name: "service", resource: "services",
		object: `{spec: {type: NodePort, clusterIP: 10.96.0.3}}`,
		want:   fields.Set{"spec.clusterIP": "10.96.0.3", "spec.type": "NodePort"},
	}, {
		name: "csr", group: "certificates.k8s.io", resource: "certificatesigningrequests",
		object: `{spec: {signerName: kubernetes.io/kubelet-serving}}`,
		want:   fields.Set{"spec.signerName": "kubernetes.io/kubelet-serving"},
	}, {
		name: "resource slice", group: "resource.k8s.io", resource: "resourceslices",
		object: `{spec: {nodeName: n1, driver: gpu.example.com, pool: {name: p1}}}`,
		want:   fields.Set{"spec.nodeName": "n1", "spec.driver": "gpu.example.com", "spec.pool.name": "p1"},
	}} {
		t.Run(tc.name, func(t *testing.T) {
			info := Lookup(tc.group, tc.resource)
			if info == nil || info.Fields == nil {
				t.Fatalf("%s.%s has no fields", tc.resource, tc.group)
			}
			got := info.Fields(decode(t, tc.object).Object)
			if !maps.Equal(got, tc.want) {
				t.Errorf("fields:\n got  %v\n want %v", got, tc.want)
			}
		})
	}
}

func TestNoFields(t *testing.T) {
	for _, gr := range [][2]string{{"", "configmaps"}, {"apps", "deployments"}, {"rbac.authorization.k8s.io", "roles"}} {
		if Lookup(gr[0], gr[1]).Fields != nil {
			t.Errorf("%s.%s: kube offers no extra fields", gr[1], gr[0])
		}
	}
}

func TestFieldSelectorMatches(t *testing.T) {
	set := Lookup("", "pods").Fields(decode(t, `{spec: {nodeName: node-1}, status: {phase: Running}}`).Object)
	for sel, want := range map[string]bool{
		"spec.nodeName=node-1":                      true,
		"spec.nodeName=node-1,status.phase!=Failed": true,
		"status.phase=Pending":                      false,
		"spec.hostNetwork=false":                    true,
	} {
		s, err := fields.ParseSelector(sel)
		if err != nil {
			t.Fatal(err)
		}
		if got := s.Matches(set); got != want {
			t.Errorf("%q matches = %v, want %v", sel, got, want)
		}
	}
}
