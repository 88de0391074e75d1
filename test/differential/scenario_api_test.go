package differential

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	autoscalingv1 "k8s.io/api/autoscaling/v1"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	appsv1ac "k8s.io/client-go/applyconfigurations/apps/v1"
	corev1ac "k8s.io/client-go/applyconfigurations/core/v1"
	metav1ac "k8s.io/client-go/applyconfigurations/meta/v1"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/tools/cache"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/yaml"

	"github.com/canopy-dev/canopy/test/poll"
)

// managedFields renders who owns what, without times.
func managedFields(entries []metav1.ManagedFieldsEntry) string {
	var b strings.Builder
	for _, e := range sortManagedFieldsEntries(entries) {
		fields := "-"
		if e.FieldsV1 != nil {
			fields = string(e.FieldsV1.Raw)
		}
		fmt.Fprintf(&b, "- manager=%s operation=%s apiVersion=%s subresource=%q fields=%s\n", e.Manager, e.Operation, e.APIVersion, e.Subresource, fields)
	}
	return b.String()
}

func applySteps() []step {
	cm := func(tg *target) func(context.Context, *corev1ac.ConfigMapApplyConfiguration, metav1.ApplyOptions) (*corev1.ConfigMap, error) {
		return tg.cs.CoreV1().ConfigMaps(ns).Apply
	}
	apply := func(name, manager string, force bool, data map[string]string) func(context.Context, *target) string {
		return func(ctx context.Context, tg *target) string {
			return show(cm(tg)(ctx, corev1ac.ConfigMap(name, ns).WithData(data), metav1.ApplyOptions{FieldManager: manager, Force: force}))
		}
	}
	applyRaw := func(path string, params []string, body string) func(context.Context, *target) string {
		return func(ctx context.Context, tg *target) string {
			return tg.raw(ctx, "PATCH", path, params, string(types.ApplyYAMLPatchType), body)
		}
	}
	return []step{
		call("apply/create", apply("ssa", "alice", false, map[string]string{"a": "1", "b": "1"})),
		call("apply/same-again-writes-nothing", func(ctx context.Context, tg *target) string {
			before, err := tg.cs.CoreV1().ConfigMaps(ns).Get(ctx, "ssa", metav1.GetOptions{})
			if err != nil {
				return showErr(err)
			}
			after, err := cm(tg)(ctx, corev1ac.ConfigMap("ssa", ns).WithData(map[string]string{"a": "1", "b": "1"}), metav1.ApplyOptions{FieldManager: "alice"})
			if err != nil {
				return showErr(err)
			}
			return fmt.Sprintf("resourceVersion unchanged: %v\n", before.ResourceVersion == after.ResourceVersion)
		}),
		call("apply/second-manager-shares", apply("ssa", "bob", false, map[string]string{"b": "1"})),
		call("apply/conflict", apply("ssa", "bob", false, map[string]string{"a": "2", "b": "1"})),
		call("apply/force", apply("ssa", "bob", true, map[string]string{"a": "2", "b": "1"})),
		call("apply/release-field", apply("ssa", "alice", false, map[string]string{"c": "3"})),
		call("apply/update-records-manager", func(ctx context.Context, tg *target) string {
			c, err := tg.cs.CoreV1().ConfigMaps(ns).Get(ctx, "ssa", metav1.GetOptions{})
			if err != nil {
				return showErr(err)
			}
			c.Data["u"] = "update"
			c, err = tg.cs.CoreV1().ConfigMaps(ns).Update(ctx, c, metav1.UpdateOptions{FieldManager: "updater"})
			if err != nil {
				return showErr(err)
			}
			return toYAML(c.Data) + managedFields(c.ManagedFields)
		}),
		call("apply/dry-run", func(ctx context.Context, tg *target) string {
			c, err := cm(tg)(ctx, corev1ac.ConfigMap("ssa", ns).WithData(map[string]string{"z": "dry"}), metav1.ApplyOptions{FieldManager: "carol", DryRun: []string{metav1.DryRunAll}})
			if err != nil {
				return showErr(err)
			}
			got, err := tg.cs.CoreV1().ConfigMaps(ns).Get(ctx, "ssa", metav1.GetOptions{})
			if err != nil {
				return showErr(err)
			}
			return "returned:\n" + toYAML(c.Data) + managedFields(c.ManagedFields) + "stored:\n" + toYAML(got.Data)
		}),
		call("apply/no-field-manager", applyRaw("/api/v1/namespaces/"+ns+"/configmaps/ssa", nil,
			"apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: ssa\ndata:\n  a: \"9\"\n")),
		call("apply/unknown-field", applyRaw("/api/v1/namespaces/"+ns+"/configmaps/ssa", []string{"fieldManager", "alice"},
			"apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: ssa\nspec:\n  foo: 1\n")),
		call("apply/name-mismatch", applyRaw("/api/v1/namespaces/"+ns+"/configmaps/ssa", []string{"fieldManager", "alice"},
			"apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: other\ndata:\n  a: \"1\"\n")),
		call("apply/status-of-missing-object", applyRaw("/apis/apps/v1/namespaces/"+ns+"/deployments/nope/status", []string{"fieldManager", "alice"},
			"apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: nope\nstatus:\n  replicas: 1\n")),
		call("apply/deployment-first-manager", func(ctx context.Context, tg *target) string {
			return show(tg.cs.AppsV1().Deployments(ns).Apply(ctx, aliceDeployment(), metav1.ApplyOptions{FieldManager: "alice"}))
		}),
		call("apply/deployment-second-manager-adds-container", func(ctx context.Context, tg *target) string {
			d := appsv1ac.Deployment("ssa-deploy", ns).WithSpec(appsv1ac.DeploymentSpec().
				WithTemplate(corev1ac.PodTemplateSpec().WithSpec(corev1ac.PodSpec().
					WithContainers(corev1ac.Container().WithName("side").WithImage("busybox:1.36")))))
			got, err := tg.cs.AppsV1().Deployments(ns).Apply(ctx, d, metav1.ApplyOptions{FieldManager: "bob"})
			if err != nil {
				return showErr(err)
			}
			var names []string
			for _, c := range got.Spec.Template.Spec.Containers {
				names = append(names, c.Name+"="+c.Image)
			}
			return fmt.Sprintf("containers: %v\n", names) + managedFields(got.ManagedFields)
		}),
		call("apply/deployment-scale-conflict", func(ctx context.Context, tg *target) string {
			// "hpa" scales through /scale, then alice applies another
			// replica count.
			sc, err := tg.cs.AppsV1().Deployments(ns).UpdateScale(ctx, "ssa-deploy", scale("ssa-deploy", 2), metav1.UpdateOptions{FieldManager: "hpa"})
			if err != nil {
				return showErr(err)
			}
			d, err := tg.cs.AppsV1().Deployments(ns).Get(ctx, "ssa-deploy", metav1.GetOptions{})
			if err != nil {
				return showErr(err)
			}
			out := fmt.Sprintf("after the scale: scale replicas %d, deployment replicas %d\n", sc.Spec.Replicas, *d.Spec.Replicas) + managedFields(d.ManagedFields)
			a := aliceDeployment()
			a.Spec.WithReplicas(5)
			return out + "alice applies replicas 5:\n" + show(tg.cs.AppsV1().Deployments(ns).Apply(ctx, a, metav1.ApplyOptions{FieldManager: "alice"}))
		}),
	}
}

