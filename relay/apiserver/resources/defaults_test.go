package resources

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/yaml"
)

// defaultCase is an object as a client sends it and the object kube-apiserver
// stores (and returns) after defaulting it. An empty want means the kind
// has no defaults for that object: it is stored as sent.
type defaultCase struct {
	name            string
	group, resource string
	in, want        string
}

// decodeTyped decodes a YAML object into the Go type Info.New returns for
// group/resource, failing on unknown fields, as the apiserver's strict
// decoding does.
func decodeTyped(t *testing.T, group, resource, doc string) runtime.Object {
	t.Helper()
	info := Lookup(group, resource)
	if info == nil {
		t.Fatalf("no resource %s/%s", group, resource)
	}
	obj := info.New()
	if err := yaml.UnmarshalStrict([]byte(doc), obj); err != nil {
		t.Fatalf("decoding %s: %v", resource, err)
	}
	return obj
}

// wireJSON returns obj as the apiserver would write it.
func wireJSON(t *testing.T, obj runtime.Object) []byte {
	t.Helper()
	data, err := json.Marshal(obj)
	if err != nil {
		t.Fatal(err)
	}
	return data
}

// checkDefaulted compares what Default made of tc.in with tc.want, both
// going through the same Go type and JSON encoding.
func checkDefaulted(t *testing.T, tc defaultCase) {
	t.Helper()
	want := tc.want
	if want == "" {
		want = tc.in
	}
	got := decodeTyped(t, tc.group, tc.resource, tc.in)
	Default(got)
	gotJSON := wireJSON(t, got)
	wantJSON := wireJSON(t, decodeTyped(t, tc.group, tc.resource, want))
	if !bytes.Equal(gotJSON, wantJSON) {
		g, _ := yaml.JSONToYAML(gotJSON)
		w, _ := yaml.JSONToYAML(wantJSON)
		t.Errorf("defaulted %s:\n%s\nwant:\n%s", tc.resource, g, w)
	}
}

