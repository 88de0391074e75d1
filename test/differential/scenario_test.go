package differential

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/utils/ptr"
)

// step is one step of the scenario: a kubectl command (args, stdin) or a
// client-go call (call), never both.
type step struct {
	name  string
	args  []string
	stdin string
	ages  bool // mask kubectl's AGE column
	call  func(ctx context.Context, tg *target) string
}

func kubectl(name string, args ...string) step { return step{name: name, args: args} }

func kubectlStdin(name, stdin string, args ...string) step {
	return step{name: name, args: args, stdin: stdin}
}

// table is a kubectl command whose output is a table with an AGE column.
func table(name string, args ...string) step { return step{name: name, args: args, ages: true} }

func call(name string, f func(ctx context.Context, tg *target) string) step {
	return step{name: name, call: f}
}

// Namespaces of the scenario.
const (
	ns  = "diff"   // most objects
	nsB = "diff-b" // created by kubectl; watches and informers
)

// scenario is the whole scenario, in order. Steps depend on the ones
// before them (objects, saved resourceVersions).
func scenario() []step {
	var s []step
	s = append(s, namespaceSteps()...)
	s = append(s, configMapSteps()...)
	s = append(s, deploymentSteps()...)
	s = append(s, dryRunSteps()...)
	s = append(s, deleteSteps()...)
	s = append(s, fieldValidationSteps()...)
	s = append(s, applySteps()...)
	s = append(s, watchSteps()...)
	s = append(s, crdSteps()...)
	s = append(s, kubectlSteps()...)
	return s
}

func configMap(name string, labels, data map[string]string) *corev1.ConfigMap {
	return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels}, Data: data}
}

// names renders the names of a list's items and whether it continues.
func names[T any](items []T, name func(*T) string, meta metav1.ListMeta) string {
	var b strings.Builder
	for i := range items {
		fmt.Fprintf(&b, "- %s\n", name(&items[i]))
	}
	if meta.Continue != "" {
		b.WriteString("continue: <set>\n")
	}
	if meta.RemainingItemCount != nil {
		fmt.Fprintf(&b, "remainingItemCount: %d\n", *meta.RemainingItemCount)
	}
	if b.Len() == 0 {
		return "(none)\n"
	}
	return b.String()
}

func cmName(c *corev1.ConfigMap) string { return c.Name }

// raw sends one request through the core REST client (so under the space
// prefix for the root) and renders the status code and the body as the
// server sent it (client-go's interpretation of an error body hides what a
// server that answers without a Status sent).
func (tg *target) raw(ctx context.Context, method, path string, params []string, contentType, body string) string {
	req := tg.cs.CoreV1().RESTClient().Verb(method).AbsPath(path)
	for i := 0; i+1 < len(params); i += 2 {
		req = req.Param(params[i], params[i+1])
	}
	if body != "" {
		req = req.Body([]byte(body)).SetHeader("Content-Type", contentType)
	}
	var code int
	b, err := req.Do(ctx).StatusCode(&code).Raw()
	out := fmt.Sprintf("code: %d\n", code)
	if len(b) == 0 && err != nil {
		return out + showErr(err)
	}
	return out + jsonToYAML(b)
}

// itemTypeMeta lists path in JSON and renders the list's kind and
// apiVersion and each item's: kube-apiserver leaves them out of the items
// of a built-in kind's list and keeps them in a custom resource's.
func itemTypeMeta(ctx context.Context, tg *target, path string) string {
	b, err := tg.cs.CoreV1().RESTClient().Get().AbsPath(path).SetHeader("Accept", "application/json").Do(ctx).Raw()
	if err != nil {
		return showErr(err)
	}
	type typeMeta struct {
		Kind       *string `json:"kind"`
		APIVersion *string `json:"apiVersion"`
		Metadata   struct {
			Name string `json:"name"`
		} `json:"metadata"`
	}
	var l struct {
		typeMeta
		Items []typeMeta `json:"items"`
	}
	if err := json.Unmarshal(b, &l); err != nil {
		return "body (not a list): " + string(b) + "\n"
	}
	str := func(p *string) string {
		if p == nil {
			return "(none)"
		}
		return *p
	}
	out := fmt.Sprintf("list: %s %s\n", str(l.APIVersion), str(l.Kind))
	for _, it := range l.Items {
		out += fmt.Sprintf("- %s: %s %s\n", it.Metadata.Name, str(it.APIVersion), str(it.Kind))
	}
	return out
}

