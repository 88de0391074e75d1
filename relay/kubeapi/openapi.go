package kubeapi

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"net/http"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
)

// serveOpenAPI answers /openapi/v3 and /openapi/v3/<group-version>.
//
// These documents are the operations index of each group-version: one path
// per resource with its verbs, the x-kubernetes-group-version-kind of every
// operation and the query parameters the server honours (fieldValidation,
// dryRun, fieldManager). kubectl reads them to learn that the server
// validates fields itself, and so sends fieldValidation=Strict instead of
// validating on the client. Object schemas (for kubectl explain and
// client-side validation) and /openapi/v2 are not published yet: v2 and
// unknown paths answer 404.
func (s *Server) serveOpenAPI(rq *request, rest string) {
	if !strings.HasPrefix(rest, "/openapi/v3") {
		rq.writeError(apierrors.NewNotFound(notFoundGR, ""))
		return
	}
	prefix := ""
	if strings.HasPrefix(rq.r.URL.Path, "/spaces/") {
		prefix = "/spaces/" + rq.space
	}
	docs := s.openAPIDocs(rq.space)
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
		rq.writeError(apierrors.NewNotFound(notFoundGR, ""))
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
