package celbound

import (
	"math"
	"strings"
	"testing"

	"github.com/google/cel-go/cel"
	. "github.com/onsi/gomega"
)

func program(g *WithT, src string, cost uint64) cel.Program {
	env, err := cel.NewEnv()
	g.Expect(err).NotTo(HaveOccurred())
	ast, iss := env.Compile(src)
	g.Expect(iss.Err()).NotTo(HaveOccurred())
	prg, err := env.Program(ast, ProgramOptions(cost)...)
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
