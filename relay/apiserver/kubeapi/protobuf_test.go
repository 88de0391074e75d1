package kubeapi

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/runtime/serializer/protobuf"
	"k8s.io/apimachinery/pkg/runtime/serializer/streaming"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/dynamic"
	clientfeatures "k8s.io/client-go/features"
	clientfeaturestesting "k8s.io/client-go/features/testing"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
	"k8s.io/utils/ptr"

	"github.com/canopy-dev/canopy/relay/store"
	"github.com/canopy-dev/canopy/test/poll"
)

func TestNegotiate(t *testing.T) {
	const pb = "application/vnd.kubernetes.protobuf"
	cases := []struct {
		accept    string
		protoOK   bool
		wantForm  outputForm
		wantProto bool
	}{
		{"", true, formObject, false},
		{"application/json", true, formObject, false},
		{pb + ",application/json", true, formObject, true},
		{pb + ",application/json", false, formObject, false},
		{pb, true, formObject, true},
		{pb + ";stream=watch", true, formObject, true},
		{"application/json," + pb, true, formObject, false},
		{"*/*", true, formObject, false},
		{"*/*," + pb, true, formObject, false},
		{"application/yaml," + pb, true, formObject, true},
		// Table and PartialObjectMetadata are JSON: protobuf entries that
		// ask for them are passed over.
		{pb + ";as=Table;v=v1;g=meta.k8s.io,application/json;as=Table;v=v1;g=meta.k8s.io,application/json", true, formTable, false},
		{pb + ";as=PartialObjectMetadataList;g=meta.k8s.io;v=v1,application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1,application/json", true, formPartial, false},
		{pb + ";as=Table;v=v1;g=meta.k8s.io," + pb + ",application/json", true, formObject, true},
		{"application/json;as=Table;v=v1;g=meta.k8s.io," + pb, true, formTable, false},
		{"application/json;as=Table;v=v9;g=meta.k8s.io," + pb, true, formObject, true},
	}
	for _, c := range cases {
		f, p := negotiate(c.accept, c.protoOK)
		if f != c.wantForm || p != c.wantProto {
			t.Errorf("Accept %q (protobuf kind %v): form %d protobuf %v, want %d %v", c.accept, c.protoOK, f, p, c.wantForm, c.wantProto)
		}
	}
}

func TestProtobufKind(t *testing.T) {
	b := builtinCatalog()
	for gr, want := range map[schema.GroupResource]bool{
		{Resource: "configmaps"}:                                               true,
		{Group: "apps", Resource: "deployments"}:                               true,
		{Group: "events.k8s.io", Resource: "events"}:                           true,
		{Group: "apiextensions.k8s.io", Resource: "customresourcedefinitions"}: false,
		{Group: "apiregistration.k8s.io", Resource: "apiservices"}:             false,
	} {
		if got := protobufKind(b.byGR[gr]); got != want {
			t.Errorf("%s: protobuf %v, want %v", gr, got, want)
		}
	}
}

// kubeCodec is kube's own protobuf serializer, to check the bytes written
// here against.
var kubeCodec = protobuf.NewSerializer(protobufScheme, protobufScheme)

