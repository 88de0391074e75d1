package customize

import (
	"fmt"
	"strings"

	"github.com/canopy-dev/canopy/topology/api/v1alpha1"
)

// Params are one destination's customization parameters. The maps are
// read, never written; nil maps are empty.
type Params struct {
	SyncTargetName        string
	LocationName          string
	SyncTargetLabels      map[string]string
	SyncTargetAnnotations map[string]string
	LocationLabels        map[string]string
	LocationAnnotations   map[string]string
}

// ParamsFor gathers the parameters of the destination st reached through
// loc. Either may be nil; the result then lacks its part.
func ParamsFor(st *v1alpha1.SyncTarget, loc *v1alpha1.Location) Params {
	var p Params
	if st != nil {
		p.SyncTargetName, p.SyncTargetLabels, p.SyncTargetAnnotations = st.Name, st.Labels, st.Annotations
	}
	if loc != nil {
		p.LocationName, p.LocationLabels, p.LocationAnnotations = loc.Name, loc.Labels, loc.Annotations
	}
	return p
}

// Lookup returns the value of parameter name: the built-ins
// v1alpha1.ParamSyncTargetName and v1alpha1.ParamLocationName (known when
// not empty), else the first of the Location's annotations, the
// Location's labels, the SyncTarget's annotations and the SyncTarget's
// labels that has the key name.
func (p *Params) Lookup(name string) (string, bool) {
	switch name {
	case v1alpha1.ParamSyncTargetName:
		return p.SyncTargetName, p.SyncTargetName != ""
	case v1alpha1.ParamLocationName:
		return p.LocationName, p.LocationName != ""
	}
	for _, m := range [...]map[string]string{p.LocationAnnotations, p.LocationLabels, p.SyncTargetAnnotations, p.SyncTargetLabels} {
		if v, ok := m[name]; ok {
			return v, true
		}
	}
	return "", false
}

// ParameterError is a reference to a parameter the destination does not
// have. Its text names the parameter and where it was used, as in
// `spec.template.spec.containers[0].env[1].value: unknown parameter "zone"`.
type ParameterError struct {
	Where string // a field path of the object, or "customizer NS/NAME replacements[I].value"
	Name  string // the parameter
}

func (e *ParameterError) Error() string {
	return fmt.Sprintf("%s: unknown parameter %q", e.Where, e.Name)
}

// expandString replaces every %(NAME) in s by parameter NAME and every %%
// by %. A % followed by anything else is kept as it is, so that "50%"
// needs no escape. A string without % is returned as it is, without
// allocating. An unknown parameter is a *ParameterError without Where.
func expandString(s string, p *Params) (string, error) {
	i := strings.IndexByte(s, '%')
	if i < 0 {
		return s, nil
	}
	var b strings.Builder
	b.Grow(len(s) + 16)
	for {
		b.WriteString(s[:i])
		s = s[i:] // s[0] == '%'
		switch {
		case strings.HasPrefix(s, "%%"):
			b.WriteByte('%')
			s = s[2:]
		case strings.HasPrefix(s, "%("):
			end := strings.IndexByte(s, ')')
			if end < 0 {
				return "", fmt.Errorf("unterminated parameter reference %q", s)
			}
			name := s[2:end]
			if name == "" {
				return "", fmt.Errorf("empty parameter reference %q", "%()")
			}
			v, ok := p.Lookup(name)
			if !ok {
				return "", &ParameterError{Name: name}
			}
			b.WriteString(v)
			s = s[end+1:]
		default:
			b.WriteByte('%')
			s = s[1:]
		}
		if i = strings.IndexByte(s, '%'); i < 0 {
			b.WriteString(s)
			return b.String(), nil
		}
	}
}

// place gives err, from expandString, its place.
func place(where string, err error) error {
	if pe, ok := err.(*ParameterError); ok {
		return &ParameterError{Where: where, Name: pe.Name}
	}
	return fmt.Errorf("%s: %w", where, err)
}
