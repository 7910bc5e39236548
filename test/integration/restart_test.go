package integration

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr/funcr"
	. "github.com/onsi/gomega"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/config"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	workv1alpha1 "sigs.k8s.io/work-api/pkg/apis/v1alpha1"

	placementv1alpha1 "github.com/lodestar-dev/lodestar/api/placement/v1alpha1"
	lodestarworkv1alpha1 "github.com/lodestar-dev/lodestar/api/work/v1alpha1"
	"github.com/lodestar-dev/lodestar/controllers/hub"
	"github.com/lodestar-dev/lodestar/controllers/hub/scheduler"
	"github.com/lodestar-dev/lodestar/internal/lookup"
)

// A hub manager that starts over settled Placements writes nothing: not their
// status, not their Works, not their decisions. Each such write would be made
// for every Placement of a large hub at every restart or change of leader, and
// compete with the writes of real changes. A second manager, with caches and
// memory of its own, stands for the restarted one.
func TestRestartWritesNothingWhenNothingChanged(t *testing.T) {
	g := NewWithT(t)
	ctx := t.Context()
	ns := newNamespace(t)
	createWebApp(t, ns, nil)
	// One Placement available on its cluster (member-1 runs Pods), with status
	// summaries and reflection; one applied on two clusters and available on one
	// (member-2 runs none).
	one := webPlacement(ns)
	one.Name = "web-one"
	one.Spec.Scheduling.ClusterSelector = nil
	one.Spec.Scheduling.ClusterNames = []string{fullMember}
	one.Spec.Reporting.Feedback = []lodestarworkv1alpha1.FeedbackRule{{Group: "apps", Kind: "Deployment", Fields: []lodestarworkv1alpha1.FeedbackField{
		{Name: "ready", JSONPath: ".status.readyReplicas"}}}}
	one.Spec.Reporting.Summaries = []placementv1alpha1.StatusSummary{
		{Name: "ready", Resource: placementv1alpha1.SummaryResource{Group: "apps", Kind: "Deployment"}, Value: "ready", Operation: placementv1alpha1.SummarySum,
			GroupBy: &placementv1alpha1.SummaryGroupBy{ClusterLabel: "region"}},
	}
	one.Spec.Reporting.Reflection = placementv1alpha1.ReflectionAggregate
	// Its own namespace: the two may not place the same objects on member-1.
	ns2 := newNamespace(t)
	createWebApp(t, ns2, nil)
	two := webPlacement(ns2)
	two.Name = "web-two"
	two.Spec.Scheduling.ClusterSelector = nil
	two.Spec.Scheduling.ClusterNames = []string{member1, member2}
	placements := []*placementv1alpha1.Placement{one, two}
	for _, p := range placements {
		g.Expect(hubCP.Client.Create(ctx, p)).To(Succeed())
	}

	// written are the resource versions of everything the hub's controllers
	// write for the Placements.
	written := func(g Gomega) map[string]string {
		out := map[string]string{}
		for _, p := range placements {
			got := &placementv1alpha1.Placement{}
			g.Expect(hubCP.Client.Get(ctx, client.ObjectKeyFromObject(p), got)).To(Succeed())
			out[p.Name] = got.ResourceVersion
			works := &workv1alpha1.WorkList{}
			g.Expect(hubCP.Client.List(ctx, works, client.MatchingLabels(lookup.WorkLabels(got)))).To(Succeed())
			g.Expect(works.Items).To(HaveLen(len(p.Spec.Scheduling.ClusterNames)))
			for _, w := range works.Items {
				out[p.Name+" work "+w.Namespace] = w.ResourceVersion
			}
		}
		return out
	}
	var settled map[string]string
	g.Eventually(func(g Gomega) {
		got := &placementv1alpha1.Placement{}
		g.Expect(hubCP.Client.Get(ctx, client.ObjectKeyFromObject(one), got)).To(Succeed())
		g.Expect(meta.IsStatusConditionTrue(got.Status.Conditions, placementv1alpha1.AvailableCondition)).To(BeTrue(), "%+v", got.Status.Conditions)
		g.Expect(got.Status.Summaries).NotTo(BeEmpty())
		g.Expect(hubCP.Client.Get(ctx, client.ObjectKeyFromObject(two), got)).To(Succeed())
		g.Expect(meta.IsStatusConditionTrue(got.Status.Conditions, placementv1alpha1.AppliedCondition)).To(BeTrue())
		g.Expect(got.Status.AvailableClusters).To(HaveValue(BeEquivalentTo(1)))
		// Settled: nothing was written for them in a while (paced writes included).
		now, before := written(g), settled
		settled = now
		g.Expect(now).To(Equal(before), "still being written")
	}).WithPolling(3 * time.Second).Should(Succeed())

	// The second manager's own log says which of its controllers reconciled the
	// Placement (controller-runtime logs each reconcile's end at level 5).
	var mu sync.Mutex
	reconciled := map[string]bool{}
	logger := funcr.New(func(_, args string) {
		ours := strings.Contains(args, `"namespace"="`+ns+`"`) || strings.Contains(args, `"namespace"="`+ns2+`"`)
		if !ours || !strings.Contains(args, `"msg"="Reconcile `) {
			return
		}
		for _, c := range []string{"scheduler", "workgenerator", "status"} {
			for _, p := range placements {
				if strings.Contains(args, `"controller"="`+c+`"`) && strings.Contains(args, `"name"="`+p.Name+`"`) {
					mu.Lock()
					reconciled[c+" "+p.Name] = true
					mu.Unlock()
				}
			}
		}
	}, funcr.Options{Verbosity: 5})
	mgr, err := ctrl.NewManager(hubCP.Config, hub.ManagerOptions(ctrl.Options{
		Logger:                 logger,
		Metrics:                metricsserver.Options{BindAddress: "0"},
		HealthProbeBindAddress: "0",
		Controller:             config.Controller{SkipNameValidation: ptr.To(true)},
	}, ""))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(hub.Setup(mgr, hub.Options{ClusterSetNamespaces: []string{scheduler.DefaultClusterSetNamespace, auxSet}})).To(Succeed())
	mgrCtx, stop := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { defer close(done); _ = mgr.Start(mgrCtx) }()
	defer func() { stop(); <-done }()
	g.Eventually(func(g Gomega) {
		mu.Lock()
		defer mu.Unlock()
		g.Expect(reconciled).To(HaveLen(6), "controllers of the second manager that reconciled each Placement")
		g.Expect(written(g)).To(Equal(settled))
	}).Should(Succeed())
	// Writes the controllers hold back for pace would come within seconds.
	g.Consistently(func(g Gomega) {
		g.Expect(written(g)).To(Equal(settled))
	}).Should(Succeed())
}
