package resources

import (
	"encoding/json"
	"reflect"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utiljson "k8s.io/apimachinery/pkg/util/json"
	"sigs.k8s.io/yaml"
)

// now is the time every table test measures ages against.
var now = time.Date(2025, 6, 1, 12, 0, 0, 0, time.UTC)

// ago returns the RFC 3339 timestamp d before now.
func ago(d time.Duration) string { return now.Add(-d).Format(time.RFC3339) }

// decode parses a YAML object the way the apiserver decodes JSON (integers
// as int64).
func decode(t *testing.T, doc string) *unstructured.Unstructured {
	t.Helper()
	data, err := yaml.YAMLToJSON([]byte(doc))
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := utiljson.Unmarshal(data, &m); err != nil {
		t.Fatal(err)
	}
	return &unstructured.Unstructured{Object: m}
}

type tableCase struct {
	name     string
	group    string
	resource string
	object   string
	want     []any
}

func runTableCases(t *testing.T, cases []tableCase) {
	t.Helper()
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			info := Lookup(tc.group, tc.resource)
			if info == nil {
				t.Fatalf("%s.%s not served", tc.resource, tc.group)
			}
			got := info.Table.Cells(decode(t, tc.object), now)
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("cells:\n got  %#v\n want %#v", got, tc.want)
			}
			if cols := info.Table.Columns(); len(cols) != len(got) {
				t.Errorf("%d cells for %d columns", len(got), len(cols))
			}
		})
	}
}

