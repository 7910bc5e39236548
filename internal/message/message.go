// Package message shapes the text Lodestar writes into conditions, status fields
// and events: one truncation to a field's length, and one way to name a few of
// many ("a, b and 3 more").
package message

import (
	"fmt"
	"strings"
	"unicode/utf8"
)

// ellipsis ends a truncated message.
const ellipsis = "..."

// Truncate shortens s to at most n bytes, ending in "..." when cut, and never
// in the middle of a UTF-8 character: for condition messages and status fields
// that have a maximum length.
func Truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	if n <= len(ellipsis) {
		return ellipsis[:max(n, 0)]
	}
	cut := n - len(ellipsis)
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + ellipsis
}

// List names at most n of items, joined by sep, and says how many more there
// are: "a, b and 3 more". With n < 1 it names one.
func List(items []string, n int, sep string) string {
	n = max(n, 1)
	if len(items) <= n {
		return strings.Join(items, sep)
	}
	return fmt.Sprintf("%s and %d more", strings.Join(items[:n], sep), len(items)-n)
}

// Count is n and noun, plural unless n is 1: "1 cluster", "3 clusters",
// "0 clusters". noun is singular and takes an s.
func Count[N ~int | ~int32 | ~int64](n N, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return fmt.Sprintf("%d %ss", n, noun)
}

// Verb is a verb's form for n subjects: one ("reports") or many ("report").
func Verb[N ~int | ~int32 | ~int64](n N, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}

// All is "all" of n nouns: "all 3 clusters", and "the 1 cluster".
func All[N ~int | ~int32 | ~int64](n N, noun string) string {
	if n == 1 {
		return "the 1 " + noun
	}
	return "all " + Count(n, noun)
}
