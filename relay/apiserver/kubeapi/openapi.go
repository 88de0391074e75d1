package kubeapi

import (
	"bytes"
	"compress/gzip"
	"crypto/sha512"
	"encoding/hex"
	"encoding/json"
	"net/http"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	openapiv2 "github.com/google/gnostic-models/openapiv2"
	openapiv3 "github.com/google/gnostic-models/openapiv3"
	"google.golang.org/protobuf/proto"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apiextensions-apiserver/pkg/controller/openapi/builder"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/kube-openapi/pkg/spec3"
	"k8s.io/kube-openapi/pkg/validation/spec"

	"github.com/canopy-dev/canopy/relay/layout"
	"github.com/canopy-dev/canopy/relay/store"
)

// serveOpenAPI answers /openapi/v2, /openapi/v3 and
// /openapi/v3/<group-version> of a space, as kube-apiserver does:
//
//   - /openapi/v3 is the index: one entry per group-version with the
//     serverRelativeURL of its document, which carries the document's hash
//     (and the /spaces/<space> prefix the request came with, since client-go
//     requests that URL as is).
//   - /openapi/v3/<group-version> is the document: paths with the
//     operations, their parameters (fieldValidation, dryRun, ...) and
//     x-kubernetes-group-version-kind, and components.schemas with the
//     models. kubectl explain renders it; kubectl's strategic merge patch
//     reads x-kubernetes-patch-strategy from it; its field validation
//     check finds fieldValidation on the PATCH operation and so leaves
//     validation to the server, as with kube-apiserver. With a hash that
//     is current the answer is immutable; with a stale one it redirects
//     to the current URL.
//   - /openapi/v2 is one Swagger 2.0 document of every kind, as JSON or,
//     when asked for (kubectl asks), protobuf. Client-side validation
//     (kubectl against a server without field validation, helm) and
//     kubectl's older code paths read it.
//
// Built-in kinds have the models described in openapi_defs.go, the same in
// every space and built once per process. A space's custom resources have
// the documents kube's CRD handler builds from their CRD (the same
// builder), merged per group-version; documents are cached by content, so
// spaces with the same CRDs share them and a changed CRD changes the hash.
func (s *Server) serveOpenAPI(rq *request, rest string) {
	set, err := s.openAPIFor(rq)
	if err != nil {
		rq.writeError(apierrors.NewInternalError(err))
		return
	}
	prefix := rq.prefix
	switch {
	case rest == "/openapi/v2":
		doc, err := set.v2()
		if err != nil {
			rq.writeError(apierrors.NewInternalError(err))
			return
		}
		doc.serve(rq, accepts(rq.r, "protobuf"))
	case rest == "/openapi/v3" || rest == "/openapi/v3/":
		paths := make(map[string]map[string]string, len(set.v3))
		for name, doc := range set.v3 {
			if !rq.view.hasOpenAPI(name) {
				continue
			}
			paths[name] = map[string]string{"serverRelativeURL": doc.url(prefix, name)}
		}
		writeJSON(rq, http.StatusOK, map[string]any{"paths": paths})
	case strings.HasPrefix(rest, "/openapi/v3/"):
		name := strings.Trim(strings.TrimPrefix(rest, "/openapi/v3/"), "/")
		doc, ok := set.v3[name]
		if !ok || !rq.view.hasOpenAPI(name) {
			rq.writeError(errNoResource())
			return
		}
		if h := rq.r.URL.Query().Get("hash"); h != "" {
			if h != doc.hash {
				http.Redirect(rq.w, rq.r, doc.url(prefix, name), http.StatusMovedPermanently)
				return
			}
			rq.w.Header().Set("Expires", time.Now().AddDate(1, 0, 0).UTC().Format(http.TimeFormat))
			rq.w = immutable{rq.w}
		}
		doc.serve(rq, accepts(rq.r, "protobuf"))
	default:
		rq.writeError(errNoResource())
	}
}

