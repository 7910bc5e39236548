package integration

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	cpv1alpha1 "sigs.k8s.io/cluster-inventory-api/apis/v1alpha1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	placementv1alpha1 "github.com/lodestar-dev/lodestar/api/placement/v1alpha1"
	"github.com/lodestar-dev/lodestar/internal/renderctl"
)

// dividedPlacement places the web ConfigMap and Deployment on clusters,
// dividing the Deployment's replicas by weights (cluster, weight, ...), with
// the hub's Deployment reflecting the sum.
func dividedPlacement(ns string, weights ...any) *placementv1alpha1.Placement {
	p := &placementv1alpha1.Placement{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: ns},
		Spec: placementv1alpha1.PlacementSpec{
			ResourceSelectors: []placementv1alpha1.ResourceSelector{
				{Version: "v1", Kind: "ConfigMap", Name: "web-config"}, {Group: "apps", Version: "v1", Kind: "Deployment", Name: "web"}},
			Scheduling: placementv1alpha1.Scheduling{Replicas: &placementv1alpha1.ReplicaDivision{Method: placementv1alpha1.DivisionWeighted}},
			Reporting:  placementv1alpha1.Reporting{Reflection: placementv1alpha1.ReflectionAggregate},
		}}
	for i := 0; i+1 < len(weights); i += 2 {
		name := weights[i].(string)
		p.Spec.Scheduling.ClusterNames = append(p.Spec.Scheduling.ClusterNames, name)
		p.Spec.Scheduling.Replicas.Weights = append(p.Spec.Scheduling.Replicas.Weights,
			placementv1alpha1.ReplicaWeight{ClusterNames: []string{name}, Weight: ptr.To(int32(weights[i+1].(int)))})
	}
	return p
}

// webDeploymentOf is the web Deployment on cluster, nil when it has none.
func webDeploymentOf(cluster, ns string) *appsv1.Deployment {
	d := &appsv1.Deployment{}
	if err := members[cluster].Client.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: "web"}, d); err != nil {
		return nil
	}
	return d
}

// expectRunning waits until each cluster's web Deployment asks for and runs
// its share (pods on kwok where the member has a node).
func expectRunning(g Gomega, ns string, shares map[string]int32) {
	g.Eventually(func(g Gomega) {
		for cluster, want := range shares {
			d := webDeploymentOf(cluster, ns)
			g.Expect(d).NotTo(BeNil(), "web on %s", cluster)
			g.Expect(d.Spec.Replicas).To(HaveValue(Equal(want)), "the share of %s", cluster)
			g.Expect(d.Status.ObservedGeneration).To(Equal(d.Generation))
			g.Expect(d.Status.AvailableReplicas).To(Equal(want), "available on %s", cluster)
		}
	}).Should(Succeed())
}

