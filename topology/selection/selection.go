package selection

import (
	"fmt"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/canopy-dev/canopy/topology/api/v1alpha1"
)

// Object is what matching needs to know of a workload object. Namespace
// is empty for cluster-scoped objects (CustomResourceDefinitions,
// ClusterRoles, Namespaces themselves). Labels is read, never written.
type Object struct {
	Group     string // API group; "" is the core group
	Resource  string // lower-case plural resource name
	Namespace string // "" for cluster-scoped objects
	Name      string
	Labels    map[string]string
}

// Selector is a compiled list of downsync clauses. The zero value and a
// nil *Selector match nothing.
type Selector struct {
	clauses []clause
}

// clause is one compiled DownsyncClause.
type clause struct {
	anyGroup bool // APIGroup left out
	group    string

	resources nameSet // required: never unconstrained

	// Namespace test, for namespaced objects only: passes when
	// !nsConstrained, or the namespace is in namespaces, or nsSel
	// selects its labels.
	nsConstrained bool
	namespaces    nameSet
	nsSel         labels.Selector // nil when NamespaceSelector is left out
	nsSelAll      bool            // nsSel is {}: selects every namespace

	names nameSet // unconstrained when ObjectNames is left out

	labelSels []labels.Selector // any-of; none means unconstrained
}

// smallSet is the list length up to which a linear scan beats a map.
const smallSet = 8

// nameSet is a list of names in which "*" matches any name.
type nameSet struct {
	constrained bool // the list is not empty
	all         bool // the list holds "*"
	list        []string
	set         map[string]struct{} // instead of list, for long lists
}

func newNameSet(names []string) nameSet {
	s := nameSet{constrained: len(names) > 0}
	for _, n := range names {
		if n == "*" {
			s.all = true
			return s
		}
	}
	if len(names) <= smallSet {
		s.list = names
		return s
	}
	s.set = make(map[string]struct{}, len(names))
	for _, n := range names {
		s.set[n] = struct{}{}
	}
	return s
}

// has reports whether name is in the set; an unconstrained set has
// every name.
func (s *nameSet) has(name string) bool {
	if !s.constrained || s.all {
		return true
	}
	if s.set != nil {
		_, ok := s.set[name]
		return ok
	}
	for _, n := range s.list {
		if n == name {
			return true
		}
	}
	return false
}

// listed reports whether name is explicitly in a constrained set.
func (s *nameSet) listed(name string) bool {
	return s.constrained && s.has(name)
}

// Compile converts clauses once, for many calls of Matches. It keeps
// references to the clauses' string lists, which the caller must not
// change afterwards. An invalid clause is an error naming its index and
// field, as in "downsync[2].labelSelectors[0]: ...".
func Compile(clauses []v1alpha1.DownsyncClause) (*Selector, error) {
	s := &Selector{clauses: make([]clause, len(clauses))}
	for i := range clauses {
		dc := &clauses[i]
		c := &s.clauses[i]
		if dc.APIGroup == nil {
			c.anyGroup = true
		} else {
			c.group = *dc.APIGroup
		}
		if len(dc.Resources) == 0 {
			return nil, fmt.Errorf("downsync[%d].resources: at least one resource (or \"*\") is required", i)
		}
		c.resources = newNameSet(dc.Resources)
		c.namespaces = newNameSet(dc.Namespaces)
		c.nsConstrained = len(dc.Namespaces) > 0 || dc.NamespaceSelector != nil
		if dc.NamespaceSelector != nil {
			sel, err := metav1.LabelSelectorAsSelector(dc.NamespaceSelector)
			if err != nil {
				return nil, fmt.Errorf("downsync[%d].namespaceSelector: %w", i, err)
			}
			c.nsSel, c.nsSelAll = sel, sel.Empty()
		}
		c.names = newNameSet(dc.ObjectNames)
		for j := range dc.LabelSelectors {
			sel, err := metav1.LabelSelectorAsSelector(&dc.LabelSelectors[j])
			if err != nil {
				return nil, fmt.Errorf("downsync[%d].labelSelectors[%d]: %w", i, j, err)
			}
			c.labelSels = append(c.labelSels, sel)
		}
	}
	return s, nil
}

