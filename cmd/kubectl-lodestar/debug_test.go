package main

import (
	"strings"
	"testing"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/yaml"

	debugv1alpha1 "github.com/lodestar-dev/lodestar/api/debug/v1alpha1"
	placementv1alpha1 "github.com/lodestar-dev/lodestar/api/placement/v1alpha1"
)

func TestOwnedBy(t *testing.T) {
	pod := func(kind, name string) *corev1.Pod {
		return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", OwnerReferences: []metav1.OwnerReference{{Kind: kind, Name: name, Controller: ptr.To(true)}}}}
	}
	for _, tc := range []struct {
		pod        *corev1.Pod
		kind, name string
		want       bool
	}{
		{pod("ReplicaSet", "web-7c9f"), workloadKind("deploy"), "web", true},
		{pod("ReplicaSet", "webhook-7c9f"), "Deployment", "web", false},
		{pod("ReplicaSet", "web-api-7c9f"), "Deployment", "web", false},
		{pod("StatefulSet", "db"), workloadKind("sts"), "db", true},
		{pod("Job", "report-1"), "CronJob", "report", true},
		{pod("Job", "report-1"), "Job", "report-1", true},
		{pod("DaemonSet", "agent"), workloadKind("ds"), "other", false},
		{&corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p"}}, "Pod", "p", true},
	} {
		if got := ownedBy(tc.pod, tc.kind, tc.name); got != tc.want {
			t.Errorf("ownedBy(%v, %s %s) = %v", tc.pod.OwnerReferences, tc.kind, tc.name, got)
		}
	}
}

// The debug verbs reach a member through the hub's debug API: client-go's
// paths under the Placement's prefix.
func TestDebugSessionConfig(t *testing.T) {
	s := &debugSession{base: &restConfigForTest, namespace: "shop", placement: "web"}
	cs, err := s.client(debugv1alpha1.Log, "member-1")
	if err != nil {
		t.Fatal(err)
	}
	u := cs.CoreV1().RESTClient().Get().Namespace("shop").Resource("pods").Name("web-1").SubResource("log").URL()
	want := "https://hub.example:6443/apis/debug.lodestar.dev/v1alpha1/namespaces/shop/placements/web/log/member-1/api/v1/namespaces/shop/pods/web-1/log"
	if u.String() != want {
		t.Errorf("URL %s, want %s", u, want)
	}
	if !strings.HasSuffix(s.config(debugv1alpha1.Exec, "edge-7").Host, "/placements/web/exec/edge-7") {
		t.Errorf("exec host %s", s.config(debugv1alpha1.Exec, "edge-7").Host)
	}
}

var restConfigForTest = rest.Config{Host: "https://hub.example:6443"}

func TestNamedAfter(t *testing.T) {
	g := NewWithT(t)
	g.Expect(namedAfter("web-7d9f8", "web", 0)).To(BeTrue(), "a ReplicaSet of web")
	g.Expect(namedAfter("web-7d9f8-x2kq1", "web", 1)).To(BeTrue(), "a pod of web")
	g.Expect(namedAfter("web-config-x2kq1", "web", 0)).To(BeFalse(), "a pod of web-config")
	g.Expect(namedAfter("web-api-7d9f8", "web", 0)).To(BeFalse(), "a ReplicaSet of web-api")
	g.Expect(namedAfter("web-api-7d9f8-x2kq1", "web", 1)).To(BeFalse(), "a pod of web-api")
	g.Expect(namedAfter("web-", "web", 0)).To(BeFalse())
	g.Expect(namedAfter("db-0", "db", 0)).To(BeTrue(), "a StatefulSet's pod")
}

func TestWorkloadKind(t *testing.T) {
	g := NewWithT(t)
	g.Expect(workloadKind("deploy")).To(Equal("Deployment"))
	g.Expect(workloadKind("cj")).To(Equal("CronJob"))
	g.Expect(workloadKind("cm")).To(BeEmpty(), "a ConfigMap has no pods")
}

// A workload's Placement is found however its selectors name it: by name, by
// kind, or by labels with or without a kind (the quick start's shop chart
// selects by the release's label alone); two that may place it are named.
func TestPlacementFor(t *testing.T) {
	g := NewWithT(t)
	placements := func(text string) []placementv1alpha1.Placement {
		var out []placementv1alpha1.Placement
		for _, doc := range strings.Split(text, "---\n") {
			p := placementv1alpha1.Placement{}
			g.Expect(yaml.UnmarshalStrict([]byte(doc), &p)).To(Succeed())
			out = append(out, p)
		}
		return out
	}
	shop := placements(`metadata: {name: shop}
spec:
  resourceSelectors:
    - labelSelector: {matchLabels: {app.kubernetes.io/instance: shop}}
---
metadata: {name: settings}
spec:
  resourceSelectors:
    - {version: v1, kind: ConfigMap}
`)
	labels := map[string]string{"app.kubernetes.io/instance": "shop"}
	got, err := placementFor(shop, "shop", "Deployment", "shop-web", labels)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(got).To(Equal("shop"))
	_, err = placementFor(shop, "shop", "Deployment", "shop-web", map[string]string{"app": "other"})
	g.Expect(err).To(MatchError("no Placement in shop selects Deployment shop-web (by name, kind or labels)"))

	both := append(shop, placements(`metadata: {name: every-deployment}
spec:
  resourceSelectors:
    - {group: apps, version: v1, kind: Deployment}
`)...)
	_, err = placementFor(both, "shop", "Deployment", "shop-web", labels)
	g.Expect(err).To(MatchError(ContainSubstring("several Placements in shop may place Deployment shop-web (shop, every-deployment)")))
	named := append(both, placements(`metadata: {name: web}
spec:
  resourceSelectors:
    - {group: apps, version: v1, kind: Deployment, name: shop-web}
`)...)
	got, err = placementFor(named, "shop", "Deployment", "shop-web", labels)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(got).To(Equal("web"), "the one that names it")
	// Another group's Deployment kind is not apps'.
	_, err = placementFor(placements(`metadata: {name: other}
spec:
  resourceSelectors:
    - {group: example.com, version: v1, kind: Deployment}
`), "shop", "Deployment", "shop-web", labels)
	g.Expect(err).To(HaveOccurred())
}
