package readiness

import (
	"testing"

	. "github.com/onsi/gomega"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	lodestarworkv1alpha1 "github.com/lodestar-dev/lodestar/api/work/v1alpha1"
)

func obj(apiVersion, kind string, generation int64, spec, status map[string]any) *unstructured.Unstructured {
	u := &unstructured.Unstructured{Object: map[string]any{"apiVersion": apiVersion, "kind": kind, "metadata": map[string]any{"name": "x", "generation": generation}}}
	if spec != nil {
		u.Object["spec"] = spec
	}
	if status != nil {
		u.Object["status"] = status
	}
	return u
}

func cond(t, status, reason string) map[string]any {
	return map[string]any{"type": t, "status": status, "reason": reason, "message": "m"}
}

type want int

const (
	isAvailable want = iota
	isProgressing
	isDegraded
)

func TestBuiltinKinds(t *testing.T) {
	tests := []struct {
		name   string
		obj    *unstructured.Unstructured
		want   want
		reason string
	}{
		{"deployment available", obj("apps/v1", "Deployment", 2, map[string]any{"replicas": int64(3)},
			map[string]any{"observedGeneration": int64(2), "replicas": int64(3), "updatedReplicas": int64(3), "availableReplicas": int64(3)}), isAvailable, "ReplicasAvailable"},
		{"deployment not observed", obj("apps/v1", "Deployment", 3, map[string]any{"replicas": int64(3)},
			map[string]any{"observedGeneration": int64(2), "replicas": int64(3), "updatedReplicas": int64(3), "availableReplicas": int64(3)}), isProgressing, "NotObserved"},
		{"deployment rolling", obj("apps/v1", "Deployment", 2, map[string]any{"replicas": int64(3)},
			map[string]any{"observedGeneration": int64(2), "replicas": int64(4), "updatedReplicas": int64(2), "availableReplicas": int64(3)}), isProgressing, "RollingOut"},
		{"deployment old replicas", obj("apps/v1", "Deployment", 2, map[string]any{"replicas": int64(3)},
			map[string]any{"observedGeneration": int64(2), "replicas": int64(4), "updatedReplicas": int64(3), "availableReplicas": int64(3)}), isProgressing, "RollingOut"},
		{"deployment waiting", obj("apps/v1", "Deployment", 1, map[string]any{"replicas": int64(2)},
			map[string]any{"observedGeneration": int64(1), "replicas": int64(2), "updatedReplicas": int64(2), "availableReplicas": int64(1)}), isProgressing, "WaitingForReplicas"},
		{"deployment no status yet", obj("apps/v1", "Deployment", 1, map[string]any{"replicas": int64(2)}, nil), isProgressing, "RollingOut"},
		{"deployment zero replicas", obj("apps/v1", "Deployment", 1, map[string]any{"replicas": int64(0)},
			map[string]any{"observedGeneration": int64(1)}), isAvailable, "ReplicasAvailable"},
		{"deployment deadline", obj("apps/v1", "Deployment", 1, map[string]any{"replicas": int64(2)},
			map[string]any{"observedGeneration": int64(1), "conditions": []any{cond("Progressing", "False", "ProgressDeadlineExceeded")}}), isDegraded, "ProgressDeadlineExceeded"},
		{"statefulset ready", obj("apps/v1", "StatefulSet", 1, map[string]any{"replicas": int64(2)},
			map[string]any{"observedGeneration": int64(1), "readyReplicas": int64(2), "updatedReplicas": int64(2), "currentRevision": "a", "updateRevision": "a"}), isAvailable, "ReplicasReady"},
		{"statefulset rolling", obj("apps/v1", "StatefulSet", 1, map[string]any{"replicas": int64(2)},
			map[string]any{"observedGeneration": int64(1), "readyReplicas": int64(2), "updatedReplicas": int64(1), "currentRevision": "a", "updateRevision": "b"}), isProgressing, "RollingOut"},
		{"statefulset not ready", obj("apps/v1", "StatefulSet", 1, map[string]any{"replicas": int64(2)},
			map[string]any{"observedGeneration": int64(1), "readyReplicas": int64(1)}), isProgressing, "WaitingForReplicas"},
		{"daemonset available", obj("apps/v1", "DaemonSet", 1, nil,
			map[string]any{"observedGeneration": int64(1), "desiredNumberScheduled": int64(3), "updatedNumberScheduled": int64(3), "numberAvailable": int64(3)}), isAvailable, "PodsAvailable"},
		{"daemonset updating", obj("apps/v1", "DaemonSet", 1, nil,
			map[string]any{"observedGeneration": int64(1), "desiredNumberScheduled": int64(3), "updatedNumberScheduled": int64(1), "numberAvailable": int64(3)}), isProgressing, "RollingOut"},
		{"replicaset", obj("apps/v1", "ReplicaSet", 1, map[string]any{"replicas": int64(2)},
			map[string]any{"observedGeneration": int64(1), "availableReplicas": int64(2)}), isAvailable, "ReplicasAvailable"},
		{"job complete", obj("batch/v1", "Job", 1, nil, map[string]any{"conditions": []any{cond("Complete", "True", "")}}), isAvailable, "JobComplete"},
		{"job failed", obj("batch/v1", "Job", 1, nil, map[string]any{"conditions": []any{cond("Failed", "True", "BackoffLimitExceeded")}}), isDegraded, "JobFailed"},
		{"job running", obj("batch/v1", "Job", 1, nil, map[string]any{"active": int64(1)}), isProgressing, "JobRunning"},
		{"cluster IP service", obj("v1", "Service", 1, map[string]any{"type": "ClusterIP"}, nil), isAvailable, "ServiceReady"},
		{"load balancer pending", obj("v1", "Service", 1, map[string]any{"type": "LoadBalancer"}, map[string]any{}), isProgressing, "WaitingForLoadBalancer"},
		{"load balancer ready", obj("v1", "Service", 1, map[string]any{"type": "LoadBalancer"},
			map[string]any{"loadBalancer": map[string]any{"ingress": []any{map[string]any{"ip": "1.2.3.4"}}}}), isAvailable, "LoadBalancerReady"},
		{"pvc bound", obj("v1", "PersistentVolumeClaim", 1, nil, map[string]any{"phase": "Bound"}), isAvailable, "Bound"},
		{"pvc pending", obj("v1", "PersistentVolumeClaim", 1, nil, map[string]any{"phase": "Pending"}), isProgressing, "Pending"},
		{"pvc lost", obj("v1", "PersistentVolumeClaim", 1, nil, map[string]any{"phase": "Lost"}), isDegraded, "Lost"},
		{"crd established", obj("apiextensions.k8s.io/v1", "CustomResourceDefinition", 1, nil,
			map[string]any{"conditions": []any{cond("Established", "True", "")}}), isAvailable, "Established"},
		{"crd names rejected", obj("apiextensions.k8s.io/v1", "CustomResourceDefinition", 1, nil,
			map[string]any{"conditions": []any{cond("NamesAccepted", "False", "NameConflict")}}), isDegraded, "NameConflict"},
		{"crd pending", obj("apiextensions.k8s.io/v1", "CustomResourceDefinition", 1, nil, nil), isProgressing, "NotEstablished"},
		{"generic ready", obj("example.com/v1", "Widget", 2, nil,
			map[string]any{"observedGeneration": int64(2), "conditions": []any{cond("Ready", "True", "Done")}}), isAvailable, "Done"},
		{"generic ready but stale", obj("example.com/v1", "Widget", 3, nil,
			map[string]any{"observedGeneration": int64(2), "conditions": []any{cond("Ready", "True", "Done")}}), isProgressing, "NotObserved"},
		{"generic not ready", obj("example.com/v1", "Widget", 1, nil,
			map[string]any{"conditions": []any{cond("Ready", "False", "Installing")}}), isProgressing, "Installing"},
		{"generic available condition", obj("example.com/v1", "Widget", 1, nil,
			map[string]any{"conditions": []any{cond("Available", "True", "")}}), isAvailable, "Available"},
		{"no status", obj("v1", "ConfigMap", 1, nil, nil), isAvailable, "Applied"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			r := (*Checker)(nil).Evaluate(tt.obj)
			g.Expect([]bool{r.Available, r.Progressing, r.Degraded}).To(Equal([]bool{tt.want == isAvailable, tt.want == isProgressing, tt.want == isDegraded}), r.Message)
			g.Expect(r.Reason).To(Equal(tt.reason))
			g.Expect(r.Message).NotTo(BeEmpty())
		})
	}
}