// The wire forms are byte for byte what kube's serializers write.
func TestProtobufWireForms(t *testing.T) {
	cm := func(name string) *corev1.ConfigMap {
		return &corev1.ConfigMap{
			TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "ConfigMap"},
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default", ResourceVersion: "7", Labels: map[string]string{"a": "b"}},
			Data:       map[string]string{"k": strings.Repeat("v", 300)},
		}
	}
	var want bytes.Buffer
	if err := kubeCodec.Encode(cm("one"), &want); err != nil {
		t.Fatal(err)
	}
	enc, err := encodeProto(schema.GroupVersionKind{Version: "v1", Kind: "ConfigMap"}, cm("one"))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(enc.b, want.Bytes()) {
		t.Fatalf("object:\n got %x\nwant %x", enc.b, want.Bytes())
	}
	raw, _ := cm("one").Marshal()
	if !bytes.Equal(enc.raw(), raw) {
		t.Fatalf("raw part is not the object's own encoding")
	}

	// A list, with continue and remainingItemCount.
	sv := builtinCatalog().byGR[schema.GroupResource{Resource: "configmaps"}]
	list := &corev1.ConfigMapList{
		TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "ConfigMapList"},
		ListMeta: metav1.ListMeta{ResourceVersion: "42", Continue: "tok", RemainingItemCount: ptr.To[int64](3)},
	}
	var raws [][]byte
	for i := range 200 {
		c := cm(fmt.Sprint("cm-", i))
		list.Items = append(list.Items, *c)
		r, _ := c.Marshal()
		raws = append(raws, r)
	}
	want.Reset()
	if err := kubeCodec.Encode(list, &want); err != nil {
		t.Fatal(err)
	}
	got, err := encodeProtoList(sv, 42, "tok", ptr.To[int64](3), raws)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want.Bytes()) {
		t.Fatalf("list differs from kube's encoding (%d bytes, want %d)", len(got), len(want.Bytes()))
	}
	// An empty list.
	want.Reset()
	_ = kubeCodec.Encode(&corev1.ConfigMapList{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "ConfigMapList"}, ListMeta: metav1.ListMeta{ResourceVersion: "1"}}, &want)
	if got, _ := encodeProtoList(sv, 1, "", nil, nil); !bytes.Equal(got, want.Bytes()) {
		t.Fatalf("empty list:\n got %x\nwant %x", got, want.Bytes())
	}

	// A watch frame: kube's stream serializer (raw protobuf, length
	// delimited) around the embedded object.
	var frames bytes.Buffer
	kubeStream := streaming.NewEncoder(protobuf.LengthDelimitedFramer.NewFrameWriter(&frames), protobuf.NewRawSerializer(protobufScheme, protobufScheme))
	for _, typ := range []string{"ADDED", "BOOKMARK"} {
		if err := kubeStream.Encode(&metav1.WatchEvent{Type: typ, Object: runtime.RawExtension{Raw: enc.b}}); err != nil {
			t.Fatal(err)
		}
	}
	mine := appendWatchFrame(nil, "ADDED", enc.b)
	mine = appendWatchFrame(mine, "BOOKMARK", enc.b)
	if !bytes.Equal(mine, frames.Bytes()) {
		t.Fatalf("watch frames:\n got %x\nwant %x", mine, frames.Bytes())
	}
}

// contentTypes records the Content-Type of every answer, by method and
// path with query.
type contentTypes struct {
	mu   sync.Mutex
	seen map[string][]string
	next http.RoundTripper
}

func (c *contentTypes) RoundTrip(r *http.Request) (*http.Response, error) {
	resp, err := c.next.RoundTrip(r)
	if err == nil {
		c.mu.Lock()
		k := r.Method + " " + r.URL.Path
		c.seen[k] = append(c.seen[k], resp.Header.Get("Content-Type"))
		if r.URL.Query().Get("watch") == "true" {
			c.seen["WATCH "+r.URL.Path] = append(c.seen["WATCH "+r.URL.Path], resp.Header.Get("Content-Type"))
			if r.URL.Query().Get("sendInitialEvents") == "true" {
				c.seen["WATCHLIST "+r.URL.Path] = append(c.seen["WATCHLIST "+r.URL.Path], resp.Header.Get("Content-Type"))
			}
		}
		c.mu.Unlock()
	}
	return resp, err
}

func (c *contentTypes) of(key string) []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Clone(c.seen[key])
}

type protoEnv struct {
	hs     *httptest.Server
	srv    *Server
	st     *store.Store
	pb     kubernetes.Interface // client-go's defaults: protobuf
	js     kubernetes.Interface // JSON both ways
	dyn    dynamic.Interface
	types  *contentTypes
	pbConf *rest.Config
}

func newProtoEnv(t *testing.T, history int) *protoEnv {
	t.Helper()
	s, hs, st := newTestAPI(t, history)
	e := &protoEnv{hs: hs, srv: s, st: st, types: &contentTypes{seen: map[string][]string{}, next: http.DefaultTransport}}
	e.pbConf = &rest.Config{Host: hs.URL, QPS: -1, Transport: e.types}
	var err error
	if e.pb, err = kubernetes.NewForConfig(e.pbConf); err != nil {
		t.Fatal(err)
	}
	jcfg := &rest.Config{Host: hs.URL, QPS: -1, ContentConfig: rest.ContentConfig{ContentType: "application/json", AcceptContentTypes: "application/json"}}
	if e.js, err = kubernetes.NewForConfig(jcfg); err != nil {
		t.Fatal(err)
	}
	if e.dyn, err = dynamic.NewForConfig(jcfg); err != nil {
		t.Fatal(err)
	}
	return e
}

