package deploy

import (
	"slices"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	sigsyaml "sigs.k8s.io/yaml"
)

// chartCase is a meaningful combination of the chart's values.
type chartCase struct {
	name, values string
}

// chartCases are the installs the chart is made for.
var chartCases = []chartCase{
	{"root-1", ``},
	{"root-3", `
root:
  replicas: 3
  pki: {secretName: canopy-root-pki}
  tlsSANs: [canopy.example.com, 192.0.2.10]
  api: {port: 6443, service: {type: LoadBalancer, annotations: {}}}
`},
	{"region", `
root: {enabled: false}
regions:
  - name: region-a
  - name: region-b
    parent: ["root.example.com:7443"]
region:
  joinToken: {secretName: canopy-join-token, key: token}
`},
	{"edge-default-rbac", `
root: {enabled: false}
edge:
  enabled: true
  name: edge-1
  parent: ["region-a.example.com:7443"]
  labels: {env: prod, topology.kubernetes.io/zone: eu-1}
  joinToken: {secretName: canopy-join-token, key: token}
`},
	{"edge-custom-rbac", `
root: {enabled: false}
edge:
  enabled: true
  name: edge-2
  parent: ["10.0.0.1:7443", "10.0.0.2:7443"]
  joinToken: {secretName: edge-token, key: join}
  persistence: {enabled: false, size: 1Gi}
  serviceAccount: {create: true, name: syncer}
  rbac:
    create: true
    apply:
      - apiGroups: [""]
        resources: [configmaps, secrets]
      - apiGroups: [networking.k8s.io]
        resources: [ingresses, networkpolicies]
    read: []
    impersonate: false
`},
}

// TestChartRenders renders every case and checks what each is for.
func TestChartRenders(t *testing.T) {
	for _, tc := range chartCases {
		t.Run(tc.name, func(t *testing.T) {
			manifest, err := renderChart(t, tc.values)
			if err != nil {
				t.Fatal(err)
			}
			objs := objects(t, manifest)
			for _, o := range objs {
				checkHardened(t, o)
			}
			switch tc.name {
			case "root-1":
				sts := find(t, objs, "StatefulSet", "canopy-root")
				if r, _, _ := unstructured.NestedInt64(sts.Object, "spec", "replicas"); r != 1 {
					t.Errorf("replicas %d, want 1", r)
				}
				args := containerArgs(t, sts, "relay")
				for _, want := range []string{"--role=root", "--name=$(POD_NAME)", "--data-dir=/var/lib/canopy", "--api-addr=0.0.0.0:6443", "--link-addr=0.0.0.0:7443",
					"--tls-san=canopy-root,canopy-root.canopy,canopy-root.canopy.svc,canopy-root.canopy.svc.cluster.local,canopy-root-link,canopy-root-link.canopy,canopy-root-link.canopy.svc,canopy-root-link.canopy.svc.cluster.local"} {
					if !slices.Contains(args, want) {
						t.Errorf("root args %q lack %s", args, want)
					}
				}
				for _, a := range args {
					if strings.HasPrefix(a, "--raft-addr") || strings.HasPrefix(a, "--join") {
						t.Errorf("a single root has %s", a)
					}
				}
				link := find(t, objs, "Service", "canopy-root-link")
				if got := servicePorts(link); got != "link-quic/UDP/7443 link-tcp/TCP/7443" {
					t.Errorf("link Service ports %s, want UDP and TCP 7443", got)
				}
				peers := find(t, objs, "Service", "canopy-root-peers")
				if ip, _, _ := unstructured.NestedString(peers.Object, "spec", "clusterIP"); ip != "None" {
					t.Errorf("peers Service clusterIP %q, want None (headless)", ip)
				}
				if p, _, _ := unstructured.NestedBool(peers.Object, "spec", "publishNotReadyAddresses"); !p {
					t.Error("peers Service does not publish not-ready addresses")
				}
				find(t, objs, "Service", "canopy-root")
			case "root-3":
				sts := find(t, objs, "StatefulSet", "canopy-root")
				if r, _, _ := unstructured.NestedInt64(sts.Object, "spec", "replicas"); r != 3 {
					t.Errorf("replicas %d, want 3", r)
				}
				args := containerArgs(t, sts, "relay")
				for _, want := range []string{"--raft-addr=$(POD_IP):7001", "--peer-addr=$(POD_IP):7002", "--bootstrap-expect=3", "--tree-name=canopy-root-0",
					"--join=canopy-root-0.canopy-root-peers.canopy.svc.cluster.local:7002,canopy-root-1.canopy-root-peers.canopy.svc.cluster.local:7002,canopy-root-2.canopy-root-peers.canopy.svc.cluster.local:7002"} {
					if !slices.Contains(args, want) {
						t.Errorf("root args %q lack %s", args, want)
					}
				}
				if last := args[slices.IndexFunc(args, func(a string) bool { return strings.HasPrefix(a, "--tls-san=") })]; !strings.HasSuffix(last, ",canopy.example.com,192.0.2.10") {
					t.Errorf("%s: want root.tlsSANs at its end", last)
				}
				if got := containerArgs(t, sts, "pki-import"); !slices.Equal(got, []string{"pki", "import", "--data-dir=/var/lib/canopy", "--bundle=/etc/canopy/pki/bundle.pem"}) {
					t.Errorf("pki-import args %q", got)
				}
			case "region":
				for _, name := range []string{"region-a", "region-b"} {
					sts := find(t, objs, "StatefulSet", "canopy-region-"+name)
					args := containerArgs(t, sts, "relay")
					parent := "--parent=canopy-root-link.canopy.svc:7443"
					if name == "region-b" {
						parent = "--parent=root.example.com:7443"
					}
					for _, want := range []string{"--role=region", "--name=" + name, parent, "--link-addr=0.0.0.0:7443", "--status-addr=0.0.0.0:9090", "--join-token-file=/etc/canopy/join-token/token"} {
						if !slices.Contains(args, want) {
							t.Errorf("%s args %q lack %s", name, args, want)
						}
					}
					if got := servicePorts(find(t, objs, "Service", "canopy-region-"+name)); got != "link-quic/UDP/7443 link-tcp/TCP/7443" {
						t.Errorf("%s link Service ports %s", name, got)
					}
				}
			case "edge-default-rbac", "edge-custom-rbac":
				d := find(t, objs, "Deployment", "canopy-edge")
				args := containerArgs(t, d, "relay")
				for _, a := range args {
					if strings.HasPrefix(a, "--kubeconfig") || strings.HasPrefix(a, "--virtual-cluster") {
						t.Errorf("the edge has %s: want the in-cluster configuration", a)
					}
				}
				role := find(t, objs, "ClusterRole", "canopy-edge")
				rules := rulesOf(role)
				if tc.name == "edge-default-rbac" {
					if !slices.Contains(args, "--labels=env=prod,topology.kubernetes.io/zone=eu-1") {
						t.Errorf("edge args %q lack the labels", args)
					}
					find(t, objs, "ServiceAccount", "canopy-edge")
					find(t, objs, "PersistentVolumeClaim", "canopy-edge")
					for _, want := range []string{"/namespaces:get,list,watch", "apps/deployments:" + applyVerbs, "/configmaps:" + applyVerbs, "/pods:get,list,watch",
						"/users:impersonate", "/groups:impersonate"} {
						if !slices.Contains(rules, want) {
							t.Errorf("ClusterRole rules %q lack %s", rules, want)
						}
					}
					for _, r := range rules {
						if strings.Contains(r, "secrets") || strings.Contains(r, "*") {
							t.Errorf("the default ClusterRole grants %s", r)
						}
					}
				} else {
					find(t, objs, "ServiceAccount", "syncer")
					want := []string{"/namespaces:get,list,watch", "/configmaps:" + applyVerbs, "/secrets:" + applyVerbs,
						"networking.k8s.io/ingresses:" + applyVerbs, "networking.k8s.io/networkpolicies:" + applyVerbs}
					if !slices.Equal(rules, want) {
						t.Errorf("ClusterRole rules %q, want %q", rules, want)
					}
					for _, o := range objs {
						if o.GetKind() == "PersistentVolumeClaim" {
							t.Error("a PersistentVolumeClaim with edge.persistence.enabled=false")
						}
					}
				}
			}
		})
	}
}

