package quantity

import (
	"testing"

	. "github.com/onsi/gomega"
)

func TestBounds(t *testing.T) {
	g := NewWithT(t)
	for _, ok := range []string{"4", "500m", "1.5Gi", "1e3", "1E-2", "+12", "123456789012345678.123456789", "8Ki", "0.5"} {
		q, err := Parse(ok)
		g.Expect(err).NotTo(HaveOccurred(), ok)
		g.Expect(q.IsZero()).To(BeFalse(), ok)
	}
	for _, bad := range []string{"1e999999999", "1e20000000", "1e100", "12345678901234567890123", "1.1234567890123", "", "lots"} {
		_, err := Parse(bad)
		g.Expect(err).To(HaveOccurred(), bad)
	}
	_, err := Parse("1e999999999")
	g.Expect(err).To(MatchError(`quantity "1e999999999" is out of bounds: at most 19 digits before the point and 9 after, with an exponent of at most 2 digits`))
}