// A typed client sees the same objects through protobuf as through JSON,
// by get, list and watch, and the answers are protobuf.
func TestProtobufFidelity(t *testing.T) {
	e := newProtoEnv(t, 1000)
	ctx := t.Context()
	const ns = "pb"
	if _, err := e.pb.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns, Labels: map[string]string{"team": "a"}}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	labels := map[string]string{"app": "web"}
	if _, err := e.pb.CoreV1().ConfigMaps(ns).Create(ctx, &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: "cm", Labels: labels, Annotations: map[string]string{"note": "x"}},
		Data:       map[string]string{"a": "1", "b": ""}, BinaryData: map[string][]byte{"bin": {0, 1, 2}},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := e.pb.CoreV1().Secrets(ns).Create(ctx, &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: "sec"}, Type: corev1.SecretTypeOpaque,
		Data: map[string][]byte{"password": []byte("hunter2")}, StringData: map[string]string{"user": "bob"},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	pod := corev1.PodSpec{Containers: []corev1.Container{{
		Name: "c", Image: "nginx:1.27", Ports: []corev1.ContainerPort{{ContainerPort: 80}},
		Resources: corev1.ResourceRequirements{Limits: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("500m"), corev1.ResourceMemory: resource.MustParse("128Mi")}},
	}}}
	if _, err := e.pb.AppsV1().Deployments(ns).Create(ctx, &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: "dep"},
		Spec: appsv1.DeploymentSpec{Replicas: ptr.To[int32](3), Selector: &metav1.LabelSelector{MatchLabels: labels},
			Strategy: appsv1.DeploymentStrategy{Type: appsv1.RollingUpdateDeploymentStrategyType, RollingUpdate: &appsv1.RollingUpdateDeployment{MaxSurge: ptr.To(intstr.FromString("25%"))}},
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels}, Spec: pod}},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := e.pb.CoreV1().Pods(ns).Create(ctx, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "pod", Labels: labels}, Spec: pod}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := e.pb.CoreV1().Services(ns).Create(ctx, &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: "svc"},
		Spec:       corev1.ServiceSpec{Selector: labels, Ports: []corev1.ServicePort{{Name: "http", Port: 80, TargetPort: intstr.FromInt32(8080)}}},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	// A status write, through the status subresource, in protobuf.
	p, err := e.pb.CoreV1().Pods(ns).Get(ctx, "pod", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	p.Status.Phase = corev1.PodRunning
	p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue, LastTransitionTime: metav1.Now()}}
	if _, err := e.pb.CoreV1().Pods(ns).UpdateStatus(ctx, p, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}

	same := func(what string, pbObj, jsObj any) {
		t.Helper()
		// The items of the root's JSON lists carry kind and apiVersion,
		// which kube's lists (JSON or protobuf) leave out.
		if l, ok := jsObj.(runtime.Object); ok && meta.IsListType(l) {
			_ = meta.EachListItem(l, func(o runtime.Object) error {
				o.GetObjectKind().SetGroupVersionKind(schema.GroupVersionKind{})
				return nil
			})
		}
		if !reflect.DeepEqual(pbObj, jsObj) {
			t.Errorf("%s differs:\nprotobuf %#v\n    json %#v", what, pbObj, jsObj)
		}
	}
	type kind struct {
		name string
		get  func(c kubernetes.Interface) (any, error)
		list func(c kubernetes.Interface) (any, error)
		path string
	}
	kinds := []kind{
		{"ConfigMap", func(c kubernetes.Interface) (any, error) {
			return c.CoreV1().ConfigMaps(ns).Get(ctx, "cm", metav1.GetOptions{})
		},
			func(c kubernetes.Interface) (any, error) {
				return c.CoreV1().ConfigMaps(ns).List(ctx, metav1.ListOptions{})
			}, "/api/v1/namespaces/pb/configmaps"},
		{"Secret", func(c kubernetes.Interface) (any, error) {
			return c.CoreV1().Secrets(ns).Get(ctx, "sec", metav1.GetOptions{})
		},
			func(c kubernetes.Interface) (any, error) {
				return c.CoreV1().Secrets(ns).List(ctx, metav1.ListOptions{})
			}, "/api/v1/namespaces/pb/secrets"},
		{"Deployment", func(c kubernetes.Interface) (any, error) {
			return c.AppsV1().Deployments(ns).Get(ctx, "dep", metav1.GetOptions{})
		},
			func(c kubernetes.Interface) (any, error) {
				return c.AppsV1().Deployments(ns).List(ctx, metav1.ListOptions{})
			}, "/apis/apps/v1/namespaces/pb/deployments"},
		{"Pod", func(c kubernetes.Interface) (any, error) {
			return c.CoreV1().Pods(ns).Get(ctx, "pod", metav1.GetOptions{})
		},
			func(c kubernetes.Interface) (any, error) { return c.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{}) }, "/api/v1/namespaces/pb/pods"},
		{"Service", func(c kubernetes.Interface) (any, error) {
			return c.CoreV1().Services(ns).Get(ctx, "svc", metav1.GetOptions{})
		},
			func(c kubernetes.Interface) (any, error) {
				return c.CoreV1().Services(ns).List(ctx, metav1.ListOptions{})
			}, "/api/v1/namespaces/pb/services"},
		{"Namespace", func(c kubernetes.Interface) (any, error) {
			return c.CoreV1().Namespaces().Get(ctx, ns, metav1.GetOptions{})
		},
			func(c kubernetes.Interface) (any, error) {
				return c.CoreV1().Namespaces().List(ctx, metav1.ListOptions{LabelSelector: "team=a"})
			}, "/api/v1/namespaces"},
	}
	for _, k := range kinds {
		pbObj, err := k.get(e.pb)
		if err != nil {
			t.Fatalf("%s get (protobuf): %v", k.name, err)
		}
		jsObj, err := k.get(e.js)
		if err != nil {
			t.Fatalf("%s get (JSON): %v", k.name, err)
		}
		same(k.name+" get", pbObj, jsObj)
		pbList, err := k.list(e.pb)
		if err != nil {
			t.Fatalf("%s list (protobuf): %v", k.name, err)
		}
		jsList, err := k.list(e.js)
		if err != nil {
			t.Fatalf("%s list (JSON): %v", k.name, err)
		}
		same(k.name+" list", pbList, jsList)
		if got := e.types.of("GET " + k.path); len(got) == 0 || got[len(got)-1] != contentTypeProtobuf {
			t.Errorf("%s list answered as %q, want protobuf", k.name, got)
		}
	}
	if got := e.types.of("POST /apis/apps/v1/namespaces/pb/deployments"); !slices.Equal(got, []string{contentTypeProtobuf}) {
		t.Errorf("create answered as %q, want protobuf", got)
	}
	if got := e.types.of("PUT /api/v1/namespaces/pb/pods/pod/status"); !slices.Equal(got, []string{contentTypeProtobuf}) {
		t.Errorf("status update answered as %q, want protobuf", got)
	}

	// Watch: the same events both ways, the DELETED one included.
	watchBoth := func(f func(c kubernetes.Interface) (watch.Interface, error)) (pbW, jsW watch.Interface) {
		t.Helper()
		var err error
		if pbW, err = f(e.pb); err != nil {
			t.Fatal(err)
		}
		if jsW, err = f(e.js); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(pbW.Stop)
		t.Cleanup(jsW.Stop)
		return pbW, jsW
	}
	pbW, jsW := watchBoth(func(c kubernetes.Interface) (watch.Interface, error) {
		return c.AppsV1().Deployments(ns).Watch(ctx, metav1.ListOptions{ResourceVersion: "0"})
	})
	pbP, jsP := watchBoth(func(c kubernetes.Interface) (watch.Interface, error) {
		return c.CoreV1().Pods(ns).Watch(ctx, metav1.ListOptions{ResourceVersion: "0"})
	})
	d, _ := e.pb.AppsV1().Deployments(ns).Get(ctx, "dep", metav1.GetOptions{})
	d.Spec.Replicas = ptr.To[int32](5)
	if _, err := e.pb.AppsV1().Deployments(ns).Update(ctx, d, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := e.pb.AppsV1().Deployments(ns).Delete(ctx, "dep", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := e.pb.CoreV1().Pods(ns).Delete(ctx, "pod", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	for _, w := range []struct {
		name   string
		pb, js watch.Interface
		want   []watch.EventType
	}{
		{"Deployment", pbW, jsW, []watch.EventType{watch.Added, watch.Modified, watch.Deleted}},
		{"Pod", pbP, jsP, []watch.EventType{watch.Added, watch.Deleted}},
	} {
		pbEvs, jsEvs := nextEvents(t, w.pb, len(w.want)), nextEvents(t, w.js, len(w.want))
		for i := range w.want {
			if pbEvs[i].Type != w.want[i] || jsEvs[i].Type != w.want[i] {
				t.Fatalf("%s event %d: %s (protobuf) %s (JSON), want %s", w.name, i, pbEvs[i].Type, jsEvs[i].Type, w.want[i])
			}
			same(fmt.Sprintf("%s %s event", w.name, w.want[i]), pbEvs[i].Object, jsEvs[i].Object)
		}
	}
	if got := e.types.of("WATCH /apis/apps/v1/namespaces/pb/deployments"); !slices.Equal(got, []string{contentTypeProtobufWatch}) {
		t.Errorf("watch answered as %q, want protobuf", got)
	}
}

func nextEvents(t *testing.T, w watch.Interface, n int) []watch.Event {
	t.Helper()
	var out []watch.Event
	timeout := time.After(10 * time.Second)
	for len(out) < n {
		select {
		case ev, ok := <-w.ResultChan():
			if !ok {
				t.Fatalf("watch ended after %d events, want %d", len(out), n)
			}
			out = append(out, ev)
		case <-timeout:
			t.Fatalf("%d events of %d after 10s", len(out), n)
		}
	}
	return out
}

// Paged lists in protobuf carry continue and remainingItemCount, and the
// items' encodings come from the cache the second time.
func TestProtobufListPagingAndCache(t *testing.T) {
	e := newProtoEnv(t, 1000)
	ctx := t.Context()
	createConfigMaps(t, e.hs.URL, 25)
	before := e.srv.protoCache.stats()

	cms := e.pb.CoreV1().ConfigMaps("default")
	var names []string
	opts := metav1.ListOptions{Limit: 10}
	for page := 0; ; page++ {
		l, err := cms.List(ctx, opts)
		if err != nil {
			t.Fatal(err)
		}
		for _, it := range l.Items {
			names = append(names, it.Name)
		}
		switch page {
		case 0, 1:
			if l.Continue == "" || l.RemainingItemCount == nil || *l.RemainingItemCount != int64(15-10*page) {
				t.Fatalf("page %d: continue %q remaining %v", page, l.Continue, l.RemainingItemCount)
			}
		case 2:
			if l.Continue != "" || l.RemainingItemCount != nil || len(l.Items) != 5 {
				t.Fatalf("last page: continue %q remaining %v, %d items", l.Continue, l.RemainingItemCount, len(l.Items))
			}
		}
		if l.Continue == "" {
			break
		}
		opts.Continue = l.Continue
	}
	if len(names) != 25 {
		t.Fatalf("paged list: %d items, want 25", len(names))
	}
	afterPages := e.srv.protoCache.stats()
	if got := afterPages.Encodes - before.Encodes; got != 25 {
		t.Errorf("paged list encoded %d items, want 25", got)
	}
	full, err := cms.List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	again, err := cms.List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(full.Items) != 25 || !reflect.DeepEqual(full, again) {
		t.Fatalf("lists: %d items, equal %v", len(full.Items), reflect.DeepEqual(full, again))
	}
	if st := e.srv.protoCache.stats(); st.Encodes != afterPages.Encodes {
		t.Errorf("two more lists of unchanged objects encoded %d items, want 0", st.Encodes-afterPages.Encodes)
	}
	// A changed object is encoded again, once: for the update's protobuf
	// answer, which the list then finds in the cache.
	cm, _ := cms.Get(ctx, "cm-3", metav1.GetOptions{})
	cm.Data = map[string]string{"x": "y"}
	n := e.srv.protoCache.stats().Encodes
	if _, err := cms.Update(ctx, cm, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	if got := e.srv.protoCache.stats().Encodes - n; got != 1 {
		t.Errorf("the update's answer encoded %d items, want 1", got)
	}
	if _, err := cms.List(ctx, metav1.ListOptions{}); err != nil {
		t.Fatal(err)
	}
	if got := e.srv.protoCache.stats().Encodes - n; got != 1 {
		t.Errorf("update and list encoded %d items, want 1", got)
	}
	// So is a created one.
	n = e.srv.protoCache.stats().Encodes
	if _, err := cms.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "created"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := cms.List(ctx, metav1.ListOptions{}); err != nil {
		t.Fatal(err)
	}
	if got := e.srv.protoCache.stats().Encodes - n; got != 1 {
		t.Errorf("create and list encoded %d items, want 1", got)
	}
	// And the version an update that changes nothing leaves: written in
	// JSON (nothing encoded), its no-op protobuf update encodes it for
	// the answer, and the list finds it.
	js, err := e.js.CoreV1().ConfigMaps("default").Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "same"}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	n = e.srv.protoCache.stats().Encodes
	if _, err := cms.Update(ctx, js, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	if got := e.srv.protoCache.stats().Encodes - n; got != 1 {
		t.Errorf("the no-op update's answer encoded %d items, want 1", got)
	}
	if _, err := cms.List(ctx, metav1.ListOptions{}); err != nil {
		t.Fatal(err)
	}
	if got := e.srv.protoCache.stats().Encodes - n; got != 1 {
		t.Errorf("no-op update and list encoded %d items, want 1", got)
	}
}

func TestProtoCacheBound(t *testing.T) {
	c := newProtoCache(protoCacheShards * 4096)
	var encodes int
	enc := func() (protoEncoding, error) {
		encodes++
		return protoEncoding{b: make([]byte, 1000)}, nil
	}
	for rev := range int64(1000) {
		if _, err := c.get(protoKey{key: store.Key{Name: "x"}, rev: rev}, enc); err != nil {
			t.Fatal(err)
		}
	}
	st := c.stats()
	if st.Bytes > protoCacheShards*4096 || st.Entries == 0 || st.Entries > 1000 {
		t.Fatalf("cache of 64 KiB after 1000 entries of 1 KB: %+v", st)
	}
	// The most recent entry is still there.
	n := encodes
	_, _ = c.get(protoKey{key: store.Key{Name: "x"}, rev: 999}, enc)
	if encodes != n {
		t.Errorf("most recent entry was evicted")
	}
	// Concurrent requests for a missing entry encode it once.
	var wg sync.WaitGroup
	var mu sync.Mutex
	slow := 0
	for range 50 {
		wg.Go(func() {
			_, _ = c.get(protoKey{key: store.Key{Name: "y"}, rev: 1}, func() (protoEncoding, error) {
				mu.Lock()
				slow++
				mu.Unlock()
				time.Sleep(10 * time.Millisecond) // slow: the others ask meanwhile
				return protoEncoding{b: []byte{1}}, nil
			})
		})
	}
	wg.Wait()
	if slow != 1 {
		t.Errorf("50 concurrent gets encoded %d times, want 1", slow)
	}
	var none *protoCache
	if _, err := none.get(protoKey{}, enc); err != nil {
		t.Fatal(err)
	}
}

// An informer on the protobuf client, with and without watch-list
// (WatchListClient: the initial events end with the initial-events-end
// bookmark), sees what the store holds, events included.
func TestProtobufInformer(t *testing.T) {
	for _, watchList := range []bool{false, true} {
		t.Run(fmt.Sprint("watchList=", watchList), func(t *testing.T) {
			clientfeaturestesting.SetFeatureDuringTest(t, clientfeatures.WatchListClient, watchList)
			e := newProtoEnv(t, 1000)
			ctx := t.Context()
			createConfigMaps(t, e.hs.URL, 5)
			f := informers.NewSharedInformerFactoryWithOptions(e.pb, 0, informers.WithNamespace("default"))
			inf := f.Core().V1().ConfigMaps().Informer()
			var mu sync.Mutex
			var deleted []string
			_, _ = inf.AddEventHandler(cache.ResourceEventHandlerFuncs{DeleteFunc: func(obj any) {
				mu.Lock()
				defer mu.Unlock()
				if cm, ok := obj.(*corev1.ConfigMap); ok {
					deleted = append(deleted, cm.Name+"@"+cm.ResourceVersion)
				}
			}})
			f.Start(ctx.Done())
			syncCtx, cancel := context.WithTimeout(ctx, 10*time.Second)
			defer cancel()
			if !cache.WaitForCacheSync(syncCtx.Done(), inf.HasSynced) {
				t.Fatal("informer did not sync")
			}
			lister := f.Core().V1().ConfigMaps().Lister().ConfigMaps("default")
			cms := e.pb.CoreV1().ConfigMaps("default")
			cm, _ := cms.Get(ctx, "cm-1", metav1.GetOptions{})
			cm.Data = map[string]string{"changed": "yes"}
			if _, err := cms.Update(ctx, cm, metav1.UpdateOptions{}); err != nil {
				t.Fatal(err)
			}
			if err := cms.Delete(ctx, "cm-2", metav1.DeleteOptions{}); err != nil {
				t.Fatal(err)
			}
			if _, err := cms.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "late"}}, metav1.CreateOptions{}); err != nil {
				t.Fatal(err)
			}
			deleteRV := ""
			poll.True(t, "the informer to hold late", func() bool {
				got, _ := lister.Get("late")
				return got != nil
			})
			jsList, err := e.js.CoreV1().ConfigMaps("default").List(ctx, metav1.ListOptions{})
			if err != nil {
				t.Fatal(err)
			}
			cached, _ := lister.List(labels.Everything())
			slices.SortFunc(cached, func(a, b *corev1.ConfigMap) int { return strings.Compare(a.Name, b.Name) })
			if len(cached) != len(jsList.Items) {
				t.Fatalf("informer holds %d ConfigMaps, the server %d", len(cached), len(jsList.Items))
			}
			for i := range cached {
				jsList.Items[i].TypeMeta = metav1.TypeMeta{} // see TestProtobufFidelity
				if !reflect.DeepEqual(*cached[i], jsList.Items[i]) {
					t.Errorf("informer's %s differs:\n%#v\n%#v", cached[i].Name, *cached[i], jsList.Items[i])
				}
			}
			mu.Lock()
			if len(deleted) == 1 {
				deleteRV = deleted[0]
			}
			mu.Unlock()
			if !strings.HasPrefix(deleteRV, "cm-2@") || deleteRV == "cm-2@"+cm.ResourceVersion {
				t.Errorf("DELETED event: %q, want cm-2 at the revision of the deletion", deleteRV)
			}
			key := "WATCH /api/v1/namespaces/default/configmaps"
			if watchList {
				key = "WATCHLIST /api/v1/namespaces/default/configmaps"
			}
			if got := e.types.of(key); len(got) == 0 || got[0] != contentTypeProtobufWatch {
				t.Errorf("%s answered as %q, want %q", key, got, contentTypeProtobufWatch)
			}
		})
	}
}

