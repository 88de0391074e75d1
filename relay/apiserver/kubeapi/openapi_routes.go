package kubeapi

import (
	"fmt"
	"net/http"
	"reflect"
	"slices"
	"strings"
	"sync"

	autoscalingv1 "k8s.io/api/autoscaling/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apiserver/pkg/endpoints/openapi"
	"k8s.io/kube-openapi/pkg/builder"
	"k8s.io/kube-openapi/pkg/builder3"
	"k8s.io/kube-openapi/pkg/common"
	"k8s.io/kube-openapi/pkg/schemamutation"
	"k8s.io/kube-openapi/pkg/spec3"
	"k8s.io/kube-openapi/pkg/validation/spec"

	"github.com/canopy-dev/canopy/relay/apiserver/resources"
)

// The operations of the built-in kinds, described as the routes kube's
// OpenAPI builders take (kube-openapi's common.Route): the builders then lay
// out paths, parameters, request bodies, responses and the models the
// routes reference exactly as kube-apiserver's documents are laid out.

// builtinSpecs are the documents of the built-in kinds, the same in every
// space: v3 by group-version path ("api/v1", "apis/apps/v1") and v2 whole.
type builtinSpecs struct {
	v3 map[string]*spec3.OpenAPI
	v2 *spec.Swagger
}

var openAPIInfo = spec.Info{InfoProps: spec.InfoProps{Title: "Canopy", Version: "v1"}}

// builtinOpenAPI builds the built-in documents once per process (a
// simulation runs thousands of servers; each builds nothing until a client
// asks for OpenAPI).
var builtinOpenAPI = sync.OnceValues(func() (*builtinSpecs, error) {
	byGV := map[string][]common.Route{}
	var all []common.Route
	for _, info := range resources.Builtins() {
		gvPath := groupVersionPath(info.Group, info.Version)
		rs := builtinRoutes(info)
		byGV[gvPath] = append(byGV[gvPath], rs...)
		all = append(all, rs...)
	}
	namer := builtinNamer()
	// The models are derived once for the v3 documents (and once more
	// by the v2 builder: each version references models its own way).
	defsV3 := builtinDefinitions(refTo("#/components/schemas/"))
	out := &builtinSpecs{v3: map[string]*spec3.OpenAPI{}}
	for gvPath, rs := range byGV {
		doc, err := builder3.BuildOpenAPISpecFromRoutes([]common.RouteContainer{routeContainer{root: "/" + gvPath, routes: rs}}, &common.OpenAPIV3Config{
			Info:                           &openAPIInfo,
			Definitions:                    defsV3,
			GetDefinitionName:              namer.name,
			GetOperationIDAndTagsFromRoute: operationIDAndTags,
			CommonResponses:                map[int]*spec3.Response{http.StatusUnauthorized: {ResponseProps: spec3.ResponseProps{Description: "Unauthorized"}}},
		})
		if err != nil {
			return nil, fmt.Errorf("openapi v3 of %s: %w", gvPath, err)
		}
		out.v3[gvPath] = doc
	}
	v2, err := builder.BuildOpenAPISpecFromRoutes([]common.RouteContainer{routeContainer{root: "/", routes: all}}, &common.Config{
		Info:                           &openAPIInfo,
		GetDefinitions:                 builtinDefinitions,
		GetDefinitionName:              namer.name,
		GetOperationIDAndTagsFromRoute: operationIDAndTags,
		CommonResponses:                map[int]spec.Response{http.StatusUnauthorized: {ResponseProps: spec.ResponseProps{Description: "Unauthorized"}}},
	})
	if err != nil {
		return nil, fmt.Errorf("openapi v2: %w", err)
	}
	// As kube-apiserver's, the v2 document states no defaults.
	for name, def := range v2.Definitions {
		v2.Definitions[name] = *withoutDefaults(&def)
	}
	out.v2 = v2
	return out, nil
})

// withoutDefaults returns s with no default anywhere in it.
func withoutDefaults(s *spec.Schema) *spec.Schema {
	w := schemamutation.Walker{
		SchemaCallback: func(s *spec.Schema) *spec.Schema {
			if s.Default == nil {
				return s
			}
			c := *s
			c.Default = nil
			return &c
		},
		RefCallback: schemamutation.RefCallbackNoop,
	}
	return w.WalkSchema(s)
}

