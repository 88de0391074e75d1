package differential

import "fmt"

// cappYAML is the ConfigMap kubectl applies, with data a given value and
// extra lines under data.
func cappYAML(a string, extra string) string {
	return fmt.Sprintf(`apiVersion: v1
kind: ConfigMap
metadata:
  name: capp
  namespace: %s
  labels:
    app: kubectl
data:
  a: %q
%s`, ns, a, extra)
}

const unknownFieldYAML = `apiVersion: v1
kind: ConfigMap
metadata:
  name: %s
  namespace: ` + ns + `
spec:
  foo: bar
data:
  k: v
`

func kwebYAML(image string) string {
	return fmt.Sprintf(`apiVersion: apps/v1
kind: Deployment
metadata:
  name: kweb
  namespace: %s
spec:
  replicas: 1
  selector:
    matchLabels:
      app: kweb
  template:
    metadata:
      labels:
        app: kweb
    spec:
      containers:
      - name: app
        image: %s
        ports:
        - containerPort: 8080
`, ns, image)
}

const widgetYAML = `apiVersion: diff.example.com/v1
kind: Widget
metadata:
  name: w5
  namespace: ` + ns + `
spec:
  size: 5
  parts:
  - name: x
    count: 1
`

const invalidYAML = `apiVersion: v1
kind: ConfigMap
metadata:
  name: Bad_Name
  namespace: ` + ns + `
`

