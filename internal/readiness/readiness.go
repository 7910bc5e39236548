// Package readiness decides from an object as the member's API server returns it
// whether it is Available, Progressing or Degraded: per kind for the kinds
// Kubernetes ships, by CEL rules for kinds a platform team adds, and by the common
// Ready/Available conditions for everything else.
package readiness

import (
	"fmt"
	"strings"

	lodestarworkv1alpha1 "github.com/lodestar-dev/lodestar/api/work/v1alpha1"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// Result is the readiness of one object.
type Result struct {
	// Available: the object does what it is for.
	Available bool
	// Progressing: the object is moving towards its desired state.
	Progressing bool
	// Degraded: the object has failed or cannot make progress.
	Degraded bool
	// Reason is a CamelCase word for the state.
	Reason string
	// Message says why, in a sentence.
	Message string
}

func available(reason, format string, args ...any) Result {
	return Result{Available: true, Reason: reason, Message: fmt.Sprintf(format, args...)}
}

func progressing(reason, format string, args ...any) Result {
	return Result{Progressing: true, Reason: reason, Message: fmt.Sprintf(format, args...)}
}

func degraded(reason, format string, args ...any) Result {
	return Result{Degraded: true, Reason: reason, Message: fmt.Sprintf(format, args...)}
}

// Checker evaluates readiness. The zero value knows the built-in kinds only.
type Checker struct {
	rules map[schema.GroupKind]*compiledRule
	// health are the hub's health rules a Work carries (With).
	health map[schema.GroupKind]*Health
}

// NewChecker returns a Checker that also applies the given CEL rules; a rule for a
// built-in kind replaces the built-in check.
func NewChecker(rules []Rule) (*Checker, error) {
	c := &Checker{rules: map[schema.GroupKind]*compiledRule{}}
	for i, r := range rules {
		cr, err := compileRule(r)
		if err != nil {
			return nil, fmt.Errorf("readiness rule %d (%s): %w", i, r.GroupKind(), err)
		}
		c.rules[r.GroupKind()] = cr
	}
	return c, nil
}

// Evaluate returns the readiness of obj.
func (c *Checker) Evaluate(obj *unstructured.Unstructured) Result {
	gk := obj.GroupVersionKind().GroupKind()
	if c != nil {
		if r, ok := c.rules[gk]; ok {
			return r.evaluate(obj)
		}
		if h, ok := c.health[gk]; ok {
			return h.Evaluate(obj)
		}
	}
	if check, ok := builtin[gk]; ok {
		return check(obj)
	}
	return generic(obj)
}

var builtin = map[schema.GroupKind]func(*unstructured.Unstructured) Result{
	{Group: "apps", Kind: "Deployment"}:                               deployment,
	{Group: "apps", Kind: "StatefulSet"}:                              statefulSet,
	{Group: "apps", Kind: "DaemonSet"}:                                daemonSet,
	{Group: "apps", Kind: "ReplicaSet"}:                               replicaSet,
	{Group: "batch", Kind: "Job"}:                                     job,
	{Kind: "Service"}:                                                 service,
	{Kind: "PersistentVolumeClaim"}:                                   pvc,
	{Group: "apiextensions.k8s.io", Kind: "CustomResourceDefinition"}: crd,
}

// observed tells whether the object's controller has seen its latest spec.
func observed(obj *unstructured.Unstructured) (bool, Result) {
	og, found, _ := unstructured.NestedInt64(obj.Object, "status", "observedGeneration")
	if found && og < obj.GetGeneration() {
		return false, progressing(lodestarworkv1alpha1.ReasonNotObserved, "its controller has observed generation %d of %d", og, obj.GetGeneration())
	}
	return true, Result{}
}

func count(obj *unstructured.Unstructured, fields ...string) int64 {
	v, _, _ := unstructured.NestedInt64(obj.Object, fields...)
	return v
}

func replicas(obj *unstructured.Unstructured) int64 {
	v, found, _ := unstructured.NestedInt64(obj.Object, "spec", "replicas")
	if !found {
		return 1
	}
	return v
}

// condition returns the status and reason of the status condition of type t.
func condition(obj *unstructured.Unstructured, t string) (status, reason, message string, found bool) {
	conds, _, _ := unstructured.NestedSlice(obj.Object, "status", "conditions")
	for _, c := range conds {
		m, ok := c.(map[string]any)
		if !ok || m["type"] != t {
			continue
		}
		status, _ = m["status"].(string)
		reason, _ = m["reason"].(string)
		message, _ = m["message"].(string)
		return status, reason, message, true
	}
	return "", "", "", false
}

func deployment(obj *unstructured.Unstructured) Result {
	if st, reason, msg, ok := condition(obj, "Progressing"); ok && st == "False" && reason == "ProgressDeadlineExceeded" {
		return degraded(lodestarworkv1alpha1.ReasonProgressDeadlineExceeded, "the rollout exceeded its progress deadline: %s", msg)
	}
	if ok, r := observed(obj); !ok {
		return r
	}
	want := replicas(obj)
	updated, avail, total := count(obj, "status", "updatedReplicas"), count(obj, "status", "availableReplicas"), count(obj, "status", "replicas")
	switch {
	case updated < want:
		return progressing(lodestarworkv1alpha1.ReasonRollingOut, "%d of %d replicas updated", updated, want)
	case total > updated:
		return progressing(lodestarworkv1alpha1.ReasonRollingOut, "%d old replicas pending termination", total-updated)
	case avail < want:
		return progressing(lodestarworkv1alpha1.ReasonWaitingForReplicas, "%d of %d replicas available", avail, want)
	}
	return available(lodestarworkv1alpha1.ReasonReplicasAvailable, "%d of %d replicas available", avail, want)
}

func statefulSet(obj *unstructured.Unstructured) Result {
	if ok, r := observed(obj); !ok {
		return r
	}
	want := replicas(obj)
	ready, updated := count(obj, "status", "readyReplicas"), count(obj, "status", "updatedReplicas")
	current, _, _ := unstructured.NestedString(obj.Object, "status", "currentRevision")
	update, _, _ := unstructured.NestedString(obj.Object, "status", "updateRevision")
	strategy, _, _ := unstructured.NestedString(obj.Object, "spec", "updateStrategy", "type")
	switch {
	case strategy != "OnDelete" && update != "" && current != update && updated < want:
		return progressing(lodestarworkv1alpha1.ReasonRollingOut, "%d of %d replicas updated", updated, want)
	case ready < want:
		return progressing(lodestarworkv1alpha1.ReasonWaitingForReplicas, "%d of %d replicas ready", ready, want)
	}
	return available(lodestarworkv1alpha1.ReasonReplicasReady, "%d of %d replicas ready", ready, want)
}

func daemonSet(obj *unstructured.Unstructured) Result {
	if ok, r := observed(obj); !ok {
		return r
	}
	want := count(obj, "status", "desiredNumberScheduled")
	updated, avail := count(obj, "status", "updatedNumberScheduled"), count(obj, "status", "numberAvailable")
	switch {
	case updated < want:
		return progressing(lodestarworkv1alpha1.ReasonRollingOut, "%d of %d pods updated", updated, want)
	case avail < want:
		return progressing(lodestarworkv1alpha1.ReasonWaitingForPods, "%d of %d pods available", avail, want)
	}
	return available(lodestarworkv1alpha1.ReasonPodsAvailable, "%d of %d pods available", avail, want)
}

func replicaSet(obj *unstructured.Unstructured) Result {
	if ok, r := observed(obj); !ok {
		return r
	}
	want, avail := replicas(obj), count(obj, "status", "availableReplicas")
	if avail < want {
		return progressing(lodestarworkv1alpha1.ReasonWaitingForReplicas, "%d of %d replicas available", avail, want)
	}
	return available(lodestarworkv1alpha1.ReasonReplicasAvailable, "%d of %d replicas available", avail, want)
}

func job(obj *unstructured.Unstructured) Result {
	if st, _, msg, ok := condition(obj, "Failed"); ok && st == "True" {
		return degraded(lodestarworkv1alpha1.ReasonJobFailed, "the Job failed: %s", msg)
	}
	if st, _, _, ok := condition(obj, "Complete"); ok && st == "True" {
		return available(lodestarworkv1alpha1.ReasonJobComplete, "the Job completed")
	}
	return progressing(lodestarworkv1alpha1.ReasonJobRunning, "%d pods active, %d succeeded", count(obj, "status", "active"), count(obj, "status", "succeeded"))
}

func service(obj *unstructured.Unstructured) Result {
	typ, _, _ := unstructured.NestedString(obj.Object, "spec", "type")
	if typ != "LoadBalancer" {
		return available(lodestarworkv1alpha1.ReasonServiceReady, "a %s Service is ready once it exists", orDefault(typ, "ClusterIP"))
	}
	ingress, _, _ := unstructured.NestedSlice(obj.Object, "status", "loadBalancer", "ingress")
	if len(ingress) == 0 {
		return progressing(lodestarworkv1alpha1.ReasonWaitingForLoadBalancer, "no load balancer ingress yet")
	}
	return available(lodestarworkv1alpha1.ReasonLoadBalancerReady, "the load balancer has %d ingress points", len(ingress))
}

func pvc(obj *unstructured.Unstructured) Result {
	phase, _, _ := unstructured.NestedString(obj.Object, "status", "phase")
	switch phase {
	case "Bound":
		return available(lodestarworkv1alpha1.ReasonBound, "the claim is bound")
	case "Lost":
		return degraded(lodestarworkv1alpha1.ReasonLost, "the claim lost its volume")
	}
	return progressing(lodestarworkv1alpha1.ReasonPending, "the claim is %s", orDefault(phase, "not bound yet"))
}

func crd(obj *unstructured.Unstructured) Result {
	if st, _, _, ok := condition(obj, "Established"); ok && st == "True" {
		return available(lodestarworkv1alpha1.ReasonEstablished, "the CRD is established")
	}
	if st, reason, msg, ok := condition(obj, "NamesAccepted"); ok && st == "False" {
		return degraded(orDefault(reason, lodestarworkv1alpha1.ReasonNamesNotAccepted), "the CRD's names were not accepted: %s", msg)
	}
	return progressing(lodestarworkv1alpha1.ReasonNotEstablished, "the CRD is not established yet")
}

// generic covers every other kind: an object whose status has Ready or Available
// conditions follows them once its controller observed its generation; an object
// with neither is available once applied.
func generic(obj *unstructured.Unstructured) Result {
	for _, t := range []string{"Ready", "Available"} {
		st, reason, msg, ok := condition(obj, t)
		if !ok {
			continue
		}
		if ok, r := observed(obj); !ok {
			return r
		}
		switch st {
		case "True":
			return available(orDefault(reason, t), "%s is True", t)
		case "False":
			return progressing(orDefault(reason, "Not"+t), "%s is False: %s", t, strings.TrimSpace(msg))
		}
		return progressing(orDefault(reason, t+"Unknown"), "%s is Unknown", t)
	}
	return available(lodestarworkv1alpha1.ReasonReadinessApplied, "no readiness to wait for: available once applied")
}

func orDefault(s, def string) string {
	if s == "" {
		return def
	}
	return s
}
