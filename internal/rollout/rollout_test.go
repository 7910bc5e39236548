package rollout

import (
	"fmt"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	placementv1alpha1 "github.com/lodestar-dev/lodestar/api/placement/v1alpha1"
)

var t0 = time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)

const (
	old    = "old"
	target = "new"
)

// at is a cluster whose Work holds rev since t0, Available since t0 (or not).
func at(name, rev string, available bool) Cluster {
	c := Cluster{Name: name, Revision: rev, Since: t0, Applied: metav1.ConditionTrue, Available: metav1.ConditionUnknown}
	if available {
		c.Available, c.AvailableSince = metav1.ConditionTrue, t0
	}
	return c
}

func withLabels(c Cluster, kv ...string) Cluster {
	c.Labels = map[string]string{}
	for i := 0; i+1 < len(kv); i += 2 {
		c.Labels[kv[i]] = kv[i+1]
	}
	return c
}

func rolling(maxUnavailable, maxSurge intstr.IntOrString) Strategy {
	s, _ := StrategyFor(placementv1alpha1.RolloutStrategy{Type: placementv1alpha1.RolloutRolling,
		Rolling: &placementv1alpha1.RollingStrategy{MaxUnavailable: &maxUnavailable, MaxSurge: &maxSurge}})
	return s
}

func states(p Plan) map[string]placementv1alpha1.ClusterRolloutState {
	out := map[string]placementv1alpha1.ClusterRolloutState{}
	for _, c := range p.Clusters {
		out[c.Name] = c.State
	}
	return out
}

func TestAllAtOnceStartsEveryCluster(t *testing.T) {
	g := NewWithT(t)
	s, err := StrategyFor(placementv1alpha1.RolloutStrategy{})
	g.Expect(err).NotTo(HaveOccurred())
	p := Compute([]Cluster{at("a", old, true), at("b", old, false), {Name: "c"}}, s, State{Target: target}, t0)
	g.Expect(p.Start).To(ConsistOf("a", "b", "c"))
	g.Expect(p.Done).To(BeFalse())
}

func TestRollingRespectsMaxUnavailable(t *testing.T) {
	s := rolling(intstr.FromInt32(1), intstr.FromInt32(1))
	tests := []struct {
		name      string
		clusters  []Cluster
		wantStart []string
		blocked   bool
	}{
		{name: "one at a time", clusters: []Cluster{at("a", old, true), at("b", old, true), at("c", old, true)},
			wantStart: []string{"a"}},
		{name: "one in flight: nothing more", clusters: []Cluster{at("a", target, false), at("b", old, true)}},
		{name: "a soaking cluster is still in flight", clusters: func() []Cluster {
			c := at("a", target, true)
			return []Cluster{c, at("b", old, true)}
		}()},
		// kubefleet "one failed to apply bound binding and four failed non ready
		// bound bindings, outdated resources with maxUnavailable specified".
		{name: "clusters not Available anyway are updated without using maxUnavailable",
			clusters:  []Cluster{at("a", old, false), at("b", old, false), at("c", old, false), at("d", old, false), at("e", old, true)},
			wantStart: []string{"a", "b", "c", "d", "e"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			s := s
			s.MaxFailures = 1
			s.MinAvailable = time.Minute
			p := Compute(tt.clusters, s, State{Target: target}, t0.Add(time.Second))
			if tt.wantStart == nil {
				g.Expect(p.Start).To(BeEmpty())
			} else {
				g.Expect(p.Start).To(ConsistOf(tt.wantStart))
			}
		})
	}
	t.Run("a failed cluster leaves room for the next", func(t *testing.T) {
		g := NewWithT(t)
		s := s
		s.MaxFailures = 1
		f := at("a", target, false)
		f.Applied, f.Message = metav1.ConditionFalse, "boom"
		p := Compute([]Cluster{f, at("b", old, true)}, s, State{Target: target}, t0.Add(time.Second))
		g.Expect(p.Start).To(ConsistOf("b"))
		g.Expect(p.Failed).To(ConsistOf("a"))
		g.Expect(p.BudgetExceeded).To(BeFalse())
	})
}

// kubefleet "test bound ready bindings, maxUnavailable is set to zero - rollout blocked".
func TestMaxUnavailableZeroBlocksUpdatesButNotMoves(t *testing.T) {
	g := NewWithT(t)
	s := rolling(intstr.FromInt32(0), intstr.FromInt32(1))
	p := Compute([]Cluster{at("a", old, true), at("b", old, true)}, s, State{Target: target}, t0)
	g.Expect(p.Start).To(BeEmpty())
	g.Expect(p.Blocked).To(BeTrue())

	// A move: two clusters left, two added; maxSurge 1 gives one at a time.
	p = Compute([]Cluster{{Name: "c"}, {Name: "d"}}, s, State{Target: target, Leaving: 2}, t0)
	g.Expect(p.Start).To(ConsistOf("c"))
	p = Compute([]Cluster{at("c", target, true), {Name: "d"}}, s, State{Target: target, Leaving: 1}, t0)
	g.Expect(p.Start).To(ConsistOf("d"))
}

