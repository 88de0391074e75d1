package deploy

import (
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

var update = flag.Bool("update", false, "write deploy/kustomize's bases from the chart's renderings")

// kustomizeDir is deploy/kustomize.
func kustomizeDir(t testing.TB) string { return filepath.Join(repoDir(t), "deploy", "kustomize") }

// bases are the kustomize bases, each the chart rendered with values
// (the file base/<dir>/<dir>.yaml).
var bases = []struct{ dir, values string }{
	{"root", ``},
	{"region", `
root: {enabled: false}
regions: [{name: region-a}]
region: {joinToken: {secretName: canopy-join-token, key: token}}
`},
	{"edge", `
root: {enabled: false}
edge:
  enabled: true
  name: edge-1
  parent: ["root.example.com:7443"]
  joinToken: {secretName: canopy-join-token, key: token}
`},
}

// overlays are the kustomize overlays and the chart values each equals.
var overlays = []struct{ name, values string }{
	{"single-root", bases[0].values},
	{"ha-root", `root: {replicas: 3, pki: {secretName: canopy-root-pki}}`},
	{"region", bases[1].values},
	{"edge", bases[2].values},
}

// helmOnly matches what a rendering says of Helm, which a base made from
// it must not: the template a document came from and Helm's labels.
var helmOnly = regexp.MustCompile(`(?m)^\s*(# Source: .*|helm\.sh/chart: .*|app\.kubernetes\.io/managed-by: .*)\n`)

const generatedHeader = "# Made from deploy/helm/canopy by `go test ./test/deploy -run TestKustomizeBases -update`:\n# change the chart, not this file.\n"

// TestKustomizeBases: each base is the chart's rendering for its values;
// -update writes them.
func TestKustomizeBases(t *testing.T) {
	for _, b := range bases {
		manifest, err := renderChart(t, b.values)
		if err != nil {
			t.Fatal(err)
		}
		want := generatedHeader + helmOnly.ReplaceAllString(manifest, "")
		path := filepath.Join(kustomizeDir(t), "base", b.dir, b.dir+".yaml")
		if *update {
			if err := os.WriteFile(path, []byte(want), 0o644); err != nil {
				t.Fatal(err)
			}
			continue
		}
		if got := readFile(t, path); got != want {
			t.Errorf("%s is not the chart's rendering: run go test ./test/deploy -run TestKustomizeBases -update", path)
		}
	}
}

// TestKustomizeOverlaysMatchChart: every overlay builds (krusty) to the
// objects the chart renders for the same install, in namespace canopy.
func TestKustomizeOverlaysMatchChart(t *testing.T) {
	for _, o := range overlays {
		t.Run(o.name, func(t *testing.T) {
			built := objects(t, buildOverlay(t, filepath.Join(kustomizeDir(t), "overlays", o.name)))
			ns := find(t, built, "Namespace", namespace)
			built = slices.DeleteFunc(built, func(u *unstructured.Unstructured) bool { return u == ns })
			for _, u := range built {
				if u.GetKind() != "ClusterRole" && u.GetKind() != "ClusterRoleBinding" && u.GetNamespace() != namespace {
					t.Errorf("%s %s in namespace %q, want %s", u.GetKind(), u.GetName(), u.GetNamespace(), namespace)
				}
			}
			manifest, err := renderChart(t, o.values)
			if err != nil {
				t.Fatal(err)
			}
			want := normalize(objects(t, manifest))
			got := normalize(built)
			if len(got) != len(want) {
				t.Fatalf("overlay %s has %s; the chart %s", o.name, names(built), names(objects(t, manifest)))
			}
			for k, w := range want {
				if g, ok := got[k]; !ok {
					t.Errorf("overlay %s lacks %s", o.name, k)
				} else if g != w {
					t.Errorf("overlay %s: %s differs from the chart's:\n--- overlay\n%s\n--- chart\n%s", o.name, k, g, w)
				}
			}
		})
	}
}

// normalize maps kind/name to each object's JSON without what tells a
// Helm rendering from a kustomize build: Helm's labels and the
// namespace, which kustomize sets and Helm leaves to the install.
func normalize(objs []*unstructured.Unstructured) map[string]string {
	out := map[string]string{}
	for _, o := range objs {
		o = o.DeepCopy()
		o.SetNamespace("")
		labels := o.GetLabels()
		delete(labels, "helm.sh/chart")
		delete(labels, "app.kubernetes.io/managed-by")
		o.SetLabels(labels)
		b, err := json.MarshalIndent(o.Object, "", "  ")
		if err != nil {
			panic(err)
		}
		out[o.GetKind()+"/"+o.GetName()] = strings.TrimSpace(string(b))
	}
	return out
}
