package division

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"testing"

	. "github.com/onsi/gomega"
	"k8s.io/apimachinery/pkg/api/resource"
)

func weighted(kv ...any) []Cluster {
	var out []Cluster
	for i := 0; i+1 < len(kv); i += 2 {
		out = append(out, Cluster{Name: kv[i].(string), Weight: int64(kv[i+1].(int))})
	}
	return out
}

func TestWebster(t *testing.T) {
	tests := []struct {
		name     string
		total    int64
		clusters []Cluster
		want     map[string]int64
	}{
		{"static exact", 9, weighted("a", 1, "b", 2), map[string]int64{"a": 3, "b": 6}},
		{"static inexact", 9, weighted("a", 1, "b", 3), map[string]int64{"a": 2, "b": 7}},
		{"small total is not 2:0", 2, weighted("a", 2, "b", 1), map[string]int64{"a": 1, "b": 1}},
		{"by free room", 12, []Cluster{{Name: "a", Weight: 6, Max: 6}, {Name: "b", Weight: 12, Max: 12}, {Name: "c", Weight: 18, Max: 18}},
			map[string]int64{"a": 2, "b": 4, "c": 6}},
		{"job completions, names not in weight order", 10, weighted("west", 6, "east", 4), map[string]int64{"west": 6, "east": 4}},
		{"job parallelism", 4, weighted("west", 6, "east", 4), map[string]int64{"west": 2, "east": 2}},
		{"one replica, four clusters", 1, weighted("a", 1, "b", 1, "c", 1, "d", 1), nil},
		{"minimum first", 4, []Cluster{{Name: "a", Weight: 100}, {Name: "b", Weight: 1, Min: 2}}, map[string]int64{"a": 2, "b": 2}},
		{"maximum caps", 10, []Cluster{{Name: "a", Weight: 100, Max: 3}, {Name: "b", Weight: 1}}, map[string]int64{"a": 3, "b": 7}},
		{"zero weight gets nothing", 5, weighted("a", 0, "b", 1), map[string]int64{"a": 0, "b": 5}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			got, err := Divide(tt.total, tt.clusters, "uid")
			g.Expect(err).NotTo(HaveOccurred())
			var sum int64
			for _, v := range got {
				sum += v
			}
			g.Expect(sum).To(Equal(tt.total))
			if tt.want != nil {
				g.Expect(got).To(Equal(tt.want))
			}
		})
	}
}

// Karmada#6735: weights 170/110/60 over totals 1..6.
func TestMonotoneKarmada6735(t *testing.T) {
	g := NewWithT(t)
	want := [][3]int64{{1, 0, 0}, {1, 1, 0}, {1, 1, 1}, {2, 1, 1}, {2, 2, 1}, {3, 2, 1}}
	for i, w := range want {
		got, err := Divide(int64(i+1), weighted("a", 170, "b", 110, "c", 60), "uid")
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect([3]int64{got["a"], got["b"], got["c"]}).To(Equal(w), "total %d", i+1)
	}
}

// No cluster's share drops when the total grows, whatever the weights.
func TestMonotoneProperty(t *testing.T) {
	g := NewWithT(t)
	r := rand.New(rand.NewPCG(1, 2))
	for round := range 200 {
		n := 1 + r.IntN(6)
		var cs []Cluster
		for i := range n {
			cs = append(cs, Cluster{Name: fmt.Sprintf("c%d", i), Weight: int64(1 + r.IntN(1000))})
		}
		seed := fmt.Sprint(round)
		prev, err := Divide(0, cs, seed)
		g.Expect(err).NotTo(HaveOccurred())
		for total := int64(1); total <= 200; total++ {
			got, err := Divide(total, cs, seed)
			g.Expect(err).NotTo(HaveOccurred())
			for _, c := range cs {
				g.Expect(got[c.Name]).To(BeNumerically(">=", prev[c.Name]), "round %d total %d cluster %s", round, total, c.Name)
			}
			prev = got
		}
	}
}

// Over many Placements, every one of three equal clusters gets the remainder
// about a third of the time, the middle one too.
func TestFairRemainder(t *testing.T) {
	g := NewWithT(t)
	r := rand.New(rand.NewPCG(3, 4))
	fourth := map[string]int{}
	for range 300 {
		got, err := Divide(10, weighted("a", 1, "b", 1, "c", 1), fmt.Sprintf("%016x-%016x", r.Uint64(), r.Uint64()))
		g.Expect(err).NotTo(HaveOccurred())
		for name, v := range got {
			if v == 4 {
				fourth[name]++
			}
		}
	}
	for _, name := range []string{"a", "b", "c"} {
		g.Expect(fourth[name]).To(BeNumerically("~", 100, 30), "cluster %s: %v", name, fourth)
		t.Logf("cluster %s got the remainder %d times", name, fourth[name])
	}
}