func namespaceSteps() []step {
	return []step{
		call("namespace/create", func(ctx context.Context, tg *target) string {
			return show(tg.cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns, Labels: map[string]string{"diff": "scenario"}}}, metav1.CreateOptions{}))
		}),
		call("namespace/create-exists", func(ctx context.Context, tg *target) string {
			return show(tg.cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}))
		}),
		call("namespace/create-invalid-name", func(ctx context.Context, tg *target) string {
			return show(tg.cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "Diff_Bad"}}, metav1.CreateOptions{}))
		}),
		kubectl("kubectl/create-namespace", "create", "namespace", nsB),
		kubectl("kubectl/label-namespace", "label", "namespace", nsB, "diff=scenario"),
		table("kubectl/get-namespaces-by-label", "get", "namespaces", "-l", "diff=scenario"),
		kubectl("kubectl/get-namespace-yaml", "get", "namespace", ns, "-o", "yaml"),
		call("namespace/delete-response", func(ctx context.Context, tg *target) string {
			if _, err := tg.cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "diff-gone"}}, metav1.CreateOptions{}); err != nil {
				return showErr(err)
			}
			return tg.raw(ctx, "DELETE", "/api/v1/namespaces/diff-gone", nil, "", "")
		}),
		call("namespace/get-missing", func(ctx context.Context, tg *target) string {
			return show(tg.cs.CoreV1().Namespaces().Get(ctx, "nowhere", metav1.GetOptions{}))
		}),
	}
}

