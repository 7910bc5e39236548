// Package quantity reads the quantities that tenants, interpretations and
// agents write, within bounds: at most 19 digits before the point and 9 after,
// with an exponent of at most 2 digits. A quantity such as 1e999999999 parses,
// and the API machinery's decimal arithmetic then takes minutes (or hours) to
// compare, add or divide it; a bounded one is a few machine words.
package quantity

import (
	"fmt"
	"regexp"

	"k8s.io/apimachinery/pkg/api/resource"
)

// Pattern is what a bounded quantity matches. The CRDs refuse quantities that
// do not where tenants write them (api/placement/v1alpha1: the rules with
// this pattern).
const Pattern = `^[+-]?[0-9]{0,19}([.][0-9]{0,9})?([eE][+-]?[0-9]{1,2}|[numkMGTPE]|[KMGTPE]i)?$`

// Bounds says the bounds in words, for messages.
const Bounds = "at most 19 digits before the point and 9 after, with an exponent of at most 2 digits"

var pattern = regexp.MustCompile(Pattern)

// Bounded tells whether s is a quantity within the bounds.
func Bounded(s string) bool { return s != "" && pattern.MatchString(s) }

// Parse parses s as a quantity within the bounds.
func Parse(s string) (resource.Quantity, error) {
	if !Bounded(s) {
		shown := s
		if len(shown) > 32 {
			shown = shown[:32] + "..."
		}
		return resource.Quantity{}, fmt.Errorf("quantity %q is out of bounds: %s", shown, Bounds)
	}
	return resource.ParseQuantity(s)
}
