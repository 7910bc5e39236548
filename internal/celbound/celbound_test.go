package celbound

import (
	"fmt"
	"math"
	"runtime"
	"strings"
	"testing"

	"github.com/google/cel-go/cel"
	"github.com/google/cel-go/ext"
	. "github.com/onsi/gomega"
	"k8s.io/apiserver/pkg/cel/library"
)

func program(g *WithT, src string, cost uint64, opts ...cel.EnvOption) cel.Program {
	env, err := cel.NewEnv(opts...)
	g.Expect(err).NotTo(HaveOccurred())
	ast, iss := env.Compile(src)
	g.Expect(iss.Err()).NotTo(HaveOccurred())
	prg, err := env.Program(ast, ProgramOptions(env, cost)...)
	g.Expect(err).NotTo(HaveOccurred())
	return prg
}

func TestJSON(t *testing.T) {
	g := NewWithT(t)
	out, err := Eval(program(g, `{"a": [1, 2u, 2.5, "s", null, true, timestamp("2026-01-02T03:04:05Z")]}`, 1000), nil)
	g.Expect(err).NotTo(HaveOccurred())
	v, err := JSON(out)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(v).To(Equal(map[string]any{"a": []any{int64(1), uint64(2), 2.5, "s", nil, true, "2026-01-02T03:04:05Z"}}))
}

// L.map(a, L.map(b, L)) is cheap to evaluate (the inner lists are one list) and
// large to convert: the conversion stops at MaxResultBytes.
func TestJSONStopsAtTheBound(t *testing.T) {
	g := NewWithT(t)
	l := "[" + strings.Repeat("1,", 99) + "1]"
	out, err := Eval(program(g, l+".map(a, "+l+".map(b, "+l+"))", 1_000_000), nil)
	g.Expect(err).NotTo(HaveOccurred())
	_, err = JSON(out)
	g.Expect(err).To(MatchError("the result is larger than 64 KiB"))
}

// Without a cost limit, the deadline stops an evaluation. (It is a backstop: CEL
// checks it per comprehension, and one nested in another that goes on after an
// error can outlast it. The cost limit is what bounds every evaluation.)
func TestEvalStopsAtTheDeadline(t *testing.T) {
	g := NewWithT(t)
	l := "[" + strings.Repeat("1,", 999) + "1]"
	_, err := Eval(program(g, l+".map(a, "+l+".map(b, a+b)).size() > 0", math.MaxUint64), nil)
	g.Expect(err).To(MatchError(ContainSubstring("ran longer than")))
}

// programIn compiles src in an environment with the libraries tenants' CEL
// has (strings, lists, bindings, quantities).
func programIn(g *WithT, src string, cost uint64) cel.Program {
	return program(g, src, cost, ext.Bindings(), ext.Lists(ext.ListsVersion(2)), ext.Strings(), ext.Math(),
		library.Quantity(), library.Lists(), cel.Variable("self", cel.DynType))
}