// A 9-replica Deployment over member-1 and member-3 (both run pods) with
// weights 1:2 runs 3 and 6 pods, and the hub reads 9/9; raising it to 12 adds
// without lowering anyone (4/8); adding member-2 with weight 1 (3/6/3) raises
// member-2 first: the others keep 4 and 8 until member-2 reports its 3
// Available (its status is written here: it has no controllers); removing
// member-2 again raises the others first, and member-2 keeps its replicas
// until they are Available. The sum of available replicas, sampled every
// 100 ms, never drops below 12.
func TestReplicasDividedSurgeFirst(t *testing.T) {
	extraMembers(t)
	g := NewWithT(t)
	ctx := t.Context()
	ns := rolloutNamespace(t)
	_, deploy, _ := webObjects(ns)
	deploy.Spec.Replicas = ptr.To[int32](9)
	g.Expect(hubCP.Client.Create(ctx, deploy)).To(Succeed())
	p := dividedPlacement(ns, member1, 1, member3, 2)
	g.Expect(hubCP.Client.Create(ctx, p)).To(Succeed())
	key := client.ObjectKeyFromObject(p)

	expectRunning(g, ns, map[string]int32{member1: 3, member3: 6})
	for cluster, want := range map[string]int64{member1: 3, member3: 6} {
		pods := &corev1.PodList{}
		g.Expect(members[cluster].Client.List(ctx, pods, client.InNamespace(ns))).To(Succeed())
		g.Expect(pods.Items).To(HaveLen(int(want)), "pods on %s", cluster)
	}
	g.Eventually(func(g Gomega) {
		hub := &appsv1.Deployment{}
		g.Expect(hubCP.Client.Get(ctx, client.ObjectKeyFromObject(deploy), hub)).To(Succeed())
		g.Expect(hub.Status.Replicas).To(BeEquivalentTo(9), "the hub reads 9/9, not 27/9")
		g.Expect(hub.Status.AvailableReplicas).To(BeEquivalentTo(9))
		g.Expect(hub.Status.ObservedGeneration).To(Equal(hub.Generation))

		got := &placementv1alpha1.Placement{}
		g.Expect(hubCP.Client.Get(ctx, key, got)).To(Succeed())
		g.Expect(got.Status.Clusters).To(ContainElements(
			And(HaveField("Name", member1), HaveField("Shares", ConsistOf(placementv1alpha1.ShareStatus{Object: "Deployment/web", Replicas: 3, Target: 3, Reason: "weight 1 of 3"}))),
			And(HaveField("Name", member3), HaveField("Shares", ConsistOf(HaveField("Replicas", BeEquivalentTo(6)))))))
	}).Should(Succeed())
	// `kubectl lodestar render --cluster` shows the share.
	base, res, err := renderctl.Render(ctx, hubCP.Client, renderctl.Options{Placement: key, Cluster: member1})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(base).To(HaveLen(2))
	g.Expect(string(res.Manifests[1].Raw)).To(ContainSubstring(`"replicas":3`))

	// Shares never drop below what they were while the total grows, nor while
	// a member joins; the sum of available replicas never drops below 12 once
	// reached.
	var mu sync.Mutex
	var violations []string
	floor := map[string]int32{member1: 3, member3: 6}
	reached := false
	stop := sample(100*time.Millisecond, func() {
		mu.Lock()
		defer mu.Unlock()
		var sum int32
		for _, cluster := range []string{member1, member2, member3} {
			d := webDeploymentOf(cluster, ns)
			if d == nil {
				continue
			}
			sum += d.Status.AvailableReplicas
			if f, ok := floor[cluster]; ok && ptr.Deref(d.Spec.Replicas, 1) < f {
				violations = append(violations, fmt.Sprintf("%s asked for %d, below %d", cluster, ptr.Deref(d.Spec.Replicas, 1), f))
			}
		}
		reached = reached || sum >= 12
		if reached && sum < 12 {
			violations = append(violations, fmt.Sprintf("%d replicas available in all", sum))
		}
	})
	g.Expect(updateOnHub(deploy, func(d *appsv1.Deployment) { d.Spec.Replicas = ptr.To[int32](12) })).To(Succeed())
	expectRunning(g, ns, map[string]int32{member1: 4, member3: 8})
	mu.Lock()
	floor = map[string]int32{member1: 4, member3: 8}
	mu.Unlock()

	g.Expect(updateOnHub(p, func(p *placementv1alpha1.Placement) {
		p.Spec.Scheduling.ClusterNames = append(p.Spec.Scheduling.ClusterNames, member2)
		p.Spec.Scheduling.Replicas.Weights = append(p.Spec.Scheduling.Replicas.Weights, placementv1alpha1.ReplicaWeight{ClusterNames: []string{member2}, Weight: ptr.To[int32](1)})
	})).To(Succeed())
	g.Eventually(func(g Gomega) {
		d := webDeploymentOf(member2, ns)
		g.Expect(d).NotTo(BeNil())
		g.Expect(d.Spec.Replicas).To(HaveValue(BeEquivalentTo(3)))
		_, c := progressing(g, key)
		g.Expect(c.Message).To(ContainSubstring("surge first: "))
	}).Should(Succeed())
	// member-2 has not reported its replicas Available: the others keep theirs.
	g.Consistently(func(g Gomega) {
		g.Expect(webDeploymentOf(member1, ns).Spec.Replicas).To(HaveValue(BeEquivalentTo(4)))
		g.Expect(webDeploymentOf(member3, ns).Spec.Replicas).To(HaveValue(BeEquivalentTo(8)))
	}, 5*time.Second, 200*time.Millisecond).Should(Succeed())
	setDeploymentStatusOn(t, member2, ns, "web", 3)
	mu.Lock()
	floor = map[string]int32{member2: 3}
	mu.Unlock()
	expectRunning(g, ns, map[string]int32{member1: 3, member2: 3, member3: 6})

	// member-2 leaves: member-1 and member-3 go back to 4 and 8, and member-2
	// keeps its 3 until they are Available (the sum never drops below 12).
	mu.Lock()
	floor = map[string]int32{member1: 3, member3: 6}
	mu.Unlock()
	g.Expect(updateOnHub(p, func(p *placementv1alpha1.Placement) {
		p.Spec.Scheduling.ClusterNames = []string{member1, member3}
		p.Spec.Scheduling.Replicas.Weights = p.Spec.Scheduling.Replicas.Weights[:2]
	})).To(Succeed())
	expectRunning(g, ns, map[string]int32{member1: 4, member3: 8})
	g.Eventually(func(g Gomega) {
		g.Expect(workOf(g, p, member2)).To(BeNil())
		g.Expect(webDeploymentOf(member2, ns)).To(BeNil())
	}).Should(Succeed())
	stop()
	mu.Lock()
	g.Expect(violations).To(BeEmpty())
	g.Expect(reached).To(BeTrue())
	mu.Unlock()
	g.Eventually(func(g Gomega) {
		hub := &appsv1.Deployment{}
		g.Expect(hubCP.Client.Get(ctx, client.ObjectKeyFromObject(deploy), hub)).To(Succeed())
		g.Expect(hub.Status.Replicas).To(BeEquivalentTo(12))
		g.Expect(hub.Status.AvailableReplicas).To(BeEquivalentTo(12))
		_, c := progressing(g, key)
		g.Expect(c.Message).NotTo(ContainSubstring("surge first"))
	}).Should(Succeed())
}