// refTo makes references to models under prefix, by model name, as the
// builders do.
func refTo(prefix string) common.ReferenceCallback {
	namer := builtinNamer()
	return func(canonical string) spec.Ref {
		name, _ := namer.name(canonical)
		return spec.MustCreateRef(prefix + common.EscapeJsonPointer(name))
	}
}

// groupVersionPath is the name of a group-version's v3 document.
func groupVersionPath(group, version string) string {
	if group == "" {
		return "api/" + version
	}
	return "apis/" + group + "/" + version
}

// Content types of request bodies.
var (
	anyBody      = []string{"*/*"}
	builtinPatch = []string{"application/json-patch+json", "application/merge-patch+json", "application/strategic-merge-patch+json", "application/apply-patch+yaml"}
	jsonOnly     = []string{"application/json"}
	listProduces = []string{"application/json", "application/json;stream=watch"}
)

// builtinRoutes are the operations the server serves on one built-in
// resource: the object, its collection (in a namespace and across
// namespaces), status, scale and the other subresources.
func builtinRoutes(info *resources.Info) []common.Route {
	scheme := openAPIScheme()
	gv := schema.GroupVersion{Group: info.Group, Version: info.Version}
	obj, err := scheme.New(gv.WithKind(info.Kind))
	if err != nil {
		return nil
	}
	var list any
	if info.ListKind != "" {
		list, _ = scheme.New(gv.WithKind(info.ListKind))
	}
	gvk := func(k schema.GroupVersionKind) map[string]any {
		return map[string]any{extGVK: map[string]string{"group": k.Group, "version": k.Version, "kind": k.Kind}}
	}
	kindExt := gvk(gv.WithKind(info.Kind))
	root := "/" + groupVersionPath(info.Group, info.Version)
	scope, nsPath, nsParams := "", "", []common.Parameter(nil)
	if info.Namespaced {
		scope, nsPath = "Namespaced", "/namespaces/{namespace}"
		nsParams = []common.Parameter{pathParam("namespace", "object name and auth scope, such as for teams and projects")}
	}
	nameParam := pathParam("name", "name of the "+info.Kind)
	coll := root + nsPath + "/" + info.Resource
	item := coll + "/{name}"
	var rs []common.Route
	has := func(verb string) bool { return slices.Contains(info.Verbs, verb) }
	add := func(r *route, params ...common.Parameter) {
		r.params = append(append(append([]common.Parameter{}, nsParams...), params...), r.params...)
		if r.meta == nil {
			r.meta = kindExt
		}
		rs = append(rs, r)
	}

	if has("list") && list != nil {
		add(&route{method: "GET", path: coll, op: "list" + scope + info.Kind, action: "list",
			desc: "list or watch objects of kind " + info.Kind, params: optionParams(&metav1.ListOptions{}),
			produces: listProduces, resp: []response{{http.StatusOK, "OK", list}}})
		if info.Namespaced {
			rs = append(rs, &route{method: "GET", path: root + "/" + info.Resource, op: "list" + info.Kind + "ForAllNamespaces", action: "list",
				desc: "list or watch objects of kind " + info.Kind, params: optionParams(&metav1.ListOptions{}),
				produces: listProduces, meta: kindExt, resp: []response{{http.StatusOK, "OK", list}}})
		}
	}
	if has("create") {
		add(&route{method: "POST", path: coll, op: "create" + scope + info.Kind, action: "post",
			desc: "create " + article(info.Kind), params: optionParams(&metav1.CreateOptions{}), consumes: anyBody, req: obj,
			resp: []response{{http.StatusOK, "OK", obj}, {http.StatusCreated, "Created", obj}, {http.StatusAccepted, "Accepted", obj}}})
	}
	if has("deletecollection") {
		add(&route{method: "DELETE", path: coll, op: "deleteCollection" + scope + info.Kind, action: "deletecollection",
			desc: "delete collection of " + info.Kind, params: append(optionParams(&metav1.DeleteOptions{}), optionParams(&metav1.ListOptions{}, "watch", "allowWatchBookmarks")...),
			consumes: anyBody, req: &metav1.DeleteOptions{}, resp: []response{{http.StatusOK, "OK", &metav1.Status{}}}})
	}
	objectRoutes := func(path, suffix, what string, sample any, ext map[string]any, verbs ...string) {
		for _, verb := range verbs {
			r := &route{path: path, meta: ext}
			switch verb {
			case "get":
				r.method, r.op, r.action, r.desc = "GET", "read"+scope+info.Kind+suffix, "get", "read "+what+"the specified "+info.Kind
				r.resp = []response{{http.StatusOK, "OK", sample}}
			case "update":
				r.method, r.op, r.action, r.desc = "PUT", "replace"+scope+info.Kind+suffix, "put", "replace "+what+"the specified "+info.Kind
				r.params, r.consumes, r.req = optionParams(&metav1.UpdateOptions{}), anyBody, sample
				r.resp = []response{{http.StatusOK, "OK", sample}, {http.StatusCreated, "Created", sample}}
			case "patch":
				r.method, r.op, r.action, r.desc = "PATCH", "patch"+scope+info.Kind+suffix, "patch", "partially update "+what+"the specified "+info.Kind
				r.params, r.consumes, r.req = optionParams(&metav1.PatchOptions{}), builtinPatch, &metav1.Patch{}
				r.resp = []response{{http.StatusOK, "OK", sample}, {http.StatusCreated, "Created", sample}}
			case "delete":
				r.method, r.op, r.action, r.desc = "DELETE", "delete"+scope+info.Kind+suffix, "delete", "delete "+article(info.Kind)
				r.params, r.consumes, r.req = optionParams(&metav1.DeleteOptions{}), anyBody, &metav1.DeleteOptions{}
				r.resp = []response{{http.StatusOK, "OK", &metav1.Status{}}, {http.StatusAccepted, "Accepted", &metav1.Status{}}}
			case "create":
				r.method, r.op, r.action, r.desc = "POST", "create"+scope+info.Kind+suffix, "post", "create "+what+"of "+article(info.Kind)
				r.params, r.consumes, r.req = optionParams(&metav1.CreateOptions{}), anyBody, sample
				r.resp = []response{{http.StatusOK, "OK", sample}, {http.StatusCreated, "Created", sample}, {http.StatusAccepted, "Accepted", sample}}
			default:
				continue
			}
			add(r, nameParam)
		}
	}
	var itemVerbs []string
	for _, v := range []string{"get", "update", "patch", "delete"} {
		if has(v) {
			itemVerbs = append(itemVerbs, v)
		}
	}
	objectRoutes(item, "", "", obj, kindExt, itemVerbs...)
	if info.Status {
		objectRoutes(item+"/status", "Status", "status of ", obj, kindExt, "get", "update", "patch")
	}
	if info.Scale != nil {
		objectRoutes(item+"/scale", "Scale", "scale of ", &autoscalingv1.Scale{}, gvk(autoscalingv1.SchemeGroupVersion.WithKind("Scale")), "get", "update", "patch")
	}
	for _, sub := range info.Subresources {
		sample, ext := obj, kindExt
		if sub.Kind != "" {
			k := schema.GroupVersionKind{Group: sub.Group, Version: sub.Version, Kind: sub.Kind}
			o, err := scheme.New(k)
			if err != nil {
				continue
			}
			sample, ext = o, gvk(k)
		}
		objectRoutes(item+"/"+sub.Name, upperFirst(sub.Name), sub.Name+" of ", sample, ext, sub.Verbs...)
	}
	return rs
}

