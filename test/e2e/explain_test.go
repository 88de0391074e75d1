package e2e

import (
	"fmt"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/canopy-dev/canopy/test/kubecluster"
	"github.com/canopy-dev/canopy/test/poll"
)

// TestKubectlExplain drives kubectl explain, and kubectl apply and create
// with their default validation, against the root's OpenAPI documents:
// built-in kinds, a CRD installed in a space other than the default one,
// and Canopy's own edge.canopy.dev kinds.
func TestKubectlExplain(t *testing.T) {
	t.Parallel()
	r := startRoot(t)
	kubecluster.Kubectl(t)

	runRootTests(t, r, []rootTest{
		{"builtin", testExplainBuiltin},
		{"custom-resource", testExplainCustomResource},
		{"edge-kinds", testExplainEdgeKinds},
		{"validation", testExplainValidation},
		{"apply-merges-lists", testExplainApplyMergesLists},
	})
}

// firstWords is the start of a description, short enough not to be wrapped
// by explain.
func firstWords(doc string, n int) string {
	return strings.Join(strings.Fields(doc)[:n], " ")
}

func testExplainBuiltin(t *testing.T, r *root, _ *kubernetes.Clientset) {
	out := r.mustKubectl(t, "explain", "deployments.spec.replicas")
	wantMatch(t, "explain deployments.spec.replicas", out,
		`^GROUP:\s+apps$`, `^KIND:\s+Deployment$`, `^VERSION:\s+v1$`, `^FIELD: replicas <integer>$`, `^DESCRIPTION:$`)
	wantContains(t, "explain deployments.spec.replicas", out, firstWords(appsv1.DeploymentSpec{}.SwaggerDoc()["replicas"], 4))

	// A nested field: the field's description, then its type's, and the
	// type's fields with their types and -required- markers.
	out = r.mustKubectl(t, "explain", "deployments.spec.template")
	wantMatch(t, "explain deployments.spec.template", out,
		`^FIELD: template <PodTemplateSpec>$`, `^  metadata\s+<ObjectMeta>$`, `^  spec\s+<PodSpec>$`)
	wantContains(t, "explain deployments.spec.template", out,
		firstWords(appsv1.DeploymentSpec{}.SwaggerDoc()["template"], 5),
		firstWords(corev1.PodTemplateSpec{}.SwaggerDoc()[""], 5))
	out = r.mustKubectl(t, "explain", "deployments.spec")
	wantMatch(t, "explain deployments.spec", out,
		`^  selector\s+<LabelSelector> -required-$`, `^  template\s+<PodTemplateSpec> -required-$`, `^  replicas\s+<integer>$`, `^  strategy\s+<DeploymentStrategy>$`)

	out = r.mustKubectl(t, "explain", "configmaps")
	wantMatch(t, "explain configmaps", out, `^KIND:\s+ConfigMap$`, `^  data\s+<map\[string\]string>$`, `^  metadata\s+<ObjectMeta>$`)
	wantContains(t, "explain configmaps", out, firstWords(corev1.ConfigMap{}.SwaggerDoc()[""], 4))

	// Recursive: the whole tree, to the leaves.
	out = r.mustKubectl(t, "explain", "pods.spec.containers", "--recursive")
	wantMatch(t, "explain --recursive pods.spec.containers", out,
		`^  name\s+<string> -required-$`, `^  ports\s+<\[\]ContainerPort>$`, `^    containerPort\s+<integer> -required-$`,
		`^      port\s+<IntOrString> -required-$`)

	// kubectl's older explain reads the v2 document (protobuf).
	out = r.mustKubectl(t, "explain", "deployments.spec.replicas", "--output=plaintext-openapiv2")
	wantMatch(t, "explain --output=plaintext-openapiv2", out, `^KIND:\s+Deployment$`, `^FIELD:\s+replicas <integer>$`)
	wantContains(t, "explain --output=plaintext-openapiv2", out, firstWords(appsv1.DeploymentSpec{}.SwaggerDoc()["replicas"], 4))

	if _, err := r.kubectl(t, "explain", "deployments.spec.nosuchfield"); err == nil || !strings.Contains(err.Error(), `field "nosuchfield" does not exist`) {
		t.Errorf("explain of a missing field: %v", err)
	}
}