// kubectlCases are objects as kubectl's generators (kubectl create, kubectl
// run) or a minimal manifest send them, and what kube-apiserver 1.37 stores,
// the server-side allocations (cluster IPs, node ports) and admission
// plugins aside.
var kubectlCases = []defaultCase{{
	name: "kubectl create deployment web --image=nginx", group: "apps", resource: "deployments",
	in: `
metadata: {name: web, labels: {app: web}}
spec:
  replicas: 1
  selector: {matchLabels: {app: web}}
  strategy: {}
  template:
    metadata: {labels: {app: web}}
    spec:
      containers: [{name: nginx, image: nginx, resources: {}}]
status: {}
`,
	want: `
metadata: {name: web, labels: {app: web}}
spec:
  progressDeadlineSeconds: 600
  replicas: 1
  revisionHistoryLimit: 10
  selector: {matchLabels: {app: web}}
  strategy:
    type: RollingUpdate
    rollingUpdate: {maxSurge: 25%, maxUnavailable: 25%}
  template:
    metadata: {labels: {app: web}}
    spec:
      containers:
      - name: nginx
        image: nginx
        imagePullPolicy: Always
        resources: {}
        terminationMessagePath: /dev/termination-log
        terminationMessagePolicy: File
      dnsPolicy: ClusterFirst
      restartPolicy: Always
      schedulerName: default-scheduler
      securityContext: {}
      terminationGracePeriodSeconds: 30
`,
}, {
	name: "kubectl run web --image=nginx:1.27 --port=80", resource: "pods",
	in: `
metadata: {name: web, labels: {run: web}}
spec:
  containers: [{name: web, image: "nginx:1.27", ports: [{containerPort: 80}], resources: {}}]
  dnsPolicy: ClusterFirst
  restartPolicy: Always
`,
	want: `
metadata: {name: web, labels: {run: web}}
spec:
  containers:
  - name: web
    image: "nginx:1.27"
    imagePullPolicy: IfNotPresent
    ports: [{containerPort: 80, protocol: TCP}]
    resources: {}
    terminationMessagePath: /dev/termination-log
    terminationMessagePolicy: File
  dnsPolicy: ClusterFirst
  enableServiceLinks: true
  restartPolicy: Always
  schedulerName: default-scheduler
  securityContext: {}
  terminationGracePeriodSeconds: 30
`,
}, {
	name: "replicaset", group: "apps", resource: "replicasets",
	in: `
metadata: {name: web}
spec:
  selector: {matchLabels: {app: web}}
  template:
    metadata: {labels: {app: web}}
    spec: {containers: [{name: web, image: "nginx:1.27"}]}
`,
	want: `
metadata: {name: web}
spec:
  replicas: 1
  selector: {matchLabels: {app: web}}
  template:
    metadata: {labels: {app: web}}
    spec:
      containers:
      - {name: web, image: "nginx:1.27", imagePullPolicy: IfNotPresent, resources: {},
         terminationMessagePath: /dev/termination-log, terminationMessagePolicy: File}
      dnsPolicy: ClusterFirst
      restartPolicy: Always
      schedulerName: default-scheduler
      securityContext: {}
      terminationGracePeriodSeconds: 30
`,
}, {
	name: "statefulset with a volume claim template", group: "apps", resource: "statefulsets",
	in: `
metadata: {name: db}
spec:
  serviceName: db
  selector: {matchLabels: {app: db}}
  template:
    metadata: {labels: {app: db}}
    spec:
      containers:
      - name: pg
        image: "postgres:17"
        ports: [{name: pg, containerPort: 5432}]
        volumeMounts: [{name: data, mountPath: /var/lib/postgresql}]
  volumeClaimTemplates:
  - metadata: {name: data}
    spec: {accessModes: [ReadWriteOnce], resources: {requests: {storage: 1Gi}}}
`,
	want: `
metadata: {name: db}
spec:
  persistentVolumeClaimRetentionPolicy: {whenDeleted: Retain, whenScaled: Retain}
  podManagementPolicy: OrderedReady
  replicas: 1
  revisionHistoryLimit: 10
  serviceName: db
  selector: {matchLabels: {app: db}}
  template:
    metadata: {labels: {app: db}}
    spec:
      containers:
      - name: pg
        image: "postgres:17"
        imagePullPolicy: IfNotPresent
        ports: [{name: pg, containerPort: 5432, protocol: TCP}]
        resources: {}
        terminationMessagePath: /dev/termination-log
        terminationMessagePolicy: File
        volumeMounts: [{name: data, mountPath: /var/lib/postgresql}]
      dnsPolicy: ClusterFirst
      restartPolicy: Always
      schedulerName: default-scheduler
      securityContext: {}
      terminationGracePeriodSeconds: 30
  updateStrategy:
    type: RollingUpdate
    rollingUpdate: {partition: 0, maxUnavailable: 1}
  volumeClaimTemplates:
  - metadata: {name: data}
    spec: {accessModes: [ReadWriteOnce], resources: {requests: {storage: 1Gi}}, volumeMode: Filesystem}
    status: {phase: Pending}
`,
}, {
	name: "daemonset", group: "apps", resource: "daemonsets",
	in: `
metadata: {name: agent}
spec:
  selector: {matchLabels: {app: agent}}
  template:
    metadata: {labels: {app: agent}}
    spec: {containers: [{name: agent, image: "fluent-bit:3"}]}
`,
	want: `
metadata: {name: agent}
spec:
  revisionHistoryLimit: 10
  selector: {matchLabels: {app: agent}}
  template:
    metadata: {labels: {app: agent}}
    spec:
      containers:
      - {name: agent, image: "fluent-bit:3", imagePullPolicy: IfNotPresent, resources: {},
         terminationMessagePath: /dev/termination-log, terminationMessagePolicy: File}
      dnsPolicy: ClusterFirst
      restartPolicy: Always
      schedulerName: default-scheduler
      securityContext: {}
      terminationGracePeriodSeconds: 30
  updateStrategy:
    type: RollingUpdate
    rollingUpdate: {maxSurge: 0, maxUnavailable: 1}
`,
}, {
	name: "kubectl create job pi --image=perl -- perl -e 1", group: "batch", resource: "jobs",
	in: `
metadata: {name: pi}
spec:
  template:
    spec:
      containers: [{name: pi, image: perl, command: [perl, -e, "1"], resources: {}}]
      restartPolicy: Never
`,
	want: `
metadata: {name: pi}
spec:
  backoffLimit: 6
  completionMode: NonIndexed
  completions: 1
  manualSelector: false
  parallelism: 1
  podReplacementPolicy: TerminatingOrFailed
  suspend: false
  template:
    spec:
      containers:
      - {name: pi, image: perl, command: [perl, -e, "1"], imagePullPolicy: Always, resources: {},
         terminationMessagePath: /dev/termination-log, terminationMessagePolicy: File}
      dnsPolicy: ClusterFirst
      restartPolicy: Never
      schedulerName: default-scheduler
      securityContext: {}
      terminationGracePeriodSeconds: 30
`,
}, {
	name: "indexed job with a backoff limit per index", group: "batch", resource: "jobs",
	in: `
metadata: {name: idx}
spec:
  completionMode: Indexed
  completions: 3
  backoffLimitPerIndex: 1
  podFailurePolicy:
    rules: [{action: FailIndex, onPodConditions: [{type: DisruptionTarget}]}]
  template:
    metadata: {labels: {app: idx}}
    spec:
      containers: [{name: w, image: "busybox:1.37"}]
      restartPolicy: Never
`,
	want: `
metadata: {name: idx, labels: {app: idx}}
spec:
  backoffLimit: 2147483647
  backoffLimitPerIndex: 1
  completionMode: Indexed
  completions: 3
  manualSelector: false
  parallelism: 1
  podFailurePolicy:
    rules: [{action: FailIndex, onPodConditions: [{type: DisruptionTarget, status: "True"}]}]
  podReplacementPolicy: Failed
  suspend: false
  template:
    metadata: {labels: {app: idx}}
    spec:
      containers:
      - {name: w, image: "busybox:1.37", imagePullPolicy: IfNotPresent, resources: {},
         terminationMessagePath: /dev/termination-log, terminationMessagePolicy: File}
      dnsPolicy: ClusterFirst
      restartPolicy: Never
      schedulerName: default-scheduler
      securityContext: {}
      terminationGracePeriodSeconds: 30
`,
}, {
	// The job template of a CronJob gets the pod spec's defaults, not the
	// Job's: kube defaults Jobs, not job specs.
	name: "kubectl create cronjob hello --image=busybox --schedule=*/1 * * * *", group: "batch", resource: "cronjobs",
	in: `
metadata: {name: hello}
spec:
  schedule: "*/1 * * * *"
  jobTemplate:
    metadata: {name: hello}
    spec:
      template:
        spec:
          containers: [{name: hello, image: busybox, resources: {}}]
          restartPolicy: OnFailure
`,
	want: `
metadata: {name: hello}
spec:
  concurrencyPolicy: Allow
  failedJobsHistoryLimit: 1
  schedule: "*/1 * * * *"
  successfulJobsHistoryLimit: 3
  suspend: false
  jobTemplate:
    metadata: {name: hello}
    spec:
      template:
        spec:
          containers:
          - {name: hello, image: busybox, imagePullPolicy: Always, resources: {},
             terminationMessagePath: /dev/termination-log, terminationMessagePolicy: File}
          dnsPolicy: ClusterFirst
          restartPolicy: OnFailure
          schedulerName: default-scheduler
          securityContext: {}
          terminationGracePeriodSeconds: 30
`,
}, {
	name: "replicationcontroller takes selector and labels from its template", resource: "replicationcontrollers",
	in: `
metadata: {name: legacy}
spec:
  template:
    metadata: {labels: {app: legacy}}
    spec: {containers: [{name: c, image: "nginx:latest"}]}
`,
	want: `
metadata: {name: legacy, labels: {app: legacy}}
spec:
  replicas: 1
  selector: {app: legacy}
  template:
    metadata: {labels: {app: legacy}}
    spec:
      containers:
      - {name: c, image: "nginx:latest", imagePullPolicy: Always, resources: {},
         terminationMessagePath: /dev/termination-log, terminationMessagePolicy: File}
      dnsPolicy: ClusterFirst
      restartPolicy: Always
      schedulerName: default-scheduler
      securityContext: {}
      terminationGracePeriodSeconds: 30
`,
}, {
	name: "podtemplate", resource: "podtemplates",
	in: `{metadata: {name: t}, template: {spec: {containers: [{name: c, image: "nginx@sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"}]}}}`,
	want: `
metadata: {name: t}
template:
  spec:
    containers:
    - {name: c, image: "nginx@sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef",
       imagePullPolicy: IfNotPresent, resources: {}, terminationMessagePath: /dev/termination-log, terminationMessagePolicy: File}
    dnsPolicy: ClusterFirst
    restartPolicy: Always
    schedulerName: default-scheduler
    securityContext: {}
    terminationGracePeriodSeconds: 30
`,
}, {
	name: "kubectl create service clusterip web --tcp=80:8080", resource: "services",
	in: `
metadata: {name: web, labels: {app: web}}
spec:
  ports: [{name: 80-8080, port: 80, protocol: TCP, targetPort: 8080}]
  selector: {app: web}
  type: ClusterIP
`,
	want: `
metadata: {name: web, labels: {app: web}}
spec:
  internalTrafficPolicy: Cluster
  ipFamilies: [IPv4]
  ipFamilyPolicy: SingleStack
  ports: [{name: 80-8080, port: 80, protocol: TCP, targetPort: 8080}]
  selector: {app: web}
  sessionAffinity: None
  type: ClusterIP
`,
}, {
	name: "kubectl create service nodeport web --tcp=80", resource: "services",
	in: `
metadata: {name: web, labels: {app: web}}
spec:
  ports: [{name: "80", port: 80, protocol: TCP, targetPort: 80}]
  selector: {app: web}
  type: NodePort
`,
	want: `
metadata: {name: web, labels: {app: web}}
spec:
  externalTrafficPolicy: Cluster
  internalTrafficPolicy: Cluster
  ipFamilies: [IPv4]
  ipFamilyPolicy: SingleStack
  ports: [{name: "80", port: 80, protocol: TCP, targetPort: 80}]
  selector: {app: web}
  sessionAffinity: None
  type: NodePort
`,
}, {
	name: "load balancer from a manifest", resource: "services",
	in: `
metadata: {name: lb}
spec: {type: LoadBalancer, selector: {app: web}, ports: [{name: https, port: 443}]}
status: {loadBalancer: {ingress: [{ip: 203.0.113.7}, {hostname: lb.example.com}]}}
`,
	want: `
metadata: {name: lb}
spec:
  allocateLoadBalancerNodePorts: true
  externalTrafficPolicy: Cluster
  internalTrafficPolicy: Cluster
  ipFamilies: [IPv4]
  ipFamilyPolicy: SingleStack
  ports: [{name: https, port: 443, protocol: TCP, targetPort: 443}]
  selector: {app: web}
  sessionAffinity: None
  type: LoadBalancer
status: {loadBalancer: {ingress: [{ip: 203.0.113.7, ipMode: VIP}, {hostname: lb.example.com}]}}
`,
}, {
	name: "kubectl create service clusterip db --clusterip=None", resource: "services",
	in: `
metadata: {name: db, labels: {app: db}}
spec: {clusterIP: None, selector: {app: db}, type: ClusterIP}
`,
	want: `
metadata: {name: db, labels: {app: db}}
spec:
  clusterIP: None
  clusterIPs: [None]
  internalTrafficPolicy: Cluster
  ipFamilies: [IPv4]
  ipFamilyPolicy: SingleStack
  selector: {app: db}
  sessionAffinity: None
  type: ClusterIP
`,
}, {
	// Headless services without selector front endpoints of any family.
	name: "headless service without selector", resource: "services",
	in: `{metadata: {name: ext}, spec: {clusterIP: None, ports: [{port: 5432, targetPort: 0}]}}`,
	want: `
metadata: {name: ext}
spec:
  clusterIP: None
  clusterIPs: [None]
  internalTrafficPolicy: Cluster
  ipFamilies: [IPv4, IPv6]
  ipFamilyPolicy: RequireDualStack
  ports: [{port: 5432, protocol: TCP, targetPort: 5432}]
  sessionAffinity: None
  type: ClusterIP
`,
}, {
	name: "service with a requested cluster IP and client IP affinity", resource: "services",
	in: `{metadata: {name: dns}, spec: {clusterIP: "fd00:10::a", sessionAffinity: ClientIP, ports: [{port: 53, protocol: UDP, targetPort: dns}]}}`,
	want: `
metadata: {name: dns}
spec:
  clusterIP: "fd00:10::a"
  clusterIPs: ["fd00:10::a"]
  internalTrafficPolicy: Cluster
  ipFamilies: [IPv6]
  ipFamilyPolicy: SingleStack
  ports: [{port: 53, protocol: UDP, targetPort: dns}]
  sessionAffinity: ClientIP
  sessionAffinityConfig: {clientIP: {timeoutSeconds: 10800}}
  type: ClusterIP
`,
}, {
	name: "kubectl create service externalname ext --external-name=example.com", resource: "services",
	in:   `{metadata: {name: ext, labels: {app: ext}}, spec: {type: ExternalName, externalName: example.com, selector: {app: ext}}}`,
	want: `{metadata: {name: ext, labels: {app: ext}}, spec: {type: ExternalName, externalName: example.com, selector: {app: ext}, sessionAffinity: None}}`,
}, {
	name: "kubectl create secret generic s --from-literal=a=b", resource: "secrets",
	in:   `{metadata: {name: s}, data: {a: Yg==}}`,
	want: `{metadata: {name: s}, data: {a: Yg==}, type: Opaque}`,
}, {
	name: "kubectl create namespace team", resource: "namespaces",
	in:   `{metadata: {name: team}, spec: {}, status: {}}`,
	want: `{metadata: {name: team, labels: {kubernetes.io/metadata.name: team}}, spec: {}, status: {phase: Active}}`,
}, {
	name: "persistentvolumeclaim", resource: "persistentvolumeclaims",
	in:   `{metadata: {name: data}, spec: {accessModes: [ReadWriteOnce], resources: {requests: {storage: 1Gi}}}}`,
	want: `{metadata: {name: data}, spec: {accessModes: [ReadWriteOnce], resources: {requests: {storage: 1Gi}}, volumeMode: Filesystem}, status: {phase: Pending}}`,
}, {
	name: "persistentvolume", resource: "persistentvolumes",
	in: `{metadata: {name: pv1}, spec: {capacity: {storage: 5Gi}, accessModes: [ReadWriteOnce], hostPath: {path: /data}}}`,
	want: `
metadata: {name: pv1}
spec:
  accessModes: [ReadWriteOnce]
  capacity: {storage: 5Gi}
  hostPath: {path: /data, type: ""}
  persistentVolumeReclaimPolicy: Retain
  volumeMode: Filesystem
status: {phase: Pending}
`,
}, {
	name: "endpoints", resource: "endpoints",
	in:   `{metadata: {name: web}, subsets: [{addresses: [{ip: 10.0.0.1}], ports: [{port: 80}, {name: dns, port: 53, protocol: UDP}]}]}`,
	want: `{metadata: {name: web}, subsets: [{addresses: [{ip: 10.0.0.1}], ports: [{port: 80, protocol: TCP}, {name: dns, port: 53, protocol: UDP}]}]}`,
}, {
	name: "limitrange", resource: "limitranges",
	in: `
metadata: {name: limits}
spec:
  limits:
  - {type: Container, max: {cpu: "2"}, min: {memory: 64Mi}, default: {memory: 512Mi}}
  - {type: Pod, max: {cpu: "4"}}
`,
	want: `
metadata: {name: limits}
spec:
  limits:
  - type: Container
    max: {cpu: "2"}
    min: {memory: 64Mi}
    default: {cpu: "2", memory: 512Mi}
    defaultRequest: {cpu: "2", memory: 512Mi}
  - {type: Pod, max: {cpu: "4"}}
`,
}, {
	name: "kubectl create quota q --hard=cpu=1,pods=10", resource: "resourcequotas",
	in: `{metadata: {name: q}, spec: {hard: {cpu: "1", pods: "10"}}}`,
}, {
	name: "horizontalpodautoscaler without metrics", group: "autoscaling", resource: "horizontalpodautoscalers",
	in: `{metadata: {name: web}, spec: {scaleTargetRef: {apiVersion: apps/v1, kind: Deployment, name: web}, maxReplicas: 10}}`,
	want: `
metadata: {name: web}
spec:
  maxReplicas: 10
  metrics: [{type: Resource, resource: {name: cpu, target: {type: Utilization, averageUtilization: 80}}}]
  minReplicas: 1
  scaleTargetRef: {apiVersion: apps/v1, kind: Deployment, name: web}
`,
}, {
	name: "horizontalpodautoscaler with a partial behavior", group: "autoscaling", resource: "horizontalpodautoscalers",
	in: `
metadata: {name: web}
spec:
  scaleTargetRef: {apiVersion: apps/v1, kind: Deployment, name: web}
  minReplicas: 2
  maxReplicas: 10
  metrics: [{type: Resource, resource: {name: memory, target: {type: AverageValue, averageValue: 500Mi}}}]
  behavior: {scaleDown: {stabilizationWindowSeconds: 300}}
`,
	want: `
metadata: {name: web}
spec:
  scaleTargetRef: {apiVersion: apps/v1, kind: Deployment, name: web}
  minReplicas: 2
  maxReplicas: 10
  metrics: [{type: Resource, resource: {name: memory, target: {type: AverageValue, averageValue: 500Mi}}}]
  behavior:
    scaleUp:
      stabilizationWindowSeconds: 0
      selectPolicy: Max
      policies: [{type: Pods, value: 4, periodSeconds: 15}, {type: Percent, value: 100, periodSeconds: 15}]
    scaleDown:
      stabilizationWindowSeconds: 300
      selectPolicy: Max
      policies: [{type: Percent, value: 100, periodSeconds: 15}]
`,
}, {
	name: "networkpolicy with egress rules", group: "networking.k8s.io", resource: "networkpolicies",
	in:   `{metadata: {name: dns}, spec: {podSelector: {}, egress: [{ports: [{port: 53}, {port: 53, protocol: UDP}]}]}}`,
	want: `{metadata: {name: dns}, spec: {podSelector: {}, egress: [{ports: [{port: 53, protocol: TCP}, {port: 53, protocol: UDP}]}], policyTypes: [Ingress, Egress]}}`,
}, {
	name: "networkpolicy with ingress rules", group: "networking.k8s.io", resource: "networkpolicies",
	in:   `{metadata: {name: web}, spec: {podSelector: {matchLabels: {app: web}}, ingress: [{ports: [{port: http}]}]}}`,
	want: `{metadata: {name: web}, spec: {podSelector: {matchLabels: {app: web}}, ingress: [{ports: [{port: http, protocol: TCP}]}], policyTypes: [Ingress]}}`,
}, {
	name: "kubectl create ingress web --rule=example.com/=web:80", group: "networking.k8s.io", resource: "ingresses",
	in: `
metadata: {name: web}
spec:
  rules:
  - host: example.com
    http: {paths: [{path: /, pathType: Exact, backend: {service: {name: web, port: {number: 80}}}}]}
`,
}, {
	name: "ingressclass with parameters", group: "networking.k8s.io", resource: "ingressclasses",
	in:   `{metadata: {name: lb}, spec: {controller: example.com/lb, parameters: {apiGroup: k8s.example.com, kind: IngressParameters, name: external}}}`,
	want: `{metadata: {name: lb}, spec: {controller: example.com/lb, parameters: {apiGroup: k8s.example.com, kind: IngressParameters, name: external, scope: Cluster}}}`,
}, {
	name: "rolebinding", group: "rbac.authorization.k8s.io", resource: "rolebindings",
	in: `
metadata: {name: edit}
roleRef: {kind: ClusterRole, name: edit}
subjects: [{kind: User, name: alice}, {kind: Group, name: devs}, {kind: ServiceAccount, name: ci, namespace: build}]
`,
	want: `
metadata: {name: edit}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: edit}
subjects:
- {apiGroup: rbac.authorization.k8s.io, kind: User, name: alice}
- {apiGroup: rbac.authorization.k8s.io, kind: Group, name: devs}
- {kind: ServiceAccount, name: ci, namespace: build}
`,
}, {
	name: "clusterrolebinding", group: "rbac.authorization.k8s.io", resource: "clusterrolebindings",
	in:   `{metadata: {name: view}, roleRef: {kind: ClusterRole, name: view}, subjects: [{kind: Group, name: viewers}]}`,
	want: `{metadata: {name: view}, roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: view}, subjects: [{apiGroup: rbac.authorization.k8s.io, kind: Group, name: viewers}]}`,
}, {
	name: "priorityclass", group: "scheduling.k8s.io", resource: "priorityclasses",
	in:   `{metadata: {name: high}, value: 1000}`,
	want: `{metadata: {name: high}, value: 1000, preemptionPolicy: PreemptLowerPriority}`,
}, {
	name: "storageclass", group: "storage.k8s.io", resource: "storageclasses",
	in:   `{metadata: {name: fast}, provisioner: csi.example.com}`,
	want: `{metadata: {name: fast}, provisioner: csi.example.com, reclaimPolicy: Delete, volumeBindingMode: Immediate}`,
}, {
	name: "csidriver", group: "storage.k8s.io", resource: "csidrivers",
	in: `{metadata: {name: csi.example.com}, spec: {}}`,
	want: `
metadata: {name: csi.example.com}
spec:
  attachRequired: true
  fsGroupPolicy: ReadWriteOnceWithFSType
  podInfoOnMount: false
  requiresRepublish: false
  seLinuxMount: false
  storageCapacity: false
  volumeLifecycleModes: [Persistent]
`,
}, {
	name: "volumeattachment with an inline volume", group: "storage.k8s.io", resource: "volumeattachments",
	in: `
metadata: {name: va}
spec: {attacher: csi.example.com, nodeName: n1, source: {inlineVolumeSpec: {capacity: {storage: "0.0001"}, hostPath: {path: /x}}}}
`,
	want: `
metadata: {name: va}
spec: {attacher: csi.example.com, nodeName: n1, source: {inlineVolumeSpec: {capacity: {storage: 1m}, hostPath: {path: /x, type: ""}}}}
`,
}, {
	name: "endpointslice", group: "discovery.k8s.io", resource: "endpointslices",
	in:   `{metadata: {name: web-1}, addressType: IPv4, endpoints: [{addresses: [10.0.0.1]}], ports: [{port: 80}]}`,
	want: `{metadata: {name: web-1}, addressType: IPv4, endpoints: [{addresses: [10.0.0.1]}], ports: [{name: "", port: 80, protocol: TCP}]}`,
}, {
	name: "flowschema", group: "flowcontrol.apiserver.k8s.io", resource: "flowschemas",
	in:   `{metadata: {name: fs}, spec: {priorityLevelConfiguration: {name: pl}}}`,
	want: `{metadata: {name: fs}, spec: {priorityLevelConfiguration: {name: pl}, matchingPrecedence: 1000}}`,
}, {
	name: "limited prioritylevelconfiguration", group: "flowcontrol.apiserver.k8s.io", resource: "prioritylevelconfigurations",
	in: `{metadata: {name: pl}, spec: {type: Limited, limited: {limitResponse: {type: Queue, queuing: {}}}}}`,
	want: `
metadata: {name: pl}
spec:
  type: Limited
  limited:
    nominalConcurrencyShares: 30
    lendablePercent: 0
    limitResponse: {type: Queue, queuing: {handSize: 8, queues: 64, queueLengthLimit: 50}}
`,
}, {
	name: "exempt prioritylevelconfiguration", group: "flowcontrol.apiserver.k8s.io", resource: "prioritylevelconfigurations",
	in:   `{metadata: {name: ex}, spec: {type: Exempt, exempt: {}}}`,
	want: `{metadata: {name: ex}, spec: {type: Exempt, exempt: {nominalConcurrencyShares: 0, lendablePercent: 0}}}`,
}, {
	name: "validatingwebhookconfiguration", group: "admissionregistration.k8s.io", resource: "validatingwebhookconfigurations",
	in: `
metadata: {name: v}
webhooks:
- name: v.example.com
  clientConfig: {service: {namespace: hooks, name: v}}
  rules: [{operations: [CREATE], apiGroups: [""], apiVersions: [v1], resources: [pods]}]
  sideEffects: None
  admissionReviewVersions: [v1]
`,
	want: `
metadata: {name: v}
webhooks:
- name: v.example.com
  clientConfig: {service: {namespace: hooks, name: v, port: 443}}
  rules: [{operations: [CREATE], apiGroups: [""], apiVersions: [v1], resources: [pods], scope: "*"}]
  failurePolicy: Fail
  matchPolicy: Equivalent
  namespaceSelector: {}
  objectSelector: {}
  sideEffects: None
  timeoutSeconds: 10
  admissionReviewVersions: [v1]
`,
}, {
	name: "mutatingwebhookconfiguration", group: "admissionregistration.k8s.io", resource: "mutatingwebhookconfigurations",
	in: `
metadata: {name: m}
webhooks:
- name: m.example.com
  clientConfig: {url: "https://hooks.example.com/m"}
  sideEffects: None
  admissionReviewVersions: [v1]
`,
	want: `
metadata: {name: m}
webhooks:
- name: m.example.com
  clientConfig: {url: "https://hooks.example.com/m"}
  failurePolicy: Fail
  matchPolicy: Equivalent
  namespaceSelector: {}
  objectSelector: {}
  reinvocationPolicy: Never
  sideEffects: None
  timeoutSeconds: 10
  admissionReviewVersions: [v1]
`,
}, {
	name: "validatingadmissionpolicy", group: "admissionregistration.k8s.io", resource: "validatingadmissionpolicies",
	in: `
metadata: {name: max-replicas}
spec:
  matchConstraints: {resourceRules: [{apiGroups: [apps], apiVersions: [v1], operations: [CREATE, UPDATE], resources: [deployments]}]}
  validations: [{expression: "object.spec.replicas <= 5"}]
`,
	want: `
metadata: {name: max-replicas}
spec:
  failurePolicy: Fail
  matchConstraints:
    matchPolicy: Equivalent
    namespaceSelector: {}
    objectSelector: {}
    resourceRules: [{apiGroups: [apps], apiVersions: [v1], operations: [CREATE, UPDATE], resources: [deployments], scope: "*"}]
  validations: [{expression: "object.spec.replicas <= 5"}]
`,
}, {
	name: "validatingadmissionpolicybinding", group: "admissionregistration.k8s.io", resource: "validatingadmissionpolicybindings",
	in:   `{metadata: {name: b}, spec: {policyName: max-replicas, validationActions: [Deny], matchResources: {namespaceSelector: {matchLabels: {env: test}}}}}`,
	want: `{metadata: {name: b}, spec: {policyName: max-replicas, validationActions: [Deny], matchResources: {namespaceSelector: {matchLabels: {env: test}}, objectSelector: {}, matchPolicy: Equivalent}}}`,
}, {
	name: "mutatingadmissionpolicy", group: "admissionregistration.k8s.io", resource: "mutatingadmissionpolicies",
	in: `
metadata: {name: add-label}
spec:
  reinvocationPolicy: IfNeeded
  mutations: [{patchType: ApplyConfiguration, applyConfiguration: {expression: "Object{}"}}]
`,
	want: `
metadata: {name: add-label}
spec:
  failurePolicy: Fail
  reinvocationPolicy: IfNeeded
  mutations: [{patchType: ApplyConfiguration, applyConfiguration: {expression: "Object{}"}}]
`,
}, {
	name: "resourceclaim", group: "resource.k8s.io", resource: "resourceclaims",
	in: `
metadata: {name: gpu}
spec:
  devices:
    requests:
    - {name: one, exactly: {deviceClassName: gpu.example.com, tolerations: [{key: k, effect: NoSchedule}]}}
    - name: any
      firstAvailable: [{name: a, deviceClassName: small.example.com}, {name: b, deviceClassName: big.example.com, allocationMode: All}]
`,
	want: `
metadata: {name: gpu}
spec:
  devices:
    requests:
    - name: one
      exactly: {deviceClassName: gpu.example.com, allocationMode: ExactCount, count: 1, tolerations: [{key: k, operator: Equal, effect: NoSchedule}]}
    - name: any
      firstAvailable:
      - {name: a, deviceClassName: small.example.com, allocationMode: ExactCount, count: 1}
      - {name: b, deviceClassName: big.example.com, allocationMode: All}
`,
}, {
	name: "resourceclaimtemplate", group: "resource.k8s.io", resource: "resourceclaimtemplates",
	in:   `{metadata: {name: gpu}, spec: {spec: {devices: {requests: [{name: one, exactly: {deviceClassName: gpu.example.com, count: 2}}]}}}}`,
	want: `{metadata: {name: gpu}, spec: {spec: {devices: {requests: [{name: one, exactly: {deviceClassName: gpu.example.com, allocationMode: ExactCount, count: 2}}]}}}}`,
}, {
	name: "podcertificaterequest", group: "certificates.k8s.io", resource: "podcertificaterequests",
	in:   `{metadata: {name: pcr}, spec: {signerName: example.com/signer, podName: p, nodeName: n}}`,
	want: `{metadata: {name: pcr}, spec: {signerName: example.com/signer, podName: p, nodeName: n, maxExpirationSeconds: 86400}}`,
}, {
	name: "apiservice", group: "apiregistration.k8s.io", resource: "apiservices",
	in:   `{metadata: {name: v1.example.com}, spec: {service: {namespace: ns, name: api}, group: example.com, version: v1, groupPriorityMinimum: 100, versionPriority: 10}}`,
	want: `{metadata: {name: v1.example.com}, spec: {service: {namespace: ns, name: api, port: 443}, group: example.com, version: v1, groupPriorityMinimum: 100, versionPriority: 10}}`,
},
	// Kinds without defaults are stored as sent.
	{name: "kubectl create configmap", resource: "configmaps", in: `{metadata: {name: c}, data: {a: b}}`},
	{name: "kubectl create serviceaccount", resource: "serviceaccounts", in: `{metadata: {name: sa}}`},
	{name: "kubectl create pdb", group: "policy", resource: "poddisruptionbudgets", in: `{metadata: {name: pdb}, spec: {minAvailable: 1, selector: {matchLabels: {app: web}}}}`},
	{name: "kubectl create role", group: "rbac.authorization.k8s.io", resource: "roles", in: `{metadata: {name: r}, rules: [{apiGroups: [""], resources: [pods], verbs: [get]}]}`},
	{name: "lease", group: "coordination.k8s.io", resource: "leases", in: `{metadata: {name: l}, spec: {holderIdentity: me}}`},
	{name: "runtimeclass", group: "node.k8s.io", resource: "runtimeclasses", in: `{metadata: {name: gvisor}, handler: runsc}`},
	{name: "event", resource: "events", in: `{metadata: {name: e}, involvedObject: {kind: Pod, name: p}, reason: Started}`},
}