// A member autoscaler moves its cluster's share, and Lodestar neither sets it
// back nor divides anew: member-1's HPA (minReplicas 5, so the member's own
// controller scales to 5 without metrics) takes member-1 from its share 2 to
// 5; a new revision of the Placement applied meanwhile leaves 5; the hub reads
// the sum, 7.
func TestMemberAutoscalerKeepsItsReplicas(t *testing.T) {
	extraMembers(t)
	g := NewWithT(t)
	ctx := t.Context()
	ns := rolloutNamespace(t)
	_, deploy, _ := webObjects(ns)
	deploy.Spec.Replicas = ptr.To[int32](4)
	g.Expect(hubCP.Client.Create(ctx, deploy)).To(Succeed())
	p := dividedPlacement(ns, member1, 1, member3, 1)
	g.Expect(hubCP.Client.Create(ctx, p)).To(Succeed())
	expectRunning(g, ns, map[string]int32{member1: 2, member3: 2})

	hpa := &autoscalingv2.HorizontalPodAutoscaler{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: ns},
		Spec: autoscalingv2.HorizontalPodAutoscalerSpec{
			ScaleTargetRef: autoscalingv2.CrossVersionObjectReference{APIVersion: "apps/v1", Kind: "Deployment", Name: "web"},
			MinReplicas:    ptr.To[int32](5), MaxReplicas: 10,
			Metrics: []autoscalingv2.MetricSpec{{Type: autoscalingv2.ResourceMetricSourceType, Resource: &autoscalingv2.ResourceMetricSource{
				Name: corev1.ResourceCPU, Target: autoscalingv2.MetricTarget{Type: autoscalingv2.UtilizationMetricType, AverageUtilization: ptr.To[int32](80)}}}},
		}}
	g.Expect(members[member1].Client.Create(ctx, hpa)).To(Succeed())
	expectRunning(g, ns, map[string]int32{member1: 5, member3: 2})
	generation := webDeploymentOf(member1, ns).Generation

	// A new revision: every Work is applied again.
	g.Expect(updateOnHub(&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "web-config"}}, func(cm *corev1.ConfigMap) {
		cm.Data["greeting"] = "v2"
	})).To(Succeed())
	g.Eventually(func(g Gomega) {
		cm := &corev1.ConfigMap{}
		g.Expect(members[member1].Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "web-config"}, cm)).To(Succeed())
		g.Expect(cm.Data).To(HaveKeyWithValue("greeting", "v2"))
	}).Should(Succeed())
	g.Consistently(func(g Gomega) {
		d := webDeploymentOf(member1, ns)
		g.Expect(d.Spec.Replicas).To(HaveValue(BeEquivalentTo(5)))
		g.Expect(d.Generation).To(Equal(generation), "nothing wrote member-1's Deployment spec")
		g.Expect(webDeploymentOf(member3, ns).Spec.Replicas).To(HaveValue(BeEquivalentTo(2)), "no division anew")
	}, 20*time.Second, time.Second).Should(Succeed())
	g.Eventually(func(g Gomega) {
		hub := &appsv1.Deployment{}
		g.Expect(hubCP.Client.Get(ctx, client.ObjectKeyFromObject(deploy), hub)).To(Succeed())
		g.Expect(hub.Status.Replicas).To(BeEquivalentTo(7), "the hub shows the members' sum")
		g.Expect(hub.Spec.Replicas).To(HaveValue(BeEquivalentTo(4)))
	}).Should(Succeed())
}

