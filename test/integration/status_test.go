package integration

import (
	"context"
	"fmt"
	"testing"

	. "github.com/onsi/gomega"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	placementv1alpha1 "github.com/lodestar-dev/lodestar/api/placement/v1alpha1"
	lodestarworkv1alpha1 "github.com/lodestar-dev/lodestar/api/work/v1alpha1"
	"github.com/lodestar-dev/lodestar/internal/settled"
)

// A cluster whose objects are not available says why on the Placement, naming
// each object: a claim that stays Pending, and a Deployment whose pod cannot
// pull its image (the agent reads the member's pods for it).
func TestWhyAClusterIsNotReady(t *testing.T) {
	g := NewWithT(t)
	ctx := t.Context()
	ns := newNamespace(t)
	labels := map[string]string{"app": "api"}
	g.Expect(hubCP.Client.Create(ctx, &corev1.PersistentVolumeClaim{
		ObjectMeta: metav1.ObjectMeta{Name: "uploads", Namespace: ns},
		Spec: corev1.PersistentVolumeClaimSpec{AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			Resources: corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")}}},
	})).To(Succeed())
	g.Expect(hubCP.Client.Create(ctx, &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: "api", Namespace: ns, Labels: labels},
		Spec: appsv1.DeploymentSpec{Replicas: ptr.To[int32](2), Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "api", Image: "registry.example/api:nope"}}}}},
	})).To(Succeed())
	p := &placementv1alpha1.Placement{
		ObjectMeta: metav1.ObjectMeta{Name: "shop", Namespace: ns},
		Spec: placementv1alpha1.PlacementSpec{
			ResourceSelectors: []placementv1alpha1.ResourceSelector{
				{Version: "v1", Kind: "PersistentVolumeClaim"}, {Group: "apps", Version: "v1", Kind: "Deployment"},
			},
			Scheduling: placementv1alpha1.Scheduling{ClusterNames: []string{member2}},
		},
	}
	g.Expect(hubCP.Client.Create(ctx, p)).To(Succeed())
	key := client.ObjectKeyFromObject(p)

	g.Eventually(func(g Gomega) {
		cs := clusterStatusOf(g, key, member2)
		g.Expect(cs).NotTo(BeNil())
		// The agent says why the claim waits (the member has no default class).
		g.Expect(cs.Reasons).To(ContainElement("PersistentVolumeClaim " + ns + "/uploads: the claim names no storage class and the member has no default StorageClass"))
		g.Expect(cs.Objects).To(ContainElement(And(HaveField("Kind", "PersistentVolumeClaim"), HaveField("State", placementv1alpha1.ObjectProgressing))))
	}).Should(Succeed())
	avail := placementCondition(g, t, key, placementv1alpha1.AvailableCondition)
	g.Expect(avail.Message).To(ContainSubstring("not yet: member-2 (member-2: "))

	// A pod of the Deployment that cannot pull its image, as the member's kubelet
	// reports it, and the Deployment's status as its controller writes it.
	mc := members[member2].Client
	g.Expect(mc.Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "default", Namespace: ns}})).To(Succeed())
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "api-7c9f", Namespace: ns, Labels: labels},
		Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "api", Image: "registry.example/api:nope"}}},
	}
	g.Expect(mc.Create(ctx, pod)).To(Succeed())
	pod.Status = corev1.PodStatus{Phase: corev1.PodPending, ContainerStatuses: []corev1.ContainerStatus{{
		Name: "api", Image: "registry.example/api:nope",
		State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "ImagePullBackOff", Message: `Back-off pulling image "registry.example/api:nope"`}},
	}}}
	g.Expect(mc.Status().Update(ctx, pod)).To(Succeed())
	setDeploymentStatus(t, ns, "api", 0)

	want := "Deployment " + ns + `/api: 0 of 2 replicas available; pod api-7c9f: ImagePullBackOff: Back-off pulling image "registry.example/api:nope"`
	g.Eventually(func(g Gomega) {
		cs := clusterStatusOf(g, key, member2)
		g.Expect(cs).NotTo(BeNil())
		g.Expect(cs.Reasons).To(ContainElement(want))
	}).Should(Succeed())
}