func TestPodTable(t *testing.T) {
	runTableCases(t, []tableCase{{
		name: "running", resource: "pods",
		object: `
metadata: {name: web-1, creationTimestamp: "` + ago(10*time.Minute) + `"}
spec:
  nodeName: node-1
  containers: [{name: app}, {name: proxy}]
status:
  phase: Running
  podIPs: [{ip: 10.0.0.5}]
  podIP: 10.0.0.5
  conditions: [{type: Ready, status: "True"}]
  containerStatuses:
  - {name: app, ready: true, restartCount: 0, state: {running: {startedAt: "` + ago(9*time.Minute) + `"}}}
  - {name: proxy, ready: true, restartCount: 0, state: {running: {startedAt: "` + ago(9*time.Minute) + `"}}}
`,
		want: []any{"web-1", "2/2", "Running", "0", "10m", "10.0.0.5", "node-1", "<none>", "<none>"},
	}, {
		name: "pending", resource: "pods",
		object: `
metadata: {name: web-2, creationTimestamp: "` + ago(5*time.Second) + `"}
spec: {containers: [{name: app}]}
status: {phase: Pending}
`,
		want: []any{"web-2", "0/1", "Pending", "0", "5s", "<none>", "<none>", "<none>", "<none>"},
	}, {
		name: "crash loop", resource: "pods",
		object: `
metadata: {name: web-3, creationTimestamp: "` + ago(3*time.Hour+20*time.Minute) + `"}
spec: {nodeName: node-2, containers: [{name: app}]}
status:
  phase: Running
  podIPs: [{ip: 10.0.0.6}]
  containerStatuses:
  - name: app
    ready: false
    restartCount: 5
    state: {waiting: {reason: CrashLoopBackOff, message: back-off 5m0s}}
    lastState: {terminated: {exitCode: 1, reason: Error, finishedAt: "` + ago(3*time.Minute+20*time.Second) + `"}}
`,
		want: []any{"web-3", "0/1", "CrashLoopBackOff", "5 (3m20s ago)", "3h20m", "10.0.0.6", "node-2", "<none>", "<none>"},
	}, {
		name: "terminating", resource: "pods",
		object: `
metadata: {name: web-4, creationTimestamp: "` + ago(50*time.Hour) + `", deletionTimestamp: "` + ago(-30*time.Second) + `"}
spec: {nodeName: node-1, containers: [{name: app}]}
status:
  phase: Running
  containerStatuses: [{name: app, ready: true, restartCount: 0, state: {running: {}}}]
`,
		want: []any{"web-4", "1/1", "Terminating", "0", "2d2h", "<none>", "node-1", "<none>", "<none>"},
	}, {
		name: "completed with restarts", resource: "pods",
		object: `
metadata: {name: job-x, creationTimestamp: "` + ago(2*time.Hour) + `"}
spec: {restartPolicy: OnFailure, containers: [{name: work}]}
status:
  phase: Succeeded
  containerStatuses:
  - name: work
    ready: false
    restartCount: 2
    state: {terminated: {exitCode: 0, reason: Completed, finishedAt: "` + ago(time.Hour) + `"}}
    lastState: {terminated: {exitCode: 1, reason: Error, finishedAt: "` + ago(90*time.Minute) + `"}}
`,
		want: []any{"job-x", "0/1", "Completed", "2 (90m ago)", "120m", "<none>", "<none>", "<none>", "<none>"},
	}, {
		name: "init container running", resource: "pods",
		object: `
metadata: {name: init-1, creationTimestamp: "` + ago(30*time.Second) + `"}
spec: {initContainers: [{name: migrate}, {name: seed}], containers: [{name: app}]}
status:
  phase: Pending
  initContainerStatuses:
  - {name: migrate, restartCount: 0, state: {terminated: {exitCode: 0, reason: Completed}}}
  - {name: seed, restartCount: 0, state: {running: {}}}
  containerStatuses: [{name: app, restartCount: 0, state: {waiting: {reason: PodInitializing}}}]
`,
		want: []any{"init-1", "0/1", "Init:1/2", "0", "30s", "<none>", "<none>", "<none>", "<none>"},
	}, {
		name: "init container failing", resource: "pods",
		object: `
metadata: {name: init-2, creationTimestamp: "` + ago(30*time.Second) + `"}
spec: {initContainers: [{name: migrate}], containers: [{name: app}]}
status:
  phase: Pending
  initContainerStatuses:
  - {name: migrate, restartCount: 3, state: {waiting: {reason: CrashLoopBackOff}}, lastState: {terminated: {exitCode: 2, finishedAt: "` + ago(10*time.Second) + `"}}}
`,
		want: []any{"init-2", "0/1", "Init:CrashLoopBackOff", "3 (10s ago)", "30s", "<none>", "<none>", "<none>", "<none>"},
	}, {
		name: "sidecar and readiness gates", resource: "pods",
		object: `
metadata: {name: mesh-1, creationTimestamp: "` + ago(time.Minute) + `"}
spec:
  initContainers: [{name: envoy, restartPolicy: Always}]
  containers: [{name: app}]
  readinessGates: [{conditionType: example.com/lb}, {conditionType: example.com/dns}]
status:
  phase: Running
  podIPs: [{ip: fd00::5}, {ip: 10.0.0.7}]
  nominatedNodeName: node-9
  conditions:
  - {type: Initialized, status: "True"}
  - {type: example.com/lb, status: "True"}
  - {type: example.com/dns, status: "False"}
  initContainerStatuses:
  - {name: envoy, started: true, ready: true, restartCount: 1, state: {running: {}}, lastState: {terminated: {exitCode: 137, finishedAt: "` + ago(40*time.Second) + `"}}}
  containerStatuses: [{name: app, ready: true, restartCount: 0, state: {running: {}}}]
`,
		want: []any{"mesh-1", "2/2", "Running", "1 (40s ago)", "60s", "fd00::5", "<none>", "node-9", "1/2"},
	}, {
		name: "lost with its node", resource: "pods",
		object: `
metadata: {name: lost, creationTimestamp: "` + ago(time.Hour) + `", deletionTimestamp: "` + ago(time.Minute) + `"}
spec: {containers: [{name: app}]}
status: {phase: Running, reason: NodeLost}
`,
		want: []any{"lost", "0/1", "Unknown", "0", "60m", "<none>", "<none>", "<none>", "<none>"},
	}, {
		name: "signal", resource: "pods",
		object: `
metadata: {name: killed}
spec: {containers: [{name: app}]}
status:
  phase: Failed
  containerStatuses: [{name: app, restartCount: 0, state: {terminated: {exitCode: 137, signal: 9}}}]
`,
		want: []any{"killed", "0/1", "Signal:9", "0", "<unknown>", "<none>", "<none>", "<none>", "<none>"},
	}})
}