// A Job's completions and parallelism are divided by the same weights
// (member-3:member-1 = 6:4, completions 10, parallelism 4 → 6/2 and 4/2),
// both members run theirs (kwok completes the pods), and the hub Job is
// Complete with 10 succeeded.
func TestJobDivided(t *testing.T) {
	extraMembers(t)
	g := NewWithT(t)
	ctx := t.Context()
	ns := rolloutNamespace(t)
	job := &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Name: "crunch", Namespace: ns},
		Spec: batchv1.JobSpec{Completions: ptr.To[int32](10), Parallelism: ptr.To[int32](4),
			Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{RestartPolicy: corev1.RestartPolicyNever,
				Containers: []corev1.Container{{Name: "crunch", Image: "busybox:1.36"}}}}}}
	g.Expect(hubCP.Client.Create(ctx, job)).To(Succeed())
	p := dividedPlacement(ns, member3, 6, member1, 4)
	p.Spec.ResourceSelectors = []placementv1alpha1.ResourceSelector{{Group: "batch", Version: "v1", Kind: "Job", Name: "crunch"}}
	g.Expect(hubCP.Client.Create(ctx, p)).To(Succeed())

	for cluster, want := range map[string][2]int32{member3: {6, 2}, member1: {4, 2}} {
		g.Eventually(func(g Gomega) {
			got := &batchv1.Job{}
			g.Expect(members[cluster].Client.Get(ctx, client.ObjectKeyFromObject(job), got)).To(Succeed())
			g.Expect(got.Spec.Completions).To(HaveValue(Equal(want[0])), "completions on %s", cluster)
			g.Expect(got.Spec.Parallelism).To(HaveValue(Equal(want[1])), "parallelism on %s", cluster)
		}).Should(Succeed())
	}
	g.Eventually(func(g Gomega) {
		hub := &batchv1.Job{}
		g.Expect(hubCP.Client.Get(ctx, client.ObjectKeyFromObject(job), hub)).To(Succeed())
		g.Expect(hub.Status.Succeeded).To(BeEquivalentTo(10))
		g.Expect(hub.Status.Conditions).To(ContainElement(And(HaveField("Type", batchv1.JobComplete), HaveField("Status", corev1.ConditionTrue))))
	}).Should(Succeed())
}