func configMapSteps() []step {
	cms := func(tg *target) typedcorev1.ConfigMapInterface { return tg.cs.CoreV1().ConfigMaps(ns) }
	return []step{
		call("configmap/create", func(ctx context.Context, tg *target) string {
			return show(cms(tg).Create(ctx, configMap("alpha", map[string]string{"app": "web", "tier": "front"}, map[string]string{"a": "1"}), metav1.CreateOptions{}))
		}),
		call("configmap/create-second", func(ctx context.Context, tg *target) string {
			return show(cms(tg).Create(ctx, configMap("beta", map[string]string{"app": "web", "tier": "back"}, map[string]string{"b": "1"}), metav1.CreateOptions{}))
		}),
		call("configmap/create-generate-name", func(ctx context.Context, tg *target) string {
			c := configMap("", map[string]string{"app": "batch"}, map[string]string{"g": "1"})
			c.GenerateName = "gen-"
			return show(cms(tg).Create(ctx, c, metav1.CreateOptions{}))
		}),
		call("configmap/create-exists", func(ctx context.Context, tg *target) string {
			return show(cms(tg).Create(ctx, configMap("alpha", nil, nil), metav1.CreateOptions{}))
		}),
		call("configmap/create-invalid", func(ctx context.Context, tg *target) string {
			return show(cms(tg).Create(ctx, configMap("Bad_Name", nil, map[string]string{"bad key!": "x"}), metav1.CreateOptions{}))
		}),
		call("configmap/create-no-name", func(ctx context.Context, tg *target) string {
			return show(cms(tg).Create(ctx, configMap("", nil, nil), metav1.CreateOptions{}))
		}),
		call("configmap/create-missing-namespace", func(ctx context.Context, tg *target) string {
			return show(tg.cs.CoreV1().ConfigMaps("nowhere").Create(ctx, configMap("x", nil, nil), metav1.CreateOptions{}))
		}),
		call("configmap/create-namespace-mismatch", func(ctx context.Context, tg *target) string {
			return tg.raw(ctx, "POST", "/api/v1/namespaces/"+ns+"/configmaps", nil, "application/json",
				`{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"elsewhere","namespace":"other"}}`)
		}),
		call("configmap/get", func(ctx context.Context, tg *target) string {
			return show(tg.cs.CoreV1().ConfigMaps(ns).Get(ctx, "alpha", metav1.GetOptions{}))
		}),
		call("configmap/get-missing", func(ctx context.Context, tg *target) string {
			return show(tg.cs.CoreV1().ConfigMaps(ns).Get(ctx, "missing", metav1.GetOptions{}))
		}),
		call("configmap/list-label-equality", func(ctx context.Context, tg *target) string {
			return listCMs(ctx, tg, ns, metav1.ListOptions{LabelSelector: "app=web"})
		}),
		call("configmap/list-label-set", func(ctx context.Context, tg *target) string {
			return listCMs(ctx, tg, ns, metav1.ListOptions{LabelSelector: "tier in (front,back),app!=batch"})
		}),
		call("configmap/list-label-exists", func(ctx context.Context, tg *target) string {
			return listCMs(ctx, tg, ns, metav1.ListOptions{LabelSelector: "app,!tier"})
		}),
		call("configmap/list-field-selector", func(ctx context.Context, tg *target) string {
			return listCMs(ctx, tg, ns, metav1.ListOptions{FieldSelector: "metadata.name=beta"})
		}),
		call("configmap/list-json-item-typemeta", func(ctx context.Context, tg *target) string {
			return itemTypeMeta(ctx, tg, "/api/v1/namespaces/"+ns+"/configmaps")
		}),
		call("configmap/list-all-namespaces-field-selector", func(ctx context.Context, tg *target) string {
			return listCMs(ctx, tg, "", metav1.ListOptions{FieldSelector: "metadata.namespace=" + ns + ",metadata.name!=beta", LabelSelector: "app"})
		}),
		call("configmap/list-bad-label-selector", func(ctx context.Context, tg *target) string {
			return listCMs(ctx, tg, ns, metav1.ListOptions{LabelSelector: "app in (web"})
		}),
		call("configmap/list-bad-label-value", func(ctx context.Context, tg *target) string {
			return listCMs(ctx, tg, ns, metav1.ListOptions{LabelSelector: "app=-bad-"})
		}),
		call("configmap/list-bad-field-selector", func(ctx context.Context, tg *target) string {
			return listCMs(ctx, tg, ns, metav1.ListOptions{FieldSelector: "data.a=1"})
		}),
		call("configmap/list-paged", func(ctx context.Context, tg *target) string {
			l, err := tg.cs.CoreV1().ConfigMaps(ns).List(ctx, metav1.ListOptions{Limit: 1, LabelSelector: "app"})
			if err != nil {
				return showErr(err)
			}
			out := "page 1:\n" + names(l.Items, cmName, l.ListMeta)
			l, err = tg.cs.CoreV1().ConfigMaps(ns).List(ctx, metav1.ListOptions{Limit: 5, LabelSelector: "app", Continue: l.Continue})
			if err != nil {
				return out + showErr(err)
			}
			return out + "page 2:\n" + names(l.Items, cmName, l.ListMeta)
		}),
		call("configmap/list-bad-continue", func(ctx context.Context, tg *target) string {
			return listCMs(ctx, tg, ns, metav1.ListOptions{Limit: 1, Continue: "not-a-token"})
		}),
		call("configmap/update", func(ctx context.Context, tg *target) string {
			c, err := tg.cs.CoreV1().ConfigMaps(ns).Get(ctx, "alpha", metav1.GetOptions{})
			if err != nil {
				return showErr(err)
			}
			tg.saved["alpha-stale-rv"] = c.ResourceVersion
			c.Data["a"] = "2"
			return show(tg.cs.CoreV1().ConfigMaps(ns).Update(ctx, c, metav1.UpdateOptions{}))
		}),
		call("configmap/update-conflict", func(ctx context.Context, tg *target) string {
			c := configMap("alpha", map[string]string{"app": "web", "tier": "front"}, map[string]string{"a": "3"})
			c.ResourceVersion = tg.saved["alpha-stale-rv"]
			return show(tg.cs.CoreV1().ConfigMaps(ns).Update(ctx, c, metav1.UpdateOptions{}))
		}),
		call("configmap/update-unconditional", func(ctx context.Context, tg *target) string {
			c := configMap("alpha", map[string]string{"app": "web", "tier": "front"}, map[string]string{"a": "3"})
			return show(tg.cs.CoreV1().ConfigMaps(ns).Update(ctx, c, metav1.UpdateOptions{}))
		}),
		call("configmap/update-missing", func(ctx context.Context, tg *target) string {
			return show(tg.cs.CoreV1().ConfigMaps(ns).Update(ctx, configMap("missing", nil, nil), metav1.UpdateOptions{}))
		}),
		call("configmap/update-name-mismatch", func(ctx context.Context, tg *target) string {
			return tg.raw(ctx, "PUT", "/api/v1/namespaces/"+ns+"/configmaps/alpha", nil, "application/json",
				`{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"other"}}`)
		}),
		call("configmap/patch-merge", func(ctx context.Context, tg *target) string {
			return show(tg.cs.CoreV1().ConfigMaps(ns).Patch(ctx, "alpha", types.MergePatchType,
				[]byte(`{"data":{"b":"2"},"metadata":{"labels":{"tier":null,"patched":"merge"}}}`), metav1.PatchOptions{}))
		}),
		call("configmap/patch-json", func(ctx context.Context, tg *target) string {
			return show(tg.cs.CoreV1().ConfigMaps(ns).Patch(ctx, "alpha", types.JSONPatchType,
				[]byte(`[{"op":"add","path":"/data/c","value":"3"},{"op":"replace","path":"/data/a","value":"x"},{"op":"test","path":"/data/b","value":"2"}]`), metav1.PatchOptions{}))
		}),
		call("configmap/patch-json-test-fails", func(ctx context.Context, tg *target) string {
			return tg.raw(ctx, "PATCH", "/api/v1/namespaces/"+ns+"/configmaps/alpha", nil, string(types.JSONPatchType),
				`[{"op":"test","path":"/data/a","value":"nope"}]`)
		}),
		call("configmap/patch-json-missing-path", func(ctx context.Context, tg *target) string {
			return tg.raw(ctx, "PATCH", "/api/v1/namespaces/"+ns+"/configmaps/alpha", nil, string(types.JSONPatchType),
				`[{"op":"remove","path":"/data/zzz"}]`)
		}),
		call("configmap/patch-strategic", func(ctx context.Context, tg *target) string {
			return show(tg.cs.CoreV1().ConfigMaps(ns).Patch(ctx, "alpha", types.StrategicMergePatchType,
				[]byte(`{"data":{"d":"4","c":null}}`), metav1.PatchOptions{}))
		}),
		call("configmap/patch-merge-stale-resource-version", func(ctx context.Context, tg *target) string {
			return show(tg.cs.CoreV1().ConfigMaps(ns).Patch(ctx, "alpha", types.MergePatchType,
				fmt.Appendf(nil, `{"metadata":{"resourceVersion":%q},"data":{"e":"5"}}`, tg.saved["alpha-stale-rv"]), metav1.PatchOptions{}))
		}),
		call("configmap/patch-not-json", func(ctx context.Context, tg *target) string {
			return tg.raw(ctx, "PATCH", "/api/v1/namespaces/"+ns+"/configmaps/alpha", nil, string(types.MergePatchType), `{"data":`)
		}),
		call("configmap/patch-missing", func(ctx context.Context, tg *target) string {
			return show(tg.cs.CoreV1().ConfigMaps(ns).Patch(ctx, "missing", types.MergePatchType, []byte(`{"data":{"a":"1"}}`), metav1.PatchOptions{}))
		}),
	}
}