func TestDefaultKubectlObjects(t *testing.T) {
	for _, tc := range kubectlCases {
		t.Run(tc.name, func(t *testing.T) { checkDefaulted(t, tc) })
	}
}

// podCases exercise what a pod spec holds.
var podCases = []defaultCase{{
	name: "probes, environment, volumes and host network", resource: "pods",
	in: `
metadata: {name: p}
spec:
  hostNetwork: true
  volumes:
  - {name: scratch}
  - {name: s, secret: {secretName: s}}
  - {name: c, configMap: {name: c}}
  - {name: h, hostPath: {path: /var/log}}
  - {name: d, downwardAPI: {items: [{path: labels, fieldRef: {fieldPath: metadata.labels}}]}}
  - name: proj
    projected:
      sources:
      - serviceAccountToken: {path: token}
      - downwardAPI: {items: [{path: name, fieldRef: {fieldPath: metadata.name}}]}
  - {name: img, image: {reference: "quay.io/team/data:latest"}}
  - name: eph
    ephemeral: {volumeClaimTemplate: {spec: {accessModes: [ReadWriteOnce], resources: {requests: {storage: 1Gi}}}}}
  initContainers:
  - name: init
    image: "busybox:1.37"
    ports: [{containerPort: 9000}]
  containers:
  - name: app
    image: registry.example.com:5000/team/app
    ports: [{containerPort: 8080}, {containerPort: 8125, hostPort: 18125, protocol: UDP}]
    env:
    - {name: NODE, valueFrom: {fieldRef: {fieldPath: spec.nodeName}}}
    - {name: CFG, valueFrom: {fileKeyRef: {volumeName: scratch, path: env, key: K}}}
    livenessProbe: {httpGet: {port: 8080}}
    readinessProbe: {grpc: {port: 9000}}
    startupProbe: {tcpSocket: {port: 8080}, periodSeconds: 5}
    lifecycle: {preStop: {httpGet: {path: /quit, port: 8080}}, postStart: {exec: {command: ["true"]}}}
  ephemeralContainers:
  - {name: debug, image: busybox}
`,
	want: `
metadata: {name: p}
spec:
  hostNetwork: true
  volumes:
  - {name: scratch, emptyDir: {}}
  - {name: s, secret: {secretName: s, defaultMode: 420}}
  - {name: c, configMap: {name: c, defaultMode: 420}}
  - {name: h, hostPath: {path: /var/log, type: ""}}
  - {name: d, downwardAPI: {defaultMode: 420, items: [{path: labels, fieldRef: {apiVersion: v1, fieldPath: metadata.labels}}]}}
  - name: proj
    projected:
      defaultMode: 420
      sources:
      - serviceAccountToken: {path: token, expirationSeconds: 3600}
      - downwardAPI: {items: [{path: name, fieldRef: {apiVersion: v1, fieldPath: metadata.name}}]}
  - {name: img, image: {reference: "quay.io/team/data:latest", pullPolicy: Always}}
  - name: eph
    ephemeral: {volumeClaimTemplate: {spec: {accessModes: [ReadWriteOnce], resources: {requests: {storage: 1Gi}}, volumeMode: Filesystem}}}
  initContainers:
  - name: init
    image: "busybox:1.37"
    imagePullPolicy: IfNotPresent
    ports: [{containerPort: 9000, hostPort: 9000, protocol: TCP}]
    resources: {}
    terminationMessagePath: /dev/termination-log
    terminationMessagePolicy: File
  containers:
  - name: app
    image: registry.example.com:5000/team/app
    imagePullPolicy: Always
    ports: [{containerPort: 8080, hostPort: 8080, protocol: TCP}, {containerPort: 8125, hostPort: 18125, protocol: UDP}]
    env:
    - {name: NODE, valueFrom: {fieldRef: {apiVersion: v1, fieldPath: spec.nodeName}}}
    - {name: CFG, valueFrom: {fileKeyRef: {volumeName: scratch, path: env, key: K, optional: false}}}
    livenessProbe:
      httpGet: {path: /, port: 8080, scheme: HTTP}
      timeoutSeconds: 1
      periodSeconds: 10
      successThreshold: 1
      failureThreshold: 3
    readinessProbe:
      grpc: {port: 9000, service: ""}
      timeoutSeconds: 1
      periodSeconds: 10
      successThreshold: 1
      failureThreshold: 3
    startupProbe:
      tcpSocket: {port: 8080}
      timeoutSeconds: 1
      periodSeconds: 5
      successThreshold: 1
      failureThreshold: 3
    lifecycle: {preStop: {httpGet: {path: /quit, port: 8080, scheme: HTTP}}, postStart: {exec: {command: ["true"]}}}
    resources: {}
    terminationMessagePath: /dev/termination-log
    terminationMessagePolicy: File
  ephemeralContainers:
  - {name: debug, image: busybox, imagePullPolicy: Always, resources: {},
     terminationMessagePath: /dev/termination-log, terminationMessagePolicy: File}
  dnsPolicy: ClusterFirst
  enableServiceLinks: true
  restartPolicy: Always
  schedulerName: default-scheduler
  securityContext: {}
  terminationGracePeriodSeconds: 30
`,
}, {
	// Requests default to limits, then pod-level requests to what the
	// containers need together: the sidecar runs beside the regular
	// containers and the init container (1 CPU + the sidecar's 200m).
	name: "pod-level requests", resource: "pods",
	in: `
metadata: {name: p}
spec:
  resources: {limits: {cpu: "2", memory: 2Gi}}
  initContainers:
  - {name: sidecar, image: "envoy:1", restartPolicy: Always, resources: {requests: {cpu: 200m}}}
  - {name: migrate, image: "app:1", resources: {requests: {cpu: "1", memory: 1Gi}}}
  containers:
  - {name: app, image: "app:1", resources: {requests: {cpu: 500m, memory: 256Mi}}}
  - {name: log, image: "log:1", resources: {limits: {cpu: 100m}}}
`,
	want: `
metadata: {name: p}
spec:
  resources: {limits: {cpu: "2", memory: 2Gi}, requests: {cpu: 1200m, memory: 1Gi}}
  initContainers:
  - {name: sidecar, image: "envoy:1", restartPolicy: Always, resources: {requests: {cpu: 200m}}, imagePullPolicy: IfNotPresent,
     terminationMessagePath: /dev/termination-log, terminationMessagePolicy: File}
  - {name: migrate, image: "app:1", resources: {requests: {cpu: "1", memory: 1Gi}}, imagePullPolicy: IfNotPresent,
     terminationMessagePath: /dev/termination-log, terminationMessagePolicy: File}
  containers:
  - {name: app, image: "app:1", resources: {requests: {cpu: 500m, memory: 256Mi}}, imagePullPolicy: IfNotPresent,
     terminationMessagePath: /dev/termination-log, terminationMessagePolicy: File}
  - {name: log, image: "log:1", resources: {limits: {cpu: 100m}, requests: {cpu: 100m}}, imagePullPolicy: IfNotPresent,
     terminationMessagePath: /dev/termination-log, terminationMessagePolicy: File}
  dnsPolicy: ClusterFirst
  enableServiceLinks: true
  restartPolicy: Always
  schedulerName: default-scheduler
  securityContext: {}
  terminationGracePeriodSeconds: 30
`,
}, {
	// Hugepages the containers limit become a pod-level limit, then a
	// pod-level request; memory is requested at pod level as the
	// containers request it.
	name: "pod-level hugepages", resource: "pods",
	in: `
metadata: {name: p}
spec:
  resources: {requests: {cpu: "1"}}
  containers: [{name: app, image: "app:1", resources: {limits: {hugepages-2Mi: 100Mi, memory: 100Mi}}}]
`,
	want: `
metadata: {name: p}
spec:
  resources:
    limits: {hugepages-2Mi: 100Mi}
    requests: {cpu: "1", hugepages-2Mi: 100Mi, memory: 100Mi}
  containers:
  - name: app
    image: "app:1"
    resources: {limits: {hugepages-2Mi: 100Mi, memory: 100Mi}, requests: {hugepages-2Mi: 100Mi, memory: 100Mi}}
    imagePullPolicy: IfNotPresent
    terminationMessagePath: /dev/termination-log
    terminationMessagePolicy: File
  dnsPolicy: ClusterFirst
  enableServiceLinks: true
  restartPolicy: Always
  schedulerName: default-scheduler
  securityContext: {}
  terminationGracePeriodSeconds: 30
`,
}, {
	name: "quantities are rounded up to milli precision", resource: "pods",
	in: `
metadata: {name: p}
spec: {containers: [{name: app, image: "app:1", imagePullPolicy: Never, terminationMessagePath: /t, terminationMessagePolicy: File,
  resources: {limits: {cpu: "0.0001", memory: 64Mi}}}],
  dnsPolicy: Default, restartPolicy: Never, schedulerName: s, securityContext: {}, terminationGracePeriodSeconds: 0, enableServiceLinks: false}
status: {containerStatuses: [{name: app, image: "app:1", imageID: "", ready: false, restartCount: 0, allocatedResources: {cpu: "0.0001"}}]}
`,
	want: `
metadata: {name: p}
spec: {containers: [{name: app, image: "app:1", imagePullPolicy: Never, terminationMessagePath: /t, terminationMessagePolicy: File,
  resources: {limits: {cpu: 1m, memory: 64Mi}, requests: {cpu: 1m, memory: 64Mi}}}],
  dnsPolicy: Default, restartPolicy: Never, schedulerName: s, securityContext: {}, terminationGracePeriodSeconds: 0, enableServiceLinks: false}
status: {containerStatuses: [{name: app, image: "app:1", imageID: "", ready: false, restartCount: 0, allocatedResources: {cpu: 1m}}]}
`,
}, {
	name: "in-tree volume plugins", resource: "podtemplates",
	in: `
metadata: {name: t}
template:
  spec:
    containers: [{name: c, image: "c:1", imagePullPolicy: IfNotPresent, terminationMessagePath: /t, terminationMessagePolicy: File}]
    dnsPolicy: ClusterFirst
    restartPolicy: Always
    schedulerName: default-scheduler
    securityContext: {}
    terminationGracePeriodSeconds: 30
    volumes:
    - {name: iscsi, iscsi: {targetPortal: "10.0.0.1:3260", iqn: "iqn.2001-04.com.example:storage", lun: 0}}
    - {name: rbd, rbd: {monitors: ["10.0.0.2:6789"], image: foo}}
    - {name: azure, azureDisk: {diskName: d, diskURI: "https://example.com/d.vhd"}}
    - {name: scaleio, scaleIO: {gateway: "https://gw", system: sys, secretRef: {name: s}}}
`,
	want: `
metadata: {name: t}
template:
  spec:
    containers: [{name: c, image: "c:1", imagePullPolicy: IfNotPresent, terminationMessagePath: /t, terminationMessagePolicy: File, resources: {}}]
    dnsPolicy: ClusterFirst
    restartPolicy: Always
    schedulerName: default-scheduler
    securityContext: {}
    terminationGracePeriodSeconds: 30
    volumes:
    - {name: iscsi, iscsi: {targetPortal: "10.0.0.1:3260", iqn: "iqn.2001-04.com.example:storage", lun: 0, iscsiInterface: default}}
    - {name: rbd, rbd: {monitors: ["10.0.0.2:6789"], image: foo, pool: rbd, user: admin, keyring: /etc/ceph/keyring}}
    - {name: azure, azureDisk: {diskName: d, diskURI: "https://example.com/d.vhd", cachingMode: ReadWrite, fsType: ext4, readOnly: false, kind: Shared}}
    - {name: scaleio, scaleIO: {gateway: "https://gw", system: sys, secretRef: {name: s}, storageMode: ThinProvisioned, fsType: xfs}}
`,
}}

