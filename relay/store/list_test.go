package store

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
)

// nodeFields indexes spec.node of pods, as kube does for pods' spec.nodeName.
func nodeFields(r Resource, v *FieldSource) fields.Set {
	obj := v.Object()
	spec, _ := obj["spec"].(map[string]any)
	node, _ := spec["node"].(string)
	if r != pods || node == "" {
		return nil
	}
	return fields.Set{"spec.node": node, "metadata.name": "cannot override"}
}

func keysOf(objs []*Object) []string {
	out := make([]string, len(objs))
	for i, o := range objs {
		out[i] = o.Key.String()
	}
	return out
}

// fillListStore creates, in random order, pods and deployments named a, b
// and c in namespaces ns1 and ns2 and a cluster-scoped secret in space ws,
// plus the same keys in space other; it returns ws's keys in list order.
// Objects named c have app=db, the others app=web; tier is a in ns1, c in
// ns2, b for the secret; pods have spec.node "n"+name.
func fillListStore(t *testing.T, s *Store) []string {
	var all []Key
	add := func(res Resource) {
		for _, ns := range []string{"ns1", "ns2"} {
			for _, name := range []string{"a", "b", "c"} {
				all = append(all, key("ws", res, ns, name))
			}
		}
	}
	// Resources sort by group, then name: pods and secrets ("") before
	// deployments ("apps").
	add(pods)
	all = append(all, key("ws", secrets, "", "s"))
	add(deploys)

	shuffled := slices.Clone(all)
	rand.New(rand.NewPCG(3, 4)).Shuffle(len(shuffled), func(i, j int) { shuffled[i], shuffled[j] = shuffled[j], shuffled[i] })
	for _, k := range shuffled {
		lbls := map[string]string{"app": "web", "tier": map[string]string{"ns1": "a", "ns2": "c", "": "b"}[k.Namespace]}
		if k.Name == "c" {
			lbls["app"] = "db"
		}
		mustCreate(t, s, k, body("u", lbls, map[string]any{"node": "n" + k.Name}))
		mustCreate(t, s, key("other", k.Resource, k.Namespace, k.Name), body("u", nil, nil))
	}
	return keysOf(objectsOf(all))
}

// objectsOf wraps keys into objects, for keysOf.
func objectsOf(ks []Key) []*Object {
	out := make([]*Object, len(ks))
	for i, k := range ks {
		out[i] = &Object{Key: k}
	}
	return out
}

func TestList(t *testing.T) {
	s := newStore(t, Options{Fields: nodeFields})
	all := fillListStore(t, s)
	filter := func(keep func(string) bool) []string {
		var out []string
		for _, k := range all {
			if keep(k) {
				out = append(out, k)
			}
		}
		return out
	}
	has := func(part string) func(string) bool {
		return func(k string) bool { return slices.Contains(splitKey(k), part) }
	}

	for _, tc := range []struct {
		name string
		opts ListOptions
		want []string
	}{
		{"all resources", ListOptions{Space: "ws"}, all},
		{"one resource", ListOptions{Space: "ws", Resource: pods}, filter(has("pods"))},
		{"grouped resource", ListOptions{Space: "ws", Resource: deploys}, filter(has("deployments.apps"))},
		{"namespace", ListOptions{Space: "ws", Resource: pods, Namespace: "ns2"},
			filter(func(k string) bool { return has("pods")(k) && has("ns2")(k) })},
		{"namespace, all resources", ListOptions{Space: "ws", Namespace: "ns1"}, filter(has("ns1"))},
		{"label", ListOptions{Space: "ws", Label: labels.SelectorFromSet(labels.Set{"app": "db"})}, filter(has("c"))},
		{"label set", ListOptions{Space: "ws", Label: mustSelector(t, "app=web,tier in (a,b)")},
			filter(func(k string) bool { return has("ns1")(k) && !has("c")(k) || has("secrets")(k) })},
		{"field", ListOptions{Space: "ws", Field: fields.OneTermEqualSelector("metadata.namespace", "ns2")}, filter(has("ns2"))},
		{"custom field", ListOptions{Space: "ws", Field: fields.OneTermEqualSelector("spec.node", "nb")},
			filter(func(k string) bool { return has("pods")(k) && has("b")(k) })},
		{"name field not overridden", ListOptions{Space: "ws", Resource: pods, Field: fields.OneTermEqualSelector("metadata.name", "a")},
			filter(func(k string) bool { return has("pods")(k) && has("a")(k) })},
		{"missing resource", ListOptions{Space: "ws", Resource: Resource{Resource: "nodes"}}, nil},
		{"missing space", ListOptions{Space: "nope"}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res, err := s.List(tc.opts)
			if err != nil {
				t.Fatal(err)
			}
			if got := keysOf(res.Items); !slices.Equal(got, tc.want) {
				t.Fatalf("got %v\nwant %v", got, tc.want)
			}
			if res.Revision != s.Revision() || res.Continue != "" || res.Remaining != 0 {
				t.Fatalf("revision %d (store %d), continue %q, remaining %d", res.Revision, s.Revision(), res.Continue, res.Remaining)
			}
		})
	}
}

// splitKey splits a Key.String into its parts.
func splitKey(k string) []string {
	var parts []string
	start := 0
	for i := range len(k) {
		if k[i] == '/' {
			parts = append(parts, k[start:i])
			start = i + 1
		}
	}
	return append(parts, k[start:])
}