func listCMs(ctx context.Context, tg *target, namespace string, opts metav1.ListOptions) string {
	l, err := tg.cs.CoreV1().ConfigMaps(namespace).List(ctx, opts)
	if err != nil {
		return showErr(err)
	}
	return names(l.Items, func(c *corev1.ConfigMap) string { return c.Namespace + "/" + c.Name }, l.ListMeta)
}

func deployment(name string, containers ...corev1.Container) *appsv1.Deployment {
	labels := map[string]string{"app": name}
	return &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels},
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To[int32](1),
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec:       corev1.PodSpec{Containers: containers},
			},
		},
	}
}

func deploymentSteps() []step {
	return []step{
		call("deployment/create-defaults", func(ctx context.Context, tg *target) string {
			return show(tg.cs.AppsV1().Deployments(ns).Create(ctx, deployment("web", corev1.Container{
				Name: "app", Image: "nginx:1.27",
				Ports: []corev1.ContainerPort{{ContainerPort: 80}},
				Env:   []corev1.EnvVar{{Name: "A", Value: "1"}},
			}), metav1.CreateOptions{}))
		}),
		call("deployment/create-invalid", func(ctx context.Context, tg *target) string {
			d := deployment("broken", corev1.Container{Name: "app"})
			d.Spec.Selector.MatchLabels = map[string]string{"app": "other"}
			d.Spec.Replicas = ptr.To[int32](-1)
			return show(tg.cs.AppsV1().Deployments(ns).Create(ctx, d, metav1.CreateOptions{}))
		}),
		call("deployment/patch-strategic-add-container", func(ctx context.Context, tg *target) string {
			return show(tg.cs.AppsV1().Deployments(ns).Patch(ctx, "web", types.StrategicMergePatchType,
				[]byte(`{"spec":{"template":{"spec":{"containers":[{"name":"side","image":"busybox:1.36","args":["sleep","3600"]},{"name":"app","image":"nginx:1.28","env":[{"name":"B","value":"2"}]}]}}}}`), metav1.PatchOptions{}))
		}),
		call("deployment/patch-strategic-delete-directive", func(ctx context.Context, tg *target) string {
			return show(tg.cs.AppsV1().Deployments(ns).Patch(ctx, "web", types.StrategicMergePatchType,
				[]byte(`{"spec":{"template":{"spec":{"containers":[{"name":"side","$patch":"delete"},{"name":"app","env":[{"name":"A","$patch":"delete"}]}]}}}}`), metav1.PatchOptions{}))
		}),
		call("deployment/patch-merge-replaces-list", func(ctx context.Context, tg *target) string {
			return show(tg.cs.AppsV1().Deployments(ns).Patch(ctx, "web", types.MergePatchType,
				[]byte(`{"spec":{"template":{"spec":{"containers":[{"name":"only","image":"nginx:1.29"}]}}}}`), metav1.PatchOptions{}))
		}),
		call("deployment/get-scale", func(ctx context.Context, tg *target) string {
			return show(tg.cs.AppsV1().Deployments(ns).GetScale(ctx, "web", metav1.GetOptions{}))
		}),
		call("deployment/update-scale", func(ctx context.Context, tg *target) string {
			return show(tg.cs.AppsV1().Deployments(ns).UpdateScale(ctx, "web", scale("web", 3), metav1.UpdateOptions{}))
		}),
		call("deployment/update-status", func(ctx context.Context, tg *target) string {
			d, err := tg.cs.AppsV1().Deployments(ns).Get(ctx, "web", metav1.GetOptions{})
			if err != nil {
				return showErr(err)
			}
			d.Status.ObservedGeneration = d.Generation
			d.Status.Replicas = 3
			d.Spec.Replicas = ptr.To[int32](7) // ignored through /status
			return show(tg.cs.AppsV1().Deployments(ns).UpdateStatus(ctx, d, metav1.UpdateOptions{}))
		}),
	}
}