// One replica over four clusters puts the Deployment on exactly one and the
// ConfigMap on all four; an override that sets a cluster's replicas wins,
// with a warning that the sum differs; a Job without completions is not
// divisible; a total the maxima cannot hold is NotEnoughCapacity, and the
// shares placed stay.
func TestDivisionEdges(t *testing.T) {
	extraMembers(t)
	g := NewWithT(t)
	ctx := t.Context()
	ns := rolloutNamespace(t)
	_, deploy, _ := webObjects(ns)
	deploy.Spec.Replicas = ptr.To[int32](1)
	g.Expect(hubCP.Client.Create(ctx, deploy)).To(Succeed())
	all := []string{member1, member2, member3, member4}
	p := dividedPlacement(ns)
	p.Spec.Scheduling.ClusterNames = all
	p.Spec.Scheduling.Replicas.Method = placementv1alpha1.DivisionEven
	g.Expect(hubCP.Client.Create(ctx, p)).To(Succeed())
	key := client.ObjectKeyFromObject(p)
	g.Eventually(func(g Gomega) {
		carrying := 0
		for _, cluster := range all {
			g.Expect(members[cluster].Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "web-config"}, &corev1.ConfigMap{})).To(Succeed(), "the ConfigMap on %s", cluster)
			if d := webDeploymentOf(cluster, ns); d != nil {
				carrying++
				g.Expect(d.Spec.Replicas).To(HaveValue(BeEquivalentTo(1)))
			}
		}
		g.Expect(carrying).To(Equal(1), "one replica, one cluster")
	}).Should(Succeed())

	// 5 over four: 2/1/1/1; an override gives member-2 ten.
	g.Expect(updateOnHub(deploy, func(d *appsv1.Deployment) { d.Spec.Replicas = ptr.To[int32](5) })).To(Succeed())
	g.Expect(updateOnHub(p, func(p *placementv1alpha1.Placement) {
		p.Spec.Overrides = []placementv1alpha1.Override{{Name: "member-2-big", ClusterNames: []string{member2},
			Targets:   []placementv1alpha1.OverrideTarget{{Group: "apps", Kind: "Deployment"}},
			JSONPatch: []placementv1alpha1.JSONPatchOperation{{Op: "replace", Path: "/spec/replicas", ValueExpression: "10"}}}}
	})).To(Succeed())
	g.Eventually(func(g Gomega) {
		var sum int32
		for _, cluster := range all {
			d := webDeploymentOf(cluster, ns)
			g.Expect(d).NotTo(BeNil(), "a share on %s", cluster)
			sum += ptr.Deref(d.Spec.Replicas, 1)
		}
		g.Expect(webDeploymentOf(member2, ns).Spec.Replicas).To(HaveValue(BeEquivalentTo(10)))
		g.Expect(sum).To(BeNumerically(">", 10))
		_, c := progressing(g, key)
		g.Expect(c.Message).To(ContainSubstring("overrides set the replicas of Deployment/web (10 on member-2)"))
		events := &eventsv1.EventList{}
		g.Expect(hubCP.Client.List(ctx, events, client.InNamespace(ns))).To(Succeed())
		g.Expect(events.Items).To(ContainElement(And(HaveField("Reason", placementv1alpha1.ReasonSharesOverridden), HaveField("Note", ContainSubstring("differs from the divided total 5")))))
	}).Should(Succeed())

	// At most one per cluster: 5 do not fit, and every share stays.
	// member-2's own share is what the others leave of the 5 (which cluster
	// took the remainder goes by a hash of the Placement's UID).
	before := map[string]int32{member2: 5}
	for _, cluster := range all {
		if cluster != member2 {
			before[cluster] = ptr.Deref(webDeploymentOf(cluster, ns).Spec.Replicas, 1)
			before[member2] -= before[cluster]
		}
	}
	g.Expect(before[member2]).To(BeElementOf(int32(1), int32(2)), "5 over four is 2/1/1/1: %v", before)
	g.Expect(updateOnHub(p, func(p *placementv1alpha1.Placement) {
		p.Spec.Overrides = nil
		p.Spec.Scheduling.Replicas.Weights = []placementv1alpha1.ReplicaWeight{{Max: ptr.To[int32](1)}}
	})).To(Succeed())
	g.Eventually(func(g Gomega) {
		_, c := progressing(g, key)
		g.Expect(c.Status).To(Equal(metav1.ConditionFalse))
		g.Expect(c.Reason).To(Equal(placementv1alpha1.ReasonNotEnoughCapacity))
		g.Expect(c.Message).To(ContainSubstring("member-1 1, member-2 1, member-3 1, member-4 1"))
	}).Should(Succeed())
	shares := func(g Gomega) {
		for _, cluster := range all {
			// The override is gone: member-2 is back to its division's share.
			g.Expect(webDeploymentOf(cluster, ns).Spec.Replicas).To(HaveValue(Equal(before[cluster])), "the share of %s stays", cluster)
		}
	}
	g.Eventually(shares).Should(Succeed())
	g.Consistently(shares, 3*time.Second, 500*time.Millisecond).Should(Succeed())

	// A work-queue Job (no completions) is not divisible: it goes nowhere.
	queue := &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Name: "queue", Namespace: ns},
		Spec: batchv1.JobSpec{Parallelism: ptr.To[int32](3),
			Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{RestartPolicy: corev1.RestartPolicyNever,
				Containers: []corev1.Container{{Name: "work", Image: "busybox:1.36"}}}}}}
	g.Expect(hubCP.Client.Create(ctx, queue)).To(Succeed())
	g.Expect(updateOnHub(p, func(p *placementv1alpha1.Placement) {
		p.Spec.Scheduling.Replicas.Weights = nil
		p.Spec.ResourceSelectors = append(p.Spec.ResourceSelectors, placementv1alpha1.ResourceSelector{Group: "batch", Version: "v1", Kind: "Job", Name: "queue"})
	})).To(Succeed())
	g.Eventually(func(g Gomega) {
		_, c := progressing(g, key)
		g.Expect(c.Reason).To(Equal(placementv1alpha1.ReasonNotDivisible))
		g.Expect(c.Message).To(ContainSubstring("a Job without spec.completions"))
		for _, cluster := range all {
			err := members[cluster].Client.Get(ctx, client.ObjectKeyFromObject(queue), &batchv1.Job{})
			g.Expect(apierrors.IsNotFound(err)).To(BeTrue(), "the Job on %s: %v", cluster, err)
		}
	}).Should(Succeed())
}

