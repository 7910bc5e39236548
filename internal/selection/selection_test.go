package selection

import (
	"context"
	"errors"
	"strings"
	"testing"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"

	placementv1alpha1 "github.com/lodestar-dev/lodestar/api/placement/v1alpha1"
)

func TestForbiddenKinds(t *testing.T) {
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Annotations: map[string]string{
		placementv1alpha1.ForbiddenKindsAnnotation: " rbac.authorization.k8s.io/* , ServiceAccount,apps/DaemonSet,",
	}}}
	forbidden := ForbiddenKinds(ns)
	for gk, want := range map[schema.GroupKind]bool{
		{Group: "rbac.authorization.k8s.io", Kind: "Role"}:        true,
		{Group: "rbac.authorization.k8s.io", Kind: "RoleBinding"}: true,
		{Kind: "ServiceAccount"}:                                  true,
		{Group: "apps", Kind: "DaemonSet"}:                        true,
		{Group: "apps", Kind: "Deployment"}:                       false,
		{Kind: "ConfigMap"}:                                       false,
		{Group: "example.com", Kind: "ServiceAccount"}:            false,
	} {
		if got := forbidden(gk); got != want {
			t.Errorf("%s: forbidden %v, want %v", gk, got, want)
		}
	}
	if ForbiddenKinds(&corev1.Namespace{})(schema.GroupKind{Kind: "Secret"}) {
		t.Error("a namespace without the annotation forbids nothing")
	}
}

// fakeHub is a hub of a few kinds, each with one object labelled app=shop.
type fakeHub struct{ kinds []schema.GroupVersionKind }

func (h fakeHub) source(forbidden func(schema.GroupKind) bool) Source {
	mapper := meta.NewDefaultRESTMapper(nil)
	for _, gvk := range h.kinds {
		mapper.Add(gvk, meta.RESTScopeNamespace)
	}
	return Source{
		Mapper: mapper,
		List: func(_ context.Context, gvk schema.GroupVersionKind, ns string, sel labels.Selector) ([]unstructured.Unstructured, error) {
			obj := unstructured.Unstructured{}
			obj.SetGroupVersionKind(gvk)
			obj.SetNamespace(ns)
			obj.SetName("shop")
			obj.SetLabels(map[string]string{"app": "shop"})
			if !sel.Matches(labels.Set(obj.GetLabels())) {
				return nil, nil
			}
			return []unstructured.Unstructured{obj}, nil
		},
		Kinds:     func(context.Context) ([]schema.GroupVersionKind, error) { return h.kinds, nil },
		Forbidden: forbidden,
	}
}

func kindsOf(objs []*unstructured.Unstructured) []string {
	out := make([]string, 0, len(objs))
	for _, o := range objs {
		out = append(out, o.GroupVersionKind().GroupKind().String())
	}
	return out
}

func TestSelectObjectsByLabelsAlone(t *testing.T) {
	g := NewWithT(t)
	hub := fakeHub{kinds: []schema.GroupVersionKind{
		{Version: "v1", Kind: "ConfigMap"}, {Version: "v1", Kind: "Secret"}, {Version: "v1", Kind: "Pod"},
		{Version: "v1", Kind: "Endpoints"}, {Version: "v1", Kind: "Event"}, {Group: "apps", Version: "v1", Kind: "Deployment"},
		{Group: "coordination.k8s.io", Version: "v1", Kind: "Lease"}, {Group: "placement.lodestar.dev", Version: "v1alpha1", Kind: "Placement"},
		{Group: "rbac.authorization.k8s.io", Version: "v1", Kind: "Role"}, {Group: "example.com", Version: "v1", Kind: "Widget"},
	}}
	byLabels := placementv1alpha1.ResourceSelector{LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "shop"}}}
	p := &placementv1alpha1.Placement{ObjectMeta: metav1.ObjectMeta{Name: "shop", Namespace: "shop"},
		Spec: placementv1alpha1.PlacementSpec{ResourceSelectors: []placementv1alpha1.ResourceSelector{byLabels}}}

	sel, err := SelectObjects(t.Context(), p, hub.source(nil))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(sel.Refused).To(BeEmpty())
	g.Expect(kindsOf(sel.Objects)).To(ConsistOf("ConfigMap", "Deployment.apps", "Role.rbac.authorization.k8s.io", "Widget.example.com"))

	// Forbidden kinds are left out; a selector naming kind Secret places it by labels.
	p.Spec.ResourceSelectors = append(p.Spec.ResourceSelectors, placementv1alpha1.ResourceSelector{
		Version: "v1", Kind: "Secret", LabelSelector: byLabels.LabelSelector})
	noRBAC := func(gk schema.GroupKind) bool { return gk.Group == "rbac.authorization.k8s.io" }
	sel, err = SelectObjects(t.Context(), p, hub.source(noRBAC))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(kindsOf(sel.Objects)).To(ConsistOf("ConfigMap", "Deployment.apps", "Widget.example.com", "Secret"))

	// A selector naming a forbidden kind, or one the hub does not serve, is
	// refused alone: the other selectors select all the same.
	p.Spec.ResourceSelectors = []placementv1alpha1.ResourceSelector{
		{Group: "rbac.authorization.k8s.io", Version: "v1", Kind: "Role"},
		{Version: "v1", Kind: "ConfigMap", Name: "shop"},
		{Group: "example.com", Version: "v1", Kind: "Gadget"},
	}
	sel, err = SelectObjects(t.Context(), p, hub.source(noRBAC))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(kindsOf(sel.Objects)).To(ConsistOf("ConfigMap"))
	g.Expect(sel.Refused).To(HaveLen(2))
	var invalid *InvalidSelectorError
	g.Expect(errors.As(sel.Refused[0], &invalid)).To(BeTrue(), "%v", sel.Refused[0])
	g.Expect(invalid.Error()).To(ContainSubstring("spec.resourceSelectors[0]: the namespace's platform admin forbids placing Role.rbac.authorization.k8s.io"))
	g.Expect(sel.Refused[1]).To(MatchError(ContainSubstring("spec.resourceSelectors[2]: the hub does not serve kind")))
	g.Expect(sel.Strict()).To(MatchError(ContainSubstring("resourceSelectors[2]")))

	// Without discovery, a selector without kind cannot be served.
	src := hub.source(nil)
	src.Kinds = nil
	p.Spec.ResourceSelectors = []placementv1alpha1.ResourceSelector{byLabels}
	_, err = SelectObjects(t.Context(), p, src)
	g.Expect(err).To(MatchError(ContainSubstring("needs the hub's discovery")))
}