// Two members report a Deployment's ready replicas: the Placement sums them, and
// with reporting.reflection the hub's Deployment reads the sum of both, follows a
// scale change, and is left alone once something else writes its status.
func TestSummariesAndReflection(t *testing.T) {
	g := NewWithT(t)
	ctx := t.Context()
	ns := newNamespace(t)
	createWebApp(t, ns, nil)
	p := webPlacement(ns)
	p.Spec.Scheduling.ClusterSelector = nil
	p.Spec.Scheduling.ClusterNames = []string{member1, member2}
	p.Spec.Reporting.Feedback = []lodestarworkv1alpha1.FeedbackRule{{Group: "apps", Kind: "Deployment", Fields: []lodestarworkv1alpha1.FeedbackField{
		{Name: "ready", JSONPath: ".status.readyReplicas"}, {Name: "image", CEL: "self.spec.template.spec.containers[0].image"},
	}}}
	p.Spec.Reporting.Summaries = []placementv1alpha1.StatusSummary{
		{Name: "ready", Resource: placementv1alpha1.SummaryResource{Group: "apps", Kind: "Deployment", Name: "web"}, Value: "ready", Operation: placementv1alpha1.SummarySum},
		{Name: "ready-per-region", Resource: placementv1alpha1.SummaryResource{Group: "apps", Kind: "Deployment"}, Value: "ready", Operation: placementv1alpha1.SummarySum,
			GroupBy: &placementv1alpha1.SummaryGroupBy{ClusterLabel: "region"}},
		{Name: "per-image", Resource: placementv1alpha1.SummaryResource{Group: "apps", Kind: "Deployment"}, Operation: placementv1alpha1.SummaryCount,
			GroupBy: &placementv1alpha1.SummaryGroupBy{Value: "image"}},
		{Name: "broken", Resource: placementv1alpha1.SummaryResource{Group: "apps", Kind: "Deployment"}, Value: "replicas", Operation: placementv1alpha1.SummaryMax},
	}
	p.Spec.Reporting.Reflection = placementv1alpha1.ReflectionAggregate
	g.Expect(hubCP.Client.Create(ctx, p)).To(Succeed())
	key := client.ObjectKeyFromObject(p)

	summaries := func(g Gomega) map[string]placementv1alpha1.SummaryStatus {
		got := &placementv1alpha1.Placement{}
		g.Expect(hubCP.Client.Get(ctx, key, got)).To(Succeed())
		out := map[string]placementv1alpha1.SummaryStatus{}
		for _, s := range got.Status.Summaries {
			out[s.Name] = s
		}
		return out
	}
	hubDeployment := func(g Gomega) *appsv1.Deployment {
		d := &appsv1.Deployment{}
		g.Expect(hubCP.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "web"}, d)).To(Succeed())
		return d
	}

	// member-1 runs the pods (kwok); member-2's status is written here.
	setDeploymentStatus(t, ns, "web", 2)
	g.Eventually(func(g Gomega) {
		s := summaries(g)
		g.Expect(s["ready"]).To(And(HaveField("Value", "4"), HaveField("Count", HaveValue(BeEquivalentTo(2))), HaveField("Stale", HaveValue(BeZero()))))
		g.Expect(s["ready-per-region"].Groups).To(ConsistOf(
			placementv1alpha1.SummaryGroup{Key: "eu-west", Value: "2", Count: 1}, placementv1alpha1.SummaryGroup{Key: "us-east", Value: "2", Count: 1}))
		g.Expect(s["per-image"].Groups).To(ConsistOf(placementv1alpha1.SummaryGroup{Key: "nginx:1.27", Value: "2", Count: 2}))
		g.Expect(s["broken"].Message).To(ContainSubstring(`no spec.reporting.feedback rule of Deployment.apps reports "replicas"`))
		g.Expect(s["broken"].Value).To(BeEmpty())

		// Each of the two clusters runs its 2: the hub's Deployment reads 2/2,
		// its own spec, as kstatus and helm compare them.
		d := hubDeployment(g)
		g.Expect(d.Status.Replicas).To(BeEquivalentTo(2))
		g.Expect(d.Status.ReadyReplicas).To(BeEquivalentTo(2))
		g.Expect(d.Status.AvailableReplicas).To(BeEquivalentTo(2))
		g.Expect(d.Status.ObservedGeneration).To(Equal(d.Generation))
	}).Should(Succeed())
	reflected := placementCondition(g, t, key, placementv1alpha1.StatusReflectedCondition)
	g.Expect(reflected.Status).To(Equal(metav1.ConditionTrue), reflected.Message)

	// Scale on the hub: the status follows once both members run the new spec.
	g.Expect(updateOnHub(&appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "web"}}, func(d *appsv1.Deployment) {
		d.Spec.Replicas = ptr.To[int32](3)
	})).To(Succeed())
	g.Eventually(func(g Gomega) {
		g.Expect(deploymentOn(g, member2, ns).Spec.Replicas).To(HaveValue(BeEquivalentTo(3)))
	}).Should(Succeed())
	setDeploymentStatus(t, ns, "web", 3)
	g.Eventually(func(g Gomega) {
		g.Expect(summaries(g)["ready"].Value).To(Equal("6"), "the summary is the fleet's sum")
		d := hubDeployment(g)
		g.Expect(d.Status.ReadyReplicas).To(BeEquivalentTo(3))
		g.Expect(d.Status.ObservedGeneration).To(Equal(d.Generation))
	}).Should(Succeed())

	// Another writer of the hub Deployment's status (kube-controller-manager on a
	// hub that runs workloads, which writes it again and again): Lodestar backs off
	// and says so. Each round the other writer writes, and member-2 reports.
	otherWrites := func(g Gomega) {
		g.Expect(retry.RetryOnConflict(retry.DefaultRetry, func() error {
			d := hubDeployment(g)
			d.Status.ReadyReplicas, d.Status.AvailableReplicas = 1, 1
			return hubCP.Client.Status().Update(ctx, d, client.FieldOwner("kube-controller-manager"))
		})).To(Succeed())
	}
	ready := int32(1)
	g.Eventually(func(g Gomega) {
		otherWrites(g)
		ready = 3 - ready
		setDeploymentStatus(t, ns, "web", ready)
		c := placementCondition(g, t, key, placementv1alpha1.StatusReflectedCondition)
		g.Expect(c.Status).To(Equal(metav1.ConditionFalse))
		g.Expect(c.Reason).To(Equal(placementv1alpha1.ReasonOtherStatusWriter))
		g.Expect(c.Message).To(ContainSubstring("Deployment " + ns + "/web by kube-controller-manager"))
	}).Should(Succeed())
	otherWrites(g)
	setDeploymentStatus(t, ns, "web", 0)
	g.Eventually(func(g Gomega) { g.Expect(summaries(g)["ready"].Value).To(Equal("3")) }).Should(Succeed())
	g.Expect(hubDeployment(g).Status.ReadyReplicas).To(BeEquivalentTo(1), "the other writer's status stays")
}