func TestSoakCountsFromThisRevision(t *testing.T) {
	g := NewWithT(t)
	s := rolling(intstr.FromInt32(1), intstr.FromInt32(1))
	s.MinAvailable = time.Minute
	// Available since long before; given the target at t0: the soak runs from t0
	// (ocm#1207: an old transition time let every cluster through at once).
	c := at("a", target, true)
	c.AvailableSince = t0.Add(-time.Hour)
	p := Compute([]Cluster{c, at("b", old, true)}, s, State{Target: target}, t0.Add(30*time.Second))
	g.Expect(states(p)).To(HaveKeyWithValue("a", placementv1alpha1.ClusterSoaking))
	g.Expect(p.Start).To(BeEmpty())
	g.Expect(p.RecheckAfter).To(Equal(30 * time.Second))

	p = Compute([]Cluster{c, at("b", old, true)}, s, State{Target: target}, t0.Add(time.Minute))
	g.Expect(states(p)).To(HaveKeyWithValue("a", placementv1alpha1.ClusterSucceeded))
	g.Expect(p.Start).To(ConsistOf("b"))

	// Available at the new revision only later: counted from that transition.
	c.AvailableSince = t0.Add(time.Minute)
	p = Compute([]Cluster{c}, s, State{Target: target}, t0.Add(90*time.Second))
	g.Expect(states(p)).To(HaveKeyWithValue("a", placementv1alpha1.ClusterSoaking))
}

// kubernetes "DeploymentTimedOut"; ocm "Failed status outside of the timeout
// duration": a breached deadline is a failure, and spends the budget.
func TestDeadlineBreachCountsAsFailure(t *testing.T) {
	g := NewWithT(t)
	s := rolling(intstr.FromInt32(1), intstr.FromInt32(1))
	s.Deadline = time.Minute
	clusters := []Cluster{at("a", target, false), at("b", old, true)}
	p := Compute(clusters, s, State{Target: target}, t0.Add(59*time.Second))
	g.Expect(states(p)).To(HaveKeyWithValue("a", placementv1alpha1.ClusterUpdating))
	g.Expect(p.RecheckAfter).To(Equal(time.Second))

	p = Compute(clusters, s, State{Target: target}, t0.Add(time.Minute))
	g.Expect(states(p)).To(HaveKeyWithValue("a", placementv1alpha1.ClusterFailed))
	g.Expect(p.Clusters[0].ByDeadline).To(BeTrue())
	g.Expect(p.BudgetExceeded).To(BeTrue(), "maxFailures 0")
	g.Expect(p.Start).To(BeEmpty(), "the rollout stops by itself")

	// Paused: the clock stops, nothing fails by the deadline, nothing starts.
	p = Compute(clusters, s, State{Target: target, Paused: true}, t0.Add(time.Hour))
	g.Expect(states(p)).To(HaveKeyWithValue("a", placementv1alpha1.ClusterUpdating))
	g.Expect(p.Start).To(BeEmpty())
}

// ocm "rolling exceeds max failure" and "rolling deadline meets and tolerate max failure".
func TestFailureBudget(t *testing.T) {
	g := NewWithT(t)
	s := rolling(intstr.FromString("100%"), intstr.FromInt32(1))
	s.MaxFailures = 1
	failed := func(name string) Cluster {
		c := at(name, target, false)
		c.Applied, c.Message = metav1.ConditionFalse, "boom"
		return c
	}
	degraded := at("b", target, true)
	degraded.Degraded = true
	clusters := []Cluster{failed("a"), at("c", old, true), at("d", old, true)}
	p := Compute(clusters, s, State{Target: target}, t0)
	g.Expect(p.BudgetExceeded).To(BeFalse())
	g.Expect(p.Start).To(ConsistOf("c", "d"))

	p = Compute(append(clusters, degraded), s, State{Target: target}, t0)
	g.Expect(p.BudgetExceeded).To(BeTrue())
	g.Expect(p.Failed).To(ConsistOf("a", "b"))
	g.Expect(p.Start).To(BeEmpty())

	// A new revision (a fix, or an undo): the clusters that failed start again
	// without counting, as they are not Available anyway.
	p = Compute([]Cluster{failed("a"), degraded, at("c", target, true)}, s, State{Target: "fix"}, t0)
	g.Expect(p.BudgetExceeded).To(BeFalse())
	g.Expect(p.Start).To(ContainElement("a"))
}

