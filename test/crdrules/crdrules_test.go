// Package crdrules checks every validation rule (x-kubernetes-validations) of the
// CRDs Lodestar ships against a real API server, and guards that none is left
// without a case here: a rule added to config/crd without a case fails
// TestEveryRuleHasACase.
package crdrules

import (
	"context"
	"fmt"
	"os"
	"sort"
	"testing"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/rand"
	"k8s.io/utils/ptr"
	cpv1alpha1 "sigs.k8s.io/cluster-inventory-api/apis/v1alpha1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	placementv1alpha1 "github.com/lodestar-dev/lodestar/api/placement/v1alpha1"
	lodestarworkv1alpha1 "github.com/lodestar-dev/lodestar/api/work/v1alpha1"
	"github.com/lodestar-dev/lodestar/config"
	"github.com/lodestar-dev/lodestar/internal/scheme"
	"github.com/lodestar-dev/lodestar/internal/testenv"
)

// The API groups whose CRDs config/crd ships.
var groups = []string{"placement.lodestar.dev", "work.lodestar.dev", "multicluster.x-k8s.io", "about.k8s.io"}

var apiServer *testenv.ControlPlane

// TestMain starts one API server serving every CRD Lodestar ships (hub and member).
func TestMain(m *testing.M) {
	testenv.SetGomegaDefaults()
	scheme := scheme.Hub()
	if err := lodestarworkv1alpha1.AddToScheme(scheme); err != nil {
		panic(err)
	}
	os.Exit(testenv.RunWithHub(m, scheme, func(cp *testenv.ControlPlane) (func(), error) {
		apiServer = cp
		crds, err := config.MemberCRDs()
		if err != nil {
			return nil, err
		}
		_, err = envtest.InstallCRDs(cp.Config, envtest.CRDInstallOptions{CRDs: crds})
		return nil, err
	}))
}

// ruleCase breaks one rule: write makes the write the rule must refuse, and
// message is the rule's message.
type ruleCase struct {
	message string
	write   func(ctx context.Context, c client.Client, ns string) error
}

// placementWith creates a Placement changed by mutate.
func placementWith(mutate func(*placementv1alpha1.PlacementSpec)) func(context.Context, client.Client, string) error {
	return func(ctx context.Context, c client.Client, ns string) error {
		p := &placementv1alpha1.Placement{
			ObjectMeta: metav1.ObjectMeta{Name: "p-" + rand.String(5), Namespace: ns},
			Spec: placementv1alpha1.PlacementSpec{
				ResourceSelectors: []placementv1alpha1.ResourceSelector{{Version: "v1", Kind: "ConfigMap", Name: "web"}},
				Scheduling:        placementv1alpha1.Scheduling{ClusterSelector: &metav1.LabelSelector{}},
			},
		}
		mutate(&p.Spec)
		return c.Create(ctx, p)
	}
}

// override creates a Placement with one override.
func override(o placementv1alpha1.Override) func(context.Context, client.Client, string) error {
	return placementWith(func(s *placementv1alpha1.PlacementSpec) { s.Overrides = []placementv1alpha1.Override{o} })
}

// feedback creates a Placement with one status feedback rule.
func feedback(rule lodestarworkv1alpha1.FeedbackRule) func(context.Context, client.Client, string) error {
	return placementWith(func(s *placementv1alpha1.PlacementSpec) {
		s.Reporting.Feedback = []lodestarworkv1alpha1.FeedbackRule{rule}
	})
}

// createThenUpdate creates obj, then updates it changed by mutate.
func createThenUpdate[T client.Object](obj T, mutate func(T)) func(context.Context, client.Client, string) error {
	return func(ctx context.Context, c client.Client, ns string) error {
		if err := c.Create(ctx, obj); err != nil {
			return fmt.Errorf("creating the valid object first: %w", err)
		}
		mutate(obj)
		return c.Update(ctx, obj)
	}
}