// explainCRD is a cluster-scoped CRD with descriptions; extra is more YAML
// under spec's properties.
func explainCRD(extra string) string {
	return `apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: gadgets.explain.canopy.dev
spec:
  group: explain.canopy.dev
  scope: Cluster
  names: {plural: gadgets, singular: gadget, kind: Gadget}
  versions:
  - name: v1
    served: true
    storage: true
    schema:
      openAPIV3Schema:
        type: object
        description: A gadget of the explain test.
        properties:
          spec:
            type: object
            description: What the gadget should be.
            required: [size]
            properties:
              size:
                type: integer
                minimum: 1
                description: Size of the gadget, in centimetres.
              colour:
                type: string
                enum: [red, green]
                description: Colour of the gadget.
` + extra
}

func gadget(name, spec string) string {
	return fmt.Sprintf("apiVersion: explain.canopy.dev/v1\nkind: Gadget\nmetadata: {name: %s}\nspec: %s\n", name, spec)
}

func testExplainCustomResource(t *testing.T, r *root, _ *kubernetes.Clientset) {
	const ctx = "--context=inventory"
	r.mustKubectlIn(t, explainCRD(""), ctx, "apply", "-f", "-")
	r.mustKubectl(t, ctx, "wait", "--for=condition=established", "crd/gadgets.explain.canopy.dev", "--timeout=30s")

	out := r.mustKubectl(t, ctx, "explain", "gadgets.spec.size")
	wantMatch(t, "explain gadgets.spec.size", out,
		`^GROUP:\s+explain.canopy.dev$`, `^KIND:\s+Gadget$`, `^VERSION:\s+v1$`, `^FIELD: size <integer>$`, `Size of the gadget, in centimetres\.`)
	out = r.mustKubectl(t, ctx, "explain", "gadgets.spec")
	wantMatch(t, "explain gadgets.spec", out,
		`What the gadget should be\.`, `^  size\s+<integer> -required-$`, `^  colour\s+<string>$`, `^  enum: red, green$`)
	out = r.mustKubectl(t, ctx, "explain", "gadgets")
	wantMatch(t, "explain gadgets", out, `A gadget of the explain test\.`, `^  metadata\s+<ObjectMeta>$`, `^  spec\s+<Object>$`)

	// The CRD is the inventory space's only: the default space does not
	// know the resource.
	if _, err := r.kubectl(t, "explain", "gadgets"); err == nil {
		t.Error("explain gadgets in the default space succeeded")
	}

	// A changed CRD is explained as changed, through kubectl's OpenAPI
	// cache (the document's URL carries its hash).
	r.mustKubectlIn(t, explainCRD(`              shape:
                type: string
                description: Shape of the gadget, added later.
`), ctx, "apply", "-f", "-")
	poll.Until(t, "kubectl explain to show the added field", func() error {
		out, err := r.kubectl(t, ctx, "explain", "gadgets.spec.shape")
		if err != nil {
			return err
		}
		if !strings.Contains(out, "Shape of the gadget, added later.") {
			return fmt.Errorf("explain gadgets.spec.shape:\n%s", out)
		}
		return nil
	})

	// Client-side apply validates with the default setting, as against
	// kube-apiserver: an unknown field fails, a valid gadget is created.
	_, err := r.kubectlIn(t, gadget("g1", "{size: 3, weight: 2}"), nil, ctx, "apply", "-f", "-")
	if err == nil || !strings.Contains(err.Error(), `Error from server (BadRequest): error when creating "STDIN"`) || !strings.Contains(err.Error(), `unknown field "spec.weight"`) {
		t.Errorf("apply of a gadget with an unknown field: %v", err)
	}
	wantContains(t, "apply gadget", r.mustKubectlIn(t, gadget("g1", "{size: 3, colour: red}"), ctx, "apply", "-f", "-"), "gadget.explain.canopy.dev/g1 created")
}