// A cluster an override fails on keeps what it has, is Failed at the target and
// does not count against maxFailures: the others proceed, under every strategy.
func TestOverrideFailedClusterDoesNotStopTheOthers(t *testing.T) {
	g := NewWithT(t)
	overrideFailed := func(c Cluster) Cluster {
		c.OverrideFailed = "rule replicas: no such key: region"
		return c
	}
	allAtOnce, err := StrategyFor(placementv1alpha1.RolloutStrategy{})
	g.Expect(err).NotTo(HaveOccurred())
	clusters := []Cluster{overrideFailed(at("a", old, true)), at("b", old, true), overrideFailed(Cluster{Name: "c"}), {Name: "d"}}
	p := Compute(clusters, allAtOnce, State{Target: target}, t0)
	g.Expect(p.BudgetExceeded).To(BeFalse())
	g.Expect(p.Start).To(ConsistOf("b", "d"), "neither a (kept at its revision) nor c (no Work) is given the target")
	g.Expect(p.Failed).To(ConsistOf("a", "c"))
	g.Expect(states(p)).To(HaveKeyWithValue("a", placementv1alpha1.ClusterFailed))
	g.Expect(p.Clusters[0].Reason).To(HavePrefix("OverrideFailed: rule replicas"))

	// Rolling with one cluster at a time: the failed one uses no room.
	p = Compute([]Cluster{overrideFailed(at("a", old, true)), at("b", old, true), at("c", old, true)},
		rolling(intstr.FromInt32(1), intstr.FromInt32(0)), State{Target: target}, t0)
	g.Expect(p.Start).To(ConsistOf("b"))

	// Once the others are Available at the target, the rollout is done, not complete.
	p = Compute([]Cluster{overrideFailed(at("a", old, true)), at("b", target, true)}, allAtOnce, State{Target: target}, t0)
	g.Expect(p.Done).To(BeTrue())
	g.Expect(p.Complete).To(BeFalse())

	// A cluster already at the target whose content no longer renders keeps it and
	// its state.
	p = Compute([]Cluster{overrideFailed(at("a", target, true))}, allAtOnce, State{Target: target}, t0)
	g.Expect(states(p)).To(HaveKeyWithValue("a", placementv1alpha1.ClusterSucceeded))

	// A stage finishes with it failed.
	st := staged(envStage("dev", "dev", false), envStage("prod", "prod", false))
	p = Compute([]Cluster{overrideFailed(withLabels(at("a", old, true), "env", "dev")), withLabels(at("b", old, true), "env", "prod")},
		st, State{Target: target}, t0)
	g.Expect(p.Start).To(ConsistOf("b"))
}

func staged(stages ...Stage) Strategy {
	s, _ := StrategyFor(placementv1alpha1.RolloutStrategy{})
	s.Type = placementv1alpha1.RolloutStaged
	s.Stages = stages
	return s
}

func envStage(name, env string, approval bool) Stage {
	return Stage{Name: name, Selector: labels.SelectorFromSet(labels.Set{"env": env}), MaxConcurrency: intstr.FromInt32(1), Approval: approval}
}

// kubefleet "Should not start rolling out 1st stage" → "Should accept the approval
// request and start to rollout 1st stage", and the approval of an old revision.
func TestStagedWaitsForApproval(t *testing.T) {
	g := NewWithT(t)
	s := staged(envStage("dev", "dev", false), envStage("prod", "prod", true))
	clusters := []Cluster{withLabels(at("d1", old, true), "env", "dev"), withLabels(at("p1", old, true), "env", "prod"),
		withLabels(at("p2", old, true), "env", "prod")}

	p := Compute(clusters, s, State{Target: target}, t0)
	g.Expect(p.Start).To(ConsistOf("d1"))
	g.Expect(p.Stage).To(Equal("dev"))
	g.Expect(p.StageClusters).To(ConsistOf("d1"))

	clusters[0] = withLabels(at("d1", target, true), "env", "dev")
	st := State{Target: target, Stage: p.Stage, StageStarted: p.StageStarted, StageClusters: p.StageClusters}
	p = Compute(clusters, s, st, t0.Add(time.Minute))
	g.Expect(p.Start).To(BeEmpty())
	g.Expect(p.WaitingForApproval).To(Equal("prod"))
	g.Expect(p.Stage).To(Equal("prod"))

	// An approval of another revision is not passed in: nothing changes.
	st = State{Target: target, Stage: p.Stage, ApprovedStages: map[string]bool{"dev": true}}
	p = Compute(clusters, s, st, t0.Add(time.Minute))
	g.Expect(p.WaitingForApproval).To(Equal("prod"))

	st.ApprovedStages = map[string]bool{"prod": true}
	p = Compute(clusters, s, st, t0.Add(time.Minute))
	g.Expect(p.Start).To(ConsistOf("p1"), "maxConcurrency 1")
	g.Expect(p.StageClusters).To(ConsistOf("p1", "p2"))
}

// kubefleet "Should skip the entire empty stage (stage2) and complete update run".
func TestEmptyStageIsSkipped(t *testing.T) {
	g := NewWithT(t)
	s := staged(envStage("canary", "canary", true), envStage("prod", "prod", false))
	clusters := []Cluster{withLabels(at("p1", old, true), "env", "prod")}
	p := Compute(clusters, s, State{Target: target}, t0)
	g.Expect(p.WaitingForApproval).To(BeEmpty(), "no canary cluster: its approval is not waited for")
	g.Expect(p.Start).To(ConsistOf("p1"))
	g.Expect(p.Stage).To(Equal("prod"))
}