func TestCELRules(t *testing.T) {
	g := NewWithT(t)
	c, err := NewChecker([]Rule{{
		Group: "example.com", Kind: "Widget",
		Available: "self.status.phase == 'Ready'",
		Degraded:  "has(self.status.phase) && self.status.phase == 'Failed'",
	}})
	g.Expect(err).NotTo(HaveOccurred())

	ready := c.Evaluate(obj("example.com/v1", "Widget", 1, nil, map[string]any{"phase": "Ready"}))
	g.Expect(ready.Available).To(BeTrue())
	failed := c.Evaluate(obj("example.com/v1", "Widget", 1, nil, map[string]any{"phase": "Failed"}))
	g.Expect(failed.Degraded).To(BeTrue())
	pending := c.Evaluate(obj("example.com/v1", "Widget", 1, nil, map[string]any{"phase": "Installing"}))
	g.Expect(pending.Progressing).To(BeTrue())
	g.Expect(pending.Reason).To(Equal("RuleNotAvailable"))
	noStatus := c.Evaluate(obj("example.com/v1", "Widget", 1, nil, nil))
	g.Expect(noStatus.Progressing).To(BeTrue(), "a field the object does not have yet is not a failure")
	g.Expect(noStatus.Reason).To(Equal("RulePending"))

	// Other kinds keep their built-in checks.
	g.Expect(c.Evaluate(obj("v1", "ConfigMap", 1, nil, nil)).Available).To(BeTrue())
}