func TestDefaultPodSpecs(t *testing.T) {
	for _, tc := range podCases {
		t.Run(tc.name, func(t *testing.T) { checkDefaulted(t, tc) })
	}
}

// explicitCases set every field Default would fill, to other values than
// kube's defaults: Default must keep them all.
var explicitCases = []defaultCase{{
	name: "deployment", group: "apps", resource: "deployments",
	in: `
metadata: {name: web}
spec:
  replicas: 3
  revisionHistoryLimit: 2
  progressDeadlineSeconds: 60
  selector: {matchLabels: {app: web}}
  strategy: {type: Recreate}
  template:
    metadata: {labels: {app: web}}
    spec:
      dnsPolicy: Default
      restartPolicy: Always
      schedulerName: custom
      securityContext: {runAsNonRoot: true}
      terminationGracePeriodSeconds: 5
      volumes:
      - {name: s, secret: {secretName: s, defaultMode: 256}}
      - {name: h, hostPath: {path: /run, type: Directory}}
      - {name: t, projected: {defaultMode: 384, sources: [{serviceAccountToken: {path: t, expirationSeconds: 600}}]}}
      containers:
      - name: app
        image: "app:latest"
        imagePullPolicy: Never
        terminationMessagePath: /tmp/msg
        terminationMessagePolicy: FallbackToLogsOnError
        ports: [{containerPort: 53, protocol: UDP}]
        env: [{name: N, valueFrom: {fieldRef: {apiVersion: v2, fieldPath: metadata.name}}}]
        readinessProbe: {httpGet: {path: /ready, port: 80, scheme: HTTPS}, timeoutSeconds: 3, periodSeconds: 4, successThreshold: 2, failureThreshold: 6}
        livenessProbe: {grpc: {port: 9000, service: health}, timeoutSeconds: 3, periodSeconds: 4, successThreshold: 1, failureThreshold: 6}
        resources: {limits: {cpu: "1"}, requests: {cpu: 500m}}
`,
}, {
	name: "rolling deployment", group: "apps", resource: "deployments",
	in: `
metadata: {name: web}
spec:
  replicas: 0
  revisionHistoryLimit: 0
  progressDeadlineSeconds: 60
  selector: {matchLabels: {app: web}}
  strategy: {type: RollingUpdate, rollingUpdate: {maxSurge: 0, maxUnavailable: 1}}
  template:
    metadata: {labels: {app: web}}
    spec: {containers: [{name: app, image: "app:1", imagePullPolicy: Always, terminationMessagePath: /t, terminationMessagePolicy: File}],
      dnsPolicy: None, dnsConfig: {nameservers: [1.1.1.1]}, restartPolicy: Always, schedulerName: s, securityContext: {}, terminationGracePeriodSeconds: 1}
`,
}, {
	name: "statefulset", group: "apps", resource: "statefulsets",
	in: `
metadata: {name: db}
spec:
  replicas: 2
  revisionHistoryLimit: 1
  podManagementPolicy: Parallel
  updateStrategy: {type: RollingUpdate, rollingUpdate: {partition: 1, maxUnavailable: 50%}}
  persistentVolumeClaimRetentionPolicy: {whenDeleted: Delete, whenScaled: Delete}
  selector: {matchLabels: {app: db}}
  template:
    metadata: {labels: {app: db}}
    spec: {containers: [{name: db, image: "db:1", imagePullPolicy: Always, terminationMessagePath: /t, terminationMessagePolicy: File}],
      dnsPolicy: ClusterFirst, restartPolicy: Always, schedulerName: s, securityContext: {}, terminationGracePeriodSeconds: 1}
  volumeClaimTemplates:
  - metadata: {name: data}
    spec: {accessModes: [ReadWriteOnce], resources: {requests: {storage: 1Gi}}, volumeMode: Block}
    status: {phase: Bound}
`,
}, {
	// An explicit RollingUpdate type without parameters gets none, as in kube.
	name: "statefulset with on-delete and bare rolling strategies", group: "apps", resource: "statefulsets",
	in: `
metadata: {name: db}
spec:
  replicas: 2
  revisionHistoryLimit: 1
  podManagementPolicy: OrderedReady
  updateStrategy: {type: RollingUpdate}
  persistentVolumeClaimRetentionPolicy: {whenDeleted: Retain, whenScaled: Delete}
  selector: {matchLabels: {app: db}}
  template:
    metadata: {labels: {app: db}}
    spec: {containers: [{name: db, image: "db:1", imagePullPolicy: Always, terminationMessagePath: /t, terminationMessagePolicy: File}],
      dnsPolicy: ClusterFirst, restartPolicy: Always, schedulerName: s, securityContext: {}, terminationGracePeriodSeconds: 1}
`,
}, {
	name: "daemonset", group: "apps", resource: "daemonsets",
	in: `
metadata: {name: agent}
spec:
  revisionHistoryLimit: 3
  updateStrategy: {type: OnDelete}
  selector: {matchLabels: {app: agent}}
  template:
    metadata: {labels: {app: agent}}
    spec: {containers: [{name: a, image: "a:1", imagePullPolicy: Always, terminationMessagePath: /t, terminationMessagePolicy: File}],
      dnsPolicy: ClusterFirstWithHostNet, hostNetwork: true, restartPolicy: Always, schedulerName: s, securityContext: {}, terminationGracePeriodSeconds: 1}
`,
}, {
	name: "job", group: "batch", resource: "jobs",
	in: `
metadata: {name: j, labels: {team: a}}
spec:
  completions: 5
  parallelism: 2
  backoffLimit: 1
  completionMode: Indexed
  suspend: true
  podReplacementPolicy: Failed
  manualSelector: true
  selector: {matchLabels: {job: j}}
  podFailurePolicy: {rules: [{action: Ignore, onPodConditions: [{type: DisruptionTarget, status: "False"}]}]}
  template:
    metadata: {labels: {job: j}}
    spec: {containers: [{name: w, image: "w:1", imagePullPolicy: Always, terminationMessagePath: /t, terminationMessagePolicy: File}],
      dnsPolicy: ClusterFirst, restartPolicy: Never, schedulerName: s, securityContext: {}, terminationGracePeriodSeconds: 1}
`,
}, {
	name: "job with parallelism only", group: "batch", resource: "jobs",
	in: `
metadata: {name: j}
spec:
  parallelism: 4
  backoffLimit: 6
  completionMode: NonIndexed
  suspend: false
  podReplacementPolicy: TerminatingOrFailed
  manualSelector: false
  template:
    spec: {containers: [{name: w, image: "w:1", imagePullPolicy: Always, terminationMessagePath: /t, terminationMessagePolicy: File}],
      dnsPolicy: ClusterFirst, restartPolicy: Never, schedulerName: s, securityContext: {}, terminationGracePeriodSeconds: 1}
`,
}, {
	name: "cronjob", group: "batch", resource: "cronjobs",
	in: `
metadata: {name: c}
spec:
  schedule: "@daily"
  concurrencyPolicy: Forbid
  suspend: true
  successfulJobsHistoryLimit: 0
  failedJobsHistoryLimit: 0
  jobTemplate:
    spec:
      template:
        spec: {containers: [{name: w, image: "w:1", imagePullPolicy: Always, terminationMessagePath: /t, terminationMessagePolicy: File}],
          dnsPolicy: ClusterFirst, restartPolicy: OnFailure, schedulerName: s, securityContext: {}, terminationGracePeriodSeconds: 1}
`,
}, {
	name: "service", resource: "services",
	in: `
metadata: {name: web}
spec:
  type: LoadBalancer
  clusterIP: 10.96.0.20
  clusterIPs: [10.96.0.20]
  ipFamilies: [IPv4]
  ipFamilyPolicy: PreferDualStack
  sessionAffinity: ClientIP
  sessionAffinityConfig: {clientIP: {timeoutSeconds: 60}}
  externalTrafficPolicy: Local
  internalTrafficPolicy: Local
  allocateLoadBalancerNodePorts: false
  ports: [{port: 80, protocol: SCTP, targetPort: http}]
status: {loadBalancer: {ingress: [{ip: 203.0.113.7, ipMode: Proxy}]}}
`,
}, {
	name: "secret", resource: "secrets",
	in: `{metadata: {name: tls}, type: kubernetes.io/tls, data: {tls.crt: "", tls.key: ""}}`,
}, {
	name: "persistentvolume", resource: "persistentvolumes",
	in: `
metadata: {name: pv}
spec: {capacity: {storage: 1Gi}, persistentVolumeReclaimPolicy: Recycle, volumeMode: Block,
  rbd: {monitors: [m], image: i, pool: p, user: u, keyring: /k}, accessModes: [ReadWriteOnce]}
status: {phase: Available}
`,
}, {
	name: "persistentvolumeclaim", resource: "persistentvolumeclaims",
	in: `{metadata: {name: c}, spec: {volumeMode: Block, resources: {requests: {storage: 1Gi}}}, status: {phase: Bound}}`,
}, {
	name: "namespace", resource: "namespaces",
	in: `{metadata: {name: team, labels: {kubernetes.io/metadata.name: team}}, status: {phase: Terminating}}`,
}, {
	name: "horizontalpodautoscaler", group: "autoscaling", resource: "horizontalpodautoscalers",
	in: `
metadata: {name: h}
spec:
  scaleTargetRef: {apiVersion: apps/v1, kind: Deployment, name: web}
  minReplicas: 3
  maxReplicas: 9
  metrics: [{type: Pods, pods: {metric: {name: qps}, target: {type: AverageValue, averageValue: "10"}}}]
  behavior:
    scaleUp: {stabilizationWindowSeconds: 30, selectPolicy: Disabled, policies: [{type: Pods, value: 1, periodSeconds: 60}]}
    scaleDown: {stabilizationWindowSeconds: 60, selectPolicy: Min, policies: [{type: Pods, value: 2, periodSeconds: 30}]}
`,
}, {
	name: "networkpolicy", group: "networking.k8s.io", resource: "networkpolicies",
	in: `{metadata: {name: n}, spec: {podSelector: {}, policyTypes: [Egress], egress: [{ports: [{port: 53, protocol: UDP}]}]}}`,
}, {
	name: "ingressclass", group: "networking.k8s.io", resource: "ingressclasses",
	in: `{metadata: {name: i}, spec: {controller: c, parameters: {kind: K, name: n, scope: Namespace, namespace: ns}}}`,
}, {
	name: "rolebinding", group: "rbac.authorization.k8s.io", resource: "rolebindings",
	in: `{metadata: {name: r}, roleRef: {apiGroup: rbac.authorization.k8s.io, kind: Role, name: r}, subjects: [{apiGroup: example.com, kind: User, name: u}]}`,
}, {
	name: "priorityclass", group: "scheduling.k8s.io", resource: "priorityclasses",
	in: `{metadata: {name: p}, value: 1, preemptionPolicy: Never}`,
}, {
	name: "storageclass", group: "storage.k8s.io", resource: "storageclasses",
	in: `{metadata: {name: s}, provisioner: p, reclaimPolicy: Retain, volumeBindingMode: WaitForFirstConsumer}`,
}, {
	name: "csidriver", group: "storage.k8s.io", resource: "csidrivers",
	in: `
metadata: {name: d}
spec: {attachRequired: false, podInfoOnMount: true, storageCapacity: true, fsGroupPolicy: File,
  volumeLifecycleModes: [Ephemeral], requiresRepublish: true, seLinuxMount: true}
`,
}, {
	name: "endpointslice", group: "discovery.k8s.io", resource: "endpointslices",
	in: `{metadata: {name: e}, addressType: IPv4, endpoints: [], ports: [{name: dns, port: 53, protocol: UDP}]}`,
}, {
	name: "flowschema", group: "flowcontrol.apiserver.k8s.io", resource: "flowschemas",
	in: `{metadata: {name: f}, spec: {matchingPrecedence: 500, priorityLevelConfiguration: {name: p}}}`,
}, {
	name: "prioritylevelconfiguration", group: "flowcontrol.apiserver.k8s.io", resource: "prioritylevelconfigurations",
	in: `
metadata: {name: p}
spec:
  type: Limited
  limited: {nominalConcurrencyShares: 0, lendablePercent: 50, limitResponse: {type: Queue, queuing: {handSize: 4, queues: 16, queueLengthLimit: 10}}}
`,
}, {
	name: "validatingwebhookconfiguration", group: "admissionregistration.k8s.io", resource: "validatingwebhookconfigurations",
	in: `
metadata: {name: v}
webhooks:
- name: v.example.com
  clientConfig: {service: {namespace: n, name: s, port: 8443}}
  rules: [{operations: ["*"], apiGroups: ["*"], apiVersions: ["*"], resources: ["*"], scope: Namespaced}]
  failurePolicy: Ignore
  matchPolicy: Exact
  namespaceSelector: {matchLabels: {a: b}}
  objectSelector: {matchLabels: {c: d}}
  sideEffects: None
  timeoutSeconds: 3
  admissionReviewVersions: [v1]
`,
}, {
	name: "validatingadmissionpolicy", group: "admissionregistration.k8s.io", resource: "validatingadmissionpolicies",
	in: `
metadata: {name: p}
spec:
  failurePolicy: Ignore
  matchConstraints: {matchPolicy: Exact, namespaceSelector: {matchLabels: {a: b}}, objectSelector: {matchLabels: {c: d}},
    resourceRules: [{apiGroups: [""], apiVersions: [v1], operations: [CREATE], resources: [pods], scope: Cluster}]}
  validations: [{expression: "true"}]
`,
}, {
	name: "resourceclaim", group: "resource.k8s.io", resource: "resourceclaims",
	in: `{metadata: {name: c}, spec: {devices: {requests: [{name: r, exactly: {deviceClassName: d, allocationMode: All, tolerations: [{operator: Exists}]}}]}}}`,
}, {
	name: "podcertificaterequest", group: "certificates.k8s.io", resource: "podcertificaterequests",
	in: `{metadata: {name: p}, spec: {signerName: s/s, maxExpirationSeconds: 3600}}`,
}, {
	name: "apiservice", group: "apiregistration.k8s.io", resource: "apiservices",
	in: `{metadata: {name: v1.example.com}, spec: {service: {namespace: n, name: s, port: 8443}, group: example.com, version: v1, groupPriorityMinimum: 1, versionPriority: 1}}`,
}}

