package selection

import (
	"path"
	"slices"

	"github.com/canopy-dev/canopy/topology/api/v1alpha1"
)

// UpsyncMatches reports whether an object of a destination (namespace
// empty: cluster-scoped) matches upsync clause c: every field of c that is
// set matches. Resources and namespaces are names or "*"; names are shell
// patterns (NameMatches). The edge decides with it which objects it
// reports, the root which placements those reports belong to.
func UpsyncMatches(c *v1alpha1.UpsyncClause, group, resource, namespace, name string) bool {
	if c.APIGroup != nil && *c.APIGroup != group {
		return false
	}
	if !slices.Contains(c.Resources, "*") && !slices.Contains(c.Resources, resource) {
		return false
	}
	if namespace != "" && len(c.Namespaces) > 0 && !slices.Contains(c.Namespaces, "*") && !slices.Contains(c.Namespaces, namespace) {
		return false
	}
	return NameMatches(c.Names, name)
}

// NameMatches reports whether name matches one of patterns, shell
// patterns with path.Match's syntax (*, ?, [...]; "*" matches any name, a
// pattern without special characters only itself); no patterns match
// every name. A malformed pattern, which the root's API refuses, matches
// only the name equal to it.
func NameMatches(patterns []string, name string) bool {
	if len(patterns) == 0 {
		return true
	}
	for _, p := range patterns {
		if p == name {
			return true
		}
		if ok, err := path.Match(p, name); ok && err == nil {
			return true
		}
	}
	return false
}
