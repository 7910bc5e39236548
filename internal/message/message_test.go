package message

import (
	"strings"
	"testing"
	"unicode/utf8"
)

func TestTruncate(t *testing.T) {
	for _, tc := range []struct {
		in   string
		n    int
		want string
	}{
		{"short", 10, "short"},
		{"exactly10!", 10, "exactly10!"},
		{"a longer message", 10, "a longe..."},
		{"abc", 2, ".."},
		{"abcdef", 0, ""},
		// "é" is two bytes: a cut never splits it.
		{"ééééé", 8, "éé..."},
	} {
		got := Truncate(tc.in, tc.n)
		if got != tc.want {
			t.Errorf("Truncate(%q, %d) = %q, want %q", tc.in, tc.n, got, tc.want)
		}
		if len(got) > tc.n || !utf8.ValidString(got) {
			t.Errorf("Truncate(%q, %d) = %q: longer than %d bytes or not valid UTF-8", tc.in, tc.n, got, tc.n)
		}
	}
	long := strings.Repeat("日本", 1000)
	for n := 0; n < 40; n++ {
		if got := Truncate(long, n); len(got) > n || !utf8.ValidString(got) {
			t.Errorf("Truncate(long, %d) = %q", n, got)
		}
	}
}

func TestList(t *testing.T) {
	for _, tc := range []struct {
		items []string
		n     int
		sep   string
		want  string
	}{
		{nil, 3, ", ", ""},
		{[]string{"a"}, 3, ", ", "a"},
		{[]string{"a", "b", "c"}, 3, ", ", "a, b, c"},
		{[]string{"a", "b", "c", "d", "e"}, 3, ", ", "a, b, c and 2 more"},
		{[]string{"x", "y"}, 1, "; ", "x and 1 more"},
		{[]string{"x", "y"}, 0, "; ", "x and 1 more"},
	} {
		if got := List(tc.items, tc.n, tc.sep); got != tc.want {
			t.Errorf("List(%q, %d) = %q, want %q", tc.items, tc.n, got, tc.want)
		}
	}
}

func TestCount(t *testing.T) {
	for _, tc := range []struct{ got, want string }{
		{Count(1, "cluster"), "1 cluster"}, {Count(0, "cluster"), "0 clusters"}, {Count(int32(3), "object"), "3 objects"},
	} {
		if tc.got != tc.want {
			t.Errorf("got %q, want %q", tc.got, tc.want)
		}
	}
}
