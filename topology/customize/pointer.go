package customize

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// parsePointer splits a JSON Pointer (RFC 6901) into its unescaped
// reference tokens. The empty pointer (the whole document) is refused: a
// replacement sets a field, not the object.
func parsePointer(ptr string) ([]string, error) {
	if ptr == "" {
		return nil, errors.New("empty pointer: a replacement cannot set the whole object")
	}
	if ptr[0] != '/' {
		return nil, fmt.Errorf("pointer %q does not start with /", ptr)
	}
	toks := strings.Split(ptr[1:], "/")
	for i, t := range toks {
		if !strings.Contains(t, "~") {
			continue
		}
		var b strings.Builder
		for j := 0; j < len(t); j++ {
			if t[j] != '~' {
				b.WriteByte(t[j])
				continue
			}
			if j+1 == len(t) || (t[j+1] != '0' && t[j+1] != '1') {
				return nil, fmt.Errorf("pointer %q: ~ must be followed by 0 or 1", ptr)
			}
			if t[j+1] == '0' {
				b.WriteByte('~')
			} else {
				b.WriteByte('/')
			}
			j++
		}
		toks[i] = b.String()
	}
	return toks, nil
}

// arrayIndex parses an array index token ("0", or digits without a
// leading zero) into an array of length n: below n, or up to n when
// orEnd.
func arrayIndex(tok string, n int, orEnd bool) (int, error) {
	if tok == "" || (len(tok) > 1 && tok[0] == '0') || strings.TrimLeft(tok, "0123456789") != "" {
		return 0, fmt.Errorf("%q is not an array index", tok)
	}
	i, err := strconv.Atoi(tok)
	if err != nil || i > n || (i == n && !orEnd) {
		return 0, fmt.Errorf("index %s is out of range (array of %d)", tok, n)
	}
	return i, nil
}

// add sets the value at toks under node the way a JSON Patch "add" does:
// every parent must exist; in a map the last token sets (or replaces) a
// key; in an array an index inserts before that element (the length
// appends) and "-" appends. It changes node in place and returns it, or
// the new array when it grew. done are the tokens already walked, for
// error messages.
func add(node any, done, toks []string, val any) (any, error) {
	tok, last := toks[0], len(toks) == 1
	switch n := node.(type) {
	case map[string]any:
		if last {
			n[tok] = val
			return n, nil
		}
		child, ok := n[tok]
		if !ok {
			return nil, fmt.Errorf("parent %s does not exist", pointer(append(done, tok)))
		}
		c, err := add(child, append(done, tok), toks[1:], val)
		if err != nil {
			return nil, err
		}
		n[tok] = c
		return n, nil
	case []any:
		if last {
			if tok == "-" {
				return append(n, val), nil
			}
			i, err := arrayIndex(tok, len(n), true)
			if err != nil {
				return nil, fmt.Errorf("at %s: %w", pointer(done), err)
			}
			n = append(n, nil)
			copy(n[i+1:], n[i:])
			n[i] = val
			return n, nil
		}
		i, err := arrayIndex(tok, len(n), false)
		if err != nil {
			return nil, fmt.Errorf("parent %s does not exist: %w", pointer(append(done, tok)), err)
		}
		c, err := add(n[i], append(done, tok), toks[1:], val)
		if err != nil {
			return nil, err
		}
		n[i] = c
		return n, nil
	default:
		return nil, fmt.Errorf("parent %s is a %s, not an object or array", pointer(done), kind(node))
	}
}

// pointer writes tokens back as a JSON Pointer.
func pointer(toks []string) string {
	if len(toks) == 0 {
		return `""`
	}
	var b strings.Builder
	r := strings.NewReplacer("~", "~0", "/", "~1")
	for _, t := range toks {
		b.WriteByte('/')
		b.WriteString(r.Replace(t))
	}
	return b.String()
}

// kind names the JSON type of a decoded value.
func kind(v any) string {
	switch v.(type) {
	case nil:
		return "null"
	case string:
		return "string"
	case bool:
		return "boolean"
	case map[string]any:
		return "object"
	case []any:
		return "array"
	default:
		return "number"
	}
}