func TestWorkloadTables(t *testing.T) {
	runTableCases(t, []tableCase{{
		name: "deployment", group: "apps", resource: "deployments",
		object: `
metadata: {name: web, creationTimestamp: "` + ago(26*time.Hour) + `"}
spec:
  replicas: 3
  selector: {matchLabels: {app: web}, matchExpressions: [{key: tier, operator: In, values: [front]}]}
  template: {spec: {containers: [{name: app, image: nginx:1.27}, {name: log, image: busybox}]}}
status: {replicas: 3, updatedReplicas: 3, readyReplicas: 2, availableReplicas: 2}
`,
		want: []any{"web", "2/3", int64(3), int64(2), "26h", "app,log", "nginx:1.27,busybox", "app=web,tier in (front)"},
	}, {
		name: "replicaset", group: "apps", resource: "replicasets",
		object: `
metadata: {name: web-5d9c, creationTimestamp: "` + ago(3*24*time.Hour) + `"}
spec: {replicas: 2, selector: {matchLabels: {app: web}}, template: {spec: {containers: [{name: app, image: nginx}]}}}
status: {replicas: 2, readyReplicas: 1}
`,
		want: []any{"web-5d9c", int64(2), int64(2), int64(1), "3d", "app", "nginx", "app=web"},
	}, {
		name: "statefulset", group: "apps", resource: "statefulsets",
		object: `
metadata: {name: db, creationTimestamp: "` + ago(45*time.Second) + `"}
spec: {replicas: 3, template: {spec: {containers: [{name: pg, image: postgres:17}]}}}
status: {readyReplicas: 1}
`,
		want: []any{"db", "1/3", "45s", "pg", "postgres:17"},
	}, {
		name: "daemonset", group: "apps", resource: "daemonsets",
		object: `
metadata: {name: agent, creationTimestamp: "` + ago(7*time.Minute+5*time.Second) + `"}
spec:
  selector: {matchLabels: {app: agent}}
  template: {spec: {nodeSelector: {kubernetes.io/os: linux}, containers: [{name: agent, image: agent:2}]}}
status: {desiredNumberScheduled: 4, currentNumberScheduled: 4, numberReady: 3, updatedNumberScheduled: 4, numberAvailable: 3}
`,
		want: []any{"agent", int64(4), int64(4), int64(3), int64(4), int64(3), "kubernetes.io/os=linux", "7m5s", "agent", "agent:2", "app=agent"},
	}, {
		name: "job complete", group: "batch", resource: "jobs",
		object: `
metadata: {name: pi, creationTimestamp: "` + ago(10*time.Minute) + `"}
spec: {completions: 1, parallelism: 1, selector: {matchLabels: {batch.kubernetes.io/controller-uid: abc}}, template: {spec: {containers: [{name: pi, image: perl}]}}}
status:
  succeeded: 1
  startTime: "` + ago(10*time.Minute) + `"
  completionTime: "` + ago(10*time.Minute-42*time.Second) + `"
  conditions: [{type: SuccessCriteriaMet, status: "True"}, {type: Complete, status: "True"}]
`,
		want: []any{"pi", "Complete", "1/1", "42s", "10m", "pi", "perl", "batch.kubernetes.io/controller-uid=abc"},
	}, {
		name: "job running work queue", group: "batch", resource: "jobs",
		object: `
metadata: {name: queue, creationTimestamp: "` + ago(5*time.Minute) + `"}
spec: {parallelism: 3, template: {spec: {containers: [{name: w, image: worker}]}}}
status: {succeeded: 2, startTime: "` + ago(4*time.Minute) + `"}
`,
		want: []any{"queue", "Running", "2/1 of 3", "4m", "5m", "w", "worker", "<none>"},
	}, {
		name: "cronjob", group: "batch", resource: "cronjobs",
		object: `
metadata: {name: nightly, creationTimestamp: "` + ago(9*24*time.Hour) + `"}
spec:
  schedule: "0 3 * * *"
  suspend: false
  jobTemplate: {spec: {template: {spec: {containers: [{name: backup, image: backup:1}]}}}}
status: {active: [{name: nightly-1}], lastScheduleTime: "` + ago(9*time.Hour) + `"}
`,
		want: []any{"nightly", "0 3 * * *", "<none>", "False", int64(1), "9h", "9d", "backup", "backup:1", "<none>"},
	}, {
		name: "hpa", group: "autoscaling", resource: "horizontalpodautoscalers",
		object: `
metadata: {name: web, creationTimestamp: "` + ago(time.Hour) + `"}
spec:
  scaleTargetRef: {apiVersion: apps/v1, kind: Deployment, name: web}
  minReplicas: 2
  maxReplicas: 10
  metrics:
  - {type: Resource, resource: {name: cpu, target: {type: Utilization, averageUtilization: 80}}}
  - {type: Resource, resource: {name: memory, target: {type: AverageValue, averageValue: 512Mi}}}
  - {type: Pods, pods: {metric: {name: rps}, target: {type: AverageValue, averageValue: "100"}}}
status:
  currentReplicas: 3
  currentMetrics:
  - {type: Resource, resource: {name: cpu, current: {averageUtilization: 45, averageValue: 120m}}}
  - {type: Resource, resource: {name: memory, current: {averageUtilization: 30}}}
`,
		want: []any{"web", "Deployment/web", "cpu: 45%/80%, memory: <nil>/512Mi + 1 more...", "2", int64(10), int64(3), "60m"},
	}, {
		name: "pdb", group: "policy", resource: "poddisruptionbudgets",
		object: `
metadata: {name: web, creationTimestamp: "` + ago(time.Hour) + `"}
spec: {minAvailable: 50%}
status: {disruptionsAllowed: 1}
`,
		want: []any{"web", "50%", "N/A", int64(1), "60m"},
	}})
}