func mustSelector(t *testing.T, s string) labels.Selector {
	t.Helper()
	sel, err := labels.Parse(s)
	if err != nil {
		t.Fatal(err)
	}
	return sel
}

func TestListPaging(t *testing.T) {
	s := newStore(t, Options{})
	fillListStore(t, s)

	for _, tc := range []struct {
		name  string
		opts  ListOptions
		limit int64
	}{
		{"all resources", ListOptions{Space: "ws"}, 4},
		{"all resources, limit 1", ListOptions{Space: "ws"}, 1},
		{"one resource", ListOptions{Space: "ws", Resource: pods}, 4},
		{"namespace", ListOptions{Space: "ws", Namespace: "ns2"}, 2},
		{"selector", ListOptions{Space: "ws", Label: labels.SelectorFromSet(labels.Set{"app": "web"})}, 3},
		{"limit above count", ListOptions{Space: "ws"}, 100},
	} {
		t.Run(tc.name, func(t *testing.T) {
			full, err := s.List(tc.opts)
			if err != nil {
				t.Fatal(err)
			}
			want := keysOf(full.Items)
			var got []string
			opts := tc.opts
			opts.Limit = tc.limit
			for {
				page, err := s.List(opts)
				if err != nil {
					t.Fatal(err)
				}
				if int64(len(page.Items)) > tc.limit {
					t.Fatalf("page of %d items, limit %d", len(page.Items), tc.limit)
				}
				got = append(got, keysOf(page.Items)...)
				if left := int64(len(want) - len(got)); page.Remaining != left {
					t.Fatalf("remaining %d, want %d", page.Remaining, left)
				}
				if page.Continue == "" {
					break
				}
				opts.After = page.Continue
			}
			if !slices.Equal(got, want) {
				t.Fatalf("pages %v\nwant %v", got, want)
			}
		})
	}
}

func TestListBadContinue(t *testing.T) {
	s := newStore(t, Options{})
	for i := range 3 {
		mustCreate(t, s, key("ws", pods, "ns", fmt.Sprint(i)), body("u", nil, i))
	}
	page, err := s.List(ListOptions{Space: "ws", Resource: pods, Limit: 1})
	if err != nil || page.Continue == "" {
		t.Fatalf("%+v, %v", page, err)
	}
	for _, tc := range []struct {
		name string
		opts ListOptions
	}{
		{"not base64", ListOptions{Space: "ws", After: "!!"}},
		{"garbage", ListOptions{Space: "ws", After: "AAAA"}},
		{"trailing", ListOptions{Space: "ws", After: page.Continue + "AA"}},
		{"other resource", ListOptions{Space: "ws", Resource: secrets, After: page.Continue}},
	} {
		if _, err := s.List(tc.opts); !errors.Is(err, ErrInvalid) {
			t.Errorf("%s: err = %v, want ErrInvalid", tc.name, err)
		}
	}
}

// TestListAndWatchMatch: Match narrows lists and watches like a selector,
// with objects moving in and out of it seen as Added and Deleted.
func TestListAndWatchMatch(t *testing.T) {
	s := newStore(t, Options{})
	even := func(o *Object) bool { return strings.HasSuffix(o.Key.Name, "-even") }
	mustCreate(t, s, key("ws", pods, "ns", "a-even"), body("u", nil, 0))
	mustCreate(t, s, key("ws", pods, "ns", "b-odd"), body("u", nil, 0))
	lr, err := s.List(ListOptions{Space: "ws", Match: even})
	if err != nil || len(lr.Items) != 1 || lr.Items[0].Key.Name != "a-even" {
		t.Fatalf("list with Match: %v %v", lr.Items, err)
	}
	w := mustWatch(t, s, WatchOptions{Space: "ws", Match: even})
	mustCreate(t, s, key("ws", pods, "ns", "c-odd"), body("u", nil, 0))
	c := mustCreate(t, s, key("ws", pods, "ns", "c-even"), body("u", nil, 0))
	checkEvent(t, next(t, w), Added, c.Revision, c, nil)
}

// FieldSource.Annotation reads metadata.annotations without decoding the
// object: an annotation becomes a field, and annotations that are missing,
// null or not strings give none without failing the write.
func TestFieldSourceAnnotation(t *testing.T) {
	byAnnotation := func(_ Resource, v *FieldSource) fields.Set {
		if a := v.Annotation("a"); a != "" {
			return fields.Set{"a": a}
		}
		return nil
	}
	s := newStore(t, Options{Fields: byAnnotation})
	for _, tc := range []struct {
		name, metadata, want string
	}{
		{"set", `{"name":"set","annotations":{"a":"x","b":"y"}}`, "x"},
		{"other", `{"name":"other","annotations":{"b":"y"}}`, ""},
		{"none", `{"name":"none"}`, ""},
		{"null", `{"name":"null","annotations":null}`, ""},
		{"not strings", `{"name":"not strings","annotations":{"a":1}}`, ""},
	} {
		o := mustCreate(t, s, key("ws", pods, "ns", tc.name), []byte(`{"metadata":`+tc.metadata+`,"spec":{"big":[1,2,3]}}`))
		got, ok := o.Fields["a"]
		if got != tc.want || ok != (tc.want != "") {
			t.Errorf("%s: field a = %q (set: %v), want %q", tc.name, got, ok, tc.want)
		}
	}
}
