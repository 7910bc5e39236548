package diff

import (
	"fmt"
	"strconv"
	"strings"
)

// Pointer is a parsed JSON pointer (RFC 6901): the keys (or list indexes) from the
// object's root to a field.
type Pointer []string

// ParsePointer parses a JSON pointer like /spec/replicas or
// /metadata/annotations/example.com~1revision.
func ParsePointer(s string) (Pointer, error) {
	if !strings.HasPrefix(s, "/") || len(s) < 2 {
		return nil, fmt.Errorf("%q is not a JSON pointer: it must start with / and name a field", s)
	}
	parts := strings.Split(s[1:], "/")
	for i, p := range parts {
		if p == "" {
			return nil, fmt.Errorf("%q is not a JSON pointer: empty key", s)
		}
		parts[i] = strings.NewReplacer("~1", "/", "~0", "~").Replace(p)
	}
	return parts, nil
}

// String returns the pointer as a field path like those Paths returns.
func (p Pointer) String() string {
	var b strings.Builder
	for i, k := range p {
		if _, err := strconv.Atoi(k); err == nil {
			fmt.Fprintf(&b, "[%s]", k)
			continue
		}
		if i > 0 {
			b.WriteByte('.')
		}
		b.WriteString(k)
	}
	return b.String()
}

// Get returns the value at p in obj.
func (p Pointer) Get(obj map[string]any) (any, bool) {
	var cur any = obj
	for _, k := range p {
		next, ok := child(cur, k)
		if !ok {
			return nil, false
		}
		cur = next
	}
	return cur, true
}

// Set sets the value at p in obj, creating maps on the way; it does nothing when
// a list on the way is too short or something else is not a map.
func (p Pointer) Set(obj map[string]any, v any) {
	var cur any = obj
	for i, k := range p {
		last := i == len(p)-1
		switch c := cur.(type) {
		case map[string]any:
			if last {
				c[k] = v
				return
			}
			if _, ok := c[k]; !ok {
				c[k] = map[string]any{}
			}
			cur = c[k]
		case []any:
			n, err := strconv.Atoi(k)
			if err != nil || n < 0 || n >= len(c) {
				return
			}
			if last {
				c[n] = v
				return
			}
			cur = c[n]
		default:
			return
		}
	}
}

// Remove deletes the field at p from obj (a list element cannot be removed: it is
// left).
func (p Pointer) Remove(obj map[string]any) {
	parent, ok := p[:len(p)-1].Get(obj)
	if !ok {
		return
	}
	if m, ok := parent.(map[string]any); ok {
		delete(m, p[len(p)-1])
	}
}

func child(v any, k string) (any, bool) {
	switch c := v.(type) {
	case map[string]any:
		next, ok := c[k]
		return next, ok
	case []any:
		n, err := strconv.Atoi(k)
		if err != nil || n < 0 || n >= len(c) {
			return nil, false
		}
		return c[n], true
	}
	return nil, false
}