// aliceDeployment is alice's whole configuration of Deployment ssa-deploy.
func aliceDeployment() *appsv1ac.DeploymentApplyConfiguration {
	labels := map[string]string{"app": "ssa-deploy"}
	return appsv1ac.Deployment("ssa-deploy", ns).WithSpec(appsv1ac.DeploymentSpec().
		WithSelector(metav1ac.LabelSelector().WithMatchLabels(labels)).
		WithTemplate(corev1ac.PodTemplateSpec().WithLabels(labels).WithSpec(corev1ac.PodSpec().
			WithContainers(corev1ac.Container().WithName("app").WithImage("nginx:1.27")))))
}

func watchSteps() []step {
	cmGVR := schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}
	return []step{
		call("watch/from-resource-version", func(ctx context.Context, tg *target) string {
			cms := tg.cs.CoreV1().ConfigMaps(nsB)
			l, err := cms.List(ctx, metav1.ListOptions{})
			if err != nil {
				return showErr(err)
			}
			tg.saved["watch-rv"] = l.ResourceVersion
			out := "before: " + names(l.Items, cmName, metav1.ListMeta{})
			if _, err := cms.Create(ctx, configMap("w1", map[string]string{"w": "yes"}, map[string]string{"v": "1"}), metav1.CreateOptions{}); err != nil {
				return out + showErr(err)
			}
			if _, err := cms.Patch(ctx, "w1", types.MergePatchType, []byte(`{"data":{"v":"2"}}`), metav1.PatchOptions{}); err != nil {
				return out + showErr(err)
			}
			if err := cms.Delete(ctx, "w1", metav1.DeleteOptions{}); err != nil {
				return out + showErr(err)
			}
			if _, err := cms.Create(ctx, configMap("w2", nil, map[string]string{"v": "1"}), metav1.CreateOptions{}); err != nil {
				return out + showErr(err)
			}
			w, err := cms.Watch(ctx, metav1.ListOptions{ResourceVersion: l.ResourceVersion})
			if err != nil {
				return out + showErr(err)
			}
			defer w.Stop()
			return out + events(w, 4, nil)
		}),
		call("watch/label-selector", func(ctx context.Context, tg *target) string {
			cms := tg.cs.CoreV1().ConfigMaps(nsB)
			w, err := cms.Watch(ctx, metav1.ListOptions{ResourceVersion: tg.saved["watch-rv"], LabelSelector: "w=yes"})
			if err != nil {
				return showErr(err)
			}
			defer w.Stop()
			return events(w, 3, nil)
		}),
		call("watch/dynamic-field-selector", func(ctx context.Context, tg *target) string {
			w, err := tg.dyn.Resource(cmGVR).Namespace(nsB).Watch(ctx, metav1.ListOptions{ResourceVersion: tg.saved["watch-rv"], FieldSelector: "metadata.name=w2"})
			if err != nil {
				return showErr(err)
			}
			defer w.Stop()
			return events(w, 1, nil)
		}),
		call("watch/initial-events", func(ctx context.Context, tg *target) string {
			cms := tg.cs.CoreV1().ConfigMaps(nsB)
			w, err := cms.Watch(ctx, metav1.ListOptions{
				SendInitialEvents:    ptr.To(true),
				ResourceVersionMatch: metav1.ResourceVersionMatchNotOlderThan,
				AllowWatchBookmarks:  true,
			})
			if err != nil {
				return showErr(err)
			}
			defer w.Stop()
			out := events(w, 0, func(ev watch.Event) bool {
				m, err := meta.Accessor(ev.Object)
				return ev.Type == watch.Bookmark && err == nil && m.GetAnnotations()[metav1.InitialEventsAnnotationKey] == "true"
			})
			if _, err := cms.Create(ctx, configMap("w3", nil, nil), metav1.CreateOptions{}); err != nil {
				return out + showErr(err)
			}
			return out + "after the bookmark:\n" + events(w, 1, nil)
		}),
		call("watch/initial-events-without-bookmarks", func(ctx context.Context, tg *target) string {
			w, err := tg.cs.CoreV1().ConfigMaps(nsB).Watch(ctx, metav1.ListOptions{SendInitialEvents: ptr.To(true), ResourceVersionMatch: metav1.ResourceVersionMatchNotOlderThan})
			if err != nil {
				return showErr(err)
			}
			defer w.Stop()
			return "watching:\n" + eventsWithin(w, 3, nil, 2*time.Second)
		}),
		call("watch/initial-events-exact", func(ctx context.Context, tg *target) string {
			_, err := tg.cs.CoreV1().ConfigMaps(nsB).Watch(ctx, metav1.ListOptions{SendInitialEvents: ptr.To(true), AllowWatchBookmarks: true, ResourceVersion: tg.saved["watch-rv"], ResourceVersionMatch: metav1.ResourceVersionMatchExact})
			return show("watching", err)
		}),
		call("watch/bad-resource-version", func(ctx context.Context, tg *target) string {
			_, err := tg.cs.CoreV1().ConfigMaps(nsB).Watch(ctx, metav1.ListOptions{ResourceVersion: "abc"})
			return show("watching", err)
		}),
		call("watch/informer-watch-list", func(ctx context.Context, tg *target) string {
			// An informer with the WatchListClient feature on (set by the
			// test) fills its cache from one watch with sendInitialEvents.
			tg.reqs.start()
			f := informers.NewSharedInformerFactoryWithOptions(tg.cs, 0, informers.WithNamespace(nsB))
			inf := f.Core().V1().ConfigMaps().Informer()
			ictx, cancel := context.WithCancel(ctx)
			f.Start(ictx.Done())
			synced := cache.WaitForCacheSync(ictx.Done(), inf.HasSynced)
			reqs := tg.reqs.stop()
			cancel()
			f.Shutdown()
			out := fmt.Sprintf("synced: %v\nrequests:\n", synced)
			for _, r := range reqs {
				out += "  " + r + "\n"
			}
			return out + fmt.Sprintf("cache: %v\n", slices.Sorted(slices.Values(inf.GetStore().ListKeys())))
		}),
	}
}