// A deleted Placement takes back the status it reflected on the hub's objects:
// `kubectl get deploy` on the hub does not keep reading the fleet's replicas of
// a Placement that is gone. A Service placed on one cluster reflects too (its
// status has no observedGeneration).
func TestReflectedStatusGoesWithThePlacement(t *testing.T) {
	g := NewWithT(t)
	ctx := t.Context()
	ns := newNamespace(t)
	createWebApp(t, ns, nil)
	svc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: ns},
		Spec: corev1.ServiceSpec{Selector: map[string]string{"app": "web"}, Ports: []corev1.ServicePort{{Port: 80}}}}
	g.Expect(hubCP.Client.Create(ctx, svc)).To(Succeed())
	p := webPlacement(ns)
	p.Spec.ResourceSelectors = append(p.Spec.ResourceSelectors, placementv1alpha1.ResourceSelector{Version: "v1", Kind: "Service", Name: "web"})
	p.Spec.Scheduling = placementv1alpha1.Scheduling{ClusterNames: []string{member2}}
	p.Spec.Reporting.Reflection = placementv1alpha1.ReflectionAggregate
	g.Expect(hubCP.Client.Create(ctx, p)).To(Succeed())
	setDeploymentStatus(t, ns, "web", 2)
	hubDeployment := func(g Gomega) *appsv1.Deployment {
		d := &appsv1.Deployment{}
		g.Expect(hubCP.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "web"}, d)).To(Succeed())
		return d
	}
	g.Eventually(func(g Gomega) {
		g.Expect(hubDeployment(g).Status.ReadyReplicas).To(BeEquivalentTo(2))
		c := placementCondition(g, t, client.ObjectKeyFromObject(p), placementv1alpha1.StatusReflectedCondition)
		g.Expect(c.Status).To(Equal(metav1.ConditionTrue), c.Message)
	}).Should(Succeed())

	g.Expect(hubCP.Client.Delete(ctx, p)).To(Succeed())
	g.Eventually(func(g Gomega) {
		err := hubCP.Client.Get(ctx, client.ObjectKeyFromObject(p), &placementv1alpha1.Placement{})
		g.Expect(apierrors.IsNotFound(err)).To(BeTrue(), "the Placement is gone: %v", err)
		st := hubDeployment(g).Status
		g.Expect(st.Replicas).To(BeZero(), "the fleet's status is taken back")
		g.Expect(st.ReadyReplicas).To(BeZero())
		g.Expect(st.ObservedGeneration).To(BeZero())
	}).Should(Succeed())
}

