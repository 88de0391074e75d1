package mailbox

import (
	"bytes"
	"encoding/json"
	"strings"

	"k8s.io/apimachinery/pkg/fields"

	"github.com/canopy-dev/canopy/relay/store"
	"github.com/canopy-dev/canopy/topology/api/v1alpha1"
)

// destinationsField is the store field holding an object's
// v1alpha1.DestinationsAnnotation, the destinations it targets
// (comma-separated), parsed once per stored version, not once per child
// and look-up. A tier routes by it: at the root the placement translator
// writes objects with it into the downsync space; a region receives them
// in its inbox. Either way the children's mailboxes are indexes over that
// one space (tree.Routing): an object goes to every child under which one
// of its destinations was announced, and nothing is copied per child.
const destinationsField = "metadata.annotations." + v1alpha1.DestinationsAnnotation

// Fields extends a store's Options.Fields (base, which may be nil) with
// the field that Targets reads: the Options of every store that holds a
// tier's shared space, or reports.
func Fields(base func(store.Resource, *store.FieldSource) fields.Set) func(store.Resource, *store.FieldSource) fields.Set {
	return func(r store.Resource, v *store.FieldSource) fields.Set {
		var set fields.Set
		if base != nil {
			set = base(r, v)
		}
		if d := v.Annotation(v1alpha1.DestinationsAnnotation); d != "" {
			if set == nil {
				set = fields.Set{}
			}
			set[destinationsField] = d
		}
		return set
	}
}

// Targets returns the destinations an object targets: the Options.Addresses
// of a store that holds a tier's shared space (with Fields); Senders read
// it through Store.Addresses, once per version.
func Targets(o *store.Object) []string {
	d := o.Fields[destinationsField]
	if d == "" {
		return nil
	}
	out := strings.Split(d, ",")
	for i := range out {
		out[i] = strings.TrimSpace(out[i])
	}
	return out
}

// trim is tree.Routing.Trim: it sets, in an object's
// DestinationsAnnotation, only keep (the destinations below the child it
// is sent to). The object less the annotation is encoded once per version
// (trimTemplate), so a root with thousands of children writes each child's
// copy without decoding the object, and its fleet-long list, again.
func trim(o *store.Object, keep []string) []byte {
	list := strings.Join(keep, ",")
	t, _ := o.Memo(trimMemo{}, newTrimTemplate).(*trimTemplate)
	if t == nil {
		return setDestinations(o.Data, list)
	}
	q, _ := json.Marshal(list)
	out := make([]byte, 0, len(t.before)+len(q)+len(t.after))
	out = append(out, t.before...)
	out = append(out, q...)
	return append(out, t.after...)
}

// trimMemo is the store.Object.Memo key of trimTemplate.
type trimMemo struct{}

// trimTemplate is an object's JSON encoding around the value of its
// DestinationsAnnotation: before, the quoted list, after.
type trimTemplate struct{ before, after []byte }

// trimMark stands for the annotation's value while the template is made.
const trimMark = "\x00canopy-destinations\x00"

// newTrimTemplate returns o's trimTemplate, or a nil *trimTemplate when
// o has no DestinationsAnnotation.
func newTrimTemplate(o *store.Object) any {
	marked := setDestinations(o.Data, trimMark)
	q, _ := json.Marshal(trimMark)
	i := bytes.Index(marked, q)
	if i < 0 || bytes.Count(marked, q) != 1 {
		return (*trimTemplate)(nil)
	}
	return &trimTemplate{before: marked[:i], after: marked[i+len(q):]}
}

// setDestinations returns data with its DestinationsAnnotation set to
// list; data unchanged when it has none.
func setDestinations(data []byte, list string) []byte {
	var m map[string]any
	if json.Unmarshal(data, &m) != nil {
		return data
	}
	md, _ := m["metadata"].(map[string]any)
	ann, _ := md["annotations"].(map[string]any)
	if _, ok := ann[v1alpha1.DestinationsAnnotation].(string); !ok {
		return data
	}
	ann[v1alpha1.DestinationsAnnotation] = list
	out, err := json.Marshal(m)
	if err != nil {
		return data
	}
	return out
}