const applyVerbs = "get,list,watch,create,update,patch,delete"

// TestChartSchemaRefuses: values out of the schema fail the install with
// a message naming the value.
func TestChartSchemaRefuses(t *testing.T) {
	for _, tc := range []struct {
		values string
		want   []string // in the error
	}{
		{`root: {replicas: 2}`, []string{"/root/replicas", "1", "3"}},
		{`root: {replicas: 3}`, []string{"/root/pki/secretName"}},
		{`root: {api: {port: 0, service: {type: ClusterIP}}}`, []string{"/root/api/port"}},
		{`root: {link: {port: 7443, service: {type: External}}}`, []string{"/root/link/service/type"}},
		{`root: {replica: 3}`, []string{"replica"}},
		{`root: {statusWindow: soon}`, []string{"/root/statusWindow"}},
		{`logLevel: loud`, []string{"/logLevel"}},
		{`image: {pullPolicy: Sometimes}`, []string{"/image/pullPolicy"}},
		{`regions: [{name: Region_A}]`, []string{"/regions/0/name"}},
		{`regions: [{parent: ["root:7443"]}]`, []string{"/regions/0", "name"}},
		{`regions: [{name: region-a}]`, []string{"/region/joinToken/secretName"}},
		{`edge: {enabled: true}`, []string{"/edge/name"}},
		{`edge: {enabled: true, name: e1, parent: ["nonsense"], joinToken: {secretName: t, key: token}}`, []string{"/edge/parent/0"}},
		{`edge: {rbac: {create: true, apply: [{resources: [configmaps]}], read: []}}`, []string{"/edge/rbac/apply/0", "apiGroups"}},
		{`edge: {rbac: {create: true, apply: [{apiGroups: [""], resources: [configmaps], verbs: [get]}], read: []}}`, []string{"verbs"}},
	} {
		t.Run(tc.values, func(t *testing.T) {
			_, err := renderChart(t, tc.values)
			if err == nil {
				t.Fatal("rendered; want the schema to refuse the values")
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not name %s", err, w)
				}
			}
		})
	}
}

// TestChartREADMEListsEveryValue: every value of values.yaml is in the
// chart's README table.
func TestChartREADMEListsEveryValue(t *testing.T) {
	readme := readFile(t, chartDir(t)+"/README.md")
	var vals map[string]any
	if err := sigsyaml.Unmarshal([]byte(readFile(t, chartDir(t)+"/values.yaml")), &vals); err != nil {
		t.Fatal(err)
	}
	for _, k := range leafKeys("", vals) {
		if !strings.Contains(readme, "| `"+k+"` |") {
			t.Errorf("README.md has no row for `%s`", k)
		}
	}
}