func TestStageMembershipIsFrozen(t *testing.T) {
	g := NewWithT(t)
	s := staged(envStage("dev", "dev", false), envStage("prod", "prod", false))
	// dev started with d1 alone; d2 joined dev later (relabelled): it waits for
	// the end, and the stage completes on d1.
	clusters := []Cluster{withLabels(at("d1", target, true), "env", "dev"), withLabels(at("d2", old, true), "env", "dev"),
		withLabels(at("p1", old, true), "env", "prod")}
	st := State{Target: target, Stage: "dev", StageStarted: t0, StageClusters: []string{"d1"}}
	p := Compute(clusters, s, st, t0.Add(time.Minute))
	g.Expect(p.Stage).To(Equal("prod"))
	g.Expect(p.Start).To(ConsistOf("p1"))
	for _, c := range p.Clusters {
		if c.Name == "d2" {
			g.Expect(c.Stage).To(Equal(UnmatchedStage))
		}
	}
	// A member that left the Placement during its stage is not waited for.
	st = State{Target: target, Stage: "dev", StageStarted: t0, StageClusters: []string{"d1", "gone"}}
	p = Compute(clusters[:1], s, st, t0.Add(time.Minute))
	g.Expect(p.Complete).To(BeTrue())
}

func TestStageSoakAndUnmatchedGoLast(t *testing.T) {
	g := NewWithT(t)
	dev := envStage("dev", "dev", false)
	dev.Soak = time.Minute
	s := staged(dev)
	clusters := []Cluster{withLabels(at("d1", target, true), "env", "dev"), at("x", old, true)}
	st := State{Target: target, Stage: "dev", StageStarted: t0, StageClusters: []string{"d1"}}
	p := Compute(clusters, s, st, t0.Add(30*time.Second))
	g.Expect(states(p)).To(HaveKeyWithValue("d1", placementv1alpha1.ClusterSoaking))
	g.Expect(p.Start).To(BeEmpty())
	p = Compute(clusters, s, st, t0.Add(time.Minute))
	g.Expect(p.Start).To(ConsistOf("x"))
	g.Expect(p.Stage).To(Equal(UnmatchedStage))
}

func TestExternalStartsOnlyApprovedClusters(t *testing.T) {
	g := NewWithT(t)
	s, _ := StrategyFor(placementv1alpha1.RolloutStrategy{Type: placementv1alpha1.RolloutExternal})
	clusters := []Cluster{at("a", old, true), at("b", old, true)}
	p := Compute(clusters, s, State{Target: target}, t0)
	g.Expect(p.Start).To(BeEmpty())
	g.Expect(p.WaitingForApproval).To(Equal("clusters"))
	p = Compute(clusters, s, State{Target: target, ApprovedClusters: map[string]bool{"b": true}}, t0)
	g.Expect(p.Start).To(ConsistOf("b"))
}

// ocm TestGetRolloutCluster_ClusterAdded: a cluster added during a rollout gets
// the stable revision and is updated through the gates.
func TestClusterAddedDuringARollout(t *testing.T) {
	g := NewWithT(t)
	s := rolling(intstr.FromInt32(1), intstr.FromInt32(1))
	p := Compute([]Cluster{at("a", target, false), at("b", old, true), {Name: "c"}}, s, State{Target: target, Stable: old}, t0)
	g.Expect(p.PlaceStable).To(ConsistOf("c"))
	g.Expect(p.Start).To(BeEmpty())

	// With nothing under way the target goes straight to it.
	p = Compute([]Cluster{at("a", target, true), {Name: "c"}}, s, State{Target: target, Stable: target}, t0)
	g.Expect(p.Start).To(ConsistOf("c"))
}

func TestCompleteAndDone(t *testing.T) {
	g := NewWithT(t)
	s := rolling(intstr.FromInt32(1), intstr.FromInt32(1))
	s.MaxFailures = 1
	f := at("b", target, false)
	f.Applied = metav1.ConditionFalse
	p := Compute([]Cluster{at("a", target, true), f}, s, State{Target: target}, t0)
	g.Expect(p.Done).To(BeTrue())
	g.Expect(p.Complete).To(BeFalse())
	p = Compute([]Cluster{at("a", target, true)}, s, State{Target: target}, t0)
	g.Expect(p.Complete).To(BeTrue())
}