// A Job that ran keeps the status it reflected on the hub when its Placement
// goes (helm uninstall of a chart with a hook Job): the API server refuses to
// unset a terminal condition or lower the succeeded count, so Lodestar does not
// try in a loop; the Placement goes at once and an event says why the status
// stays.
func TestFinishedJobKeepsItsReflectedStatus(t *testing.T) {
	g := NewWithT(t)
	ctx := t.Context()
	ns := newNamespace(t)
	createYAML(t, ns, migrateJob+`---
apiVersion: placement.lodestar.dev/v1alpha1
kind: Placement
metadata: {name: migrate}
spec:
  resourceSelectors: [{group: batch, version: v1, kind: Job, name: migrate}]
  scheduling: {clusterNames: [`+fullMember+`]}
  reporting: {reflection: Aggregate}
`)
	key := client.ObjectKey{Namespace: ns, Name: "migrate"}
	complete := ContainElement(And(HaveField("Type", batchv1.JobComplete), HaveField("Status", corev1.ConditionTrue)))
	g.Eventually(func(g Gomega) {
		job := &batchv1.Job{}
		g.Expect(hubCP.Client.Get(ctx, key, job)).To(Succeed())
		g.Expect(job.Status.Conditions).To(complete)
		g.Expect(job.Status.Succeeded).To(BeEquivalentTo(1))
	}).Should(Succeed())

	g.Expect(hubCP.Client.Delete(ctx, &placementv1alpha1.Placement{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "migrate"}})).To(Succeed())
	g.Eventually(func(g Gomega) {
		err := hubCP.Client.Get(ctx, key, &placementv1alpha1.Placement{})
		g.Expect(apierrors.IsNotFound(err)).To(BeTrue(), "the Placement is gone: %v", err)
	}).Should(Succeed())
	job := &batchv1.Job{}
	g.Expect(hubCP.Client.Get(ctx, key, job)).To(Succeed())
	g.Expect(job.Status.Conditions).To(complete, "the record of the run stays")
	g.Expect(job.Status.Succeeded).To(BeEquivalentTo(1))
	g.Eventually(func(g Gomega) {
		events := &eventsv1.EventList{}
		g.Expect(hubCP.Client.List(ctx, events, client.InNamespace(ns))).To(Succeed())
		g.Expect(events.Items).To(ContainElement(And(
			HaveField("Reason", placementv1alpha1.ReasonStatusKept),
			HaveField("Note", ContainSubstring("Job "+ns+"/migrate keeps the status its clusters reported: the Job finished on its clusters")))))
	}).Should(Succeed())
}