func TestDefaultKeepsExplicitValues(t *testing.T) {
	for _, tc := range explicitCases {
		t.Run(tc.name, func(t *testing.T) {
			if tc.want != "" {
				t.Fatal("explicit cases are stored as sent")
			}
			checkDefaulted(t, tc)
		})
	}
}

// TestDefaultOverridesAsKube covers the few places where kube's defaulting
// replaces a value the client sent.
func TestDefaultOverridesAsKube(t *testing.T) {
	for _, tc := range []defaultCase{{
		name: "session affinity None drops its config", resource: "services",
		in: `{metadata: {name: s}, spec: {type: ExternalName, externalName: x.example.com, sessionAffinity: None,
			sessionAffinityConfig: {clientIP: {timeoutSeconds: 5}}}}`,
		want: `{metadata: {name: s}, spec: {type: ExternalName, externalName: x.example.com, sessionAffinity: None}}`,
	}, {
		name: "an incomplete client IP config is replaced", resource: "services",
		in:   `{metadata: {name: s}, spec: {type: ExternalName, externalName: x.example.com, sessionAffinity: ClientIP, sessionAffinityConfig: {clientIP: {}}}}`,
		want: `{metadata: {name: s}, spec: {type: ExternalName, externalName: x.example.com, sessionAffinity: ClientIP, sessionAffinityConfig: {clientIP: {timeoutSeconds: 10800}}}}`,
	}, {
		name: "a namespace's name label follows its name", resource: "namespaces",
		in:   `{metadata: {name: team, labels: {kubernetes.io/metadata.name: other, a: b}}, status: {phase: Active}}`,
		want: `{metadata: {name: team, labels: {kubernetes.io/metadata.name: team, a: b}}, status: {phase: Active}}`,
	}} {
		t.Run(tc.name, func(t *testing.T) { checkDefaulted(t, tc) })
	}
}