// Content types of the documents in protobuf, as kube-apiserver answers
// them. Clients ask with an older form ("spec.v2@v1.0"), which is not a
// valid media type: client-go fails to parse it in an answer.
const (
	openAPIV2ProtoType = "application/com.github.proto-openapi.spec.v2.v1.0+protobuf"
	openAPIV3ProtoType = "application/com.github.proto-openapi.spec.v3.v1.0+protobuf"
)

func accepts(r *http.Request, sub string) bool {
	return strings.Contains(r.Header.Get("Accept"), sub)
}

// immutable makes writeRaw's Cache-Control say that the answer never
// changes (the URL names the content by its hash).
type immutable struct{ http.ResponseWriter }

func (w immutable) WriteHeader(code int) {
	if code == http.StatusOK {
		w.Header().Set("Cache-Control", "public, immutable")
	}
	w.ResponseWriter.WriteHeader(code)
}

// openAPIDoc is one document, serialized: JSON always, protobuf and
// gzip-compressed forms when first asked for.
type openAPIDoc struct {
	json []byte
	hash string // upper-case hex SHA-512 of json, as kube's
	v2   bool

	protoOnce sync.Once
	proto     []byte
	protoErr  error

	gzipMu sync.Mutex
	gzip   map[bool][]byte // by protobuf
}

func newOpenAPIDoc(v any, v2 bool) (*openAPIDoc, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	sum := sha512.Sum512(b)
	return &openAPIDoc{json: b, hash: strings.ToUpper(hex.EncodeToString(sum[:])), v2: v2}, nil
}

func (d *openAPIDoc) url(prefix, name string) string {
	return prefix + "/openapi/v3/" + name + "?hash=" + d.hash
}

func (d *openAPIDoc) protobuf() ([]byte, error) {
	d.protoOnce.Do(func() {
		var m proto.Message
		if d.v2 {
			m, d.protoErr = openapiv2.ParseDocument(d.json)
		} else {
			m, d.protoErr = openapiv3.ParseDocument(d.json)
		}
		if d.protoErr == nil {
			d.proto, d.protoErr = proto.Marshal(m)
		}
	})
	return d.proto, d.protoErr
}

// gzipMin is the size from which an answer is compressed for a client that
// accepts gzip (kube-apiserver's threshold).
const gzipMin = 128 << 10

func (d *openAPIDoc) serve(rq *request, asProto bool) {
	body, ctype, etag := d.json, "application/json", `"`+d.hash+`"`
	if asProto {
		b, err := d.protobuf()
		if err != nil {
			rq.writeError(apierrors.NewInternalError(err))
			return
		}
		body, ctype, etag = b, openAPIV3ProtoType, `"`+d.hash+`-pb"`
		if d.v2 {
			ctype = openAPIV2ProtoType
		}
	}
	h := rq.w.Header()
	h.Set("Etag", etag)
	h.Set("Vary", "Accept, Accept-Encoding")
	if slices.Contains(strings.Split(strings.ReplaceAll(rq.r.Header.Get("If-None-Match"), " ", ""), ","), etag) {
		rq.w.WriteHeader(http.StatusNotModified)
		return
	}
	if len(body) >= gzipMin && strings.Contains(rq.r.Header.Get("Accept-Encoding"), "gzip") {
		body = d.gzipped(asProto, body)
		h.Set("Content-Encoding", "gzip")
	}
	writeRaw(rq.w, http.StatusOK, ctype, body)
}

func (d *openAPIDoc) gzipped(asProto bool, body []byte) []byte {
	d.gzipMu.Lock()
	defer d.gzipMu.Unlock()
	if b, ok := d.gzip[asProto]; ok {
		return b
	}
	var buf bytes.Buffer
	zw, _ := gzip.NewWriterLevel(&buf, gzip.DefaultCompression)
	_, _ = zw.Write(body)
	_ = zw.Close()
	if d.gzip == nil {
		d.gzip = map[bool][]byte{}
	}
	d.gzip[asProto] = buf.Bytes()
	return buf.Bytes()
}