func TestPercentages(t *testing.T) {
	g := NewWithT(t)
	g.Expect(scaled(intstr.FromString("25%"), 10, false)).To(Equal(2))
	g.Expect(scaled(intstr.FromString("25%"), 2, false)).To(Equal(1), "at least 1")
	g.Expect(scaled(intstr.FromString("0%"), 10, false)).To(Equal(0))
	g.Expect(scaled(intstr.FromString("10%"), 1000, false)).To(Equal(100))
	_, err := StrategyFor(placementv1alpha1.RolloutStrategy{Type: placementv1alpha1.RolloutStaged,
		Stages: []placementv1alpha1.RolloutStage{{Name: "x", ClusterSelector: metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "a", Operator: "Bad"}}}}}})
	g.Expect(err).To(MatchError(ContainSubstring("stages[0].clusterSelector")))
	s, err := StrategyFor(placementv1alpha1.RolloutStrategy{ProgressDeadlineSeconds: ptr.To[int32](30)})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(s.Deadline).To(Equal(30 * time.Second))
}

// Make-before-break is decided once (Depart), its three gates together:
// availability and the deadline, the claims a copy holds, and the traffic
// of the Services it exports. karmada "Delete the old ones first, then create
// the new ones" is what must not happen; karmada#7455: no replacement must not
// mean "remove".
func TestDepartIsMakeBeforeBreak(t *testing.T) {
	leaving := []Leaving{{Name: "old1", Since: t0, Available: true}, {Name: "old2", Since: t0, Available: true}}
	withClaims := func(l Leaving, move bool) Leaving {
		l.Claims, l.ClaimsMove = "db on "+l.Name+" holds 1 bound ReadWriteOnce claim", move
		return l
	}
	withTraffic := func(l Leaving, tr Traffic) Leaving {
		tr.Services = []string{"web"}
		tr.Drain = 5 * time.Second
		l.Traffic = &tr
		return l
	}
	old1 := leaving[0]
	available := []Cluster{at("new1", target, true)}
	tests := []struct {
		name                 string
		selected             []Cluster
		leaving              []Leaving
		now                  time.Time
		remove, forced, held []string
		moving, withdraw     int
		traffic              string
		recheck              time.Duration
	}{
		// Availability.
		{name: "no replacement Available yet: both kept", selected: []Cluster{{Name: "new1"}, at("new2", target, false)}, leaving: leaving, now: t0},
		{name: "one replacement Available: one goes", selected: []Cluster{at("new1", target, true), at("new2", target, false)}, leaving: leaving, now: t0,
			remove: []string{"old1"}, recheck: 10 * time.Minute},
		{name: "both Available: both go", selected: []Cluster{at("new1", target, true), at("new2", target, true)}, leaving: leaving, now: t0,
			remove: []string{"old1", "old2"}},
		{name: "a copy that is not Available serves nothing", selected: []Cluster{{Name: "new1"}}, leaving: []Leaving{{Name: "old1", Since: t0}}, now: t0,
			remove: []string{"old1"}},
		{name: "nothing selected any more: they go", leaving: leaving, now: t0, remove: []string{"old1", "old2"}},
		{name: "revoked: at once", selected: []Cluster{{Name: "new1"}}, leaving: []Leaving{{Name: "old1", Since: t0, Available: true, Revoked: true}}, now: t0,
			remove: []string{"old1"}},
		{name: "deadline passed: forced", selected: []Cluster{at("new1", target, false)}, leaving: leaving[:1], now: t0.Add(10 * time.Minute),
			remove: []string{"old1"}, forced: []string{"old1"}},
		{name: "a failover's own deadline (grace period)", selected: []Cluster{at("new1", target, false)},
			leaving: []Leaving{{Name: "old1", Since: t0, Available: true, Deadline: time.Minute, FailedOver: true}}, now: t0.Add(time.Minute),
			remove: []string{"old1"}, forced: []string{"old1"}},
		{name: "deadline passed, but the replacement was never given the objects (paused): kept", selected: []Cluster{{Name: "new1"}},
			leaving: leaving[:1], now: t0.Add(time.Hour)},
		// Claims.
		{name: "held by its claims: kept whatever the deadline and the replacements", selected: available,
			leaving: []Leaving{withClaims(old1, false)}, now: t0.Add(time.Hour), held: []string{"old1"}},
		{name: "held even when not Available (a crash-looping database still has its data)", selected: []Cluster{{Name: "new1"}},
			leaving: []Leaving{withClaims(Leaving{Name: "old1", Since: t0}, false)}, now: t0, held: []string{"old1"}},
		{name: "a held copy does not let another go", selected: []Cluster{{Name: "new1"}},
			leaving: []Leaving{withClaims(old1, false), leaving[1]}, now: t0.Add(time.Hour), held: []string{"old1"}},
		{name: "revoked: goes even when held", selected: []Cluster{{Name: "new1"}},
			leaving: []Leaving{func() Leaving { l := withClaims(old1, false); l.Revoked = true; return l }()}, now: t0, remove: []string{"old1"}},
		{name: "claims that move (Move, or drained with --include-stateful): make-before-break as any copy, said to move", selected: []Cluster{{Name: "new1"}},
			leaving: []Leaving{withClaims(old1, true)}, now: t0, moving: 1},
		{name: "claims that move go once the replacement is Available", selected: available,
			leaving: []Leaving{withClaims(old1, true)}, now: t0, remove: []string{"old1"}, moving: 1},
		// Traffic.
		{name: "traffic: the importers do not serve a replacement yet", selected: available,
			leaving: []Leaving{withTraffic(old1, Traffic{Unserved: "1 of 2 importers of Service app/web do not serve the endpoints of new1 yet"})}, now: t0,
			traffic: "old1: 1 of 2 importers", recheck: TrafficRecheck},
		{name: "traffic: replacements served, its endpoints are withdrawn now", selected: available,
			leaving: []Leaving{withTraffic(old1, Traffic{})}, now: t0, withdraw: 1, traffic: "old1: withdrawing its endpoints of web", recheck: TrafficRecheck},
		{name: "traffic: withdrawn, an importer still serves them", selected: available,
			leaving: []Leaving{withTraffic(old1, Traffic{Withdrawn: true, WithdrawnAt: t0, StillServed: "1 of 2 importers of Service app/web still serve its endpoints"})},
			now:     t0, traffic: "old1: 1 of 2 importers", recheck: TrafficRecheck},
		{name: "traffic: withdrawn everywhere, draining", selected: available,
			leaving: []Leaving{withTraffic(old1, Traffic{Withdrawn: true, WithdrawnAt: t0})}, now: t0.Add(2 * time.Second),
			traffic: "old1: draining", recheck: 3 * time.Second},
		{name: "traffic: drained: goes", selected: available,
			leaving: []Leaving{withTraffic(old1, Traffic{Withdrawn: true, WithdrawnAt: t0})}, now: t0.Add(5 * time.Second), remove: []string{"old1"}},
		{name: "traffic: not waited for while the replacement is not Available (availability keeps it first)", selected: []Cluster{at("new1", target, false)},
			leaving: []Leaving{withTraffic(old1, Traffic{})}, now: t0, recheck: 10 * time.Minute},
		{name: "traffic: a removal forced by the deadline does not wait for it", selected: []Cluster{at("new1", target, false)},
			leaving: []Leaving{withTraffic(old1, Traffic{Unserved: "no importer"})}, now: t0.Add(10 * time.Minute), remove: []string{"old1"}, forced: []string{"old1"}},
		{name: "traffic: a revoked cluster does not wait for it", selected: []Cluster{{Name: "new1"}},
			leaving: []Leaving{func() Leaving { l := withTraffic(old1, Traffic{Unserved: "no importer"}); l.Revoked = true; return l }()}, now: t0, remove: []string{"old1"}},
		{name: "all three: claims hold first, whatever the traffic", selected: available,
			leaving: []Leaving{withTraffic(withClaims(old1, false), Traffic{})}, now: t0, held: []string{"old1"}},
		{name: "all three: claims that move, then the traffic", selected: available,
			leaving: []Leaving{withTraffic(withClaims(old1, true), Traffic{})}, now: t0, moving: 1, withdraw: 1, traffic: "old1: withdrawing", recheck: TrafficRecheck},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			r := Depart(tt.leaving, tt.selected, Strategy{Deadline: 10 * time.Minute}, tt.now)
			g.Expect(r.Remove).To(Equal(tt.remove))
			g.Expect(r.Forced).To(Equal(tt.forced))
			g.Expect(r.Held).To(Equal(tt.held))
			g.Expect(r.Moving).To(HaveLen(tt.moving))
			g.Expect(r.Withdraw).To(HaveLen(tt.withdraw))
			if tt.traffic == "" {
				g.Expect(r.TrafficHeld).To(BeEmpty())
			} else {
				g.Expect(r.TrafficHeld).To(ConsistOf(HavePrefix(tt.traffic)))
			}
			g.Expect(r.RecheckAfter).To(Equal(tt.recheck))
			g.Expect(len(r.Remove)+len(r.Kept)).To(Equal(len(tt.leaving)), fmt.Sprint(r))
			held, _ := Holds(tt.leaving)
			g.Expect(held).To(HaveLen(len(tt.held)), "Holds and Depart agree")
		})
	}
}