// optionParams are the query parameters of an options type (ListOptions,
// PatchOptions, ...): its fields of simple types but those in except,
// described by its SwaggerDoc, as kube-apiserver's installer lists them.
func optionParams(opts any, except ...string) []common.Parameter {
	t := reflect.TypeOf(opts).Elem()
	docs := swaggerDocs(t)
	var out []common.Parameter
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		if f.Anonymous || name == "" || name == "-" || slices.Contains(except, name) {
			continue
		}
		ft := f.Type
		for ft.Kind() == reflect.Pointer {
			ft = ft.Elem()
		}
		var typ string
		switch ft.Kind() {
		case reflect.String:
			typ = "string"
		case reflect.Bool:
			typ = "boolean"
		case reflect.Int, reflect.Int32, reflect.Int64:
			typ = "integer"
		case reflect.Slice:
			if ft.Elem().Kind() != reflect.String {
				continue
			}
			typ = "string"
		default:
			continue
		}
		out = append(out, param{name: name, desc: docs[name], kind: common.QueryParameterKind, dataType: typ})
	}
	return out
}

func pathParam(name, desc string) common.Parameter {
	return param{name: name, desc: desc, kind: common.PathParameterKind, dataType: "string", required: true}
}

func article(kind string) string {
	if strings.ContainsRune("AEIOU", rune(kind[0])) {
		return "an " + kind
	}
	return "a " + kind
}