// openAPISet is what one space serves: the v3 documents by group-version
// path and the v2 document (built when first asked for).
type openAPISet struct {
	v3 map[string]*openAPIDoc
	v2 func() (*openAPIDoc, error)
}

// builtinSet is the set of a space without custom resources.
var builtinSet = sync.OnceValues(func() (*openAPISet, error) {
	specs, err := builtinOpenAPI()
	if err != nil {
		return nil, err
	}
	set := &openAPISet{v3: make(map[string]*openAPIDoc, len(specs.v3))}
	for name, doc := range specs.v3 {
		if set.v3[name], err = newOpenAPIDoc(doc, false); err != nil {
			return nil, err
		}
	}
	set.v2 = sync.OnceValues(func() (*openAPIDoc, error) { return newOpenAPIDoc(specs.v2, true) })
	return set, nil
})

// openAPIFor returns the documents of rq's space: the system space's
// custom resource is Space (spacesapi.go).
func (s *Server) openAPIFor(rq *request) (*openAPISet, error) {
	base, err := builtinSet()
	if err != nil {
		return nil, err
	}
	var crds []*crdOpenAPI
	if rq.kind == layout.SpaceKindSystem {
		crds = openAPIOfCRDs([]*compiledCRD{spaceServed()})
	} else {
		crds = s.openAPICRDs(rq.data)
	}
	if len(crds) == 0 {
		return base, nil
	}
	var key strings.Builder
	for _, c := range crds {
		key.WriteString(c.hash)
	}
	return openAPISets.get(key.String(), func() (*openAPISet, error) { return assembleOpenAPI(base, crds) })
}

// crdOpenAPI holds the documents kube's CRD handler builds for one CRD
// (by content: its spec), per served version.
type crdOpenAPI struct {
	name string
	hash string
	v3   map[string]*spec3.OpenAPI // by version
	v2   map[string]*spec.Swagger
	gv   map[string]string // version -> group-version path
}

// openAPICRDs returns the OpenAPI of the CRDs served in space, by name.
func (s *Server) openAPICRDs(space string) []*crdOpenAPI {
	list, err := s.store.List(store.ListOptions{Space: space, Resource: crdResource})
	if err != nil {
		return nil
	}
	var ccs []*compiledCRD
	for _, obj := range list.Items {
		cc := s.catalog.crd(space, obj.Key.Name)
		if cc != nil && crdServing(cc.obj) {
			ccs = append(ccs, cc)
		}
	}
	return openAPIOfCRDs(ccs)
}

// openAPIOfCRDs returns the OpenAPI of ccs, by name.
func openAPIOfCRDs(ccs []*compiledCRD) []*crdOpenAPI {
	var out []*crdOpenAPI
	for _, cc := range ccs {
		hash := cc.specHash()
		if hash == "" {
			continue
		}
		c, err := crdOpenAPIs.get(hash, func() (*crdOpenAPI, error) { return buildCRDOpenAPI(cc.obj, hash), nil })
		if err == nil && len(c.v3) > 0 {
			out = append(out, c)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].name < out[j].name })
	return out
}

// openAPIHash names a CRD's OpenAPI documents by their content, its spec
// (hex SHA-512/256 of its JSON); "" if the spec does not encode.
func openAPIHash(c *apiextensionsv1.CustomResourceDefinition) string {
	b, err := json.Marshal(c.Spec)
	if err != nil {
		return ""
	}
	sum := sha512.Sum512_256(b)
	return hex.EncodeToString(sum[:])
}