func TestCELRuleErrors(t *testing.T) {
	for name, r := range map[string]Rule{
		"syntax":       {Kind: "Widget", Available: "self.status.phase =="},
		"not a bool":   {Kind: "Widget", Available: "'yes'"},
		"no kind":      {Available: "true"},
		"no available": {Kind: "Widget"},
		"bad degraded": {Kind: "Widget", Available: "true", Degraded: "self.("},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := NewChecker([]Rule{r})
			NewWithT(t).Expect(err).To(HaveOccurred())
		})
	}
}

func TestHealthRulesFromTheHub(t *testing.T) {
	g := NewWithT(t)
	widget := func(status map[string]any) *unstructured.Unstructured {
		return &unstructured.Unstructured{Object: map[string]any{"apiVersion": "example.com/v1", "kind": "Widget", "status": status}}
	}
	rules := []lodestarworkv1alpha1.HealthRule{{Group: "example.com", Kind: "Widget", Source: "ResourceInterpretation widgets",
		Expression: "self.status.ready == self.status.size ? {'state': 'Healthy'} : self.status.broken ? {'state': 'Degraded', 'message': 'broken'} : {'state': 'Progressing'}"}}
	c := (&Checker{}).With(rules)
	r := c.Evaluate(widget(map[string]any{"ready": int64(3), "size": int64(3), "broken": false}))
	g.Expect(r.Available).To(BeTrue())
	g.Expect(r.Reason).To(Equal(lodestarworkv1alpha1.ReasonHealthy))
	g.Expect(r.Message).To(ContainSubstring("ResourceInterpretation widgets says Healthy"))
	r = c.Evaluate(widget(map[string]any{"ready": int64(1), "size": int64(3), "broken": true}))
	g.Expect(r.Degraded).To(BeTrue())
	g.Expect(r.Message).To(Equal("broken"))
	r = c.Evaluate(widget(map[string]any{"ready": int64(1), "size": int64(3), "broken": false}))
	g.Expect(r.Progressing).To(BeTrue())

	r = c.Evaluate(widget(map[string]any{}))
	g.Expect(r.Progressing).To(BeTrue(), "a field not there yet is pending, not a failure")
	g.Expect(r.Reason).To(Equal(lodestarworkv1alpha1.ReasonHealthPending))

	r = (&Checker{}).With([]lodestarworkv1alpha1.HealthRule{{Group: "example.com", Kind: "Widget", Expression: "'Fine'", Source: "x"}}).Evaluate(widget(nil))
	g.Expect(r.Degraded).To(BeTrue(), "a state that is none of the three fails the object")
	g.Expect(r.Reason).To(Equal(lodestarworkv1alpha1.ReasonInterpretationFailed))

	r = (&Checker{}).With([]lodestarworkv1alpha1.HealthRule{{Group: "example.com", Kind: "Widget", Expression: "self.status.", Source: "x"}}).Evaluate(widget(nil))
	g.Expect(r.Degraded).To(BeTrue())
	g.Expect(r.Message).To(ContainSubstring("does not compile"))

	member, err := NewChecker([]Rule{{Group: "example.com", Kind: "Widget", Available: "true"}})
	g.Expect(err).NotTo(HaveOccurred())
	r = member.With(rules).Evaluate(widget(map[string]any{"ready": int64(0), "size": int64(3), "broken": true}))
	g.Expect(r.Available).To(BeTrue(), "the member's own rule for the kind wins over the hub's")
	g.Expect(r.Reason).To(Equal(lodestarworkv1alpha1.ReasonRuleAvailable))
	g.Expect(member.With(nil)).To(BeIdenticalTo(member))

	cost := (&Checker{}).With([]lodestarworkv1alpha1.HealthRule{{Group: "example.com", Kind: "Widget", Source: "x",
		Expression: "self.status.items.map(a, self.status.items.map(b, self.status.items.map(c, 1))).size() > 0 ? 'Healthy' : 'Progressing'"}})
	items := make([]any, 1000)
	for i := range items {
		items[i] = int64(i)
	}
	r = cost.Evaluate(widget(map[string]any{"items": items}))
	g.Expect(r.Degraded).To(BeTrue(), "a rule past its cost fails the object at once")
	g.Expect(r.Message).To(ContainSubstring("cost limit"))
}