func TestCoreTables(t *testing.T) {
	runTableCases(t, []tableCase{{
		name: "clusterip service", resource: "services",
		object: `
metadata: {name: web, creationTimestamp: "` + ago(2*time.Hour) + `"}
spec:
  type: ClusterIP
  clusterIP: 10.96.0.10
  clusterIPs: [10.96.0.10]
  selector: {app: web, tier: front}
  ports: [{name: http, port: 80, protocol: TCP, targetPort: 8080}, {name: dns, port: 53, protocol: UDP}]
`,
		want: []any{"web", "ClusterIP", "10.96.0.10", "<none>", "80/TCP,53/UDP", "120m", "app=web,tier=front"},
	}, {
		name: "load balancer service", resource: "services",
		object: `
metadata: {name: edge, creationTimestamp: "` + ago(2*time.Hour) + `"}
spec:
  type: LoadBalancer
  clusterIPs: [10.96.0.11]
  externalIPs: [192.0.2.9]
  ports: [{port: 443, nodePort: 30443, protocol: TCP}]
status: {loadBalancer: {ingress: [{ip: 203.0.113.7}, {hostname: lb.example.com}]}}
`,
		want: []any{"edge", "LoadBalancer", "10.96.0.11", "203.0.113.7,lb.example.com,192.0.2.9", "443:30443/TCP", "120m", "<none>"},
	}, {
		name: "pending load balancer", resource: "services",
		object: `
metadata: {name: lb}
spec: {type: LoadBalancer, clusterIPs: [10.96.0.12], ports: [{port: 80, nodePort: 31000, protocol: TCP}]}
`,
		want: []any{"lb", "LoadBalancer", "10.96.0.12", "<pending>", "80:31000/TCP", "<unknown>", "<none>"},
	}, {
		name: "external name service", resource: "services",
		object: `
metadata: {name: db, creationTimestamp: "` + ago(time.Minute) + `"}
spec: {type: ExternalName, externalName: db.example.com}
`,
		want: []any{"db", "ExternalName", "<none>", "db.example.com", "<none>", "60s", "<none>"},
	}, {
		name: "secret", resource: "secrets",
		object: `
metadata: {name: tls, creationTimestamp: "` + ago(400*24*time.Hour) + `"}
type: kubernetes.io/tls
data: {tls.crt: Y2VydA==, tls.key: a2V5}
`,
		want: []any{"tls", "kubernetes.io/tls", int64(2), "400d"},
	}, {
		name: "configmap", resource: "configmaps",
		object: `
metadata: {name: settings, creationTimestamp: "` + ago(3*365*24*time.Hour+30*24*time.Hour) + `"}
data: {a: "1", b: "2"}
binaryData: {c: AA==}
`,
		want: []any{"settings", int64(3), "3y30d"},
	}, {
		name: "namespace terminating", resource: "namespaces",
		object: `
metadata: {name: old, creationTimestamp: "` + ago(5*time.Hour+7*time.Minute) + `", deletionTimestamp: "` + ago(time.Minute) + `"}
spec: {finalizers: [kubernetes]}
status: {phase: Terminating}
`,
		want: []any{"old", "Terminating", "5h7m"},
	}, {
		name: "node", resource: "nodes",
		object: `
metadata:
  name: node-1
  creationTimestamp: "` + ago(30*24*time.Hour) + `"
  labels: {node-role.kubernetes.io/control-plane: "", node-role.kubernetes.io/worker: "", kubernetes.io/role: edge}
spec: {unschedulable: true}
status:
  conditions: [{type: MemoryPressure, status: "False"}, {type: Ready, status: "True"}]
  addresses: [{type: Hostname, address: node-1}, {type: InternalIP, address: 192.168.1.10}]
  nodeInfo: {kubeletVersion: v1.37.2, osImage: Debian GNU/Linux 13, kernelVersion: 6.12.0, containerRuntimeVersion: containerd://2.1.0}
`,
		want: []any{"node-1", "Ready,SchedulingDisabled", "control-plane,edge,worker", "30d", "v1.37.2",
			"192.168.1.10", "<none>", "Debian GNU/Linux 13", "6.12.0", "containerd://2.1.0"},
	}, {
		name: "node without status", resource: "nodes",
		object: `metadata: {name: node-2}`,
		want:   []any{"node-2", "Unknown", "<none>", "<unknown>", "", "<none>", "<none>", "<unknown>", "<unknown>", "<unknown>"},
	}, {
		name: "event", resource: "events",
		object: `
metadata: {name: web-1.17f2, namespace: default}
involvedObject: {kind: Pod, name: web-1, namespace: default, fieldPath: "spec.containers{app}"}
reason: BackOff
message: "Back-off restarting failed container app\n"
type: Warning
count: 12
firstTimestamp: "` + ago(time.Hour) + `"
lastTimestamp: "` + ago(2*time.Minute) + `"
source: {component: kubelet, host: node-1}
`,
		want: []any{"2m", "Warning", "BackOff", "pod/web-1", "spec.containers{app}", "kubelet, node-1",
			"Back-off restarting failed container app", "60m", int64(12), "web-1.17f2"},
	}, {
		name: "event series", resource: "events",
		object: `
metadata: {name: e2}
involvedObject: {kind: Node}
reason: Rebooted
type: Normal
eventTime: "` + now.Add(-3*time.Hour).Format("2006-01-02T15:04:05.000000Z07:00") + `"
series: {count: 4, lastObservedTime: "` + now.Add(-20*time.Second).Format("2006-01-02T15:04:05.000000Z07:00") + `"}
reportingComponent: kubelet
reportingInstance: node-3
`,
		want: []any{"20s", "Normal", "Rebooted", "node", "", "kubelet, node-3", "", "3h", int64(4), "e2"},
	}, {
		name: "events.k8s.io event", group: "events.k8s.io", resource: "events",
		object: `
metadata: {name: e3}
regarding: {kind: Deployment, name: web}
reason: ScalingReplicaSet
note: Scaled up replica set web-5d9c to 3
type: Normal
eventTime: "` + now.Add(-90*time.Second).Format("2006-01-02T15:04:05.000000Z07:00") + `"
reportingController: deployment-controller
`,
		want: []any{"90s", "Normal", "ScalingReplicaSet", "deployment/web", "", "deployment-controller",
			"Scaled up replica set web-5d9c to 3", "90s", int64(1), "e3"},
	}, {
		name: "endpoints", resource: "endpoints",
		object: `
metadata: {name: web, creationTimestamp: "` + ago(time.Minute) + `"}
subsets:
- addresses: [{ip: 10.0.0.1}, {ip: 10.0.0.2}, {ip: "fd00::3"}]
  ports: [{port: 8080}, {port: 9090}]
`,
		want: []any{"web", "10.0.0.1:8080,10.0.0.2:8080,[fd00::3]:8080 + 3 more...", "60s"},
	}, {
		name: "service account", resource: "serviceaccounts",
		object: `metadata: {name: default, creationTimestamp: "` + ago(time.Minute) + `"}`,
		want:   []any{"default", int64(0), "60s"},
	}, {
		name: "persistent volume", resource: "persistentvolumes",
		object: `
metadata: {name: pv-1, creationTimestamp: "` + ago(time.Hour) + `"}
spec:
  capacity: {storage: 10Gi}
  accessModes: [ReadWriteMany, ReadWriteOnce, ReadWriteOnce]
  persistentVolumeReclaimPolicy: Retain
  storageClassName: fast
  volumeMode: Filesystem
  claimRef: {namespace: default, name: data}
status: {phase: Bound}
`,
		want: []any{"pv-1", "10Gi", "RWO,RWX", "Retain", "Bound", "default/data", "fast", "<unset>", "", "60m", "Filesystem"},
	}, {
		name: "persistent volume claim", resource: "persistentvolumeclaims",
		object: `
metadata: {name: data, creationTimestamp: "` + ago(time.Hour) + `", annotations: {volume.beta.kubernetes.io/storage-class: legacy}}
spec: {storageClassName: fast, volumeName: pv-1, resources: {requests: {storage: 5Gi}}}
status: {phase: Bound, capacity: {storage: "10737418240"}, accessModes: [ReadWriteOnce]}
`,
		want: []any{"data", "Bound", "pv-1", "10737418240", "RWO", "legacy", "<unset>", "60m", "<unset>"},
	}, {
		name: "resource quota", resource: "resourcequotas",
		object: `
metadata: {name: q, creationTimestamp: "` + ago(time.Hour) + `"}
status:
  hard: {limits.cpu: "4", pods: "10", requests.memory: 1Gi}
  used: {limits.cpu: 500m, pods: "3"}
`,
		want: []any{"q", "pods: 3/10, requests.memory: 0/1Gi", "limits.cpu: 500m/4", "60m"},
	}})
}