// buildCRDOpenAPI runs kube's CRD OpenAPI builder for every served version,
// with the options kube-apiserver uses. A version whose schema the builder
// refuses is left out, as kube leaves it out.
func buildCRDOpenAPI(c *apiextensionsv1.CustomResourceDefinition, hash string) *crdOpenAPI {
	out := &crdOpenAPI{name: c.Name, hash: hash, v3: map[string]*spec3.OpenAPI{}, v2: map[string]*spec.Swagger{}, gv: map[string]string{}}
	for _, v := range c.Spec.Versions {
		if !v.Served {
			continue
		}
		v3, err := builder.BuildOpenAPIV3(c, v.Name, builder.Options{V2: false, IncludeSelectableFields: true})
		if err != nil {
			continue
		}
		out.v3[v.Name] = v3
		out.gv[v.Name] = groupVersionPath(c.Spec.Group, v.Name)
		if v2, err := builder.BuildOpenAPIV2(c, v.Name, builder.Options{V2: true, IncludeSelectableFields: true}); err == nil {
			// Without defaults, as the built-in v2 models: the meta/v1
			// models both reference are then the same, and merge.
			for name, def := range v2.Definitions {
				v2.Definitions[name] = *withoutDefaults(&def)
			}
			out.v2[v.Name] = v2
		}
	}
	return out
}

// assembleOpenAPI adds the CRDs' documents to the built-in ones: a
// group-version's v3 document merges every CRD version in it (after the
// built-in kinds, which win a conflict); v2 is the built-in document with
// every CRD version merged in (kube's MergeSpecs).
func assembleOpenAPI(base *openAPISet, crds []*crdOpenAPI) (*openAPISet, error) {
	specs, err := builtinOpenAPI()
	if err != nil {
		return nil, err
	}
	byGV := map[string][]*spec3.OpenAPI{}
	var v2s []*spec.Swagger
	for _, c := range crds {
		versions := make([]string, 0, len(c.v3))
		for v := range c.v3 {
			versions = append(versions, v)
		}
		sort.Strings(versions)
		for _, v := range versions {
			byGV[c.gv[v]] = append(byGV[c.gv[v]], c.v3[v])
			if s, ok := c.v2[v]; ok {
				v2s = append(v2s, s)
			}
		}
	}
	set := &openAPISet{v3: make(map[string]*openAPIDoc, len(base.v3)+len(byGV))}
	for name, doc := range base.v3 {
		set.v3[name] = doc
	}
	for name, docs := range byGV {
		if b, ok := specs.v3[name]; ok {
			docs = append([]*spec3.OpenAPI{b}, docs...)
		}
		merged, err := builder.MergeSpecsV3(docs...)
		if err != nil {
			continue // a CRD in a built-in group-version clashing with a built-in kind
		}
		if set.v3[name], err = newOpenAPIDoc(merged, false); err != nil {
			return nil, err
		}
	}
	set.v2 = sync.OnceValues(func() (*openAPIDoc, error) {
		merged, err := builder.MergeSpecs(specs.v2, v2s...)
		if err != nil {
			return nil, err
		}
		return newOpenAPIDoc(merged, true)
	})
	return set, nil
}

// Caches shared by every server of the process, by content. They are
// bounded: when one is full it starts over.
var (
	crdOpenAPIs = &contentCache[*crdOpenAPI]{max: 512}
	openAPISets = &contentCache[*openAPISet]{max: 32}
)

type contentCache[V any] struct {
	max int
	mu  sync.Mutex
	m   map[string]*cacheEntry[V]
}

type cacheEntry[V any] struct {
	once sync.Once
	v    V
	err  error
}

// get returns the value under key, building it (once, outside the lock) if
// missing.
func (c *contentCache[V]) get(key string, build func() (V, error)) (V, error) {
	c.mu.Lock()
	e, ok := c.m[key]
	if !ok {
		if c.m == nil || len(c.m) >= c.max {
			c.m = map[string]*cacheEntry[V]{}
		}
		e = &cacheEntry[V]{}
		c.m[key] = e
	}
	c.mu.Unlock()
	e.once.Do(func() { e.v, e.err = build() })
	return e.v, e.err
}