func dryRunSteps() []step {
	all := []string{metav1.DryRunAll}
	return []step{
		call("dry-run/create", func(ctx context.Context, tg *target) string {
			return show(tg.cs.CoreV1().ConfigMaps(ns).Create(ctx, configMap("dry", nil, map[string]string{"k": "v"}), metav1.CreateOptions{DryRun: all}))
		}),
		call("dry-run/create-generate-name", func(ctx context.Context, tg *target) string {
			c := configMap("", nil, nil)
			c.GenerateName = "drygen-"
			return show(tg.cs.CoreV1().ConfigMaps(ns).Create(ctx, c, metav1.CreateOptions{DryRun: all}))
		}),
		call("dry-run/get-after-create", func(ctx context.Context, tg *target) string {
			return show(tg.cs.CoreV1().ConfigMaps(ns).Get(ctx, "dry", metav1.GetOptions{}))
		}),
		call("dry-run/create-invalid", func(ctx context.Context, tg *target) string {
			return show(tg.cs.CoreV1().ConfigMaps(ns).Create(ctx, configMap("Dry_Bad", nil, nil), metav1.CreateOptions{DryRun: all}))
		}),
		call("dry-run/create-exists", func(ctx context.Context, tg *target) string {
			return show(tg.cs.CoreV1().ConfigMaps(ns).Create(ctx, configMap("alpha", nil, nil), metav1.CreateOptions{DryRun: all}))
		}),
		call("dry-run/update", func(ctx context.Context, tg *target) string {
			c, err := tg.cs.CoreV1().ConfigMaps(ns).Get(ctx, "alpha", metav1.GetOptions{})
			if err != nil {
				return showErr(err)
			}
			c.Data = map[string]string{"only": "dry"}
			u, err := tg.cs.CoreV1().ConfigMaps(ns).Update(ctx, c, metav1.UpdateOptions{DryRun: all})
			if err != nil {
				return showErr(err)
			}
			return toYAML(u) + fmt.Sprintf("resourceVersion unchanged: %v\n", u.ResourceVersion == c.ResourceVersion)
		}),
		call("dry-run/patch", func(ctx context.Context, tg *target) string {
			return show(tg.cs.CoreV1().ConfigMaps(ns).Patch(ctx, "alpha", types.MergePatchType, []byte(`{"data":{"dry":"patch"}}`), metav1.PatchOptions{DryRun: all}))
		}),
		call("dry-run/delete", func(ctx context.Context, tg *target) string {
			return tg.raw(ctx, "DELETE", "/api/v1/namespaces/"+ns+"/configmaps/alpha", []string{"dryRun", "All"}, "", "")
		}),
		call("dry-run/get-after-writes", func(ctx context.Context, tg *target) string {
			return show(tg.cs.CoreV1().ConfigMaps(ns).Get(ctx, "alpha", metav1.GetOptions{}))
		}),
		call("dry-run/bad-value", func(ctx context.Context, tg *target) string {
			return tg.raw(ctx, "POST", "/api/v1/namespaces/"+ns+"/configmaps", []string{"dryRun", "Bogus"}, "application/json",
				`{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"dry-bogus"}}`)
		}),
	}
}