var cases = []ruleCase{
	{"name and labelSelector are mutually exclusive", placementWith(func(s *placementv1alpha1.PlacementSpec) {
		s.ResourceSelectors[0].LabelSelector = &metav1.LabelSelector{MatchLabels: map[string]string{"a": "b"}}
	})},
	{"kind and version go together", placementWith(func(s *placementv1alpha1.PlacementSpec) {
		s.ResourceSelectors[0].Version = ""
	})},
	{"a selector without kind selects by labelSelector alone (no group, version or name)", placementWith(func(s *placementv1alpha1.PlacementSpec) {
		s.ResourceSelectors[0] = placementv1alpha1.ResourceSelector{Group: "apps", LabelSelector: &metav1.LabelSelector{}}
	})},
	{"a ClusterSetBinding's name must equal spec.clusterSet", func(ctx context.Context, c client.Client, ns string) error {
		return c.Create(ctx, &placementv1alpha1.ClusterSetBinding{ObjectMeta: metav1.ObjectMeta{Name: "mine", Namespace: ns},
			Spec: placementv1alpha1.ClusterSetBindingSpec{ClusterSet: "theirs"}})
	}},
	{"schedulerName is immutable", func(ctx context.Context, c client.Client, ns string) error {
		p := &placementv1alpha1.Placement{
			ObjectMeta: metav1.ObjectMeta{Name: "p-" + rand.String(5), Namespace: ns},
			Spec:       placementv1alpha1.PlacementSpec{ResourceSelectors: []placementv1alpha1.ResourceSelector{{Version: "v1", Kind: "ConfigMap"}}},
		}
		return createThenUpdate(p, func(p *placementv1alpha1.Placement) { p.Spec.Scheduling.SchedulerName = "acme" })(ctx, c, ns)
	}},
	{"exactly one of expression and propertySort must be set", placementWith(func(s *placementv1alpha1.PlacementSpec) {
		s.Scheduling.NumberOfClusters = ptr.To[int32](1)
		s.Scheduling.Preferences = []placementv1alpha1.Preference{{Weight: 1, Expression: "1", PropertySort: &placementv1alpha1.PropertySort{Name: "x"}}}
	})},
	// Quantities with an exponent of thousands of digits parse, and cost
	// minutes to compare: refused at admission, as typed.
	{"cpu must be a quantity of at most 19 digits before the point and 9 after, with an exponent of at most 2 digits, for example 500m or 4", placementWith(func(s *placementv1alpha1.PlacementSpec) {
		s.Scheduling.RequiredCapacity = &placementv1alpha1.Capacity{CPU: "1e999999999"}
	})},
	{"memory must be a quantity of at most 19 digits before the point and 9 after, with an exponent of at most 2 digits, for example 512Mi or 8Gi", placementWith(func(s *placementv1alpha1.PlacementSpec) {
		s.Scheduling.RequiredCapacity = &placementv1alpha1.Capacity{Memory: "1e20000000"}
	})},
	{"quantity must be a quantity of at most 19 digits before the point and 9 after, with an exponent of at most 2 digits, for example 4", placementWith(func(s *placementv1alpha1.PlacementSpec) {
		s.Scheduling.RequiredCapacity = &placementv1alpha1.Capacity{Resources: []placementv1alpha1.ResourceAmount{{Name: "nvidia.com/gpu", Quantity: "123456789012345678901234"}}}
	})},
	{"name must be an extended resource (<domain>/<name>, not kubernetes.io/); cpu and memory have their own fields", placementWith(func(s *placementv1alpha1.PlacementSpec) {
		s.Scheduling.RequiredCapacity = &placementv1alpha1.Capacity{Resources: []placementv1alpha1.ResourceAmount{{Name: "kubernetes.io/batch-cpu", Quantity: "1"}}}
	})},
	{"a toleration with operator Exists takes no value", placementWith(func(s *placementv1alpha1.PlacementSpec) {
		s.Scheduling.Tolerations = []placementv1alpha1.Toleration{{Key: "k", Operator: placementv1alpha1.TolerationExists, Value: "v"}}
	})},
	{"an empty key needs operator Exists", placementWith(func(s *placementv1alpha1.PlacementSpec) {
		s.Scheduling.Tolerations = []placementv1alpha1.Toleration{{Value: "v"}}
	})},
	{"tolerationSeconds applies to effect NoExecute only", placementWith(func(s *placementv1alpha1.PlacementSpec) {
		s.Scheduling.Tolerations = []placementv1alpha1.Toleration{{Key: "k", Value: "v", TolerationSeconds: ptr.To[int64](5)}}
	})},
	{"preferences need numberOfClusters", placementWith(func(s *placementv1alpha1.PlacementSpec) {
		s.Scheduling.Preferences = []placementv1alpha1.Preference{{Weight: 1, Expression: "1"}}
	})},
	{"topologySpread needs numberOfClusters", placementWith(func(s *placementv1alpha1.PlacementSpec) {
		s.Scheduling.TopologySpread = &placementv1alpha1.TopologySpread{TopologyKey: "zone"}
	})},
	{"numberOfClusters cannot exceed the number of clusterNames", placementWith(func(s *placementv1alpha1.PlacementSpec) {
		s.Scheduling.ClusterNames, s.Scheduling.NumberOfClusters = []string{"a"}, ptr.To[int32](2)
	})},
	{"method Weighted needs weights, one of them above 0", placementWith(func(s *placementv1alpha1.PlacementSpec) {
		s.Scheduling.Replicas = &placementv1alpha1.ReplicaDivision{Method: placementv1alpha1.DivisionWeighted,
			Weights: []placementv1alpha1.ReplicaWeight{{ClusterNames: []string{"a"}, Weight: ptr.To[int32](0)}}}
	})},
	{"rebalance applies to method Capacity", placementWith(func(s *placementv1alpha1.PlacementSpec) {
		s.Scheduling.Replicas = &placementv1alpha1.ReplicaDivision{Method: placementv1alpha1.DivisionEven, Rebalance: "now"}
	})},
	{"min cannot exceed max", placementWith(func(s *placementv1alpha1.PlacementSpec) {
		s.Scheduling.Replicas = &placementv1alpha1.ReplicaDivision{Method: placementv1alpha1.DivisionEven,
			Weights: []placementv1alpha1.ReplicaWeight{{Min: ptr.To[int32](3), Max: ptr.To[int32](2)}}}
	})},
	{"exactly one of jsonPath and cel must be set", feedback(lodestarworkv1alpha1.FeedbackRule{Kind: "ConfigMap",
		Fields: []lodestarworkv1alpha1.FeedbackField{{Name: "n", JSONPath: ".data.a", CEL: "self.data.a"}}})},
	{"exactly one of fields and wholeStatus must be set", feedback(lodestarworkv1alpha1.FeedbackRule{Kind: "ConfigMap"})},
	{"status feedback is never collected from Secrets", feedback(lodestarworkv1alpha1.FeedbackRule{Kind: "Secret", WholeStatus: true})},
	{"workName is immutable", func(ctx context.Context, c client.Client, _ string) error {
		aw := &lodestarworkv1alpha1.AppliedWork{ObjectMeta: metav1.ObjectMeta{Name: "aw-" + rand.String(5)},
			Spec: lodestarworkv1alpha1.AppliedWorkSpec{WorkNamespace: "lodestar-cluster-a", WorkName: "w"}}
		return createThenUpdate(aw, func(aw *lodestarworkv1alpha1.AppliedWork) { aw.Spec.WorkName = "other" })(ctx, c, "")
	}},
	{"workNamespace is immutable", func(ctx context.Context, c client.Client, _ string) error {
		aw := &lodestarworkv1alpha1.AppliedWork{ObjectMeta: metav1.ObjectMeta{Name: "aw-" + rand.String(5)},
			Spec: lodestarworkv1alpha1.AppliedWorkSpec{WorkNamespace: "lodestar-cluster-a", WorkName: "w"}}
		return createThenUpdate(aw, func(aw *lodestarworkv1alpha1.AppliedWork) { aw.Spec.WorkNamespace = "lodestar-cluster-b" })(ctx, c, "")
	}},
	{"ClusterManager is immutable", func(ctx context.Context, c client.Client, ns string) error {
		cp := &cpv1alpha1.ClusterProfile{ObjectMeta: metav1.ObjectMeta{Name: "c-" + rand.String(5), Namespace: ns},
			Spec: cpv1alpha1.ClusterProfileSpec{ClusterManager: cpv1alpha1.ClusterManager{Name: "someone"}}}
		return createThenUpdate(cp, func(cp *cpv1alpha1.ClusterProfile) { cp.Spec.ClusterManager.Name = "someone-else" })(ctx, c, ns)
	}},
	{"failover needs numberOfClusters", placementWith(func(s *placementv1alpha1.PlacementSpec) {
		s.Scheduling.Failover = &placementv1alpha1.Failover{}
	})},
	{"rolling applies to type Rolling only", placementWith(func(s *placementv1alpha1.PlacementSpec) {
		s.Strategy = placementv1alpha1.RolloutStrategy{Type: placementv1alpha1.RolloutAllAtOnce, Rolling: &placementv1alpha1.RollingStrategy{}}
	})},
	{"type Staged needs stages, and only type Staged takes them", placementWith(func(s *placementv1alpha1.PlacementSpec) {
		s.Strategy = placementv1alpha1.RolloutStrategy{Type: placementv1alpha1.RolloutStaged}
	})},
	{"maxUnavailable and maxSurge cannot both be 0", placementWith(func(s *placementv1alpha1.PlacementSpec) {
		s.Strategy = placementv1alpha1.RolloutStrategy{Type: placementv1alpha1.RolloutRolling, Rolling: &placementv1alpha1.RollingStrategy{
			MaxUnavailable: ptr.To(intstr.FromInt32(0)), MaxSurge: ptr.To(intstr.FromString("0%"))}}
	})},
	{"minAvailableClusters is an integer of at least 0 or a percentage", placementWith(func(s *placementv1alpha1.PlacementSpec) {
		s.Strategy.DisruptionBudget = &placementv1alpha1.DisruptionBudget{MinAvailableClusters: intstr.FromString("all")}
	})},
	{"an integer of at least 0 or a percentage", placementWith(func(s *placementv1alpha1.PlacementSpec) {
		s.Strategy = placementv1alpha1.RolloutStrategy{Type: placementv1alpha1.RolloutRolling, Rolling: &placementv1alpha1.RollingStrategy{
			MaxUnavailable: ptr.To(intstr.FromString("half"))}}
	})},
	{"an integer of at least 1 or a percentage", placementWith(func(s *placementv1alpha1.PlacementSpec) {
		s.Strategy = placementv1alpha1.RolloutStrategy{Type: placementv1alpha1.RolloutStaged, Stages: []placementv1alpha1.RolloutStage{
			{Name: "dev", MaxConcurrency: ptr.To(intstr.FromInt32(0))}}}
	})},
	{"an override has exactly one action: jsonPatch, mergePatch, image, remove or delete: true", override(placementv1alpha1.Override{
		Name: "two", Remove: []placementv1alpha1.OverridePath{"/spec/x"}, Delete: true,
	})},
	{"an override may not change apiVersion, kind, status or metadata other than labels and annotations", override(placementv1alpha1.Override{
		Name: "name", Remove: []placementv1alpha1.OverridePath{"/metadata/labels/ok", "/metadata/name"},
	})},
	{"remove, move and copy take no valueExpression", override(placementv1alpha1.Override{
		Name: "remove", JSONPatch: []placementv1alpha1.JSONPatchOperation{{Op: "remove", Path: "/spec/replicas", ValueExpression: "3"}},
	})},
	{"move and copy take from; the other operations do not", override(placementv1alpha1.Override{
		Name: "nofrom", JSONPatch: []placementv1alpha1.JSONPatchOperation{{Op: "copy", Path: "/data/b"}},
	})},
	{"move may not take from apiVersion, kind, status or metadata other than labels and annotations", override(placementv1alpha1.Override{
		Name: "move", JSONPatch: []placementv1alpha1.JSONPatchOperation{{Op: "move", Path: "/metadata/labels/name", From: "/metadata/name"}},
	})},
	{"an image override sets at least one of registry, repository and tag", override(placementv1alpha1.Override{
		Name: "image", Image: &placementv1alpha1.ImageOverride{Containers: []string{"app"}},
	})},
	{"value is required unless the operation is Count", placementWith(func(s *placementv1alpha1.PlacementSpec) {
		s.Reporting.Summaries = []placementv1alpha1.StatusSummary{{Name: "ready", Operation: placementv1alpha1.SummarySum,
			Resource: placementv1alpha1.SummaryResource{Group: "apps", Kind: "Deployment"}}}
	})},
	{"exactly one of value and clusterLabel must be set", placementWith(func(s *placementv1alpha1.PlacementSpec) {
		s.Reporting.Summaries = []placementv1alpha1.StatusSummary{{Name: "per", Operation: placementv1alpha1.SummaryCount,
			Resource: placementv1alpha1.SummaryResource{Group: "apps", Kind: "Deployment"},
			GroupBy:  &placementv1alpha1.SummaryGroupBy{Value: "image", ClusterLabel: "region"}}}
	})},
	{"a PlacementRevision is immutable", func(ctx context.Context, c client.Client, ns string) error {
		rev := &placementv1alpha1.PlacementRevision{ObjectMeta: metav1.ObjectMeta{Name: "web-1", Namespace: ns},
			Spec: placementv1alpha1.PlacementRevisionSpec{Placement: "web", Revision: 1, Hash: "abc"}}
		return createThenUpdate(rev, func(rev *placementv1alpha1.PlacementRevision) { rev.Spec.Hash = "def" })(ctx, c, ns)
	}},
	{"name exactly one of stage and clusters", func(ctx context.Context, c client.Client, ns string) error {
		return c.Create(ctx, &placementv1alpha1.RolloutApproval{ObjectMeta: metav1.ObjectMeta{Name: "a", Namespace: ns},
			Spec: placementv1alpha1.RolloutApprovalSpec{Placement: "web", Revision: "web-1", Stage: "prod", Clusters: []string{"x"}}})
	}},
	{"kube-* and lodestar-* namespaces cannot receive member credentials", func(ctx context.Context, c client.Client, _ string) error {
		return c.Create(ctx, &placementv1alpha1.MemberAccessGrant{ObjectMeta: metav1.ObjectMeta{Name: "g-" + rand.String(5)},
			Spec: placementv1alpha1.MemberAccessGrantSpec{Namespace: "kube-system", ClusterSet: "lodestar-fleet"}})
	}},
	{"a ConsumerAccessGrant's name is a DNS label (at most 63 characters, no dots): it names the grant's Works and roles", func(ctx context.Context, c client.Client, _ string) error {
		return c.Create(ctx, &placementv1alpha1.ConsumerAccessGrant{ObjectMeta: metav1.ObjectMeta{Name: "platform.tools-" + rand.String(5)},
			Spec: placementv1alpha1.ConsumerAccessGrantSpec{ClusterSet: "lodestar-fleet",
				Consumers: []placementv1alpha1.ConsumerRef{{Namespace: "platform-tools", Name: "reporter"}},
				Rules:     []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"nodes"}, Verbs: []string{"list"}}}}})
	}},
	{"the built-in workload kinds keep their built-in rules (docs/interpretation.md)", func(ctx context.Context, c client.Client, _ string) error {
		return c.Create(ctx, &placementv1alpha1.ResourceInterpretation{ObjectMeta: metav1.ObjectMeta{Name: "deployments-" + rand.String(5)},
			Spec: placementv1alpha1.ResourceInterpretationSpec{Target: placementv1alpha1.InterpretedKind{Group: "apps", Kind: "Deployment"},
				Replicas: &placementv1alpha1.ReplicasInterpretation{Path: "/spec/replicas"}}})
	}},
	{"an interpretation says at least one of health, replicas, dependencies and aggregate", func(ctx context.Context, c client.Client, _ string) error {
		return c.Create(ctx, &placementv1alpha1.ResourceInterpretation{ObjectMeta: metav1.ObjectMeta{Name: "empty-" + rand.String(5)},
			Spec: placementv1alpha1.ResourceInterpretationSpec{Target: placementv1alpha1.InterpretedKind{Group: "example.com", Kind: "Widget"}}})
	}},
	{"hard names pods, clusters, requests.<resource> or limits.<resource>", func(ctx context.Context, c client.Client, ns string) error {
		return c.Create(ctx, &placementv1alpha1.FleetQuota{ObjectMeta: metav1.ObjectMeta{Name: "q-" + rand.String(5), Namespace: ns},
			Spec: placementv1alpha1.FleetQuotaSpec{Hard: map[string]resource.Quantity{"cpu": resource.MustParse("2")}}})
	}},
	{"a RolloutApproval is immutable", func(ctx context.Context, c client.Client, ns string) error {
		a := &placementv1alpha1.RolloutApproval{ObjectMeta: metav1.ObjectMeta{Name: "a", Namespace: ns},
			Spec: placementv1alpha1.RolloutApprovalSpec{Placement: "web", Revision: "web-1", Stage: "prod"}}
		return createThenUpdate(a, func(a *placementv1alpha1.RolloutApproval) { a.Spec.Stage = "dev" })(ctx, c, ns)
	}},
}