// What a user sees when a Placement goes nowhere, or partly nowhere, as they
// type it: a namespace without a ClusterSetBinding, whose divided Deployment is
// not "NotEnoughCapacity ... ()" but no cluster; a selector that matches none,
// which is no "RolloutComplete"; a name in clusterNames that no cluster has,
// which is named, not ignored; and "1 cluster", not "1 clusters".
func TestMessagesSayWhereItGoes(t *testing.T) {
	g := NewWithT(t)
	unbound := newTenant(t)
	createYAML(t, unbound, `
apiVersion: apps/v1
kind: Deployment
metadata: {name: web}
spec:
  replicas: 9
  selector: {matchLabels: {app: web}}
  template:
    metadata: {labels: {app: web}}
    spec: {containers: [{name: web, image: nginx:1.27}]}
---
apiVersion: placement.lodestar.dev/v1alpha1
kind: Placement
metadata: {name: web}
spec:
  resourceSelectors: [{group: apps, version: v1, kind: Deployment, name: web}]
  scheduling: {clusterSelector: {}, replicas: {}}
`)
	g.Eventually(func(g Gomega) {
		key := client.ObjectKey{Namespace: unbound, Name: "web"}
		g.Expect(placementCondition(g, t, key, placementv1alpha1.ScheduledCondition).Reason).To(Equal(placementv1alpha1.ReasonNoClusterSetBinding))
		g.Expect(placementCondition(g, t, key, settled.StalledCondition).Reason).To(Equal(placementv1alpha1.ReasonNoClusterSetBinding))
		p := placementCondition(g, t, key, placementv1alpha1.ProgressingCondition)
		g.Expect(p.Reason).NotTo(Equal(placementv1alpha1.ReasonNotEnoughCapacity), p.Message)
		g.Expect(p.Message).NotTo(ContainSubstring("()"))
	}).Should(Succeed())

	ns := newNamespace(t)
	placementsGoAtEnd(t, ns)
	createYAML(t, ns, `
apiVersion: v1
kind: ConfigMap
metadata: {name: settings}
data: {k: v}
---
apiVersion: placement.lodestar.dev/v1alpha1
kind: Placement
metadata: {name: nowhere}
spec:
  resourceSelectors: [{version: v1, kind: ConfigMap, name: settings}]
  scheduling: {clusterSelector: {matchLabels: {env: nowhere}}}
---
apiVersion: placement.lodestar.dev/v1alpha1
kind: Placement
metadata: {name: typo}
spec:
  resourceSelectors: [{version: v1, kind: ConfigMap, name: settings}]
  scheduling: {clusterNames: [`+member1+`, membr-2]}
`)
	g.Eventually(func(g Gomega) {
		key := client.ObjectKey{Namespace: ns, Name: "nowhere"}
		g.Expect(placementCondition(g, t, key, placementv1alpha1.ScheduledCondition).Reason).To(Equal(placementv1alpha1.ReasonNoMatchingClusters))
		p := placementCondition(g, t, key, placementv1alpha1.ProgressingCondition)
		g.Expect(p.Status).To(Equal(metav1.ConditionFalse))
		g.Expect(p.Reason).To(Equal(placementv1alpha1.ReasonNoClusters), p.Message)
		g.Expect(p.Message).To(ContainSubstring("no cluster is selected"))
	}).Should(Succeed())
	g.Eventually(func(g Gomega) {
		key := client.ObjectKey{Namespace: ns, Name: "typo"}
		s := placementCondition(g, t, key, placementv1alpha1.ScheduledCondition)
		g.Expect(s.Status).To(Equal(metav1.ConditionFalse))
		g.Expect(s.Reason).To(Equal(placementv1alpha1.ReasonUnknownClusterNames))
		g.Expect(s.Message).To(Equal("1 cluster chosen; spec.scheduling.clusterNames names membr-2 that no cluster of cluster sets " +
			placementv1alpha1.DefaultClusterSet + " has"))
		g.Expect(placementCondition(g, t, key, placementv1alpha1.AppliedCondition).Message).To(Equal("applied on the 1 cluster"))
		g.Expect(placementCondition(g, t, key, settled.StalledCondition).Reason).To(Equal(placementv1alpha1.ReasonUnknownClusterNames))
	}).Should(Succeed())
}