func kubectlSteps() []step {
	n := "--namespace=" + ns
	return []step{
		kubectl("kubectl/get-yaml", "get", "configmap", "alpha", n, "-o", "yaml"),
		kubectl("kubectl/get-json", "get", "configmap", "alpha", n, "-o", "json"),
		kubectl("kubectl/get-jsonpath", "get", "configmaps", n, "-l", "app", "-o", `jsonpath={range .items[*]}{.metadata.name}{" "}{.data}{"\n"}{end}`),
		kubectl("kubectl/get-custom-columns", "get", "configmaps", n, "-l", "app", "-o", "custom-columns=NAME:.metadata.name,APP:.metadata.labels.app"),
		table("kubectl/get-table", "get", "configmaps", n, "-l", "app"),
		table("kubectl/get-deployments-wide", "get", "deployment", "web", n, "-o", "wide"),
		kubectl("kubectl/get-name-field-selector", "get", "configmaps", n, "--field-selector=metadata.name=alpha", "-o", "name"),
		kubectl("kubectl/get-missing", "get", "configmap", "missing", n),
		kubectl("kubectl/get-bad-selector", "get", "configmaps", n, "-l", "app in (web"),
		kubectl("kubectl/get-missing-namespace", "get", "configmaps", "--namespace=nowhere"),
		kubectl("kubectl/get-unknown-resource", "get", "gizmos"),
		kubectl("kubectl/create-exists", "create", "configmap", "alpha", n),
		kubectlStdin("kubectl/create-invalid", invalidYAML, "create", "-f", "-"),
		kubectl("kubectl/create-dry-run-server", "create", "configmap", "dry", n, "--from-literal=a=1", "--dry-run=server", "-o", "yaml"),
		kubectlStdin("kubectl/apply-create", cappYAML("1", ""), "apply", "-f", "-"),
		kubectlStdin("kubectl/apply-unchanged", cappYAML("1", ""), "apply", "-f", "-"),
		kubectlStdin("kubectl/diff-changed", cappYAML("2", "  b: \"1\"\n"), "diff", "-f", "-"),
		kubectlStdin("kubectl/diff-unchanged", cappYAML("1", ""), "diff", "-f", "-"),
		kubectlStdin("kubectl/apply-configure", cappYAML("2", ""), "apply", "-f", "-"),
		kubectl("kubectl/apply-view-last-applied", "apply", "view-last-applied", "configmap/capp", n),
		kubectl("kubectl/get-after-client-side-apply", "get", "configmap", "capp", n, "-o", "yaml", "--show-managed-fields"),
		kubectlStdin("kubectl/apply-server-side-migrate", cappYAML("2", "  b: \"2\"\n"), "apply", "--server-side", "-f", "-"),
		kubectl("kubectl/get-after-server-side-apply", "get", "configmap", "capp", n, "-o", "yaml", "--show-managed-fields"),
		kubectlStdin("kubectl/apply-server-side-conflict", cappYAML("3", ""), "apply", "--server-side", "--field-manager=other", "-f", "-"),
		kubectlStdin("kubectl/apply-server-side-force", cappYAML("3", ""), "apply", "--server-side", "--field-manager=other", "--force-conflicts", "-f", "-"),
		kubectlStdin("kubectl/apply-server-side-dry-run", cappYAML("4", ""), "apply", "--server-side", "--field-manager=other", "--dry-run=server", "-o", "yaml", "-f", "-"),
		kubectlStdin("kubectl/diff-server-side", cappYAML("5", ""), "diff", "--server-side", "--field-manager=other", "-f", "-"),
		kubectlStdin("kubectl/apply-unknown-field-strict", fmt.Sprintf(unknownFieldYAML, "kstrict"), "apply", "-f", "-"),
		kubectlStdin("kubectl/apply-unknown-field-warn", fmt.Sprintf(unknownFieldYAML, "kwarn"), "apply", "--validate=warn", "-f", "-"),
		kubectlStdin("kubectl/apply-unknown-field-ignore", fmt.Sprintf(unknownFieldYAML, "kignore"), "apply", "--validate=false", "-f", "-"),
		kubectlStdin("kubectl/apply-deployment", kwebYAML("nginx:1.27"), "apply", "-f", "-"),
		kubectlStdin("kubectl/diff-deployment", kwebYAML("nginx:1.28"), "diff", "-f", "-"),
		kubectlStdin("kubectl/apply-custom-resource", widgetYAML, "apply", "-f", "-"),
		table("kubectl/get-custom-resources", "get", "widgets", n),
		kubectl("kubectl/get-custom-resource-short-name", "get", "wd", "w5", n, "-o", "yaml"),
		kubectl("kubectl/patch-strategic", "patch", "deployment", "kweb", n, "-p", `{"spec":{"template":{"spec":{"containers":[{"name":"app","image":"nginx:1.28"}]}}}}`),
		kubectl("kubectl/patch-json", "patch", "configmap", "capp", n, "--type=json", "-p", `[{"op":"add","path":"/data/j","value":"1"}]`),
		kubectl("kubectl/patch-merge", "patch", "configmap", "capp", n, "--type=merge", "-p", `{"data":{"m":"1"}}`),
		kubectl("kubectl/patch-no-change", "patch", "configmap", "capp", n, "--type=merge", "-p", `{"data":{"m":"1"}}`),
		kubectl("kubectl/patch-custom-resource-merge", "patch", "widget", "w5", n, "--type=merge", "-p", `{"spec":{"size":6}}`),
		kubectl("kubectl/patch-custom-resource-strategic", "patch", "widget", "w5", n, "-p", `{"spec":{"size":7}}`),
		kubectl("kubectl/patch-custom-resource-invalid", "patch", "widget", "w5", n, "--type=merge", "-p", `{"spec":{"size":-1}}`),
		kubectl("kubectl/label-no-overwrite", "label", "configmap", "capp", n, "app=other"),
		kubectl("kubectl/label-overwrite", "label", "configmap", "capp", n, "app=other", "--overwrite"),
		kubectl("kubectl/annotate-stale-resource-version", "annotate", "configmap", "capp", n, "note=1", "--resource-version=1"),
		kubectlStdin("kubectl/replace", cappYAML("9", ""), "replace", "-f", "-"),
		kubectlStdin("kubectl/replace-missing", fmt.Sprintf(unknownFieldYAML, "nothere"), "replace", "--validate=false", "-f", "-"),
		kubectl("kubectl/scale", "scale", "deployment", "kweb", n, "--replicas=2"),
		kubectl("kubectl/wait-jsonpath", "wait", "configmap/capp", n, "--for=jsonpath={.data.a}=9", "--timeout=10s"),
		kubectl("kubectl/wait-timeout", "wait", "widget/w5", n, "--for=condition=Ready", "--timeout=1s"),
		kubectl("kubectl/get-raw", "get", "--raw", "/api/v1/namespaces/"+ns+"/configmaps/capp"),
		kubectl("kubectl/get-raw-missing", "get", "--raw", "/api/v1/namespaces/"+ns+"/configmaps/missing"),
		kubectl("kubectl/explain-configmap", "explain", "configmap.data"),
		kubectl("kubectl/explain-deployment-recursive", "explain", "deployment.spec.strategy", "--recursive"),
		kubectl("kubectl/explain-custom-resource", "explain", "widgets.spec"),
		kubectl("kubectl/delete-dry-run", "delete", "configmap", "capp", n, "--dry-run=server"),
		kubectl("kubectl/delete-by-label", "delete", "configmaps", n, "-l", "app=web"),
		kubectl("kubectl/delete-no-wait", "delete", "configmap", "capp", n, "--wait=false"),
		kubectl("kubectl/wait-delete", "wait", "--for=delete", "configmap/capp", n, "--timeout=10s"),
		kubectl("kubectl/delete-missing", "delete", "configmap", "missing", n),
		kubectl("kubectl/delete-missing-ignored", "delete", "configmap", "missing", n, "--ignore-not-found"),
		kubectl("kubectl/delete-custom-resource", "delete", "widget", "w5", n),
		kubectl("kubectl/delete-namespace", "delete", "namespace", nsB, "--wait=false"),
	}
}
