package kubeapi

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"net/http"
	"strings"

	openapiv2 "github.com/google/gnostic-models/openapiv2"
	"google.golang.org/protobuf/proto"
)

// serveOpenAPI answers /openapi/v3 and /openapi/v3/<group-version>.
//
// These documents are the operations index of each group-version: one path
// per resource with its verbs, the x-kubernetes-group-version-kind of every
// operation and the query parameters the server honours (fieldValidation,
// dryRun, fieldManager). kubectl reads them to learn that the server
// validates fields itself, and so sends fieldValidation=Strict instead of
// validating on the client. Object schemas (for kubectl explain and
// client-side validation) are not published yet: /openapi/v2 is a valid
// Swagger 2.0 document without definitions, so kubectl's client-side
// validation finds no schema and leaves the decision to the server (which
// is how an unknown kind reaches kubectl's own "no matches for kind" error).
func (s *Server) serveOpenAPI(rq *request, rest string) {
	if rest == "/openapi/v2" {
		writeRaw(rq.w, http.StatusOK, openAPIV2ProtoType, emptyOpenAPIV2)
		return
	}
	if !strings.HasPrefix(rest, "/openapi/v3") {
		rq.writeError(errNoResource())
		return
	}
	prefix := ""
	if strings.HasPrefix(rq.r.URL.Path, "/spaces/") {
		prefix = "/spaces/" + rq.space
	}
	docs := s.openAPIDocs(rq.data)
	gv := strings.Trim(strings.TrimPrefix(rest, "/openapi/v3"), "/")
	if gv == "" {
		paths := map[string]any{}
		for name, doc := range docs {
			sum := sha256.Sum256(doc)
			paths[name] = map[string]string{"serverRelativeURL": prefix + "/openapi/v3/" + name + "?hash=" + strings.ToUpper(hex.EncodeToString(sum[:16]))}
		}
		writeJSON(rq, http.StatusOK, map[string]any{"paths": paths})
		return
	}
	doc, ok := docs[gv]
	if !ok {
		rq.writeError(errNoResource())
		return
	}
	writeRaw(rq.w, http.StatusOK, "application/json", doc)
}

// openAPIDocs builds the v3 operations documents of a space, by
// group-version path ("api/v1", "apis/apps/v1").
func (s *Server) openAPIDocs(space string) map[string][]byte {
	byGV := map[string]map[string]any{}
	for _, sv := range s.catalog.all(space) {
		name := "apis/" + sv.group + "/" + sv.version
		if sv.group == "" {
			name = "api/" + sv.version
		}
		paths := byGV[name]
		if paths == nil {
			paths = map[string]any{}
			byGV[name] = paths
		}
		base := "/" + name + "/"
		if sv.namespaced {
			base += "namespaces/{namespace}/"
		}
		gvk := map[string]string{"group": sv.group, "version": sv.version, "kind": sv.kind}
		op := func(id string, params ...string) map[string]any {
			o := map[string]any{"operationId": id, "x-kubernetes-group-version-kind": gvk}
			var ps []map[string]any
			for _, p := range params {
				ps = append(ps, map[string]any{"name": p, "in": "query", "schema": map[string]string{"type": "string"}})
			}
			if ps != nil {
				o["parameters"] = ps
			}
			return o
		}
		item := map[string]any{}
		if sv.hasVerb("get") {
			item["get"] = op("read" + sv.kind)
		}
		if sv.hasVerb("update") {
			item["put"] = op("replace"+sv.kind, "dryRun", "fieldManager", "fieldValidation")
		}
		if sv.hasVerb("patch") {
			item["patch"] = op("patch"+sv.kind, "dryRun", "fieldManager", "fieldValidation", "force")
		}
		if sv.hasVerb("delete") {
			item["delete"] = op("delete"+sv.kind, "dryRun", "gracePeriodSeconds", "propagationPolicy")
		}
		paths[base+sv.resource+"/{name}"] = item
		coll := map[string]any{}
		if sv.hasVerb("list") {
			coll["get"] = op("list" + sv.kind)
		}
		if sv.hasVerb("create") {
			coll["post"] = op("create"+sv.kind, "dryRun", "fieldManager", "fieldValidation")
		}
		paths[base+sv.resource] = coll
	}
	out := make(map[string][]byte, len(byGV))
	for name, paths := range byGV {
		b, err := json.Marshal(map[string]any{
			"openapi": "3.0.0",
			"info":    map[string]string{"title": "Canopy", "version": "v1"},
			"paths":   paths,
		})
		if err == nil {
			out[name] = b
		}
	}
	return out
}

const openAPIV2ProtoType = "application/com.github.proto-openapi.spec.v2.v1.0+protobuf"

// emptyOpenAPIV2 is a Swagger 2.0 document with no paths or definitions, in
// the protobuf form kubectl asks for.
var emptyOpenAPIV2 = func() []byte {
	b, err := proto.Marshal(&openapiv2.Document{
		Swagger: "2.0",
		Info:    &openapiv2.Info{Title: "Canopy", Version: "v1"},
		Paths:   &openapiv2.Paths{},
	})
	if err != nil {
		panic(err)
	}
	return b
}()