func TestNotEnoughRoom(t *testing.T) {
	g := NewWithT(t)
	_, err := Divide(12, []Cluster{{Name: "a", Weight: 3, Max: 3}, {Name: "b", Weight: 7, Max: 7}}, "uid")
	g.Expect(errors.Is(err, ErrNotEnoughRoom)).To(BeTrue())
	g.Expect(err).To(MatchError(ContainSubstring("2 of 12 replicas have no cluster to go to (a 3, b 7)")))
	_, err = Divide(1, []Cluster{{Name: "a", Weight: 1, Min: 2}}, "uid")
	g.Expect(err).To(MatchError(ContainSubstring("minimums add up to 2")))
	_, err = Divide(1, []Cluster{{Name: "a", Weight: 1}, {Name: "a", Weight: 1}}, "uid")
	g.Expect(err).To(MatchError(ContainSubstring("named twice")))
}

func TestSteady(t *testing.T) {
	g := NewWithT(t)
	// Scale down: the current shares are the weights.
	got, err := Steady(6, map[string]int64{"a": 6, "b": 3}, []Cluster{{Name: "a", Weight: 1}, {Name: "b", Weight: 1}}, "uid")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(got).To(Equal(map[string]int64{"a": 4, "b": 2}))
	// Scale up: existing replicas stay, the new ones go by free room.
	got, err = Steady(12, map[string]int64{"a": 4, "b": 5}, []Cluster{{Name: "a", Weight: 3, Max: 3}, {Name: "b", Weight: 10, Max: 10}}, "uid")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(got).To(Equal(map[string]int64{"a": 5, "b": 7}))
}

func TestRoom(t *testing.T) {
	g := NewWithT(t)
	q := resource.MustParse
	free := map[string]resource.Quantity{"cpu": q("3500m"), "memory": q("8Gi")}
	pods, ok := Room(free, map[string]resource.Quantity{"cpu": q("500m"), "memory": q("1Gi")})
	g.Expect(ok).To(BeTrue())
	g.Expect(pods).To(BeEquivalentTo(7), "cpu bounds it: 3500m / 500m")
	pods, _ = Room(free, map[string]resource.Quantity{"memory": q("3Gi")})
	g.Expect(pods).To(BeEquivalentTo(2))
	pods, ok = Room(free, map[string]resource.Quantity{"nvidia.com/gpu": q("1")})
	g.Expect(ok).To(BeTrue())
	g.Expect(pods).To(BeZero(), "an unreported resource is no room")
	_, ok = Room(free, nil)
	g.Expect(ok).To(BeFalse(), "a pod without requests is not bounded by capacity")
}

// Extended resources divide by what the agents report of them: the free
// amount over the cluster, and no room at all for a pod that asks more than
// one node has free.
func TestRoomOfExtendedResources(t *testing.T) {
	g := NewWithT(t)
	q := resource.MustParse
	spread := FreeCapacity(map[string]string{"cpu.free.lodestar.dev": "64", "nvidia.com/gpu.free.lodestar.dev": "8",
		"nvidia.com/gpu.largestfree.lodestar.dev": "2", "memory.allocatable.lodestar.dev": "1Ti", "nvidia.com/gpu.allocatable.lodestar.dev": "16"})
	g.Expect(spread).To(HaveLen(3), "cpu, nvidia.com/gpu and its largest on one node")
	g.Expect(spread).To(HaveKeyWithValue("nvidia.com/gpu"+OnOneNode, q("2")))

	pods, _ := Room(spread, map[string]resource.Quantity{"cpu": q("1"), "nvidia.com/gpu": q("1")})
	g.Expect(pods).To(BeEquivalentTo(8), "eight pods of one GPU each")
	pods, _ = Room(spread, map[string]resource.Quantity{"nvidia.com/gpu": q("2")})
	g.Expect(pods).To(BeEquivalentTo(4))
	pods, _ = Room(spread, map[string]resource.Quantity{"nvidia.com/gpu": q("4")})
	g.Expect(pods).To(BeZero(), "4 GPUs on one node: no node of the cluster has them")

	dense := FreeCapacity(map[string]string{"nvidia.com/gpu.free.lodestar.dev": "4", "nvidia.com/gpu.largestfree.lodestar.dev": "4"})
	pods, _ = Room(dense, map[string]resource.Quantity{"nvidia.com/gpu": q("4")})
	g.Expect(pods).To(BeEquivalentTo(1))
	pods, _ = Room(dense, map[string]resource.Quantity{"nvidia.com/gpu": q("1e16")})
	g.Expect(pods).To(BeZero(), "a request past MaxRequest fits nowhere")
}
