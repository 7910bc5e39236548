package integration

import (
	"testing"

	. "github.com/onsi/gomega"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/rand"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	placementv1alpha1 "github.com/lodestar-dev/lodestar/api/placement/v1alpha1"
)

// labelledApp is an app of ten kinds, all labelled app=shop, in namespace ns with
// a custom resource of group: what a selector without kind places.
const labelledApp = `
apiVersion: v1
kind: ConfigMap
metadata: {name: settings}
data: {mode: fast}
---
apiVersion: v1
kind: Service
metadata: {name: shop}
spec: {ports: [{port: 80}], selector: {app: shop}}
---
apiVersion: v1
kind: ServiceAccount
metadata: {name: shop}
---
apiVersion: apps/v1
kind: Deployment
metadata: {name: shop}
spec:
  replicas: 1
  selector: {matchLabels: {app: shop}}
  template:
    metadata: {labels: {app: shop}}
    spec: {containers: [{name: shop, image: "nginx:1.27"}]}
---
apiVersion: apps/v1
kind: StatefulSet
metadata: {name: cache}
spec:
  serviceName: shop
  selector: {matchLabels: {app: cache}}
  template:
    metadata: {labels: {app: cache}}
    spec: {containers: [{name: cache, image: "redis:7"}]}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: Role
metadata: {name: reader}
rules: [{apiGroups: [""], resources: [configmaps], verbs: [get]}]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata: {name: reader}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: Role, name: reader}
subjects: [{kind: ServiceAccount, name: shop}]
---
apiVersion: networking.k8s.io/v1
kind: NetworkPolicy
metadata: {name: shop}
spec: {podSelector: {matchLabels: {app: shop}}, policyTypes: [Ingress]}
---
apiVersion: batch/v1
kind: CronJob
metadata: {name: report}
spec:
  schedule: "0 3 * * *"
  jobTemplate:
    spec:
      template:
        spec: {restartPolicy: Never, containers: [{name: report, image: "busybox:1.36"}]}
---
apiVersion: GROUP/v1
kind: Widget
metadata: {name: w1}
spec: {size: 3}
`

// notPlaced are objects labelled app=shop that a selector without kind must leave
// on the hub: they belong to it, or (the Secret) are placed only when named.
const notPlaced = `
apiVersion: v1
kind: Secret
metadata: {name: credentials}
stringData: {password: hunter2}
---
apiVersion: v1
kind: Pod
metadata: {name: stray}
spec: {containers: [{name: c, image: "nginx:1.27"}]}
---
apiVersion: v1
kind: Event
metadata: {name: shop.1}
involvedObject: {kind: Deployment, name: shop, namespace: NAMESPACE}
reason: Scaled
message: scaled
---
apiVersion: coordination.k8s.io/v1
kind: Lease
metadata: {name: shop-leader}
---
apiVersion: v1
kind: Endpoints
metadata: {name: shop}
---
apiVersion: discovery.k8s.io/v1
kind: EndpointSlice
metadata: {name: shop-abc}
addressType: IPv4
endpoints: []
---
apiVersion: apps/v1
kind: ControllerRevision
metadata: {name: cache-1}
revision: 1
data: {spec: {}}
---
apiVersion: placement.lodestar.dev/v1alpha1
kind: RolloutApproval
metadata: {name: ok}
spec: {placement: shop, revision: shop-1, stage: prod}
`