func upperFirst(s string) string {
	if s == "" {
		return s
	}
	return strings.ToUpper(s[:1]) + s[1:]
}

// operationIDAndTags names operations as kube-apiserver does: the verb, the
// group and version in camel case, then the rest ("readAppsV1NamespacedDeployment";
// tag "apps_v1").
func operationIDAndTags(r common.Route) (string, []string, error) {
	op := r.OperationName()
	var verb string
	for _, v := range []string{"read", "replace", "patch", "deleteCollection", "delete", "list", "create"} {
		if strings.HasPrefix(op, v) {
			verb = v
			break
		}
	}
	if verb == "" {
		return op, nil, fmt.Errorf("operation %q does not start with a verb", op)
	}
	if verb == "deleteCollection" {
		verb = "delete"
	}
	parts := strings.Split(strings.Trim(r.Path(), "/"), "/")
	if parts[0] == "api" {
		parts = append([]string{"apis", "core"}, parts[1:]...)
	}
	group := strings.TrimSuffix(parts[1], ".k8s.io")
	id := verb + openapi.ToValidOperationID(group, true) + openapi.ToValidOperationID(parts[2], true) + openapi.ToValidOperationID(op[len(verb):], true)
	return id, []string{openapi.ToValidOperationID(group, false) + "_" + openapi.ToValidOperationID(parts[2], false)}, nil
}

// route, param, response and routeContainer implement kube-openapi's
// route interfaces (common.Route and friends).
type route struct {
	method, path, op, action, desc string
	params                         []common.Parameter
	consumes, produces             []string
	meta                           map[string]any
	req                            any
	resp                           []response
}

func (r *route) Method() string        { return r.method }
func (r *route) Path() string          { return r.path }
func (r *route) OperationName() string { return r.op }
func (r *route) Description() string   { return r.desc }
func (r *route) Consumes() []string    { return r.consumes }
func (r *route) Produces() []string {
	if r.produces != nil {
		return r.produces
	}
	return jsonOnly
}
func (r *route) Parameters() []common.Parameter {
	ps := r.params
	if r.req != nil {
		ps = append(slices.Clip(ps), param{name: "body", kind: common.BodyParameterKind, required: true})
	}
	return ps
}
func (r *route) Metadata() map[string]any {
	m := map[string]any{"x-kubernetes-action": r.action}
	for k, v := range r.meta {
		m[k] = v
	}
	return m
}
func (r *route) RequestPayloadSample() any  { return r.req }
func (r *route) ResponsePayloadSample() any { return nil }
func (r *route) StatusCodeResponses() []common.StatusCodeResponse {
	out := make([]common.StatusCodeResponse, len(r.resp))
	for i, resp := range r.resp {
		out[i] = resp
	}
	return out
}

type param struct {
	name, desc, dataType string
	kind                 common.ParameterKind
	required             bool
}

func (p param) Name() string               { return p.name }
func (p param) Description() string        { return p.desc }
func (p param) Required() bool             { return p.required }
func (p param) Kind() common.ParameterKind { return p.kind }
func (p param) DataType() string           { return p.dataType }
func (p param) AllowMultiple() bool        { return false }

type response struct {
	code  int
	msg   string
	model any
}

func (r response) Code() int       { return r.code }
func (r response) Message() string { return r.msg }
func (r response) Model() any      { return r.model }

type routeContainer struct {
	root   string
	routes []common.Route
}

func (c routeContainer) RootPath() string                   { return c.root }
func (c routeContainer) PathParameters() []common.Parameter { return nil }
func (c routeContainer) Routes() []common.Route             { return c.routes }