func TestOtherTables(t *testing.T) {
	runTableCases(t, []tableCase{{
		name: "ingress", group: "networking.k8s.io", resource: "ingresses",
		object: `
metadata: {name: web, creationTimestamp: "` + ago(time.Hour) + `"}
spec:
  ingressClassName: nginx
  tls: [{hosts: [a.example.com]}]
  rules: [{host: a.example.com}, {host: b.example.com}, {}, {host: c.example.com}, {host: d.example.com}]
status: {loadBalancer: {ingress: [{ip: 203.0.113.9}]}}
`,
		want: []any{"web", "nginx", "a.example.com,b.example.com,c.example.com + 2 more...", "203.0.113.9", "80, 443", "60m"},
	}, {
		name: "network policy", group: "networking.k8s.io", resource: "networkpolicies",
		object: `
metadata: {name: deny, creationTimestamp: "` + ago(time.Hour) + `"}
spec: {podSelector: {}}
`,
		want: []any{"deny", "<none>", "60m"},
	}, {
		name: "role binding", group: "rbac.authorization.k8s.io", resource: "rolebindings",
		object: `
metadata: {name: admins, creationTimestamp: "` + ago(time.Hour) + `"}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: admin}
subjects:
- {kind: User, name: alice}
- {kind: User, name: bob}
- {kind: Group, name: ops}
- {kind: ServiceAccount, namespace: ci, name: deployer}
`,
		want: []any{"admins", "ClusterRole/admin", "60m", "alice, bob", "ops", "ci/deployer"},
	}, {
		name: "cluster role prints the default table", group: "rbac.authorization.k8s.io", resource: "clusterroles",
		object: `metadata: {name: view, creationTimestamp: "2025-05-01T10:00:00+02:00"}`,
		want:   []any{"view", "2025-05-01T08:00:00Z"},
	}, {
		name: "crd prints the default table", group: "apiextensions.k8s.io", resource: "customresourcedefinitions",
		object: `metadata: {name: synctargets.edge.canopy.dev, creationTimestamp: "2025-05-01T10:00:00Z"}`,
		want:   []any{"synctargets.edge.canopy.dev", "2025-05-01T10:00:00Z"},
	}, {
		name: "storage class", group: "storage.k8s.io", resource: "storageclasses",
		object: `
metadata: {name: standard, creationTimestamp: "` + ago(time.Hour) + `", annotations: {storageclass.kubernetes.io/is-default-class: "true"}}
provisioner: rancher.io/local-path
volumeBindingMode: WaitForFirstConsumer
`,
		want: []any{"standard (default)", "rancher.io/local-path", "Delete", "WaitForFirstConsumer", false, "60m"},
	}, {
		name: "priority class", group: "scheduling.k8s.io", resource: "priorityclasses",
		object: `
metadata: {name: system-cluster-critical, creationTimestamp: "` + ago(time.Hour) + `"}
value: 2000000000
preemptionPolicy: PreemptLowerPriority
`,
		want: []any{"system-cluster-critical", int64(2000000000), false, "60m", "PreemptLowerPriority"},
	}, {
		name: "lease", group: "coordination.k8s.io", resource: "leases",
		object: `
metadata: {name: node-1, creationTimestamp: "` + ago(time.Hour) + `"}
spec: {holderIdentity: node-1, leaseDurationSeconds: 40}
`,
		want: []any{"node-1", "node-1", "60m"},
	}, {
		name: "csr", group: "certificates.k8s.io", resource: "certificatesigningrequests",
		object: `
metadata: {name: csr-x, creationTimestamp: "` + ago(time.Minute) + `"}
spec: {signerName: kubernetes.io/kube-apiserver-client, username: alice, expirationSeconds: 86400}
status: {conditions: [{type: Approved, status: "True"}], certificate: Y2VydA==}
`,
		want: []any{"csr-x", "60s", "kubernetes.io/kube-apiserver-client", "alice", "24h", "Approved,Issued"},
	}, {
		name: "apiservice", group: "apiregistration.k8s.io", resource: "apiservices",
		object: `
metadata: {name: v1beta1.metrics.k8s.io, creationTimestamp: "` + ago(time.Hour) + `"}
spec: {service: {namespace: kube-system, name: metrics-server}, group: metrics.k8s.io, version: v1beta1}
status: {conditions: [{type: Available, status: "False", reason: MissingEndpoints}]}
`,
		want: []any{"v1beta1.metrics.k8s.io", "kube-system/metrics-server", "False (MissingEndpoints)", "60m"},
	}, {
		name: "endpoint slice", group: "discovery.k8s.io", resource: "endpointslices",
		object: `
metadata: {name: web-abc, creationTimestamp: "` + ago(time.Hour) + `"}
addressType: IPv4
ports: [{name: http, port: 80}, {name: metrics}]
endpoints: [{addresses: [10.0.0.1]}, {addresses: [10.0.0.2]}, {addresses: [10.0.0.3]}, {addresses: [10.0.0.4]}]
`,
		want: []any{"web-abc", "IPv4", "80,metrics", "10.0.0.1,10.0.0.2,10.0.0.3 + 1 more...", "60m"},
	}})
}