func scale(name string, replicas int32) *autoscalingv1.Scale {
	return &autoscalingv1.Scale{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns}, Spec: autoscalingv1.ScaleSpec{Replicas: replicas}}
}

// events reads n events from w (or, with until, up to and including the
// first event until accepts) and renders them; it gives up after 10s.
func events(w watch.Interface, n int, until func(watch.Event) bool) string {
	return eventsWithin(w, n, until, 10*time.Second)
}

// eventsWithin is events giving up after d.
func eventsWithin(w watch.Interface, n int, until func(watch.Event) bool, d time.Duration) string {
	var b strings.Builder
	timeout := time.After(d)
	for i := 0; until != nil || i < n; i++ {
		select {
		case ev, ok := <-w.ResultChan():
			if !ok {
				b.WriteString("(watch closed)\n")
				return b.String()
			}
			b.WriteString(event(ev))
			if until != nil && until(ev) {
				return b.String()
			}
		case <-timeout:
			fmt.Fprintf(&b, "(no more events within %v)\n", d)
			return b.String()
		}
	}
	return b.String()
}

// event renders one watch event: its type, the object's name, data or
// spec, and annotations (bookmarks carry the initial-events-end one).
func event(ev watch.Event) string {
	if ev.Type == watch.Error {
		return "ERROR " + toYAML(ev.Object)
	}
	m, err := meta.Accessor(ev.Object)
	if err != nil {
		return fmt.Sprintf("%s %T\n", ev.Type, ev.Object)
	}
	s := fmt.Sprintf("%s name=%q rv=%s", ev.Type, m.GetName(), rvSet(m.GetResourceVersion()))
	switch o := ev.Object.(type) {
	case *corev1.ConfigMap:
		if o.Data != nil {
			s += fmt.Sprintf(" data=%v", o.Data)
		}
	case *unstructured.Unstructured:
		if d, ok := o.Object["data"]; ok {
			s += fmt.Sprintf(" data=%v", d)
		}
	}
	if a := m.GetAnnotations(); len(a) > 0 {
		s += fmt.Sprintf(" annotations=%v", a)
	}
	return s + "\n"
}