// A protobuf watch-list ends its initial events with a BOOKMARK carrying
// the initial-events-end annotation; periodic bookmarks are empty objects
// of the kind.
func TestProtobufWatchBookmarks(t *testing.T) {
	e := newProtoEnv(t, 1000)
	ctx := t.Context()
	createConfigMaps(t, e.hs.URL, 3)
	w, err := e.pb.CoreV1().ConfigMaps("default").Watch(ctx, metav1.ListOptions{
		SendInitialEvents: ptr.To(true), AllowWatchBookmarks: true, ResourceVersionMatch: metav1.ResourceVersionMatchNotOlderThan,
	})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	evs := nextEvents(t, w, 4)
	for i, ev := range evs[:3] {
		if ev.Type != watch.Added {
			t.Fatalf("event %d: %s, want ADDED", i, ev.Type)
		}
	}
	bm, ok := evs[3].Object.(*corev1.ConfigMap)
	if evs[3].Type != watch.Bookmark || !ok {
		t.Fatalf("event 3: %s %T, want a ConfigMap BOOKMARK", evs[3].Type, evs[3].Object)
	}
	if bm.Annotations[metav1.InitialEventsAnnotationKey] != "true" || bm.ResourceVersion != fmt.Sprint(e.st.Revision()) || bm.Name != "" {
		t.Fatalf("bookmark: %+v", bm.ObjectMeta)
	}

	// A bookmark of the stream, without the annotation.
	enc, err := protoBookmark(builtinCatalog().byGR[schema.GroupResource{Resource: "configmaps"}], 9, false)
	if err != nil {
		t.Fatal(err)
	}
	obj, _, err := kubeCodec.Decode(enc.b, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	if cm := obj.(*corev1.ConfigMap); cm.ResourceVersion != "9" || cm.Annotations != nil {
		t.Fatalf("bookmark: %+v", cm.ObjectMeta)
	}
}

// A watch from a compacted revision gets an ERROR event whose Status is
// protobuf; errors answered before a stream are JSON, which client-go
// decodes by their Content-Type.
func TestProtobufErrors(t *testing.T) {
	e := newProtoEnv(t, 5)
	ctx := t.Context()
	createConfigMaps(t, e.hs.URL, 20)
	w, err := e.pb.CoreV1().ConfigMaps("default").Watch(ctx, metav1.ListOptions{ResourceVersion: "2"})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	ev := nextEvents(t, w, 1)[0]
	st, ok := ev.Object.(*metav1.Status)
	if ev.Type != watch.Error || !ok || st.Code != http.StatusGone || st.Reason != metav1.StatusReasonExpired {
		t.Fatalf("watch from a compacted revision: %s %#v, want ERROR 410 Expired", ev.Type, ev.Object)
	}
	if got := e.types.of("WATCH /api/v1/namespaces/default/configmaps"); !slices.Equal(got, []string{contentTypeProtobufWatch}) {
		t.Errorf("watch answered as %q", got)
	}

	_, err = e.pb.CoreV1().ConfigMaps("default").Get(ctx, "missing", metav1.GetOptions{})
	if !apierrors.IsNotFound(err) || !strings.Contains(err.Error(), `configmaps "missing" not found`) {
		t.Fatalf("get of a missing object: %v", err)
	}
	if got := e.types.of("GET /api/v1/namespaces/default/configmaps/missing"); !slices.Equal(got, []string{"application/json"}) {
		t.Errorf("error answered as %q, want JSON", got)
	}
	_, err = e.pb.CoreV1().ConfigMaps("default").Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "cm-1"}}, metav1.CreateOptions{})
	if !apierrors.IsAlreadyExists(err) {
		t.Fatalf("create of an existing object: %v", err)
	}
	// A successful delete answers with a Status, in protobuf.
	if err := e.pb.CoreV1().ConfigMaps("default").Delete(ctx, "cm-1", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	if got := e.types.of("DELETE /api/v1/namespaces/default/configmaps/cm-1"); !slices.Equal(got, []string{contentTypeProtobuf}) {
		t.Errorf("delete answered as %q, want protobuf", got)
	}
}