// freeCPU is the free CPU a cluster's agent reports, in millicores, once it
// reports it.
func freeCPU(g Gomega, set, cluster string) int64 {
	var free int64
	g.Eventually(func(g Gomega) {
		props := getProfile(g, set, cluster).Status.Properties
		i := slices.IndexFunc(props, func(p cpv1alpha1.Property) bool { return p.Name == placementv1alpha1.PropertyCPUFree })
		g.Expect(i).NotTo(BeNumerically("<", 0), "%s reports its free CPU", cluster)
		q, err := resource.ParseQuantity(props[i].Value)
		g.Expect(err).NotTo(HaveOccurred())
		free = q.MilliValue()
	}).Should(Succeed())
	return free
}

// Division by capacity reads the free CPU the agents report and the pod's
// requests: with each pod asking for half the smaller free CPU of member-1
// and member-3, each has room for at least 2; 2 replicas go 1/1; 5 are more
// than the room (NotEnoughCapacity, naming each cluster's room), and the
// shares placed stay.
func TestReplicasByCapacity(t *testing.T) {
	extraMembers(t)
	g := NewWithT(t)
	ctx := t.Context()
	ns := rolloutNamespace(t)
	f1, f3 := freeCPU(g, placementv1alpha1.DefaultClusterSet, member1), freeCPU(g, auxSet, member3)
	request := min(f1, f3) / 2
	g.Expect(request).To(BeNumerically(">", 0))
	_, deploy, _ := webObjects(ns)
	deploy.Spec.Replicas = ptr.To[int32](2)
	deploy.Spec.Template.Spec.Containers[0].Resources.Requests = corev1.ResourceList{corev1.ResourceCPU: *resource.NewMilliQuantity(request, resource.DecimalSI)}
	g.Expect(hubCP.Client.Create(ctx, deploy)).To(Succeed())
	p := dividedPlacement(ns)
	p.Spec.Scheduling.ClusterNames = []string{member1, member3}
	p.Spec.Scheduling.Replicas.Method = placementv1alpha1.DivisionCapacity
	g.Expect(hubCP.Client.Create(ctx, p)).To(Succeed())
	key := client.ObjectKeyFromObject(p)
	expectRunning(g, ns, map[string]int32{member1: 1, member3: 1})
	g.Eventually(func(g Gomega) {
		got := &placementv1alpha1.Placement{}
		g.Expect(hubCP.Client.Get(ctx, key, got)).To(Succeed())
		g.Expect(got.Status.Clusters).To(ContainElement(And(HaveField("Name", member1),
			HaveField("Shares", ConsistOf(HaveField("Reason", MatchRegexp(`^room for \d+ more pods?`)))))))
	}).Should(Succeed())

	// Room is counted steadily: the placed pods' requests are spent now.
	r1, r3 := freeCPU(g, placementv1alpha1.DefaultClusterSet, member1)/request, freeCPU(g, auxSet, member3)/request
	g.Expect(updateOnHub(deploy, func(d *appsv1.Deployment) { d.Spec.Replicas = ptr.To(int32(2 + r1 + r3 + 1)) })).To(Succeed())
	g.Eventually(func(g Gomega) {
		_, c := progressing(g, key)
		g.Expect(c.Reason).To(Equal(placementv1alpha1.ReasonNotEnoughCapacity))
		g.Expect(c.Message).To(ContainSubstring(fmt.Sprintf("(member-1 %d, member-3 %d)", r1, r3)))
	}).Should(Succeed())
	g.Consistently(func(g Gomega) {
		g.Expect(webDeploymentOf(member1, ns).Spec.Replicas).To(HaveValue(BeEquivalentTo(1)))
		g.Expect(webDeploymentOf(member3, ns).Spec.Replicas).To(HaveValue(BeEquivalentTo(1)))
	}, 3*time.Second, 500*time.Millisecond).Should(Succeed())
}

