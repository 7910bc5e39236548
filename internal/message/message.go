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

// Distance is the edit distance of two short strings, counting a swap of two
// adjacent letters as one edit (optimal string alignment).
func Distance(a, b string) int {
	d := make([][]int, len(a)+1)
	for i := range d {
		d[i] = make([]int, len(b)+1)
		d[i][0] = i
	}
	for j := range d[0] {
		d[0][j] = j
	}
	for i := 1; i <= len(a); i++ {
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			d[i][j] = min(d[i-1][j]+1, d[i][j-1]+1, d[i-1][j-1]+cost)
			if i > 1 && j > 1 && a[i-1] == b[j-2] && a[i-2] == b[j-1] {
				d[i][j] = min(d[i][j], d[i-2][j-2]+1)
			}
		}
	}
	return d[len(a)][len(b)]
}

// Closest is the name among names that want most likely meant (a typo or two
// away: two edits, three for names of eight letters or more), "" when none is.
func Closest(names []string, want string) string {
	best, bestDistance := "", 3
	if len(want) >= 8 {
		bestDistance = 4
	}
	for _, n := range names {
		if d := Distance(n, want); d > 0 && d < bestDistance {
			best, bestDistance = n, d
		}
	}
	return best
}