// Each case's write is refused by the API server with its rule's message.
func TestRulesRefuse(t *testing.T) {
	for _, tc := range cases {
		t.Run(tc.message, func(t *testing.T) {
			g := NewWithT(t)
			ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "rules-" + rand.String(6)}}
			g.Expect(apiServer.Client.Create(t.Context(), ns)).To(Succeed())
			err := tc.write(t.Context(), apiServer.Client, ns.Name)
			g.Expect(apierrors.IsInvalid(err)).To(BeTrue(), "want Invalid, got %v", err)
			g.Expect(err.Error()).To(ContainSubstring(tc.message))
		})
	}
}

// The guard: every rule in config/crd has a case above, and every case a rule.
func TestEveryRuleHasACase(t *testing.T) {
	g := NewWithT(t)
	crds, err := config.CRDs(groups...)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(crds).NotTo(BeEmpty())
	shipped := map[string]string{}
	for _, crd := range crds {
		for _, v := range crd.Spec.Versions {
			if v.Schema != nil {
				collect(shipped, crd.Name+" "+v.Name, v.Schema.OpenAPIV3Schema)
			}
		}
	}
	g.Expect(shipped).NotTo(BeEmpty())
	covered := map[string]bool{}
	for _, tc := range cases {
		covered[tc.message] = true
		g.Expect(shipped).To(HaveKey(tc.message), "a case for a rule config/crd no longer has")
	}
	var missing []string
	for msg, where := range shipped {
		if !covered[msg] {
			missing = append(missing, fmt.Sprintf("%s (%s)", msg, where))
		}
	}
	sort.Strings(missing)
	g.Expect(missing).To(BeEmpty(), "CRD validation rules without a case in test/crdrules")
}

// collect adds the message (or, without one, the rule) of every validation rule
// in schema and below it.
func collect(out map[string]string, where string, schema *apiextensionsv1.JSONSchemaProps) {
	if schema == nil {
		return
	}
	for _, v := range schema.XValidations {
		msg := v.Message
		if msg == "" {
			msg = v.Rule
		}
		out[msg] = where
	}
	for name, p := range schema.Properties {
		collect(out, where+"."+name, &p)
	}
	if schema.Items != nil {
		collect(out, where+"[]", schema.Items.Schema)
		for i := range schema.Items.JSONSchemas {
			collect(out, where+"[]", &schema.Items.JSONSchemas[i])
		}
	}
	if schema.AdditionalProperties != nil {
		collect(out, where+"{}", schema.AdditionalProperties.Schema)
	}
	for _, list := range [][]apiextensionsv1.JSONSchemaProps{schema.AllOf, schema.AnyOf, schema.OneOf} {
		for i := range list {
			collect(out, where, &list[i])
		}
	}
}