func TestSuggest(t *testing.T) {
	kinds := []schema.GroupVersionKind{
		{Group: "apps", Version: "v1", Kind: "Deployment"}, {Group: "apps", Version: "v1", Kind: "StatefulSet"},
		{Version: "v1", Kind: "ConfigMap"}, {Version: "v1", Kind: "Service"}, {Group: "example.com", Version: "v1", Kind: "Widget"},
	}
	for want, suggestion := range map[schema.GroupVersionKind]string{
		{Group: "apps", Version: "v1", Kind: "Deploymnet"}:      "apps/v1 Deployment",
		{Version: "v1", Kind: "Deployment"}:                     "apps/v1 Deployment", // the core group has none
		{Group: "apps", Version: "v1beta1", Kind: "Deployment"}: "apps/v1 Deployment",
		{Version: "v1", Kind: "configmap"}:                      "v1 ConfigMap",
		{Version: "v1", Kind: "Servcie"}:                        "v1 Service",
		{Group: "example.com", Version: "v1", Kind: "Gadget"}:   "",
		{Version: "v1", Kind: "Secret"}:                         "",
	} {
		if got := Suggest(kinds, want); got != suggestion {
			t.Errorf("Suggest(%v) = %q, want %q", want, got, suggestion)
		}
	}
}

// caseBlindMapper maps kinds whatever their case, as a mapper may.
type caseBlindMapper struct{ meta.RESTMapper }

func (m caseBlindMapper) RESTMapping(gk schema.GroupKind, versions ...string) (*meta.RESTMapping, error) {
	if gk.Kind != "" {
		gk.Kind = strings.ToUpper(gk.Kind[:1]) + gk.Kind[1:]
	}
	return m.RESTMapper.RESTMapping(gk, versions...)
}

// A kind in lower case, and a kind whose CRD was deleted while the mapper
// still maps it, are refused, the first with the kind meant; a group
// discovery cannot read refuses nothing.
func TestKindsNoLongerOrNeverServed(t *testing.T) {
	g := NewWithT(t)
	hub := fakeHub{kinds: []schema.GroupVersionKind{{Group: "apps", Version: "v1", Kind: "Deployment"}, {Group: "example.com", Version: "v1", Kind: "Widget"}}}
	src := hub.source(nil)
	src.Mapper = caseBlindMapper{src.Mapper}
	served := map[schema.GroupKind]bool{{Group: "apps", Kind: "Deployment"}: true}
	src.Serves = func(_ context.Context, gk schema.GroupKind) (bool, error) {
		if gk.Group == "broken.example.com" {
			return false, errors.New("discovery failed")
		}
		return served[gk], nil
	}
	src.Kinds = func(context.Context) ([]schema.GroupVersionKind, error) {
		return []schema.GroupVersionKind{{Group: "apps", Version: "v1", Kind: "Deployment"}}, nil
	}
	p := &placementv1alpha1.Placement{ObjectMeta: metav1.ObjectMeta{Name: "shop", Namespace: "shop"},
		Spec: placementv1alpha1.PlacementSpec{ResourceSelectors: []placementv1alpha1.ResourceSelector{
			{Group: "apps", Version: "v1", Kind: "deployment"},
			{Group: "example.com", Version: "v1", Kind: "Widget"},
			{Group: "apps", Version: "v1", Kind: "Deployment"},
		}}}
	sel, err := SelectObjects(t.Context(), p, src)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(kindsOf(sel.Objects)).To(ConsistOf("Deployment.apps"))
	g.Expect(sel.Refused).To(HaveLen(2))
	g.Expect(sel.Refused[0]).To(MatchError(ContainSubstring("kind apps/v1, Kind=deployment (kinds are case-sensitive); did you mean apps/v1 Deployment?")))
	g.Expect(sel.Refused[1]).To(MatchError(ContainSubstring("the hub does not serve kind example.com/v1, Kind=Widget now (kinds are case-sensitive; a kind that was served has had its CustomResourceDefinition deleted)")))

	hub.kinds = append(hub.kinds, schema.GroupVersionKind{Group: "broken.example.com", Version: "v1", Kind: "Thing"})
	src.Mapper = hub.source(nil).Mapper
	p.Spec.ResourceSelectors = []placementv1alpha1.ResourceSelector{{Group: "broken.example.com", Version: "v1", Kind: "Thing"}}
	sel, err = SelectObjects(t.Context(), p, src)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(sel.Refused).To(BeEmpty())
	g.Expect(kindsOf(sel.Objects)).To(ConsistOf("Thing.broken.example.com"))
}
