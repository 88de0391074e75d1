package kubeapi

import "k8s.io/apimachinery/pkg/runtime/schema"

// Serves reports whether space serves gvr: a built-in kind, or a CRD of
// the space that serves that version.
func (s *Server) Serves(space string, gvr schema.GroupVersionResource) bool {
	sv, ok := s.catalog.lookup(space, gvr.Group, gvr.Version, gvr.Resource)
	return sv != nil && ok
}