// Every function that grows a string or a list at one cost unit, or walks
// one in Go, is checked before it runs: each bomb fails at once, having
// allocated little, and says which function and how large.
func TestWhatAnExpressionBuildsIsBounded(t *testing.T) {
	replaceChain := "'" + strings.Repeat("a", 10) + "'" + strings.Repeat(".replace('a', 'aaaaaaaaaa')", 9)
	doubled := "[1, 2, 3, 4, 5, 6, 7, 8]"
	for i := range 30 {
		doubled = fmt.Sprintf("cel.bind(l%d, %s, l%d + l%d)", i, doubled, i, i)
	}
	for _, tc := range []struct{ name, src, err string }{
		{"a chain of replace()", replaceChain, "replace() would build a string of"},
		{"replace() with its own string", "cel.bind(s, 'ab'.replace('', 'abcdefghijklmnopqrstuvwxyz0123456789'), cel.bind(t, s.replace('', s), t.replace('', t)))", "replace() would build a string of"},
		{"lists.range()", "lists.range(3000000).size()", "lists.range() would build a list of 3000000 elements"},
		{"a list added to itself", doubled + ".size()", "+ would build a list of"},
		{"sum() of a list added to itself", "cel.bind(l, lists.range(60000), (l + l).sum())", "+ would build a list of 120000"},
		{"join() of one string many times", "cel.bind(s, 'x'.replace('', '" + strings.Repeat("y", 500) + "'), lists.range(5000).map(i, s).join(''))", "join() would build a string of more than"},
		{"format()", "cel.bind(s, 'x'.replace('', '" + strings.Repeat("y", 500) + "'), '%s'.format([lists.range(5000).map(i, s)]))", "format() would build a string of more than"},
		{"flatten()", "cel.bind(l, lists.range(1000), lists.range(1000).map(i, l).flatten().size())", "flatten() would build a list of more than"},
		{"split()", "cel.bind(s, 'x'.replace('', '" + strings.Repeat("y", 500) + "'), lists.range(500).map(i, s).join('').split('').size())", "split() would build a list of"},
		{"quantity() with a huge exponent", "quantity('1e20000000').isGreaterThan(quantity('1'))", "quantity \"1e20000000\" is out of bounds"},
		{"a string added to itself", "cel.bind(s, 'x'.replace('', '" + strings.Repeat("y", 1000) + "'), cel.bind(a, s + s, cel.bind(b, a + a, cel.bind(c, b + b, cel.bind(d, c + c, cel.bind(e, d + d, cel.bind(f, e + e, cel.bind(h, f + f, cel.bind(i, h + h, cel.bind(j, i + i, j + j)))))))))).size()", "+ would build a string of"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			var before, after runtime.MemStats
			runtime.GC()
			runtime.ReadMemStats(&before)
			_, err := Eval(programIn(g, tc.src, 1_000_000), nil)
			runtime.ReadMemStats(&after)
			g.Expect(err).To(MatchError(ContainSubstring(tc.err)))
			g.Expect(after.TotalAlloc-before.TotalAlloc).To(BeNumerically("<", 64<<20), "allocated on the way")
		})
	}
}

// The cost limit also bounds all an evaluation builds: a string of 100 KiB
// built again and again runs out of cost long before it runs out of memory.
func TestWhatIsBuiltIsPricedBySize(t *testing.T) {
	g := NewWithT(t)
	s := "'x'.replace('', '" + strings.Repeat("y", 1000) + "').replace('y', '" + strings.Repeat("z", 100) + "')"
	_, err := Eval(programIn(g, "cel.bind(s, "+s+", lists.range(100000).map(i, s.replace('z', 'w')).size())", 1_000_000), nil)
	g.Expect(err).To(MatchError(ErrCostLimit))
}

// Ordinary expressions are untouched: strings and lists as big as an object
// holds, quantities as people write them.
func TestOrdinaryExpressionsStillRun(t *testing.T) {
	for src, want := range map[string]any{
		"'eu-west-1'.replace('-', '_').upperAscii()":                           "EU_WEST_1",
		"['a', 'b'].join(',') + '/' + 'x,y'.split(',')[1]":                     "a,b/y",
		"lists.range(5).map(i, i * 2).sum()":                                   int64(20),
		"[[1, 2], [3]].flatten().size()":                                       int64(3),
		"quantity('1.5Gi').isGreaterThan(quantity('512Mi'))":                   true,
		"'%s has %d'.format(['member-1', 3])":                                  "member-1 has 3",
		"self.items.map(i, i.name).join(',')":                                  "a,b",
		"size(self.items.map(i, i.name.replace('', '-')).join('').split('-'))": int64(5),
	} {
		g := NewWithT(t)
		out, err := Eval(programIn(g, src, 1_000_000), map[string]any{"self": map[string]any{"items": []any{map[string]any{"name": "a"}, map[string]any{"name": "b"}}}})
		g.Expect(err).NotTo(HaveOccurred(), src)
		g.Expect(out.Value()).To(BeEquivalentTo(want), src)
	}
}