// A reflection the hub refuses (the manager may not write the kind's status
// yet: here an admission policy stands for the missing right) is retried with
// a back-off, not only when a member reports again: once the hub allows it,
// the status is reflected within a minute though nothing on the members
// changed.
func TestRefusedReflectionIsRetried(t *testing.T) {
	g := NewWithT(t)
	ctx := t.Context()
	ns := newNamespace(t)
	placementsGoAtEnd(t, ns)
	name := "refuse-status-" + ns
	createYAML(t, "", fmt.Sprintf(`apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicy
metadata:
  name: %[1]s
spec:
  failurePolicy: Fail
  matchConstraints:
    namespaceSelector: {matchLabels: {kubernetes.io/metadata.name: %[2]s}}
    resourceRules:
      - {apiGroups: [apps], apiVersions: [v1], operations: [UPDATE], resources: [deployments/status]}
  validations:
    - {expression: "false", message: "the hub does not let anyone write Deployment status here yet"}
---
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicyBinding
metadata:
  name: %[1]s
spec:
  policyName: %[1]s
  validationActions: [Deny]`, name, ns))
	t.Cleanup(func() {
		for _, obj := range []client.Object{&admissionregistrationv1.ValidatingAdmissionPolicyBinding{ObjectMeta: metav1.ObjectMeta{Name: name}},
			&admissionregistrationv1.ValidatingAdmissionPolicy{ObjectMeta: metav1.ObjectMeta{Name: name}}} {
			_ = client.IgnoreNotFound(hubCP.Client.Delete(context.Background(), obj))
		}
	})
	// The policy takes effect once the API server has it: a status write as
	// the manager's would be is refused.
	g.Eventually(func(g Gomega) {
		_, probe, _ := webObjects(ns)
		probe.Name, probe.Labels = "probe", map[string]string{"app": "probe"} // not the Placement's
		g.Expect(client.IgnoreAlreadyExists(hubCP.Client.Create(ctx, probe))).To(Succeed())
		probe.Status.ObservedGeneration = 1
		err := hubCP.Client.Status().Update(ctx, probe)
		g.Expect(err).To(MatchError(ContainSubstring("does not let anyone write Deployment status")))
	}).Should(Succeed())

	createWebApp(t, ns, nil)
	p := webPlacement(ns)
	p.Spec.Scheduling.ClusterSelector = nil
	p.Spec.Scheduling.ClusterNames = []string{member2}
	p.Spec.Reporting.Reflection = placementv1alpha1.ReflectionAggregate
	g.Expect(hubCP.Client.Create(ctx, p)).To(Succeed())
	key := client.ObjectKeyFromObject(p)
	setDeploymentStatus(t, ns, "web", 2)
	g.Eventually(func(g Gomega) {
		c := placementCondition(g, t, key, placementv1alpha1.StatusReflectedCondition)
		g.Expect(c.Status).To(Equal(metav1.ConditionFalse), c.Message)
		g.Expect(c.Reason).To(Equal(placementv1alpha1.ReasonReflectionFailed))
		g.Expect(c.Message).To(ContainSubstring("does not let anyone write Deployment status"))
		g.Expect(placementCondition(g, t, key, placementv1alpha1.AvailableCondition).Status).To(Equal(metav1.ConditionTrue))
	}).Should(Succeed())

	// Allowed now; nothing on member-2 changes.
	g.Expect(hubCP.Client.Delete(ctx, &admissionregistrationv1.ValidatingAdmissionPolicyBinding{ObjectMeta: metav1.ObjectMeta{Name: name}})).To(Succeed())
	g.Eventually(func(g Gomega) {
		c := placementCondition(g, t, key, placementv1alpha1.StatusReflectedCondition)
		g.Expect(c.Status).To(Equal(metav1.ConditionTrue), c.Message)
		d := &appsv1.Deployment{}
		g.Expect(hubCP.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "web"}, d)).To(Succeed())
		g.Expect(d.Status.ReadyReplicas).To(BeEquivalentTo(2))
	}).Should(Succeed())
}