// While a cluster left holds its copy by its claims, no cluster without a Work
// is given one (whatever the strategy); clusters with Works still update.
func TestHoldGivesNoClusterACopy(t *testing.T) {
	for _, s := range []Strategy{{Type: placementv1alpha1.RolloutAllAtOnce, Deadline: time.Minute}, rolling(intstr.FromInt32(1), intstr.FromInt32(1))} {
		g := NewWithT(t)
		p := Compute([]Cluster{{Name: "new1"}, at("kept", old, true)}, s, State{Target: target, Hold: "db on old1 has 3 bound claims", Leaving: 1}, t0)
		g.Expect(p.Start).To(ConsistOf("kept"), string(s.Type))
		g.Expect(p.PlaceStable).To(BeEmpty())
		g.Expect(p.Clusters).To(ContainElement(And(HaveField("Name", "new1"), HaveField("State", placementv1alpha1.ClusterPending),
			HaveField("Reason", "held: db on old1 has 3 bound claims"))))
		g.Expect(p.Done).To(BeFalse())
	}
}

// Make-before-break object by object (a claim Pending everywhere makes no
// copy Available as a whole, but the Deployment serves on the cluster left
// until it is Available on its replacement).
func TestDepartByObject(t *testing.T) {
	objs := func(keys ...string) map[string]bool {
		out := map[string]bool{}
		for _, k := range keys {
			out[k] = true
		}
		return out
	}
	selected := func(available ...string) Cluster {
		c := at("new", target, false)
		c.Objects, c.AvailableObjects = objs("deploy", "claim"), objs(available...)
		return c
	}
	old := Leaving{Name: "old", Since: t0, AvailableObjects: objs("deploy")}
	tests := []struct {
		name     string
		selected []Cluster
		leaving  []Leaving
		remove   []string
	}{
		{"the Deployment is not Available on the replacement yet: kept", []Cluster{selected()}, []Leaving{old}, nil},
		{"the Deployment is Available there, the claim still Pending: goes", []Cluster{selected("deploy")}, []Leaving{old}, []string{"old"}},
		{"nothing Available on the copy left: goes at once", []Cluster{selected()}, []Leaving{{Name: "old", Since: t0, AvailableObjects: objs()}}, []string{"old"}},
		{"a replacement without Works needs everything", []Cluster{{Name: "new"}}, []Leaving{old}, nil},
		{"two copies left, two replacements, one with the Deployment Available: one goes", []Cluster{selected("deploy"), func() Cluster {
			c := selected()
			c.Name = "new2"
			return c
		}()}, []Leaving{old, {Name: "old2", Since: t0.Add(time.Second), AvailableObjects: objs("deploy")}}, []string{"old"}},
		{"a divided workload the replacement does not carry: it does not hold the copy left", []Cluster{func() Cluster {
			c := selected()
			c.Objects = objs("claim")
			return c
		}()}, []Leaving{old}, []string{"old"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			r := Depart(tt.leaving, tt.selected, Strategy{Deadline: 10 * time.Minute}, t0)
			g.Expect(r.Remove).To(Equal(tt.remove))
			g.Expect(r.Forced).To(BeEmpty())
		})
	}
}

