package deploy

import (
	"encoding/json"
	"errors"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"sort"
	"strings"
	"testing"

	"helm.sh/helm/v3/pkg/action"
	"helm.sh/helm/v3/pkg/chart/loader"
	"helm.sh/helm/v3/pkg/chartutil"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/kustomize/api/krusty"
	"sigs.k8s.io/kustomize/kyaml/filesys"
)

// Where the chart is installed in the tests, as a user would: release
// "canopy" in namespace "canopy".
const (
	releaseName = "canopy"
	namespace   = "canopy"
)

// repoDir is the repository's top directory.
func repoDir(t testing.TB) string {
	t.Helper()
	_, file, _, ok := runtime.Caller(0)
	if !ok {
		t.Fatal("no caller information")
	}
	return filepath.Join(filepath.Dir(file), "..", "..")
}

func chartDir(t testing.TB) string { return filepath.Join(repoDir(t), "deploy", "helm", "canopy") }

// renderChart renders the chart as `helm template canopy deploy/helm/canopy
// --namespace canopy` does with values over values.yaml, checking them
// against values.schema.json first.
func renderChart(t testing.TB, values string) (string, error) {
	t.Helper()
	ch, err := loader.Load(chartDir(t))
	if err != nil {
		t.Fatalf("loading the chart: %v", err)
	}
	vals, err := chartutil.ReadValues([]byte(values))
	if err != nil {
		t.Fatalf("values %q: %v", values, err)
	}
	install := action.NewInstall(&action.Configuration{})
	install.DryRun, install.ClientOnly, install.Replace = true, true, true
	install.ReleaseName, install.Namespace = releaseName, namespace
	install.KubeVersion = &chartutil.KubeVersion{Version: "v1.34.0", Major: "1", Minor: "34"}
	rel, err := install.Run(ch, vals.AsMap())
	if err != nil {
		return "", err
	}
	return rel.Manifest, nil
}

// buildOverlay builds a kustomize overlay as `kubectl kustomize` does.
func buildOverlay(t testing.TB, dir string) string {
	t.Helper()
	k := krusty.MakeKustomizer(krusty.MakeDefaultOptions())
	m, err := k.Run(filesys.MakeFsOnDisk(), dir)
	if err != nil {
		t.Fatalf("kustomize build %s: %v", dir, err)
	}
	y, err := m.AsYaml()
	if err != nil {
		t.Fatal(err)
	}
	return string(y)
}

// objects decodes a multi-document YAML stream.
func objects(t testing.TB, manifest string) []*unstructured.Unstructured {
	t.Helper()
	dec := utilyaml.NewYAMLOrJSONDecoder(strings.NewReader(manifest), 4096)
	var out []*unstructured.Unstructured
	for {
		var raw json.RawMessage
		err := dec.Decode(&raw)
		if errors.Is(err, io.EOF) {
			return out
		}
		if err != nil {
			t.Fatalf("decoding %s: %v", manifest, err)
		}
		if len(raw) == 0 || string(raw) == "null" {
			continue
		}
		u := &unstructured.Unstructured{}
		if err := u.UnmarshalJSON(raw); err != nil {
			t.Fatalf("decoding %s: %v", raw, err)
		}
		out = append(out, u)
	}
}

// find returns the object of kind and name, failing the test without one.
func find(t testing.TB, objs []*unstructured.Unstructured, kind, name string) *unstructured.Unstructured {
	t.Helper()
	for _, o := range objs {
		if o.GetKind() == kind && o.GetName() == name {
			return o
		}
	}
	t.Fatalf("no %s %s among %s", kind, name, names(objs))
	return nil
}

func names(objs []*unstructured.Unstructured) string {
	var s []string
	for _, o := range objs {
		s = append(s, o.GetKind()+"/"+o.GetName())
	}
	sort.Strings(s)
	return strings.Join(s, " ")
}

// containerArgs returns the args of the named container of a workload.
func containerArgs(t testing.TB, o *unstructured.Unstructured, container string) []string {
	t.Helper()
	cs, _, _ := unstructured.NestedSlice(o.Object, "spec", "template", "spec", "containers")
	cs2, _, _ := unstructured.NestedSlice(o.Object, "spec", "template", "spec", "initContainers")
	for _, c := range append(cs, cs2...) {
		m := c.(map[string]any)
		if m["name"] != container {
			continue
		}
		var args []string
		for _, a := range m["args"].([]any) {
			args = append(args, a.(string))
		}
		return args
	}
	t.Fatalf("%s %s has no container %s", o.GetKind(), o.GetName(), container)
	return nil
}

func readFile(t testing.TB, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
