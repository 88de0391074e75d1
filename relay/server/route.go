package server

import (
	"encoding/json"
	"strings"

	"k8s.io/apimachinery/pkg/fields"

	"github.com/canopy-dev/canopy/relay/store"
	"github.com/canopy-dev/canopy/topology/placement"
)

// DestinationsAnnotation on an object lists (comma-separated) the
// destinations the object targets. At the root the placement translator
// writes objects with it into the downsync space; a region receives them
// in its inbox. Either way the children's mailboxes are indexes over that
// one space (tree.Routing): an object goes to every child under which one
// of its destinations was announced, and nothing is copied per child.
const DestinationsAnnotation = placement.DestinationsAnnotation

// destinationsField is the store field holding DestinationsAnnotation, so
// that the annotation is parsed once per stored version, not once per
// child and look-up.
const destinationsField = "metadata.annotations." + DestinationsAnnotation

// withDestinations extends a store's Options.Fields with destinationsField.
func withDestinations(base func(store.Resource, map[string]any) fields.Set) func(store.Resource, map[string]any) fields.Set {
	return func(r store.Resource, obj map[string]any) fields.Set {
		var set fields.Set
		if base != nil {
			set = base(r, obj)
		}
		md, _ := obj["metadata"].(map[string]any)
		ann, _ := md["annotations"].(map[string]any)
		if d, ok := ann[DestinationsAnnotation].(string); ok && d != "" {
			if set == nil {
				set = fields.Set{}
			}
			set[destinationsField] = d
		}
		return set
	}
}

// trimDestinations is tree.Routing.Trim: it keeps, in an object's
// DestinationsAnnotation, only the destinations keep accepts (those below
// the child it is sent to).
func trimDestinations(data []byte, keep func(dest string) bool) []byte {
	var m map[string]any
	if json.Unmarshal(data, &m) != nil {
		return data
	}
	md, _ := m["metadata"].(map[string]any)
	ann, _ := md["annotations"].(map[string]any)
	list, ok := ann[DestinationsAnnotation].(string)
	if !ok {
		return data
	}
	var kept []string
	for _, d := range strings.Split(list, ",") {
		if d = strings.TrimSpace(d); d != "" && keep(d) {
			kept = append(kept, d)
		}
	}
	if len(kept) == len(strings.Split(list, ",")) {
		return data
	}
	ann[DestinationsAnnotation] = strings.Join(kept, ",")
	out, err := json.Marshal(m)
	if err != nil {
		return data
	}
	return out
}

// targetsOf returns the destinations an object targets
// (tree.Routing.Targets).
func targetsOf(o *store.Object) []string {
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