// TestDefaultIdempotent checks that defaulting a defaulted object, in
// memory or after a trip through JSON (an update of a stored object),
// changes nothing.
func TestDefaultIdempotent(t *testing.T) {
	all := append(append(append([]defaultCase{}, kubectlCases...), podCases...), explicitCases...)
	for _, tc := range all {
		t.Run(tc.name, func(t *testing.T) {
			obj := decodeTyped(t, tc.group, tc.resource, tc.in)
			Default(obj)
			once := wireJSON(t, obj)
			Default(obj)
			if twice := wireJSON(t, obj); !bytes.Equal(once, twice) {
				t.Errorf("second Default changed the object:\n%s\nto\n%s", once, twice)
			}
			again := decodeTyped(t, tc.group, tc.resource, string(once))
			Default(again)
			if stored := wireJSON(t, again); !bytes.Equal(once, stored) {
				t.Errorf("Default after a JSON round trip changed the object:\n%s\nto\n%s", once, stored)
			}
		})
	}
}

// TestDefaultEveryBuiltin runs Default over an empty object of every served
// kind: no kind may make it panic, and a second pass changes nothing.
func TestDefaultEveryBuiltin(t *testing.T) {
	for _, info := range Builtins() {
		obj := info.New()
		Default(obj)
		once := wireJSON(t, obj)
		Default(obj)
		if twice := wireJSON(t, obj); !bytes.Equal(once, twice) {
			t.Errorf("%s: second Default changed %s to %s", info.Resource, once, twice)
		}
	}
	Default(nil)
	Default(&corev1.ConfigMap{}) // no defaults, no panic
}

