package main

import (
	"bytes"
	"testing"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/rand"
	"sigs.k8s.io/controller-runtime/pkg/client"

	placementv1alpha1 "github.com/lodestar-dev/lodestar/api/placement/v1alpha1"
	"github.com/lodestar-dev/lodestar/internal/fleet"
	"github.com/lodestar-dev/lodestar/internal/names"
	"github.com/lodestar-dev/lodestar/internal/patch"
	"github.com/lodestar-dev/lodestar/internal/rolloutctl"
)

// rolloutPlacement creates a Placement with two revisions and a rollout status
// as the work generator writes them, reason being its Progressing reason.
func rolloutPlacement(t *testing.T, reason string) client.ObjectKey {
	t.Helper()
	g := NewWithT(t)
	ctx := t.Context()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "rollout-" + rand.String(5)}}
	g.Expect(hubCP.Client.Create(ctx, ns)).To(Succeed())
	g.Expect(fleet.BindClusterSet(ctx, hubCP.Client, ns.Name, placementv1alpha1.DefaultClusterSet)).To(Succeed())
	p := &placementv1alpha1.Placement{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: ns.Name},
		Spec: placementv1alpha1.PlacementSpec{ResourceSelectors: []placementv1alpha1.ResourceSelector{{Version: "v1", Kind: "ConfigMap"}},
			Strategy: placementv1alpha1.RolloutStrategy{Type: placementv1alpha1.RolloutStaged, Stages: []placementv1alpha1.RolloutStage{
				{Name: "staging", ClusterSelector: metav1.LabelSelector{MatchLabels: map[string]string{"env": "staging"}}},
				{Name: "production", ClusterSelector: metav1.LabelSelector{}, Approval: placementv1alpha1.ApprovalRequired},
			}}}}
	g.Expect(hubCP.Client.Create(ctx, p)).To(Succeed())
	for i, cause := range []string{"first revision: 1 objects", "changed ConfigMap/web"} {
		hash := rand.String(16)
		g.Expect(hubCP.Client.Create(ctx, &placementv1alpha1.PlacementRevision{
			ObjectMeta: metav1.ObjectMeta{Name: names.Revision("web", hash), Namespace: ns.Name,
				Labels: map[string]string{placementv1alpha1.PlacementNameLabel: "web"}},
			Spec: placementv1alpha1.PlacementRevisionSpec{Placement: "web", Revision: int64(i + 1), Hash: hash, ChangeCause: cause},
		})).To(Succeed())
	}
	revs, err := rolloutctl.History(ctx, hubCP.Typed(), client.ObjectKeyFromObject(p))
	g.Expect(err).NotTo(HaveOccurred())
	status := &placementv1alpha1.Placement{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: ns.Name}}
	status.Status.Conditions = []metav1.Condition{{Type: placementv1alpha1.ProgressingCondition, Status: metav1.ConditionFalse,
		Reason: reason, Message: "revision 2: 1 of 2 clusters updated", ObservedGeneration: 1, LastTransitionTime: metav1.Now()}}
	status.Status.Rollout = &placementv1alpha1.RolloutStatus{TargetRevision: revs[1].Name, TargetRevisionNumber: 2}
	g.Expect(patch.ApplyStatus(ctx, hubCP.Client, status, "test")).To(Succeed())
	return client.ObjectKeyFromObject(p)
}

