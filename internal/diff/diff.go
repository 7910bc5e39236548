// Package diff compares two versions of an object as the API server returns them
// and names the field paths in which they differ, without their values (so that no
// Secret data reaches a message).
package diff

import (
	"fmt"
	"reflect"
	"sort"
)

// ignored are metadata fields that differ between any two writes.
var ignored = map[string]bool{
	"metadata.managedFields":     true,
	"metadata.resourceVersion":   true,
	"metadata.generation":        true,
	"metadata.creationTimestamp": true,
	"metadata.uid":               true,
}

// Paths returns the sorted field paths (like spec.replicas or data.key) in which
// b differs from a; at most limit of them, with a final "..." when there are more.
func Paths(a, b map[string]any, limit int) []string {
	var out []string
	walk("", a, b, &out)
	sort.Strings(out)
	if limit > 0 && len(out) > limit {
		out = append(out[:limit], "...")
	}
	return out
}

func walk(prefix string, a, b any, out *[]string) {
	if ignored[prefix] {
		return
	}
	am, aok := a.(map[string]any)
	bm, bok := b.(map[string]any)
	if aok && bok {
		keys := map[string]bool{}
		for k := range am {
			keys[k] = true
		}
		for k := range bm {
			keys[k] = true
		}
		for k := range keys {
			walk(join(prefix, k), am[k], bm[k], out)
		}
		return
	}
	as, aok := a.([]any)
	bs, bok := b.([]any)
	if aok && bok && len(as) == len(bs) {
		for i := range as {
			walk(fmt.Sprintf("%s[%d]", prefix, i), as[i], bs[i], out)
		}
		return
	}
	if !reflect.DeepEqual(normalize(a), normalize(b)) {
		*out = append(*out, prefix)
	}
}

// normalize makes numbers of different Go types comparable.
func normalize(v any) any {
	switch n := v.(type) {
	case int:
		return float64(n)
	case int32:
		return float64(n)
	case int64:
		return float64(n)
	}
	return v
}

func join(prefix, k string) string {
	if prefix == "" {
		return k
	}
	return prefix + "." + k
}

// PathsWithin is Paths restricted to the fields that want sets: what a manifest
// says, leaving out what the API server or controllers on the member add.
func PathsWithin(want, a, b map[string]any, limit int) []string {
	var out []string
	walkWithin("", want, a, b, &out)
	sort.Strings(out)
	if limit > 0 && len(out) > limit {
		out = append(out[:limit], "...")
	}
	return out
}

func walkWithin(prefix string, want, a, b any, out *[]string) {
	if ignored[prefix] {
		return
	}
	wm, ok := want.(map[string]any)
	if !ok {
		// A value or a list the manifest sets: compared whole, as Paths does.
		walk(prefix, a, b, out)
		return
	}
	am, _ := a.(map[string]any)
	bm, _ := b.(map[string]any)
	if am == nil || bm == nil {
		if !reflect.DeepEqual(a, b) {
			*out = append(*out, prefix)
		}
		return
	}
	for k, w := range wm {
		walkWithin(join(prefix, k), w, am[k], bm[k], out)
	}
}