// Len is the number of clauses.
func (s *Selector) Len() int {
	if s == nil {
		return 0
	}
	return len(s.clauses)
}

// Matches reports the first clause that obj matches. nsLabels returns the
// labels of a Namespace object (nil when it does not exist); it is called
// at most once, and only for a namespaced object that a clause selects by
// NamespaceSelector alone. A nil nsLabels is taken as "no labels".
//
// Matches allocates nothing.
func (s *Selector) Matches(obj Object, nsLabels func(namespace string) map[string]string) (clause int, ok bool) {
	if s == nil {
		return -1, false
	}
	var (
		nsl     labels.Set
		nslDone bool
	)
	for i := range s.clauses {
		c := &s.clauses[i]
		if !c.anyGroup && c.group != obj.Group {
			continue
		}
		if !c.resources.has(obj.Resource) || !c.names.has(obj.Name) {
			continue
		}
		if len(c.labelSels) > 0 && !anyMatches(c.labelSels, labels.Set(obj.Labels)) {
			continue
		}
		if obj.Namespace != "" && c.nsConstrained && !c.namespaces.listed(obj.Namespace) {
			if c.nsSel == nil {
				continue
			}
			if !c.nsSelAll {
				if !nslDone {
					nslDone = true
					if nsLabels != nil {
						nsl = nsLabels(obj.Namespace)
					}
				}
				if !c.nsSel.Matches(nsl) {
					continue
				}
			}
		}
		return i, true
	}
	return -1, false
}

func anyMatches(sels []labels.Selector, l labels.Set) bool {
	for _, sel := range sels {
		if sel.Matches(l) {
			return true
		}
	}
	return false
}

// namespaceTest is a clause's namespace test for a namespaced object:
// pass reports whether it passes; dependsOnLabels whether the answer
// depends on the Namespace's labels at all.
func (c *clause) namespaceTest(ns string, nsl labels.Set) (pass, dependsOnLabels bool) {
	if !c.nsConstrained || c.namespaces.listed(ns) {
		return true, false
	}
	if c.nsSel == nil {
		return false, false
	}
	if c.nsSelAll {
		return true, false
	}
	return c.nsSel.Matches(nsl), true
}

// MayMatchNamespace reports whether some clause can select objects of
// namespace ns when its Namespace object has the given labels, whatever
// the objects' group, resource, name and labels. When it is false, no
// object of ns matches and the caller can skip the namespace. An empty ns
// stands for cluster-scoped objects, which ignore namespaces: it reports
// whether there is any clause.
//
// A change of a Namespace's labels from old to new can change what
// Matches says about its objects only when MayMatchNamespace holds for
// old or for new; NamespaceLabelsChangeMatter is the exact test.
func (s *Selector) MayMatchNamespace(ns string, nsLabels map[string]string) bool {
	if s == nil {
		return false
	}
	if ns == "" {
		return len(s.clauses) > 0
	}
	for i := range s.clauses {
		if pass, _ := s.clauses[i].namespaceTest(ns, nsLabels); pass {
			return true
		}
	}
	return false
}

// NamespaceLabelsChangeMatter reports whether a change of namespace ns's
// labels from oldLabels to newLabels can change what Matches says about
// any object of ns (whether it matches, or which clause matches first):
// true when some clause selects ns by NamespaceSelector alone and that
// selector's verdict differs between the two label sets. When it is
// false, the caller need not re-evaluate the namespace's objects.
func (s *Selector) NamespaceLabelsChangeMatter(ns string, oldLabels, newLabels map[string]string) bool {
	if s == nil || ns == "" {
		return false
	}
	for i := range s.clauses {
		before, depends := s.clauses[i].namespaceTest(ns, oldLabels)
		if !depends {
			continue
		}
		if after, _ := s.clauses[i].namespaceTest(ns, newLabels); after != before {
			return true
		}
	}
	return false
}

// UsesNamespaceLabels reports whether any clause selects namespaces by
// their labels, i.e. whether the caller needs to watch Namespace objects
// for this placement at all.
func (s *Selector) UsesNamespaceLabels() bool {
	if s == nil {
		return false
	}
	for i := range s.clauses {
		if c := &s.clauses[i]; c.nsSel != nil && !c.nsSelAll && !c.namespaces.all {
			return true
		}
	}
	return false
}