// The disruption budget: an Available copy goes only while enough clusters
// stay Available without it, past the deadline too; a copy that is not
// Available (a failover's unreachable cluster) and a revoked cluster go all
// the same; a percentage is of the clusters selected and left.
func TestDepartHonoursTheDisruptionBudget(t *testing.T) {
	two, all := intstr.FromInt32(2), intstr.FromString("100%")
	huge, absurd, zero := intstr.FromInt32(1<<31-1), intstr.FromString("999%"), intstr.FromInt32(0)
	left := func(name string, available bool) Leaving { return Leaving{Name: name, Since: t0, Available: available} }
	tests := []struct {
		name     string
		budget   *intstr.IntOrString
		selected []Cluster
		leaving  []Leaving
		now      time.Time
		remove   []string
		held     int
	}{
		{name: "a drain with no replacement: without a budget the copy goes", selected: []Cluster{at("a", target, true)},
			leaving: []Leaving{left("drained", true)}, now: t0, remove: []string{"drained"}},
		{name: "a drain with no replacement: a budget of 2 keeps it", budget: &two, selected: []Cluster{at("a", target, true)},
			leaving: []Leaving{left("drained", true)}, now: t0, held: 1},
		{name: "and keeps it past the deadline", budget: &two, selected: []Cluster{at("a", target, true), at("b", target, false)},
			leaving: []Leaving{left("drained", true)}, now: t0.Add(time.Hour), held: 1},
		{name: "a replacement Available: it goes", budget: &two, selected: []Cluster{at("a", target, true), at("b", target, true)},
			leaving: []Leaving{left("drained", true)}, now: t0, remove: []string{"drained"}},
		{name: "two leave, one replacement Available: one goes, the budget keeps the other", budget: &two,
			selected: []Cluster{at("a", target, true), at("b", target, false)},
			leaving:  []Leaving{left("x", true), left("y", true)}, now: t0.Add(time.Hour), remove: []string{"x"}, held: 1},
		{name: "a copy that is not Available (failover) goes: it keeps nothing Available", budget: &two, selected: []Cluster{at("a", target, true)},
			leaving: []Leaving{{Name: "gone", Since: t0, FailedOver: true, Deadline: time.Minute}}, now: t0.Add(time.Minute), remove: []string{"gone"}},
		{name: "revoked: goes whatever the budget", budget: &two, selected: []Cluster{at("a", target, true)},
			leaving: []Leaving{{Name: "r", Since: t0, Available: true, Revoked: true}}, now: t0, remove: []string{"r"}},
		{name: "100% of selected and left", budget: &all, selected: []Cluster{at("a", target, true), at("b", target, true)},
			leaving: []Leaving{left("drained", true)}, now: t0, held: 1},
		// A tenant's extreme budgets hold its own copies, nothing else, and never panic.
		{name: "2^31-1 clusters: every Available copy held", budget: &huge, selected: []Cluster{at("a", target, true)},
			leaving: []Leaving{left("x", true), left("y", false)}, now: t0.Add(time.Hour), remove: []string{"y"}, held: 1},
		{name: "999%: as many", budget: &absurd, selected: []Cluster{at("a", target, true), at("b", target, true)},
			leaving: []Leaving{left("x", true)}, now: t0, held: 1},
		{name: "0: no floor", budget: &zero, selected: []Cluster{at("a", target, false)},
			leaving: []Leaving{left("x", true)}, now: t0.Add(time.Hour), remove: []string{"x"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			r := Depart(tt.leaving, tt.selected, Strategy{Deadline: 10 * time.Minute, MinAvailableClusters: tt.budget}, tt.now)
			g.Expect(r.Remove).To(Equal(tt.remove))
			g.Expect(r.BudgetHeld).To(HaveLen(tt.held))
			for _, h := range r.BudgetHeld {
				g.Expect(h).To(ContainSubstring("the disruption budget keeps"))
			}
		})
	}
}