// A Placement whose only selector is a label selector places every labelled
// object of the namespace whatever its kind, a custom resource included, but
// nothing that belongs to the hub; a kind added later is placed without a
// restart, and a selector naming kind Secret places the Secret.
func TestSelectingByLabelsAcrossKinds(t *testing.T) {
	g := NewWithT(t)
	// Bound only once the hub's own objects are there: a tenant namespace refuses Pods.
	ns := newTenant(t)
	group := "g" + rand.String(6) + ".example.com"
	for _, c := range []client.Client{hubCP.Client, members[member2].Client} {
		createWidgetCRD(t, c, group, apiextensionsv1.NamespaceScoped, "v1")
	}
	placed := createLabelled(t, ns, group, labelledApp)
	kept := createLabelled(t, ns, group, notPlaced)
	// A ReplicaSet the hub's Deployment controls, as a hub that runs controllers has.
	rs := createLabelled(t, ns, group, `
apiVersion: apps/v1
kind: ReplicaSet
metadata: {name: shop-5d4f}
spec:
  selector: {matchLabels: {app: shop}}
  template:
    metadata: {labels: {app: shop}}
    spec: {containers: [{name: shop, image: "nginx:1.27"}]}`)[0]
	deploy := placed[3]
	g.Expect(hubCP.Client.Get(t.Context(), client.ObjectKeyFromObject(deploy), deploy)).To(Succeed())
	g.Expect(updateOnHub(rs, func(rs *unstructured.Unstructured) {
		rs.SetOwnerReferences([]metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "Deployment", Name: "shop", UID: deploy.GetUID(), Controller: ptr.To(true)}})
	})).To(Succeed())
	kept = append(kept, rs)
	bind(t, ns, placementv1alpha1.DefaultClusterSet)

	p := &placementv1alpha1.Placement{
		ObjectMeta: metav1.ObjectMeta{Name: "shop", Namespace: ns},
		Spec: placementv1alpha1.PlacementSpec{
			ResourceSelectors: []placementv1alpha1.ResourceSelector{{LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "shop"}}}},
			Scheduling:        placementv1alpha1.Scheduling{ClusterNames: []string{member2}},
		},
	}
	g.Expect(hubCP.Client.Create(t.Context(), p)).To(Succeed())
	// Cleanups run last first: the Placement and its Work go before the CRDs, so
	// that no Work is left holding objects of kinds the member no longer serves.
	t.Cleanup(func() { deletePlacement(t, p) })
	member := members[member2].Client
	onMember := func(obj *unstructured.Unstructured) error {
		got := &unstructured.Unstructured{}
		got.SetGroupVersionKind(obj.GroupVersionKind())
		return member.Get(t.Context(), client.ObjectKeyFromObject(obj), got)
	}
	g.Eventually(func(g Gomega) {
		for _, obj := range placed {
			g.Expect(onMember(obj)).To(Succeed(), "%s %s placed", obj.GetKind(), obj.GetName())
		}
		w := workOf(g, p, member2)
		g.Expect(w).NotTo(BeNil())
		g.Expect(w.Spec.Workload.Manifests).To(HaveLen(len(placed)))
	}).Should(Succeed())
	for _, obj := range kept {
		err := onMember(obj)
		g.Expect(apierrors.IsNotFound(err) || meta.IsNoMatchError(err)).To(BeTrue(), "%s %s must stay on the hub: %v", obj.GetKind(), obj.GetName(), err)
	}

	// A kind added later: its CRD on the hub and the member, then a labelled object.
	later := "g" + rand.String(6) + ".example.com"
	for _, c := range []client.Client{hubCP.Client, members[member2].Client} {
		createWidgetCRD(t, c, later, apiextensionsv1.NamespaceScoped, "v1")
	}
	t.Cleanup(func() { deletePlacement(t, p) }) // before these CRDs go too
	var added *unstructured.Unstructured
	g.Eventually(func() error {
		// The hub serves the new kind once its CRD is established.
		obj := &unstructured.Unstructured{Object: map[string]any{"apiVersion": later + "/v1", "kind": "Widget",
			"metadata": map[string]any{"name": "w2", "namespace": ns, "labels": map[string]any{"app": "shop"}}}}
		if err := hubCP.Client.Create(t.Context(), obj); err != nil {
			return err
		}
		added = obj
		return nil
	}).Should(Succeed())
	g.Eventually(func() error { return onMember(added) }).Should(Succeed(), "the object of a kind added later placed")

	// A selector that names kind Secret places the Secret by its labels.
	g.Expect(updateOnHub(p, func(p *placementv1alpha1.Placement) {
		p.Spec.ResourceSelectors = append(p.Spec.ResourceSelectors, placementv1alpha1.ResourceSelector{
			Version: "v1", Kind: "Secret", LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "shop"}}})
	})).To(Succeed())
	g.Eventually(func() error { return onMember(kept[0]) }).Should(Succeed(), "the Secret placed")
}