// TestDefaultLists checks that the items of typed lists are defaulted.
func TestDefaultLists(t *testing.T) {
	pods := &corev1.PodList{Items: []corev1.Pod{{Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "c:1"}}}}}}
	secrets := &corev1.SecretList{Items: []corev1.Secret{{}, {Type: corev1.SecretTypeTLS}}}
	Default(pods)
	Default(secrets)
	if c := pods.Items[0].Spec.Containers[0]; c.ImagePullPolicy != corev1.PullIfNotPresent || pods.Items[0].Spec.SchedulerName != corev1.DefaultSchedulerName {
		t.Errorf("pod list item not defaulted: %+v", pods.Items[0].Spec)
	}
	if secrets.Items[0].Type != corev1.SecretTypeOpaque || secrets.Items[1].Type != corev1.SecretTypeTLS {
		t.Errorf("secret types = %q, %q", secrets.Items[0].Type, secrets.Items[1].Type)
	}
}

// TestDefaultCustomResourceDefinition checks that CRDs get
// apiextensions-apiserver's own defaults.
func TestDefaultCustomResourceDefinition(t *testing.T) {
	crd := decodeTyped(t, "apiextensions.k8s.io", "customresourcedefinitions", `
metadata: {name: widgets.example.com}
spec:
  group: example.com
  scope: Namespaced
  names: {plural: widgets, kind: Widget}
  versions: [{name: v1, served: true, storage: true, schema: {openAPIV3Schema: {type: object}}}]
`).(*apiextensionsv1.CustomResourceDefinition)
	Default(crd)
	if c := crd.Spec.Conversion; c == nil || c.Strategy != apiextensionsv1.NoneConverter {
		t.Errorf("conversion = %+v, want strategy None", c)
	}
	if crd.Spec.Names.Singular != "widget" || crd.Spec.Names.ListKind != "WidgetList" {
		t.Errorf("names = %+v, want singular widget and list kind WidgetList", crd.Spec.Names)
	}
}

