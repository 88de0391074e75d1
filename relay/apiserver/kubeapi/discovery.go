package kubeapi

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"net/http"
	"strings"

	apidiscoveryv2 "k8s.io/api/apidiscovery/v2"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

const aggregatedDiscoveryType = "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList"

// wantsAggregated reports whether the client accepts aggregated discovery
// (apidiscovery.k8s.io/v2) before the legacy documents.
func wantsAggregated(r *http.Request) bool {
	for _, part := range strings.Split(r.Header.Get("Accept"), ",") {
		part = strings.TrimSpace(part)
		if strings.Contains(part, "as=APIGroupDiscoveryList") {
			return strings.Contains(part, "g=apidiscovery.k8s.io") && strings.Contains(part, "v=v2") && !strings.Contains(part, "v=v2beta1")
		}
		if strings.HasPrefix(part, "application/json") {
			return false
		}
	}
	return false
}

// groupsOf arranges the served resources of a space by group and version,
// keeping catalog order.
type discoveryGroup struct {
	name     string
	versions []string
	byVer    map[string][]*served
}

func groupsOf(all []*served, core bool) []*discoveryGroup {
	var out []*discoveryGroup
	idx := map[string]*discoveryGroup{}
	for _, sv := range all {
		if (sv.group == "") != core {
			continue
		}
		g := idx[sv.group]
		if g == nil {
			g = &discoveryGroup{name: sv.group, byVer: map[string][]*served{}}
			idx[sv.group] = g
			out = append(out, g)
		}
		if _, ok := g.byVer[sv.version]; !ok {
			g.versions = append(g.versions, sv.version)
		}
		g.byVer[sv.version] = append(g.byVer[sv.version], sv)
	}
	return out
}

func (s *Server) serveDiscoveryRoot(rq *request, core bool) {
	all := s.resources(rq)
	if wantsAggregated(rq.r) {
		list := apidiscoveryv2.APIGroupDiscoveryList{TypeMeta: metav1.TypeMeta{Kind: "APIGroupDiscoveryList", APIVersion: "apidiscovery.k8s.io/v2"}}
		for _, g := range groupsOf(all, core) {
			list.Items = append(list.Items, s.aggregatedGroup(g))
		}
		b, err := json.Marshal(&list)
		if err != nil {
			rq.writeError(err)
			return
		}
		sum := sha256.Sum256(b)
		etag := `"` + hex.EncodeToString(sum[:]) + `"`
		rq.w.Header().Set("ETag", etag)
		rq.w.Header().Set("Vary", "Accept")
		if rq.r.Header.Get("If-None-Match") == etag {
			rq.w.WriteHeader(http.StatusNotModified)
			return
		}
		writeRaw(rq.w, http.StatusOK, aggregatedDiscoveryType, b)
		return
	}
	if core {
		// A view of a resource of a group serves no core version.
		versions := []string{}
		for _, g := range groupsOf(all, true) {
			versions = g.versions
		}
		writeJSON(rq, http.StatusOK, &metav1.APIVersions{
			TypeMeta: metav1.TypeMeta{Kind: "APIVersions"},
			Versions: versions,
			ServerAddressByClientCIDRs: []metav1.ServerAddressByClientCIDR{{
				ClientCIDR: "0.0.0.0/0", ServerAddress: rq.r.Host,
			}},
		})
		return
	}
	list := metav1.APIGroupList{TypeMeta: metav1.TypeMeta{Kind: "APIGroupList", APIVersion: "v1"}}
	for _, g := range groupsOf(all, false) {
		list.Groups = append(list.Groups, legacyGroup(g))
	}
	writeJSON(rq, http.StatusOK, &list)
}

// serveDiscoveryPath answers /api/v1, /apis/<group> and /apis/<group>/<version>.
func (s *Server) serveDiscoveryPath(rq *request, rest string) bool {
	parts := strings.Split(strings.Trim(rest, "/"), "/")
	all := s.resources(rq)
	switch {
	case len(parts) == 2 && parts[0] == "api":
		for _, g := range groupsOf(all, true) {
			if rs, ok := g.byVer[parts[1]]; ok {
				writeJSON(rq, http.StatusOK, s.resourceList("v1", rs))
				return true
			}
		}
	case len(parts) == 2 && parts[0] == "apis":
		for _, g := range groupsOf(all, false) {
			if g.name == parts[1] {
				lg := legacyGroup(g)
				lg.Kind, lg.APIVersion = "APIGroup", "v1"
				writeJSON(rq, http.StatusOK, &lg)
				return true
			}
		}
	case len(parts) == 3 && parts[0] == "apis":
		for _, g := range groupsOf(all, false) {
			if rs, ok := g.byVer[parts[2]]; ok && g.name == parts[1] {
				writeJSON(rq, http.StatusOK, s.resourceList(parts[1]+"/"+parts[2], rs))
				return true
			}
		}
	default:
		return false
	}
	rq.writeError(errNoResource())
	return true
}