func TestRolloutVerbs(t *testing.T) {
	g := NewWithT(t)
	key := rolloutPlacement(t, placementv1alpha1.ReasonWaitingForApproval)

	out, _, err := kubectlLodestar(t, "rollout", "history", "web", "-n", key.Namespace)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(out).To(MatchRegexp(`REVISION\s+NAME\s+AGE\s+CHANGE-CAUSE`))
	g.Expect(out).To(MatchRegexp(`(?m)^2\s+web-\S+\s+\S+\s+changed ConfigMap/web$`))

	out, _, err = kubectlLodestar(t, "rollout", "status", "web", "-n", key.Namespace, "--watch=false")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(out).To(ContainSubstring("WaitingForApproval: revision 2"))

	// A time-out says so, whenever it falls (here before the first read
	// returns), not in the client's rate limiter's words.
	_, _, err = kubectlLodestar(t, "rollout", "status", "web", "-n", key.Namespace, "--timeout", "1ms")
	g.Expect(err).To(MatchError(ContainSubstring("timed out: the rollout is not complete after 1ms")))
	g.Expect(err).NotTo(MatchError(ContainSubstring("rate limiter")))

	_, _, err = kubectlLodestar(t, "rollout", "pause", "web", "-n", key.Namespace)
	g.Expect(err).NotTo(HaveOccurred())
	p := &placementv1alpha1.Placement{}
	g.Expect(hubCP.Client.Get(t.Context(), key, p)).To(Succeed())
	g.Expect(p.Spec.Strategy.Paused).To(BeTrue())
	_, _, err = kubectlLodestar(t, "rollout", "resume", "web", "-n", key.Namespace)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(hubCP.Client.Get(t.Context(), key, p)).To(Succeed())
	g.Expect(p.Spec.Strategy.Paused).To(BeFalse())

	// One who may read the Placement but not approve is told which role approves.
	var stdout, stderr bytes.Buffer
	err = run(t.Context(), []string{"rollout", "approve", "web", "-n", key.Namespace, "--stage", "production", "--kubeconfig", tenantKubeconfig(t, key.Namespace)}, &stdout, &stderr)
	g.Expect(err).To(MatchError(ContainSubstring("you may not approve rollouts in namespace " + key.Namespace + ": approving is creating a RolloutApproval, which the ClusterRole lodestar:approver grants")))

	out, _, err = kubectlLodestar(t, "rollout", "approve", "web", "-n", key.Namespace, "--stage", "production")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(out).To(ContainSubstring("stage production approved for revision " + p.Status.Rollout.TargetRevision))
	approvals := &placementv1alpha1.RolloutApprovalList{}
	g.Expect(hubCP.Client.List(t.Context(), approvals, client.InNamespace(key.Namespace))).To(Succeed())
	g.Expect(approvals.Items).To(ConsistOf(HaveField("Spec", placementv1alpha1.RolloutApprovalSpec{
		Placement: "web", Revision: p.Status.Rollout.TargetRevision, Stage: "production"})))

	_, _, err = kubectlLodestar(t, "rollout", "approve", "web", "-n", key.Namespace)
	g.Expect(err).To(MatchError(ContainSubstring("name a stage or clusters")))
	// What would approve nothing is refused.
	_, _, err = kubectlLodestar(t, "rollout", "approve", "web", "-n", key.Namespace, "--stage", "prod")
	g.Expect(err).To(MatchError(ContainSubstring(`has no stage "prod" (its stages: staging, production)`)))
	_, _, err = kubectlLodestar(t, "rollout", "approve", "web", "-n", key.Namespace, "--stage", "staging")
	g.Expect(err).To(MatchError(ContainSubstring(`stage "staging" of placement ` + key.String() + ` needs no approval (approval: None)`)))
	done := &placementv1alpha1.Placement{ObjectMeta: metav1.ObjectMeta{Name: key.Name, Namespace: key.Namespace}}
	done.Status.Rollout = &placementv1alpha1.RolloutStatus{TargetRevision: p.Status.Rollout.TargetRevision, TargetRevisionNumber: 2,
		StableRevision: p.Status.Rollout.TargetRevision}
	g.Expect(patch.ApplyStatus(t.Context(), hubCP.Client, done, "test")).To(Succeed())
	_, _, err = kubectlLodestar(t, "rollout", "approve", "web", "-n", key.Namespace, "--stage", "production", "--wait", "2s")
	g.Expect(err).To(MatchError(ContainSubstring("the rollout of revision 2 of placement " + key.String() + " is complete: nothing waits for an approval")))
	g.Expect(hubCP.Client.Patch(t.Context(), p, client.RawPatch(types.MergePatchType,
		[]byte(`{"spec":{"strategy":{"type":"AllAtOnce","stages":null}}}`)))).To(Succeed())
	_, _, err = kubectlLodestar(t, "rollout", "approve", "web", "-n", key.Namespace, "--stage", "production")
	g.Expect(err).To(MatchError(ContainSubstring("has strategy AllAtOnce: only a Staged strategy has stages to approve")))
	_, _, err = kubectlLodestar(t, "rollout", "undo", "web", "-n", key.Namespace, "--to-revision", "7")
	g.Expect(err).To(MatchError(ContainSubstring("no revision 7 (kept: 1, 2)")))
	_, _, err = kubectlLodestar(t, "rollout", "restart", "web")
	g.Expect(err).To(MatchError(ContainSubstring(`unknown command "restart" for "kubectl-lodestar rollout"`)))
}

// status exits non-zero on a breached failure budget or deadline.
func TestRolloutStatusFailsOnABreach(t *testing.T) {
	g := NewWithT(t)
	for _, reason := range []string{placementv1alpha1.ReasonFailureBudgetExceeded, placementv1alpha1.ReasonProgressDeadlineExceeded} {
		key := rolloutPlacement(t, reason)
		out, _, err := kubectlLodestar(t, "rollout", "status", "web", "-n", key.Namespace, "--timeout", "30s")
		g.Expect(err).To(MatchError(rolloutctl.ErrRolloutFailed))
		g.Expect(out).To(ContainSubstring(reason))
	}
}