// TestColumnsShape checks every table: NAME first (events: LAST SEEN first,
// NAME wide), one cell per column whatever the object, cells of JSON-safe
// types.
func TestColumnsShape(t *testing.T) {
	objects := []*unstructured.Unstructured{
		nil,
		{Object: map[string]any{}},
		{Object: map[string]any{"metadata": map[string]any{"name": "x"}, "spec": "not a map", "status": []any{1}}},
	}
	for _, info := range Builtins() {
		cols := info.Table.Columns()
		if len(cols) == 0 {
			t.Errorf("%s: no columns", info.Resource)
			continue
		}
		first := cols[0].Name
		if info.Resource == "events" {
			if first != "Last Seen" || cols[len(cols)-1].Name != "Name" || cols[len(cols)-1].Priority != 1 {
				t.Errorf("%s.%s: events start with Last Seen and end with a wide Name", info.Resource, info.Group)
			}
		} else if first != "Name" || cols[0].Format != "name" {
			t.Errorf("%s.%s: first column %+v, want Name", info.Resource, info.Group, cols[0])
		}
		for _, c := range cols {
			if c.Priority != 0 && c.Priority != 1 {
				t.Errorf("%s: column %s priority %d", info.Resource, c.Name, c.Priority)
			}
		}
		for _, obj := range objects {
			cells := info.Table.Cells(obj, now)
			if len(cells) != len(cols) {
				t.Errorf("%s.%s: %d cells for %d columns", info.Resource, info.Group, len(cells), len(cols))
			}
			for i, c := range cells {
				switch c.(type) {
				case string, int64, bool:
				default:
					t.Errorf("%s: cell %d is a %T", info.Resource, i, c)
				}
			}
			if _, err := json.Marshal(cells); err != nil {
				t.Errorf("%s: %v", info.Resource, err)
			}
		}
	}
}