// A StatefulSet divided over clusters numbers its pods across the fleet
// (spec.ordinals.start): db-0..2 on member-2, db-3..5 on member-4. Divided
// anew (1:5), member-2's share is not lowered while its bound ReadWriteOnce
// claims hold it there (spec.strategy.stateful: Hold), and member-4 keeps
// its start (3) as it grows.
func TestStatefulSetOrdinalsAcrossClusters(t *testing.T) {
	extraMembers(t)
	g := NewWithT(t)
	ctx := t.Context()
	ns := rolloutNamespace(t)
	sts := statefulDB(ns, 6, corev1.ReadWriteOnce)
	g.Expect(hubCP.Client.Create(ctx, sts)).To(Succeed())
	p := dividedPlacement(ns)
	p.Spec.ResourceSelectors = []placementv1alpha1.ResourceSelector{{Group: "apps", Version: "v1", Kind: "StatefulSet", Name: "db"}}
	p.Spec.Scheduling.ClusterNames = []string{member4, member2}
	p.Spec.Scheduling.Replicas.Method = placementv1alpha1.DivisionEven
	g.Expect(hubCP.Client.Create(ctx, p)).To(Succeed())
	for cluster, start := range map[string]int32{member2: 0, member4: 3} {
		g.Eventually(func(g Gomega) {
			got := &appsv1.StatefulSet{}
			g.Expect(members[cluster].Client.Get(ctx, client.ObjectKeyFromObject(sts), got)).To(Succeed())
			g.Expect(got.Spec.Replicas).To(HaveValue(BeEquivalentTo(3)))
			if start == 0 {
				g.Expect(got.Spec.Ordinals).To(BeNil())
			} else {
				g.Expect(got.Spec.Ordinals).To(HaveValue(HaveField("Start", start)))
			}
		}).Should(Succeed())
	}

	bindClaims(t, member2, ns, "db", 3, corev1.ReadWriteOnce)
	expectClaims(t, client.ObjectKeyFromObject(p), member2, 3)
	g.Expect(updateOnHub(p, func(p *placementv1alpha1.Placement) {
		p.Spec.Scheduling.Replicas = &placementv1alpha1.ReplicaDivision{Method: placementv1alpha1.DivisionWeighted, Weights: []placementv1alpha1.ReplicaWeight{
			{ClusterNames: []string{member2}, Weight: ptr.To[int32](1)}, {ClusterNames: []string{member4}, Weight: ptr.To[int32](5)}}}
	})).To(Succeed())
	g.Eventually(func(g Gomega) {
		got := &appsv1.StatefulSet{}
		g.Expect(members[member4].Client.Get(ctx, client.ObjectKeyFromObject(sts), got)).To(Succeed())
		g.Expect(got.Spec.Replicas).To(HaveValue(BeEquivalentTo(5)), "1:5 over 6 is 1/5")
		g.Expect(got.Spec.Ordinals).To(HaveValue(HaveField("Start", BeEquivalentTo(3))), "member-4 keeps its start")
		placed := &placementv1alpha1.Placement{}
		g.Expect(hubCP.Client.Get(ctx, client.ObjectKeyFromObject(p), placed)).To(Succeed())
		g.Expect(placed.Status.Clusters).To(ContainElement(And(HaveField("Name", member2), HaveField("Shares", ConsistOf(And(
			HaveField("Replicas", BeEquivalentTo(3)), HaveField("Target", BeEquivalentTo(1)),
			HaveField("Reason", ContainSubstring("has 3 bound ReadWriteOnce claims (data-db-0..2) (spec.strategy.stateful: Hold)"))))))))
	}).Should(Succeed())
	g.Consistently(func(g Gomega) {
		got := &appsv1.StatefulSet{}
		g.Expect(members[member2].Client.Get(ctx, client.ObjectKeyFromObject(sts), got)).To(Succeed())
		g.Expect(got.Spec.Replicas).To(HaveValue(BeEquivalentTo(3)), "held by its claims")
	}, 3*time.Second, 500*time.Millisecond).Should(Succeed())
}