// A forced drain overrules the budget from its ForcedAt: the copy goes as if
// there were none (the availability gate still applies) and the removal says
// what was overruled; before then, the budget keeps it and the drain is looked
// at again at ForcedAt.
func TestForcedDrainOverrulesTheBudget(t *testing.T) {
	g := NewWithT(t)
	two := intstr.FromInt32(2)
	s := Strategy{Deadline: 10 * time.Minute, MinAvailableClusters: &two}
	forced := Leaving{Name: "drained", Since: t0, Available: true, ForcedAt: t0.Add(time.Minute)}
	selected := []Cluster{at("a", target, true)}

	r := Depart([]Leaving{forced}, selected, s, t0)
	g.Expect(r.Remove).To(BeEmpty())
	g.Expect(r.BudgetHeld).To(HaveLen(1))
	g.Expect(r.RecheckAfter).To(Equal(time.Minute))
	g.Expect(r.Overruled).To(BeEmpty())

	r = Depart([]Leaving{forced}, selected, s, t0.Add(time.Minute))
	g.Expect(r.Remove).To(Equal([]string{"drained"}))
	g.Expect(r.BudgetHeld).To(BeEmpty())
	g.Expect(r.Overruled).To(HaveKeyWithValue("drained", ContainSubstring("the cluster's drain overruled it at")))

	// Overruled, a copy whose replacement is not Available yet still waits
	// for it, up to the deadline.
	waiting := []Cluster{at("a", target, true), at("b", target, false)}
	r = Depart([]Leaving{forced}, waiting, s, t0.Add(time.Minute))
	g.Expect(r.Remove).To(BeEmpty())
	g.Expect(r.Kept).To(Equal([]string{"drained"}))
	g.Expect(r.BudgetHeld).To(BeEmpty())
	r = Depart([]Leaving{forced}, waiting, s, t0.Add(10*time.Minute))
	g.Expect(r.Remove).To(Equal([]string{"drained"}))
	g.Expect(r.Overruled).To(HaveKey("drained"))
}

// A Work written after the plan was made (a surge-first division lowering a
// share once the raised ones are Available) is not Succeeded yet: the rollout
// is neither done nor complete until its agent reports it.
func TestRewrittenIsNotComplete(t *testing.T) {
	g := NewWithT(t)
	s, err := StrategyFor(placementv1alpha1.RolloutStrategy{})
	g.Expect(err).NotTo(HaveOccurred())
	p := Compute([]Cluster{at("a", target, true), at("b", target, true)}, s, State{Target: target}, t0)
	g.Expect(p.Complete).To(BeTrue())
	g.Expect(p.Done).To(BeTrue())

	p.Rewritten(nil)
	g.Expect(p.Complete).To(BeTrue(), "nothing written")
	p.Rewritten([]string{"b", "gone"})
	g.Expect(p.Complete).To(BeFalse())
	g.Expect(p.Done).To(BeFalse())
	g.Expect(p.Clusters).To(ConsistOf(
		HaveField("State", placementv1alpha1.ClusterSucceeded),
		And(HaveField("Name", "b"), HaveField("State", placementv1alpha1.ClusterUpdating))))
	_, reason, msg := Progressing(&placementv1alpha1.PlacementRevision{Spec: placementv1alpha1.PlacementRevisionSpec{Revision: 2}}, p, Removal{}, false, 2)
	g.Expect(reason).To(Equal(placementv1alpha1.ReasonRolloutInProgress))
	g.Expect(msg).To(HavePrefix("revision 2: 1 of 2 clusters updated"))

	// A failed cluster stays failed.
	failed := Plan{Clusters: []ClusterPlan{{Name: "a", State: placementv1alpha1.ClusterFailed}}, Done: true}
	failed.Rewritten([]string{"a"})
	g.Expect(failed.Done).To(BeTrue())
}