// rawGet sends a GET with an Accept header and returns the answer.
func rawGet(t *testing.T, url, accept string) (string, []byte) {
	t.Helper()
	req, _ := http.NewRequest("GET", url, nil)
	req.Header.Set("Accept", accept)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %d %s", url, resp.StatusCode, b)
	}
	return resp.Header.Get("Content-Type"), b
}

// Custom resources, kinds client-go does not know, Table and
// PartialObjectMetadata stay JSON; scale is protobuf.
func TestProtobufJSONForms(t *testing.T) {
	e := newProtoEnv(t, 1000)
	ctx := t.Context()
	createConfigMaps(t, e.hs.URL, 2)
	const pbAccept = "application/vnd.kubernetes.protobuf,application/json"

	crdObj, err := toUnstructuredMap(gizmoCRD(apiextensionsv1.NamespaceScoped))
	if err != nil {
		t.Fatal(err)
	}
	crds := e.dyn.Resource(schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"})
	if _, err := crds.Create(ctx, &unstructured.Unstructured{Object: crdObj}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := e.dyn.Resource(gizmoGVR).Namespace("default").Create(ctx, gizmo("default", "g", map[string]any{"size": int64(2)}), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct{ path, accept, want string }{
		{"/apis/test.canopy.dev/v1/namespaces/default/gizmos", pbAccept, "application/json"},
		{"/apis/test.canopy.dev/v1/namespaces/default/gizmos/g", pbAccept, "application/json"},
		{"/apis/apiextensions.k8s.io/v1/customresourcedefinitions/gizmos.test.canopy.dev", pbAccept, "application/json"},
		{"/api/v1/namespaces/default/configmaps", "application/json;as=Table;v=v1;g=meta.k8s.io,application/json", "application/json"},
		{"/api/v1/namespaces/default/configmaps", "application/vnd.kubernetes.protobuf;as=Table;v=v1;g=meta.k8s.io,application/json;as=Table;v=v1;g=meta.k8s.io,application/json", "application/json"},
		{"/api/v1/namespaces/default/configmaps/cm-0", "application/vnd.kubernetes.protobuf;as=PartialObjectMetadata;g=meta.k8s.io;v=v1,application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1,application/json", "application/json"},
		{"/api/v1/namespaces/default/configmaps", "*/*", "application/json"},
		{"/api/v1/namespaces/default/configmaps", pbAccept, contentTypeProtobuf},
	} {
		ct, body := rawGet(t, e.hs.URL+c.path, c.accept)
		if ct != c.want {
			t.Errorf("GET %s (Accept %s): %s, want %s", c.path, c.accept, ct, c.want)
		}
		if strings.Contains(c.accept, "as=Table") && !bytes.Contains(body, []byte(`"kind":"Table"`)) {
			t.Errorf("GET %s (Accept %s): not a Table: %.100s", c.path, c.accept, body)
		}
	}
	// The watch of a custom resource stays JSON.
	req, _ := http.NewRequestWithContext(ctx, "GET", e.hs.URL+"/apis/test.canopy.dev/v1/namespaces/default/gizmos?watch=true&timeoutSeconds=1", nil)
	req.Header.Set("Accept", pbAccept)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if ct := resp.Header.Get("Content-Type"); ct != "application/json" {
		t.Errorf("watch of a custom resource: %s, want JSON", ct)
	}

	// Scale, a kind of client-go's scheme, in protobuf.
	if _, err := e.pb.AppsV1().Deployments("default").Create(ctx, &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: "d"},
		Spec: appsv1.DeploymentSpec{Replicas: ptr.To[int32](1), Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"a": "b"}},
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"a": "b"}}, Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "i"}}}}},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	sc, err := e.pb.AppsV1().Deployments("default").GetScale(ctx, "d", metav1.GetOptions{})
	if err != nil || sc.Spec.Replicas != 1 || sc.Name != "d" {
		t.Fatalf("scale: %v %+v", err, sc)
	}
	if got := e.types.of("GET /apis/apps/v1/namespaces/default/deployments/d/scale"); !slices.Equal(got, []string{contentTypeProtobuf}) {
		t.Errorf("scale answered as %q, want protobuf", got)
	}
}