func deleteSteps() []step {
	return []step{
		call("delete/precondition-uid", func(ctx context.Context, tg *target) string {
			err := tg.cs.CoreV1().ConfigMaps(ns).Delete(ctx, "beta", metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: ptr.To(types.UID("00000000-0000-0000-0000-000000000000"))}})
			return show("deleted", err)
		}),
		call("delete/precondition-resource-version", func(ctx context.Context, tg *target) string {
			err := tg.cs.CoreV1().ConfigMaps(ns).Delete(ctx, "beta", metav1.DeleteOptions{Preconditions: &metav1.Preconditions{ResourceVersion: ptr.To("1")}})
			return show("deleted", err)
		}),
		call("delete/precondition-ok", func(ctx context.Context, tg *target) string {
			c, err := tg.cs.CoreV1().ConfigMaps(ns).Get(ctx, "beta", metav1.GetOptions{})
			if err != nil {
				return showErr(err)
			}
			body := fmt.Sprintf(`{"kind":"DeleteOptions","apiVersion":"v1","preconditions":{"uid":%q,"resourceVersion":%q}}`, c.UID, c.ResourceVersion)
			return tg.raw(ctx, "DELETE", "/api/v1/namespaces/"+ns+"/configmaps/beta", nil, "application/json", body)
		}),
		call("delete/missing", func(ctx context.Context, tg *target) string {
			return show("deleted", tg.cs.CoreV1().ConfigMaps(ns).Delete(ctx, "beta", metav1.DeleteOptions{}))
		}),
		call("delete/bad-propagation-policy", func(ctx context.Context, tg *target) string {
			return tg.raw(ctx, "DELETE", "/api/v1/namespaces/"+ns+"/configmaps/alpha", []string{"propagationPolicy", "Sideways"}, "", "")
		}),
		call("delete/collection-by-label", func(ctx context.Context, tg *target) string {
			err := tg.cs.CoreV1().ConfigMaps(ns).DeleteCollection(ctx, metav1.DeleteOptions{}, metav1.ListOptions{LabelSelector: "app=batch"})
			if err != nil {
				return showErr(err)
			}
			return listCMs(ctx, tg, ns, metav1.ListOptions{LabelSelector: "app"})
		}),
	}
}