func testExplainEdgeKinds(t *testing.T, r *root, _ *kubernetes.Clientset) {
	out := r.mustKubectl(t, "--context=inventory", "explain", "locations.spec")
	wantMatch(t, "explain locations.spec", out,
		`^GROUP:\s+edge.canopy.dev$`, `^KIND:\s+Location$`, `^VERSION:\s+v1alpha1$`, `^  instanceSelector\s+<Object> -required-$`)
	out = r.mustKubectl(t, "explain", "edgeplacements.spec.downsync")
	wantMatch(t, "explain edgeplacements.spec.downsync", out, `^KIND:\s+EdgePlacement$`, `^FIELD: downsync <\[\]Object>$`, `^  apiGroup\s+<string>$`)
}

const explainDeployment = `apiVersion: apps/v1
kind: Deployment
metadata: {name: %s, namespace: %s}
spec:
  replicas: 1
  %s
  selector: {matchLabels: {app: %[1]s}}
  template:
    metadata: {labels: {app: %[1]s}}
    spec:
      containers:
      - {name: web, image: nginx%[4]s}
`

func testExplainValidation(t *testing.T, r *root, cs *kubernetes.Clientset) {
	ns := "explain-validation"
	createNamespace(t, cs, ns)
	bad := fmt.Sprintf(explainDeployment, "bad", ns, "foo: bar", ", bogus: 1")
	for _, verb := range []string{"apply", "create"} {
		_, err := r.kubectlIn(t, bad, nil, verb, "-f", "-")
		if err == nil {
			t.Fatalf("kubectl %s of a deployment with unknown fields succeeded", verb)
		}
		for _, want := range []string{`Error from server (BadRequest): error when creating "STDIN"`, `unknown field "spec.foo"`, `unknown field "spec.template.spec.containers[0].bogus"`} {
			if !strings.Contains(err.Error(), want) {
				t.Errorf("kubectl %s of unknown fields: want %q in %v", verb, want, err)
			}
		}
	}
	if _, err := cs.AppsV1().Deployments(ns).Get(t.Context(), "bad", metav1.GetOptions{}); err == nil {
		t.Error("the deployment with unknown fields was stored")
	}
	good := fmt.Sprintf(explainDeployment, "good", ns, "minReadySeconds: 5", "")
	wantContains(t, "apply valid deployment", r.mustKubectlIn(t, good, "apply", "-f", "-"), "deployment.apps/good created")
	wantContains(t, "create valid deployment", r.mustKubectlIn(t, strings.Replace(good, "name: good", "name: good2", 1), "create", "-f", "-"), "deployment.apps/good2 created")
	// --validate=false drops what the server does not know, as kube does.
	wantContains(t, "apply --validate=false", r.mustKubectlIn(t, bad, "apply", "--validate=false", "-f", "-"), "deployment.apps/bad created")
}

// testExplainApplyMergesLists: kubectl apply computes its strategic merge
// patch from the served schema (x-kubernetes-patch-merge-key), so
// containers merge by name and what another client added survives.
func testExplainApplyMergesLists(t *testing.T, r *root, cs *kubernetes.Clientset) {
	ns := "explain-merge"
	createNamespace(t, cs, ns)
	manifest := func(containers string) string {
		return fmt.Sprintf(`apiVersion: apps/v1
kind: Deployment
metadata: {name: web, namespace: %s}
spec:
  selector: {matchLabels: {app: web}}
  template:
    metadata: {labels: {app: web}}
    spec:
      containers: %s
`, ns, containers)
	}
	r.mustKubectlIn(t, manifest(`[{name: a, image: "a:1"}, {name: b, image: "b:1"}]`), "apply", "-f", "-")
	r.mustKubectl(t, "-n", ns, "set", "env", "deployment/web", "-c", "a", "ADDED=by-set-env")
	r.mustKubectlIn(t, manifest(`[{name: a, image: "a:2"}, {name: c, image: "c:1"}]`), "apply", "-f", "-")

	d, err := cs.AppsV1().Deployments(ns).Get(t.Context(), "web", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, c := range d.Spec.Template.Spec.Containers {
		s := c.Name + "=" + c.Image
		for _, e := range c.Env {
			s += "," + e.Name + "=" + e.Value
		}
		got = append(got, s)
	}
	if want := "a=a:2,ADDED=by-set-env c=c:1"; strings.Join(got, " ") != want {
		t.Errorf("containers after apply: %q, want %q", strings.Join(got, " "), want)
	}
}
