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
// JSON string, quotes included) and where the metadata object is in the
// result, when data is in the form the store keeps and is plain ASCII;
// ok is false otherwise (anything else, valid or not, takes the slow path,
// which gives the same bytes whenever ok is true).
func spliceVersion(data, rv []byte) (out []byte, meta [2]int, ok bool) {
	top, md, ok := storeForm(data)
	if !ok {
		return nil, meta, false
	}
	mv, _ := top.value("metadata")
	const key = `"resourceVersion":`
	out = make([]byte, 0, len(data)+len(key)+len(rv)+1)
	if v, found := md.value("resourceVersion"); found {
		out = append(append(append(out, data[:v[0]]...), rv...), data[v[1]:]...)
		return out, [2]int{mv[0], mv[1] + len(rv) - (v[1] - v[0])}, true
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
	return out, [2]int{mv[0], mv[1] + len(out) - len(data)}, true
}

// WithoutResourceVersion returns data without metadata.resourceVersion,
// in the form the store keeps (what a write of data stores, but for the
// revision): two versions of an object compare equal this way when they
// differ only in their revision. Data that is not a JSON object with a
// metadata object is returned as is.
func WithoutResourceVersion(data []byte) []byte {
	if _, md, ok := storeForm(data); ok {
		i := slices.IndexFunc(md.keys, func(k [2]int) bool { return string(data[k[0]:k[1]]) == "resourceVersion" })
		if i < 0 {
			return data
		}
		from, to := md.keys[i][0]-1, md.values[i][1] // the member, from its opening quote
		switch {
		case i+1 < len(md.keys):
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
	keys   [][2]int // where each key is, quotes excluded
	values [][2]int // where each value is
	data   []byte
	end    int // just after the closing brace
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
		if n := len(m.keys); n > 0 && bytes.Compare(data[m.keys[n-1][0]:m.keys[n-1][1]], data[k:e]) >= 0 {
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
		m.keys = append(m.keys, [2]int{k, e})
		m.values = append(m.values, [2]int{v, ve})
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
	for i, k := range m.keys {
		if string(m.data[k[0]:k[1]]) == key {
			return m.values[i], true
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
	for _, k := range m.keys {
		if string(m.data[k[0]:k[1]]) > key {
			return k[0] - 1, commaAfter // before this member's opening quote
		}
	}
	if len(m.keys) == 0 {
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