func TestDefaultPullPolicy(t *testing.T) {
	const sha = "sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"
	for image, want := range map[string]corev1.PullPolicy{
		"nginx":                              corev1.PullAlways,
		"nginx:latest":                       corev1.PullAlways,
		"nginx:1.27":                         corev1.PullIfNotPresent,
		"nginx@" + sha:                       corev1.PullIfNotPresent,
		"nginx:latest@" + sha:                corev1.PullAlways,
		"nginx:1.27@" + sha:                  corev1.PullIfNotPresent,
		"docker.io/library/busybox":          corev1.PullAlways,
		"index.docker.io/library/busybox:1":  corev1.PullIfNotPresent,
		"localhost/app":                      corev1.PullAlways,
		"localhost:5000/app":                 corev1.PullAlways,
		"localhost:5000/app:v1":              corev1.PullIfNotPresent,
		"Registry.Example.com/team/app":      corev1.PullAlways,
		"registry.example.com:443/a/b/c:dev": corev1.PullIfNotPresent,
		"[::1]:5000/app:latest":              corev1.PullAlways,
		"my_registry/app":                    corev1.PullAlways,
		"gcr.io/p/img:v1.2.3-rc_1":           corev1.PullIfNotPresent,
		// References kube cannot parse get IfNotPresent.
		"":                              corev1.PullIfNotPresent,
		"Nginx":                         corev1.PullIfNotPresent,
		"nginx:":                        corev1.PullIfNotPresent,
		"nginx:-x":                      corev1.PullIfNotPresent,
		"nginx@sha256:0123":             corev1.PullIfNotPresent,
		"nginx@md5:" + sha[7:]:          corev1.PullIfNotPresent,
		sha[7:]:                         corev1.PullIfNotPresent,
		"a/" + strings.Repeat("b", 260): corev1.PullIfNotPresent,
	} {
		if got := defaultPullPolicy(image); got != want {
			t.Errorf("defaultPullPolicy(%q) = %s, want %s", image, got, want)
		}
	}
}