func legacyGroup(g *discoveryGroup) metav1.APIGroup {
	ag := metav1.APIGroup{Name: g.name}
	for _, v := range g.versions {
		ag.Versions = append(ag.Versions, metav1.GroupVersionForDiscovery{GroupVersion: g.name + "/" + v, Version: v})
	}
	ag.PreferredVersion = ag.Versions[0]
	return ag
}

func (s *Server) resourceList(gv string, rs []*served) *metav1.APIResourceList {
	list := &metav1.APIResourceList{TypeMeta: metav1.TypeMeta{Kind: "APIResourceList", APIVersion: "v1"}, GroupVersion: gv}
	for _, sv := range rs {
		list.APIResources = append(list.APIResources, metav1.APIResource{
			Name: sv.resource, SingularName: sv.singular, Namespaced: sv.namespaced, Kind: sv.kind,
			Verbs: sv.verbs, ShortNames: sv.shortNames, Categories: sv.categories,
		})
		for _, sub := range s.subresourcesOf(sv) {
			list.APIResources = append(list.APIResources, metav1.APIResource{
				Name: sv.resource + "/" + sub.Subresource, Namespaced: sv.namespaced,
				Group: sub.ResponseKind.Group, Version: sub.ResponseKind.Version, Kind: sub.ResponseKind.Kind,
				Verbs: sub.Verbs,
			})
		}
	}
	return list
}

func (s *Server) aggregatedGroup(g *discoveryGroup) apidiscoveryv2.APIGroupDiscovery {
	ag := apidiscoveryv2.APIGroupDiscovery{ObjectMeta: metav1.ObjectMeta{Name: g.name}}
	for _, v := range g.versions {
		vd := apidiscoveryv2.APIVersionDiscovery{Version: v, Freshness: apidiscoveryv2.DiscoveryFreshnessCurrent}
		for _, sv := range g.byVer[v] {
			scope := apidiscoveryv2.ScopeCluster
			if sv.namespaced {
				scope = apidiscoveryv2.ScopeNamespace
			}
			gvk := sv.gvk()
			vd.Resources = append(vd.Resources, apidiscoveryv2.APIResourceDiscovery{
				Resource:         sv.resource,
				ResponseKind:     &metav1.GroupVersionKind{Group: gvk.Group, Version: gvk.Version, Kind: gvk.Kind},
				Scope:            scope,
				SingularResource: sv.singular,
				Verbs:            sv.verbs,
				ShortNames:       sv.shortNames,
				Categories:       sv.categories,
				Subresources:     s.subresourcesOf(sv),
			})
		}
		ag.Versions = append(ag.Versions, vd)
	}
	return ag
}

// subresourcesOf lists the subresources served for sv, in kube's
// (alphabetical) order.
func (s *Server) subresourcesOf(sv *served) []apidiscoveryv2.APISubresourceDiscovery {
	if sv.viewed {
		return nil
	}
	out := s.connectDiscovery(sv)
	gvk := sv.gvk()
	if sv.status {
		out = append(out, apidiscoveryv2.APISubresourceDiscovery{
			Subresource:  "status",
			ResponseKind: &metav1.GroupVersionKind{Group: gvk.Group, Version: gvk.Version, Kind: gvk.Kind},
			Verbs:        []string{"get", "patch", "update"},
		})
	}
	if sv.scale != nil {
		out = append(out, apidiscoveryv2.APISubresourceDiscovery{
			Subresource:  "scale",
			ResponseKind: &metav1.GroupVersionKind{Group: "autoscaling", Version: "v1", Kind: "Scale"},
			Verbs:        []string{"get", "patch", "update"},
		})
	}
	if sv.gr() == (schema.GroupResource{Resource: "serviceaccounts"}) {
		out = append(out, apidiscoveryv2.APISubresourceDiscovery{
			Subresource:  "token",
			ResponseKind: &metav1.GroupVersionKind{Group: "authentication.k8s.io", Version: "v1", Kind: "TokenRequest"},
			Verbs:        []string{"create"},
		})
	}
	return out
}