func rvSet(rv string) string {
	if rv == "" {
		return "<none>"
	}
	return "<set>"
}

const crdYAML = `
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: widgets.diff.example.com
spec:
  group: diff.example.com
  scope: Namespaced
  names:
    plural: widgets
    singular: widget
    kind: Widget
    listKind: WidgetList
    shortNames: [wd]
  versions:
  - name: v1
    served: true
    storage: true
    subresources:
      status: {}
    additionalPrinterColumns:
    - name: Size
      type: integer
      jsonPath: .spec.size
    - name: Color
      type: string
      jsonPath: .spec.color
    - name: Age
      type: date
      jsonPath: .metadata.creationTimestamp
    schema:
      openAPIV3Schema:
        type: object
        description: A Widget is what the differential test stores.
        properties:
          spec:
            type: object
            description: What the widget should be.
            properties:
              size:
                type: integer
                minimum: 1
                description: How big the widget is.
              color:
                type: string
                enum: [red, green, blue]
                default: green
                description: Its color.
              parts:
                type: array
                description: Its parts, keyed by name.
                x-kubernetes-list-type: map
                x-kubernetes-list-map-keys: [name]
                items:
                  type: object
                  required: [name]
                  properties:
                    name:
                      type: string
                    count:
                      type: integer
          status:
            type: object
            properties:
              ready:
                type: boolean
`