func fieldValidationSteps() []step {
	const unknown = `{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":%q,"bogus":1},"spec":{"x":1},"data":{"k":"v"}}`
	const duplicate = `{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":%q},"data":{"k":"v"},"data":{"k":"w"}}`
	const duplicateYAML = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: %s\ndata:\n  k: v\ndata:\n  k: w\n"
	post := func(name, validation, contentType, body string) func(context.Context, *target) string {
		return func(ctx context.Context, tg *target) string {
			var params []string
			if validation != "" {
				params = []string{"fieldValidation", validation}
			}
			return tg.raw(ctx, "POST", "/api/v1/namespaces/"+ns+"/configmaps", params, contentType, fmt.Sprintf(body, name))
		}
	}
	return []step{
		call("field-validation/strict-unknown", post("fv-strict", "Strict", "application/json", unknown)),
		call("field-validation/warn-unknown", post("fv-warn", "Warn", "application/json", unknown)),
		call("field-validation/ignore-unknown", post("fv-ignore", "Ignore", "application/json", unknown)),
		call("field-validation/default-unknown", post("fv-default", "", "application/json", unknown)),
		call("field-validation/strict-duplicate-json", post("fv-dup-strict", "Strict", "application/json", duplicate)),
		call("field-validation/warn-duplicate-json", post("fv-dup-warn", "Warn", "application/json", duplicate)),
		call("field-validation/strict-duplicate-yaml", post("fv-dup-yaml", "Strict", "application/yaml", duplicateYAML)),
		call("field-validation/warn-duplicate-yaml", post("fv-dup-yaml-warn", "Warn", "application/yaml", duplicateYAML)),
		call("field-validation/bad-value", post("fv-bogus", "Bogus", "application/json", unknown)),
		call("field-validation/strict-unknown-update", func(ctx context.Context, tg *target) string {
			return tg.raw(ctx, "PUT", "/api/v1/namespaces/"+ns+"/configmaps/fv-warn", []string{"fieldValidation", "Strict"}, "application/json",
				`{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"fv-warn"},"data":{"k":"v2"},"extra":true}`)
		}),
		call("field-validation/strict-unknown-merge-patch", func(ctx context.Context, tg *target) string {
			return tg.raw(ctx, "PATCH", "/api/v1/namespaces/"+ns+"/configmaps/fv-warn", []string{"fieldValidation", "Strict"}, string(types.MergePatchType),
				`{"data":{"k":"v3"},"extra":true}`)
		}),
		call("field-validation/warn-unknown-strategic-patch", func(ctx context.Context, tg *target) string {
			return tg.raw(ctx, "PATCH", "/api/v1/namespaces/"+ns+"/configmaps/fv-warn", []string{"fieldValidation", "Warn"}, string(types.StrategicMergePatchType),
				`{"data":{"k":"v4"},"metadata":{"labelz":{"a":"b"}}}`)
		}),
		call("field-validation/strict-unknown-typed-client", func(ctx context.Context, tg *target) string {
			// A typed client cannot send unknown fields; Strict on a clean
			// object must just work.
			return show(tg.cs.CoreV1().ConfigMaps(ns).Create(ctx, configMap("fv-typed", nil, map[string]string{"k": "v"}), metav1.CreateOptions{FieldValidation: "Strict"}))
		}),
	}
}
