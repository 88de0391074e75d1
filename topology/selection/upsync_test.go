package selection

import (
	"testing"

	"github.com/canopy-dev/canopy/topology/api/v1alpha1"
)

// An upsync clause matches when every field it sets does: group (left out:
// any), resources and namespaces (names or "*"; cluster-scoped objects
// ignore namespaces) and names (shell patterns).
func TestUpsyncMatches(t *testing.T) {
	core, apps := "", "apps"
	for _, c := range []struct {
		clause               v1alpha1.UpsyncClause
		group, res, ns, name string
		want                 bool
	}{
		{v1alpha1.UpsyncClause{Resources: []string{"configmaps"}}, "", "configmaps", "a", "x", true},
		{v1alpha1.UpsyncClause{APIGroup: &core, Resources: []string{"configmaps"}}, "apps", "configmaps", "a", "x", false},
		{v1alpha1.UpsyncClause{APIGroup: &apps, Resources: []string{"*"}}, "apps", "deployments", "a", "x", true},
		{v1alpha1.UpsyncClause{Resources: []string{"secrets"}}, "", "configmaps", "a", "x", false},
		{v1alpha1.UpsyncClause{Resources: []string{"configmaps"}, Namespaces: []string{"b"}}, "", "configmaps", "a", "x", false},
		{v1alpha1.UpsyncClause{Resources: []string{"configmaps"}, Namespaces: []string{"*"}}, "", "configmaps", "a", "x", true},
		{v1alpha1.UpsyncClause{Resources: []string{"namespaces"}, Namespaces: []string{"b"}}, "", "namespaces", "", "a", true},
		{v1alpha1.UpsyncClause{Resources: []string{"configmaps"}, Names: []string{"up-*"}}, "", "configmaps", "a", "up-1", true},
		{v1alpha1.UpsyncClause{Resources: []string{"configmaps"}, Names: []string{"up-*"}}, "", "configmaps", "a", "down", false},
		{v1alpha1.UpsyncClause{Resources: []string{"configmaps"}, Names: []string{"x", "[ab]?"}}, "", "configmaps", "a", "bz", true},
	} {
		if got := UpsyncMatches(&c.clause, c.group, c.res, c.ns, c.name); got != c.want {
			t.Errorf("%+v vs %s %s %s/%s: %v, want %v", c.clause, c.group, c.res, c.ns, c.name, got, c.want)
		}
	}
}