// The examples of docs/replicas.md, applied as they are into a namespace of
// their own: each divides as the document says.
func TestReplicasExamples(t *testing.T) {
	replicasOf := func(g Gomega, cluster string, obj client.Object) int32 {
		g.Expect(members[cluster].Client.Get(context.Background(), client.ObjectKeyFromObject(obj), obj)).To(Succeed(), "on %s", cluster)
		switch o := obj.(type) {
		case *appsv1.Deployment:
			return ptr.Deref(o.Spec.Replicas, 1)
		case *batchv1.Job:
			return ptr.Deref(o.Spec.Completions, 0)*100 + ptr.Deref(o.Spec.Parallelism, 0)
		}
		return -1
	}
	expect := map[string]func(t *testing.T, ns string){
		"01-weighted.yaml": func(t *testing.T, ns string) {
			g := NewWithT(t)
			d := func() client.Object {
				return &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "web"}}
			}
			g.Eventually(func(g Gomega) {
				g.Expect(replicasOf(g, member1, d())).To(BeEquivalentTo(3))
				g.Expect(replicasOf(g, member2, d())).To(BeEquivalentTo(6))
				for _, cluster := range []string{member1, member2} {
					g.Expect(members[cluster].Client.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: "web-config"}, &corev1.ConfigMap{})).To(Succeed())
				}
			}).Should(Succeed())
		},
		"02-capacity.yaml": func(t *testing.T, ns string) {
			g := NewWithT(t)
			g.Eventually(func(g Gomega) {
				g.Expect(replicasOf(g, member1, &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "api"}})).To(BeEquivalentTo(4))
				p := &placementv1alpha1.Placement{}
				g.Expect(hubCP.Client.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: "api"}, p)).To(Succeed())
				g.Expect(p.Status.Clusters).To(ConsistOf(HaveField("Shares", ConsistOf(HaveField("Reason", MatchRegexp(`^room for \d+ more pods?`))))))
			}).Should(Succeed())
		},
		"03-job.yaml": func(t *testing.T, ns string) {
			g := NewWithT(t)
			j := func() client.Object {
				return &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "crunch"}}
			}
			g.Eventually(func(g Gomega) {
				g.Expect(replicasOf(g, member1, j())).To(BeEquivalentTo(502), "completions 5, parallelism 2")
				g.Expect(replicasOf(g, member2, j())).To(BeEquivalentTo(502))
				got := &batchv1.Job{}
				g.Expect(members[member1].Client.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: "crunch"}, got)).To(Succeed())
				g.Expect(got.Status.Succeeded).To(BeEquivalentTo(5), "member-1 runs its share")
			}).Should(Succeed())
		},
		"04-autoscaled.yaml": func(t *testing.T, ns string) {
			g := NewWithT(t)
			d := func() client.Object {
				return &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "shop"}}
			}
			// member-1's autoscaler (its controller manager) raises its share
			// of 2 to its minimum of 3; member-2 runs no controllers.
			g.Eventually(func(g Gomega) {
				g.Expect(replicasOf(g, member1, d())).To(BeEquivalentTo(3))
				g.Expect(replicasOf(g, member2, d())).To(BeEquivalentTo(2))
			}).Should(Succeed())
			g.Consistently(func(g Gomega) {
				g.Expect(replicasOf(g, member1, d())).To(BeEquivalentTo(3), "not set back")
			}, 5*time.Second, 500*time.Millisecond).Should(Succeed())
		},
	}
	applyExamples(t, "replicas", 4, expect)
}
