package deploy

import (
	"fmt"
	"slices"
	"sort"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// freeForm are the values that hold Kubernetes fields as they are: the
// README names them, not what is inside.
var freeForm = []string{"resources", "annotations", "podAnnotations", "nodeSelector", "affinity", "labels"}

// leafKeys returns the dotted paths of the values of m, stopping at
// lists, free-form maps and empty maps.
func leafKeys(prefix string, m map[string]any) []string {
	var out []string
	for k, v := range m {
		path := k
		if prefix != "" {
			path = prefix + "." + k
		}
		if sub, ok := v.(map[string]any); ok && len(sub) > 0 && !slices.Contains(freeForm, k) {
			out = append(out, leafKeys(path, sub)...)
			continue
		}
		out = append(out, path)
	}
	sort.Strings(out)
	return out
}

// servicePorts is "name/protocol/port ..." of a Service.
func servicePorts(svc *unstructured.Unstructured) string {
	ports, _, _ := unstructured.NestedSlice(svc.Object, "spec", "ports")
	var s []string
	for _, p := range ports {
		m := p.(map[string]any)
		s = append(s, fmt.Sprintf("%v/%v/%v", m["name"], m["protocol"], m["port"]))
	}
	return strings.Join(s, " ")
}

// rulesOf is "group/resource:verbs" for each resource of each rule of a
// (Cluster)Role, in order.
func rulesOf(role *unstructured.Unstructured) []string {
	rules, _, _ := unstructured.NestedSlice(role.Object, "rules")
	var out []string
	for _, r := range rules {
		m := r.(map[string]any)
		verbs := strings.Join(strs(m["verbs"]), ",")
		for _, g := range strs(m["apiGroups"]) {
			for _, res := range strs(m["resources"]) {
				out = append(out, g+"/"+res+":"+verbs)
			}
		}
	}
	return out
}

func strs(v any) []string {
	var out []string
	l, _ := v.([]any)
	for _, x := range l {
		out = append(out, fmt.Sprint(x))
	}
	return out
}

// checkHardened checks a workload's pods: non-root, a read-only root file
// system, no privilege escalation nor capabilities, resources, and probes
// on /healthz and /readyz for the relay.
func checkHardened(t *testing.T, o *unstructured.Unstructured) {
	t.Helper()
	if o.GetKind() != "StatefulSet" && o.GetKind() != "Deployment" {
		return
	}
	spec, _, _ := unstructured.NestedMap(o.Object, "spec", "template", "spec")
	if nonRoot, _, _ := unstructured.NestedBool(spec, "securityContext", "runAsNonRoot"); !nonRoot {
		t.Errorf("%s %s: pods may run as root", o.GetKind(), o.GetName())
	}
	cs, _, _ := unstructured.NestedSlice(spec, "containers")
	ics, _, _ := unstructured.NestedSlice(spec, "initContainers")
	for _, c := range append(cs, ics...) {
		m := c.(map[string]any)
		where := fmt.Sprintf("%s %s container %v", o.GetKind(), o.GetName(), m["name"])
		if ro, _, _ := unstructured.NestedBool(m, "securityContext", "readOnlyRootFilesystem"); !ro {
			t.Errorf("%s: root file system writable", where)
		}
		if esc, found, _ := unstructured.NestedBool(m, "securityContext", "allowPrivilegeEscalation"); !found || esc {
			t.Errorf("%s: privilege escalation allowed", where)
		}
		if drop, _, _ := unstructured.NestedStringSlice(m, "securityContext", "capabilities", "drop"); !slices.Equal(drop, []string{"ALL"}) {
			t.Errorf("%s: capabilities not dropped: %v", where, drop)
		}
		if m["name"] != "relay" {
			continue
		}
		if _, found, _ := unstructured.NestedMap(m, "resources", "requests"); !found {
			t.Errorf("%s: no resource requests", where)
		}
		live, _, _ := unstructured.NestedString(m, "livenessProbe", "httpGet", "path")
		ready, _, _ := unstructured.NestedString(m, "readinessProbe", "httpGet", "path")
		if live != "/healthz" || ready != "/readyz" {
			t.Errorf("%s: probes on %q and %q, want /healthz and /readyz", where, live, ready)
		}
	}
}