func TestCellsAcceptFloatNumbers(t *testing.T) {
	// encoding/json decodes numbers as float64; tables read them alike.
	var m map[string]any
	if err := json.Unmarshal([]byte(`{"metadata":{"name":"web"},"spec":{"replicas":3},"status":{"readyReplicas":3,"updatedReplicas":3,"availableReplicas":3}}`), &m); err != nil {
		t.Fatal(err)
	}
	got := Lookup("apps", "deployments").Table.Cells(&unstructured.Unstructured{Object: m}, now)
	if got[1] != "3/3" || got[2] != int64(3) {
		t.Errorf("cells = %v", got)
	}
}

func TestHumanDuration(t *testing.T) {
	for _, tc := range []struct {
		d    time.Duration
		want string
	}{
		{-5 * time.Second, "<invalid>"},
		{-time.Second, "0s"},
		{0, "0s"},
		{5 * time.Second, "5s"},
		{119 * time.Second, "119s"},
		{3*time.Minute + 2*time.Second, "3m2s"},
		{4 * time.Minute, "4m"},
		{10 * time.Minute, "10m"},
		{179 * time.Minute, "179m"},
		{3*time.Hour + 20*time.Minute, "3h20m"},
		{5 * time.Hour, "5h"},
		{47 * time.Hour, "47h"},
		{51 * time.Hour, "2d3h"},
		{8 * 24 * time.Hour, "8d"},
		{800 * 24 * time.Hour, "2y70d"},
		{9 * 365 * 24 * time.Hour, "9y"},
	} {
		if got := HumanDuration(tc.d); got != tc.want {
			t.Errorf("HumanDuration(%v) = %q, want %q", tc.d, got, tc.want)
		}
	}
}
