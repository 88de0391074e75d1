package store

// The form the store keeps an object in is what encoding/json makes of it
// decoded one level deep (newVersion's slow path): compact, the members of
// the object and of its metadata in key order, '<', '>' and '&' escaped.
// Most writes already come in that form: they come from another store (a
// link's frames, a report) or from the kube API, which encodes the same
// way. For those, setting metadata.resourceVersion needs no decoding and
// re-encoding of the whole object: spliceVersion writes it in place.

import (
	"bytes"
	"encoding/json"
	"slices"

	"k8s.io/apimachinery/pkg/labels"
)

// storeForm reads data's members and its metadata's when data is in the
// form the store keeps and plain ASCII; false otherwise.
func storeForm(data []byte) (top, md members, ok bool) {
	for _, c := range data {
		if c >= 0x80 || c == '<' || c == '>' || c == '&' {
			return top, md, false // escaped or checked differently by encoding/json
		}
	}
	if !json.Valid(data) || !top.scan(data, 0) || top.end != len(data) {
		return top, md, false
	}
	mv, found := top.value("metadata")
	if !found || data[mv[0]] != '{' || !md.scan(data, mv[0]) {
		return top, md, false
	}
	return top, md, true
}

// spliceVersion returns data with metadata.resourceVersion set to rv (a
// JSON string, quotes included), and the members of data's metadata, when
// data is in the form the store keeps and is plain ASCII; ok is false
// otherwise (anything else, valid or not, takes the slow path, which
// gives the same bytes whenever ok is true).
func spliceVersion(data, rv []byte) (out []byte, md members, ok bool) {
	_, md, ok = storeForm(data)
	if !ok {
		return nil, md, false
	}
	const key = `"resourceVersion":`
	out = make([]byte, 0, len(data)+len(key)+len(rv)+1)
	if v, found := md.value("resourceVersion"); found {
		out = append(append(append(out, data[:v[0]]...), rv...), data[v[1]:]...)
		return out, md, true
	}
	at, comma := md.insertAt("resourceVersion")
	out = append(out, data[:at]...)
	if comma == commaBefore {
		out = append(out, ',')
	}
	out = append(append(out, key...), rv...)
	if comma == commaAfter {
		out = append(out, ',')
	}
	out = append(out, data[at:]...)
	return out, md, true
}

// WithoutResourceVersion returns data without metadata.resourceVersion,
// in the form the store keeps (what a write of data stores, but for the
// revision): two versions of an object compare equal this way when they
// differ only in their revision. Data that is not a JSON object with a
// metadata object is returned as is.
func WithoutResourceVersion(data []byte) []byte {
	if _, md, ok := storeForm(data); ok {
		i := slices.IndexFunc(md.all, func(f member) bool { return string(data[f.key[0]:f.key[1]]) == "resourceVersion" })
		if i < 0 {
			return data
		}
		from, to := md.all[i].key[0]-1, md.all[i].value[1] // the member, from its opening quote
		switch {
		case i+1 < len(md.all):
			to++ // and the comma after it
		case i > 0:
			from-- // the last: the comma before it
		}
		return slices.Concat(data[:from], data[to:])
	}
	return withoutResourceVersionDecoded(data)
}

// withoutResourceVersionDecoded is WithoutResourceVersion for data in any
// form: decoded one level deep and encoded again.
func withoutResourceVersionDecoded(data []byte) []byte {
	var top map[string]json.RawMessage
	if json.Unmarshal(data, &top) != nil {
		return data
	}
	var meta map[string]json.RawMessage
	if json.Unmarshal(top["metadata"], &meta) != nil {
		return data
	}
	delete(meta, "resourceVersion")
	top["metadata"], _ = json.Marshal(meta)
	out, err := json.Marshal(top)
	if err != nil {
		return data
	}
	return out
}

// members are the members of one compact JSON object whose keys are in
// strictly increasing order and need no escapes.
type members struct {
	all  []member
	data []byte
	end  int // just after the closing brace
}

// member is where one member of an object is.
type member struct {
	key   [2]int // quotes excluded
	value [2]int
}