var widgetGVR = schema.GroupVersionResource{Group: "diff.example.com", Version: "v1", Resource: "widgets"}

func widget(name string, spec map[string]any) *unstructured.Unstructured {
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "diff.example.com/v1",
		"kind":       "Widget",
		"metadata":   map[string]any{"name": name, "labels": map[string]any{"app": "widget"}},
		"spec":       spec,
	}}
}

func crdSteps() []step {
	widgets := func(tg *target) dynamic.ResourceInterface { return tg.dyn.Resource(widgetGVR).Namespace(ns) }
	return []step{
		call("crd/create", func(ctx context.Context, tg *target) string {
			var crd apiextensionsv1.CustomResourceDefinition
			if err := yaml.UnmarshalStrict([]byte(crdYAML), &crd); err != nil {
				return "bad CRD in the scenario: " + err.Error()
			}
			return show(tg.ext.ApiextensionsV1().CustomResourceDefinitions().Create(ctx, &crd, metav1.CreateOptions{}))
		}),
		call("crd/established", func(ctx context.Context, tg *target) string {
			var crd *apiextensionsv1.CustomResourceDefinition
			err := poll.Wait(ctx, func() error {
				var err error
				crd, err = tg.ext.ApiextensionsV1().CustomResourceDefinitions().Get(ctx, "widgets.diff.example.com", metav1.GetOptions{})
				if err != nil {
					return err
				}
				for _, c := range crd.Status.Conditions {
					if c.Type == apiextensionsv1.Established && c.Status == apiextensionsv1.ConditionTrue {
						return nil
					}
				}
				return fmt.Errorf("not established: %v", crd.Status.Conditions)
			}, poll.For(20*time.Second))
			if err != nil {
				return "error: " + err.Error() + "\n"
			}
			// The resource must also be served (discovery and handler).
			err = poll.Wait(ctx, func() error {
				_, err := tg.dyn.Resource(widgetGVR).Namespace(ns).List(ctx, metav1.ListOptions{})
				return err
			}, poll.For(20*time.Second))
			if err != nil {
				return "error: " + err.Error() + "\n"
			}
			return toYAML(crd.Status)
		}),
		kubectl("kubectl/wait-crd-established", "wait", "--for=condition=Established", "crd/widgets.diff.example.com", "--timeout=20s"),
		call("crd/create-exists", func(ctx context.Context, tg *target) string {
			var crd apiextensionsv1.CustomResourceDefinition
			if err := yaml.Unmarshal([]byte(crdYAML), &crd); err != nil {
				return err.Error()
			}
			return show(tg.ext.ApiextensionsV1().CustomResourceDefinitions().Create(ctx, &crd, metav1.CreateOptions{}))
		}),
		call("crd/create-invalid", func(ctx context.Context, tg *target) string {
			crd := &apiextensionsv1.CustomResourceDefinition{
				ObjectMeta: metav1.ObjectMeta{Name: "gadgets.wrong.example.com"},
				Spec: apiextensionsv1.CustomResourceDefinitionSpec{
					Group: "diff.example.com", Scope: "Sideways",
					Names:    apiextensionsv1.CustomResourceDefinitionNames{Plural: "gadgets", Kind: "Gadget"},
					Versions: []apiextensionsv1.CustomResourceDefinitionVersion{{Name: "v1", Served: true, Storage: false}},
				},
			}
			return show(tg.ext.ApiextensionsV1().CustomResourceDefinitions().Create(ctx, crd, metav1.CreateOptions{}))
		}),
		call("cr/create", func(ctx context.Context, tg *target) string {
			w := widget("w1", map[string]any{"size": int64(3), "color": "red", "parts": []any{map[string]any{"name": "a", "count": int64(1)}}})
			w.Object["status"] = map[string]any{"ready": true} // dropped: status is a subresource
			return show(widgets(tg).Create(ctx, w, metav1.CreateOptions{}))
		}),
		call("cr/create-defaulted", func(ctx context.Context, tg *target) string {
			return show(widgets(tg).Create(ctx, widget("w2", map[string]any{"size": int64(1)}), metav1.CreateOptions{}))
		}),
		call("cr/create-generate-name", func(ctx context.Context, tg *target) string {
			// Removed at once, by label, so that later lists do not depend on it.
			w := widget("", map[string]any{"size": int64(2)})
			w.SetGenerateName("wgen-")
			w.SetLabels(map[string]string{"generated": "yes"})
			out := show(widgets(tg).Create(ctx, w, metav1.CreateOptions{}))
			err := widgets(tg).DeleteCollection(ctx, metav1.DeleteOptions{}, metav1.ListOptions{LabelSelector: "generated=yes"})
			return out + "delete collection: " + show("done", err)
		}),
		call("cr/create-invalid", func(ctx context.Context, tg *target) string {
			return show(widgets(tg).Create(ctx, widget("w-bad", map[string]any{"size": "three", "color": "purple"}), metav1.CreateOptions{}))
		}),
		call("cr/create-below-minimum", func(ctx context.Context, tg *target) string {
			return show(widgets(tg).Create(ctx, widget("w-small", map[string]any{"size": int64(0), "parts": []any{map[string]any{"count": int64(1)}}}), metav1.CreateOptions{}))
		}),
		call("cr/create-duplicate-map-key", func(ctx context.Context, tg *target) string {
			return show(widgets(tg).Create(ctx, widget("w-dup", map[string]any{"parts": []any{map[string]any{"name": "a"}, map[string]any{"name": "a"}}}), metav1.CreateOptions{}))
		}),
		call("cr/create-unknown-field-strict", func(ctx context.Context, tg *target) string {
			return show(widgets(tg).Create(ctx, widget("w-strict", map[string]any{"size": int64(1), "extra": "x"}), metav1.CreateOptions{FieldValidation: "Strict"}))
		}),
		call("cr/create-unknown-field-warn", func(ctx context.Context, tg *target) string {
			return show(widgets(tg).Create(ctx, widget("w-warn", map[string]any{"size": int64(1), "extra": "x"}), metav1.CreateOptions{FieldValidation: "Warn"}))
		}),
		call("cr/create-unknown-field-ignore", func(ctx context.Context, tg *target) string {
			return show(widgets(tg).Create(ctx, widget("w-ignore", map[string]any{"size": int64(1), "extra": "x"}), metav1.CreateOptions{FieldValidation: "Ignore"}))
		}),
		call("cr/get", func(ctx context.Context, tg *target) string {
			return show(tg.dyn.Resource(widgetGVR).Namespace(ns).Get(ctx, "w1", metav1.GetOptions{}))
		}),
		call("cr/list-label-and-field", func(ctx context.Context, tg *target) string {
			l, err := tg.dyn.Resource(widgetGVR).Namespace(ns).List(ctx, metav1.ListOptions{LabelSelector: "app=widget", FieldSelector: "metadata.name!=w2"})
			if err != nil {
				return showErr(err)
			}
			return fmt.Sprintf("apiVersion=%s kind=%s\n", l.GetAPIVersion(), l.GetKind()) +
				names(l.Items, func(u *unstructured.Unstructured) string { return u.GetName() }, metav1.ListMeta{Continue: l.GetContinue()})
		}),
		call("cr/list-unsupported-field-selector", func(ctx context.Context, tg *target) string {
			_, err := tg.dyn.Resource(widgetGVR).Namespace(ns).List(ctx, metav1.ListOptions{FieldSelector: "spec.size=3"})
			return show("listed", err)
		}),
		call("cr/update", func(ctx context.Context, tg *target) string {
			w, err := tg.dyn.Resource(widgetGVR).Namespace(ns).Get(ctx, "w1", metav1.GetOptions{})
			if err != nil {
				return showErr(err)
			}
			tg.saved["w1-stale-rv"] = w.GetResourceVersion()
			_ = unstructured.SetNestedField(w.Object, int64(5), "spec", "size")
			_ = unstructured.SetNestedField(w.Object, true, "status", "ready") // ignored
			return show(tg.dyn.Resource(widgetGVR).Namespace(ns).Update(ctx, w, metav1.UpdateOptions{}))
		}),
		call("cr/update-conflict", func(ctx context.Context, tg *target) string {
			w := widget("w1", map[string]any{"size": int64(6)})
			w.SetResourceVersion(tg.saved["w1-stale-rv"])
			return show(tg.dyn.Resource(widgetGVR).Namespace(ns).Update(ctx, w, metav1.UpdateOptions{}))
		}),
		call("cr/update-status", func(ctx context.Context, tg *target) string {
			w, err := tg.dyn.Resource(widgetGVR).Namespace(ns).Get(ctx, "w1", metav1.GetOptions{})
			if err != nil {
				return showErr(err)
			}
			_ = unstructured.SetNestedField(w.Object, true, "status", "ready")
			_ = unstructured.SetNestedField(w.Object, int64(99), "spec", "size") // ignored
			return show(tg.dyn.Resource(widgetGVR).Namespace(ns).UpdateStatus(ctx, w, metav1.UpdateOptions{}))
		}),
		call("cr/patch-merge", func(ctx context.Context, tg *target) string {
			return show(tg.dyn.Resource(widgetGVR).Namespace(ns).Patch(ctx, "w1", types.MergePatchType, []byte(`{"spec":{"color":"blue"}}`), metav1.PatchOptions{}))
		}),
		call("cr/patch-json", func(ctx context.Context, tg *target) string {
			return show(tg.dyn.Resource(widgetGVR).Namespace(ns).Patch(ctx, "w1", types.JSONPatchType, []byte(`[{"op":"replace","path":"/spec/size","value":8}]`), metav1.PatchOptions{}))
		}),
		call("cr/patch-json-invalid-result", func(ctx context.Context, tg *target) string {
			return show(tg.dyn.Resource(widgetGVR).Namespace(ns).Patch(ctx, "w1", types.JSONPatchType, []byte(`[{"op":"replace","path":"/spec/color","value":"pink"}]`), metav1.PatchOptions{}))
		}),
		call("cr/patch-strategic-unsupported", func(ctx context.Context, tg *target) string {
			return show(tg.dyn.Resource(widgetGVR).Namespace(ns).Patch(ctx, "w1", types.StrategicMergePatchType, []byte(`{"spec":{"size":9}}`), metav1.PatchOptions{}))
		}),
		call("cr/patch-status-merge", func(ctx context.Context, tg *target) string {
			return show(tg.dyn.Resource(widgetGVR).Namespace(ns).Patch(ctx, "w1", types.MergePatchType, []byte(`{"status":{"ready":false}}`), metav1.PatchOptions{}, "status"))
		}),
		call("cr/apply-first-manager", func(ctx context.Context, tg *target) string {
			w := widget("w4", map[string]any{"size": int64(4), "parts": []any{map[string]any{"name": "a", "count": int64(1)}, map[string]any{"name": "b", "count": int64(2)}}})
			return show(tg.dyn.Resource(widgetGVR).Namespace(ns).Apply(ctx, "w4", w, metav1.ApplyOptions{FieldManager: "alice"}))
		}),
		call("cr/apply-second-manager-adds-item", func(ctx context.Context, tg *target) string {
			w := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "diff.example.com/v1", "kind": "Widget", "metadata": map[string]any{"name": "w4"},
				"spec": map[string]any{"parts": []any{map[string]any{"name": "c", "count": int64(3)}}}}}
			got, err := tg.dyn.Resource(widgetGVR).Namespace(ns).Apply(ctx, "w4", w, metav1.ApplyOptions{FieldManager: "bob"})
			if err != nil {
				return showErr(err)
			}
			parts, _, _ := unstructured.NestedSlice(got.Object, "spec", "parts")
			return toYAML(parts) + managedFields(got.GetManagedFields())
		}),
		call("cr/apply-conflict", func(ctx context.Context, tg *target) string {
			w := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "diff.example.com/v1", "kind": "Widget", "metadata": map[string]any{"name": "w4"},
				"spec": map[string]any{"size": int64(10), "parts": []any{map[string]any{"name": "a", "count": int64(9)}, map[string]any{"name": "c", "count": int64(3)}}}}}
			return show(tg.dyn.Resource(widgetGVR).Namespace(ns).Apply(ctx, "w4", w, metav1.ApplyOptions{FieldManager: "bob"}))
		}),
		call("cr/apply-status", func(ctx context.Context, tg *target) string {
			w := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "diff.example.com/v1", "kind": "Widget", "metadata": map[string]any{"name": "w4"},
				"status": map[string]any{"ready": true}}}
			got, err := tg.dyn.Resource(widgetGVR).Namespace(ns).ApplyStatus(ctx, "w4", w, metav1.ApplyOptions{FieldManager: "status-writer"})
			if err != nil {
				return showErr(err)
			}
			st, _, _ := unstructured.NestedMap(got.Object, "status")
			return toYAML(st) + managedFields(got.GetManagedFields())
		}),
		call("cr/delete", func(ctx context.Context, tg *target) string {
			return tg.raw(ctx, "DELETE", "/apis/diff.example.com/v1/namespaces/"+ns+"/widgets/w2", nil, "", "")
		}),
		call("cr/get-deleted", func(ctx context.Context, tg *target) string {
			return show(tg.dyn.Resource(widgetGVR).Namespace(ns).Get(ctx, "w2", metav1.GetOptions{}))
		}),
		call("cr/list-all-namespaces", func(ctx context.Context, tg *target) string {
			l, err := tg.dyn.Resource(widgetGVR).List(ctx, metav1.ListOptions{})
			if err != nil {
				return showErr(err)
			}
			return names(l.Items, func(u *unstructured.Unstructured) string { return u.GetNamespace() + "/" + u.GetName() }, metav1.ListMeta{})
		}),
		call("cr/list-json-item-typemeta", func(ctx context.Context, tg *target) string {
			return itemTypeMeta(ctx, tg, "/apis/diff.example.com/v1/namespaces/"+ns+"/widgets")
		}),
		call("crd/get", func(ctx context.Context, tg *target) string {
			return show(tg.ext.ApiextensionsV1().CustomResourceDefinitions().Get(ctx, "widgets.diff.example.com", metav1.GetOptions{}))
		}),
	}
}
