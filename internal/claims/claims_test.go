package claims

import (
	"testing"

	. "github.com/onsi/gomega"
)

func TestNames(t *testing.T) {
	g := NewWithT(t)
	g.Expect(Names([]string{"data-db-0", "data-db-1", "data-db-2", "logs"})).To(Equal("data-db-0..2, logs"))
	g.Expect(Names([]string{"data-db-0", "data-db-2", "wal-db-3", "wal-db-4"})).To(Equal("data-db-0, data-db-2, wal-db-3..4"))
	g.Expect(Names([]string{"a-01", "a-02"})).To(Equal("a-01, a-02"), "numbers with leading zeros are names")
	g.Expect(Names(nil)).To(Equal(""))
}

func TestHolds(t *testing.T) {
	g := NewWithT(t)
	g.Expect(Claim{Phase: "Bound", AccessModes: []string{ReadWriteOnce}}.Holds()).To(BeTrue())
	g.Expect(Claim{Phase: "Bound", AccessModes: []string{ReadWriteOncePod}}.Holds()).To(BeTrue())
	g.Expect(Claim{Phase: "Pending", AccessModes: []string{ReadWriteOnce}}.Holds()).To(BeFalse(), "no data yet")
	g.Expect(Claim{Phase: "Bound", AccessModes: []string{ReadWriteMany}}.Holds()).To(BeFalse(), "shared storage moves")
	g.Expect(Claim{Phase: "Bound", AccessModes: []string{ReadWriteOnce, ReadWriteMany}}.Holds()).To(BeFalse())
	g.Expect(Claim{Phase: "Bound", AccessModes: []string{"ReadOnlyMany"}}.Holds()).To(BeFalse())
}

func TestDescribe(t *testing.T) {
	g := NewWithT(t)
	bound := func(name string) Claim {
		return Claim{Name: name, Phase: "Bound", AccessModes: []string{ReadWriteOnce}}
	}
	r := NewReport([]Claim{bound("data-db-0"), bound("data-db-1"), bound("data-db-2")})
	w := Workload{Kind: "StatefulSet", Namespace: "shop", Name: "db", Report: r}
	g.Expect(Describe("member-1", w)).To(Equal("StatefulSet shop/db on member-1 has 3 bound ReadWriteOnce claims (data-db-0..2)"))

	// Trimmed to fit: the holding count is kept, the names left out are counted.
	msg := Encode(r, 150)
	back, err := Decode(msg)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(len(msg)).To(BeNumerically("<=", 150))
	g.Expect(back.Holding).To(Equal(3))
	g.Expect(back.More).To(BeNumerically(">", 0))
	g.Expect(Describe("member-1", Workload{Kind: "StatefulSet", Namespace: "shop", Name: "db", Report: back})).
		To(MatchRegexp(`has 3 bound ReadWriteOnce claims \(data-db-0.* and \d more\)$`))

	_, err = Decode("not json")
	g.Expect(err).To(HaveOccurred())
}