// A watch event sent to many protobuf watchers is encoded once.
func TestProtobufWatchFanoutEncodesOnce(t *testing.T) {
	e := newProtoEnv(t, 1000)
	ctx := t.Context()
	createConfigMaps(t, e.hs.URL, 1)
	cms := e.pb.CoreV1().ConfigMaps("default")
	cm, err := cms.Get(ctx, "cm-0", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	const watchers = 20
	var ws []watch.Interface
	for range watchers {
		w, err := cms.Watch(ctx, metav1.ListOptions{ResourceVersion: cm.ResourceVersion})
		if err != nil {
			t.Fatal(err)
		}
		defer w.Stop()
		ws = append(ws, w)
	}
	before := e.srv.protoCache.stats().Encodes
	cm.Data = map[string]string{"k": "v"}
	if _, err := cms.Update(ctx, cm, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	for _, w := range ws {
		ev := nextEvents(t, w, 1)[0]
		if got, ok := ev.Object.(*corev1.ConfigMap); ev.Type != watch.Modified || !ok || got.Data["k"] != "v" {
			t.Fatalf("event: %s %#v", ev.Type, ev.Object)
		}
	}
	if got := e.srv.protoCache.stats().Encodes - before; got != 1 {
		t.Errorf("one event to %d watchers encoded %d times, want 1", watchers, got)
	}
}