// scan reads the object starting at data[i] ('{'); false if it is not in
// the form described on members, or not well formed.
func (m *members) scan(data []byte, i int) bool {
	m.data = data
	if i >= len(data) || data[i] != '{' {
		return false
	}
	i++
	if i < len(data) && data[i] == '}' {
		m.end = i + 1
		return true
	}
	for i < len(data) {
		if data[i] != '"' {
			return false
		}
		k := i + 1
		e := k
		for e < len(data) && data[e] != '"' && data[e] != '\\' && data[e] >= 0x20 {
			e++
		}
		if e >= len(data) || data[e] != '"' {
			return false // an escape in a key, or no end
		}
		if n := len(m.all); n > 0 && bytes.Compare(data[m.all[n-1].key[0]:m.all[n-1].key[1]], data[k:e]) >= 0 {
			return false // out of order, or twice
		}
		i = e + 1
		if i >= len(data) || data[i] != ':' {
			return false
		}
		v := i + 1
		ve := skipValue(data, v)
		if ve < 0 {
			return false
		}
		if m.all == nil {
			m.all = make([]member, 0, 8)
		}
		m.all = append(m.all, member{[2]int{k, e}, [2]int{v, ve}})
		if ve >= len(data) {
			return false
		}
		switch data[ve] {
		case ',':
			i = ve + 1
		case '}':
			m.end = ve + 1
			return true
		default:
			return false
		}
	}
	return false
}

// value returns where the value of key is.
func (m *members) value(key string) ([2]int, bool) {
	for _, f := range m.all {
		if string(m.data[f.key[0]:f.key[1]]) == key {
			return f.value, true
		}
	}
	return [2]int{}, false
}

const (
	commaNone = iota
	commaBefore
	commaAfter
)

// insertAt returns where a member with key (absent) goes to keep the
// order, and on which side of it a comma is needed.
func (m *members) insertAt(key string) (int, int) {
	for _, f := range m.all {
		if string(m.data[f.key[0]:f.key[1]]) > key {
			return f.key[0] - 1, commaAfter // before this member's opening quote
		}
	}
	if len(m.all) == 0 {
		return m.end - 1, commaNone
	}
	return m.end - 1, commaBefore
}

// skipValue returns the index just after the compact JSON value starting
// at data[i], or -1 if there is none there or it holds whitespace or a
// malformed string, object or array. It checks structure, not numbers and
// literals, which the callers leave to json.Valid.
func skipValue(data []byte, i int) int {
	if i >= len(data) {
		return -1
	}
	switch c := data[i]; {
	case c == '"':
		for i++; i < len(data); i++ {
			switch data[i] {
			case '\\':
				i++
			case '"':
				return i + 1
			default:
				if data[i] < 0x20 {
					return -1
				}
			}
		}
		return -1
	case c == '{' || c == '[':
		closer := byte('}')
		if c == '[' {
			closer = ']'
		}
		i++
		if i < len(data) && data[i] == closer {
			return i + 1
		}
		for i < len(data) {
			if c == '{' { // a member: its key first
				if data[i] != '"' {
					return -1
				}
				if i = skipValue(data, i); i < 0 || i >= len(data) || data[i] != ':' {
					return -1
				}
				i++
			}
			if i = skipValue(data, i); i < 0 || i >= len(data) {
				return -1
			}
			switch data[i] {
			case ',':
				i++
			case closer:
				return i + 1
			default:
				return -1
			}
		}
		return -1
	default:
		j := i
		for j < len(data) && (data[j] >= 'a' && data[j] <= 'z' || data[j] >= '0' && data[j] <= '9' ||
			data[j] == '-' || data[j] == '+' || data[j] == '.' || data[j] == 'E') {
			j++
		}
		if j == i {
			return -1
		}
		return j
	}
}

// plainString returns the JSON string raw without its quotes when it is
// plain ASCII without escapes, which is then its value.
func plainString(raw []byte) (string, bool) {
	if len(raw) < 2 || raw[0] != '"' || raw[len(raw)-1] != '"' {
		return "", false
	}
	body := raw[1 : len(raw)-1]
	for _, c := range body {
		if c == '\\' || c == '"' || c < 0x20 || c >= 0x80 {
			return "", false
		}
	}
	return string(body), true
}

// unmarshalPlain decodes the JSON string raw into s, without
// encoding/json when it has no escape.
func unmarshalPlain(raw []byte, s *string) error {
	if v, ok := plainString(raw); ok {
		*s = v
		return nil
	}
	return json.Unmarshal(raw, s)
}

// unmarshalLabels decodes the JSON object of strings raw into l, without
// encoding/json when it is compact and no key or value has an escape.
func unmarshalLabels(raw []byte, l *labels.Set) error {
	var m members
	if m.scan(raw, 0) && m.end == len(raw) {
		set := make(labels.Set, len(m.all))
		for _, f := range m.all {
			v, ok := plainString(raw[f.value[0]:f.value[1]])
			if !ok {
				return json.Unmarshal(raw, l)
			}
			set[string(raw[f.key[0]:f.key[1]])] = v
		}
		*l = set
		return nil
	}
	return json.Unmarshal(raw, l)
}
