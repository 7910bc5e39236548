// Package reflection computes the status that a placed object on the hub shows
// for its copies on the clusters (spec.reporting.reflection: Aggregate): the sum over
// the clusters for the workload kinds, a single cluster's status for any other
// kind placed on one cluster. It also says which status feedback the agents
// report for it. It is pure: the status aggregator reads and writes.
package reflection

import (
	"encoding/json"
	"sort"
	"strconv"

	"k8s.io/apimachinery/pkg/runtime/schema"

	lodestarworkv1alpha1 "github.com/lodestar-dev/lodestar/api/work/v1alpha1"
)

// FieldOwner is the field manager of the status reflection writes on the hub's
// objects (the status aggregator's): a status it owns is Lodestar's to change,
// and to take back when the Placement goes.
const FieldOwner = "lodestar-status"

// The feedback values the agents report for reflection, under names a
// Placement's own rules cannot use (they may not contain a dot).
const (
	// ValuePrefix starts the name of every value reflection reads.
	ValuePrefix = "lodestar."
	// StatusValue is the object's whole status on the member.
	StatusValue = "lodestar.status"
	// GenerationValue is the member object's metadata.generation.
	GenerationValue = "lodestar.generation"
	// HubGenerationValue is the hub object's generation the member's copy was
	// rendered from (placementv1alpha1.HubGenerationAnnotation).
	HubGenerationValue = "lodestar.hubGeneration"
	// ReplicasValue is the member object's spec.replicas (of the kinds that
	// have it), what that cluster was given to run.
	ReplicasValue = "lodestar.replicas"
)

// summed are the status fields added up over the clusters, per workload kind.
var summed = map[schema.GroupKind][]string{
	{Group: "apps", Kind: "Deployment"}:  {"replicas", "updatedReplicas", "readyReplicas", "availableReplicas", "unavailableReplicas"},
	{Group: "apps", Kind: "StatefulSet"}: {"replicas", "readyReplicas", "currentReplicas", "updatedReplicas", "availableReplicas"},
	{Group: "apps", Kind: "DaemonSet"}: {"currentNumberScheduled", "numberMisscheduled", "desiredNumberScheduled", "numberReady",
		"updatedNumberScheduled", "numberAvailable", "numberUnavailable"},
	{Group: "apps", Kind: "ReplicaSet"}: {"replicas", "fullyLabeledReplicas", "readyReplicas", "availableReplicas"},
	{Group: "batch", Kind: "Job"}:       {"active", "succeeded", "failed", "ready"},
}

// fromWorst are the status fields taken from the worst cluster, per workload kind
// (conditions always are).
var fromWorst = map[schema.GroupKind][]string{
	{Group: "apps", Kind: "StatefulSet"}: {"currentRevision", "updateRevision"},
}

// noObservedGeneration are summed kinds whose status has no
// observedGeneration (the API server refuses a field its schema does not
// declare).
var noObservedGeneration = map[schema.GroupKind]bool{{Group: "batch", Kind: "Job"}: true}

// Summed tells whether the kind's status is the sum over its clusters.
func Summed(gk schema.GroupKind) bool { _, ok := summed[gk]; return ok }

// noStatus are kinds that have no status to reflect.
var noStatus = map[schema.GroupKind]bool{{Kind: "ConfigMap"}: true, {Kind: "Secret"}: true, {Kind: "ServiceAccount"}: true}

// Rules returns the feedback rules of a Placement that reflects status: its own
// rules, with the reflection values added for every kind in kinds that has a
// status. A kind the Placement reports its whole status of keeps it under
// "status".
func Rules(rules []lodestarworkv1alpha1.FeedbackRule, kinds []schema.GroupKind) []lodestarworkv1alpha1.FeedbackRule {
	out := make([]lodestarworkv1alpha1.FeedbackRule, 0, len(rules)+len(kinds))
	byKind := map[schema.GroupKind]int{}
	for _, r := range rules {
		byKind[schema.GroupKind{Group: r.Group, Kind: r.Kind}] = len(out)
		out = append(out, *r.DeepCopy())
	}
	extra := []lodestarworkv1alpha1.FeedbackField{
		{Name: StatusValue, JSONPath: ".status"},
		{Name: GenerationValue, JSONPath: ".metadata.generation"},
		{Name: HubGenerationValue, JSONPath: ".metadata.annotations.placement\\.lodestar\\.dev/hub-generation"},
	}
	sorted := append([]schema.GroupKind(nil), kinds...)
	sort.Slice(sorted, func(i, j int) bool { return sorted[i].String() < sorted[j].String() })
	for _, gk := range sorted {
		if noStatus[gk] {
			continue
		}
		i, ok := byKind[gk]
		if !ok {
			byKind[gk] = len(out)
			out = append(out, lodestarworkv1alpha1.FeedbackRule{Group: gk.Group, Kind: gk.Kind})
			i = len(out) - 1
		}
		r := &out[i]
		if r.WholeStatus {
			r.WholeStatus = false
			r.Fields = append(r.Fields, lodestarworkv1alpha1.FeedbackField{Name: "status", JSONPath: ".status"})
		}
		r.Fields = append(r.Fields, extra...)
		if perCluster[gk] {
			r.Fields = append(r.Fields, lodestarworkv1alpha1.FeedbackField{Name: ReplicasValue, JSONPath: ".spec.replicas"})
		}
	}
	return out
}

// Copy is one cluster's copy of a placed object, as its agent reports it.
type Copy struct {
	Cluster string
	// Status is the member object's status.
	Status map[string]any
	// Current: the copy is rendered from the hub object's current generation,
	// reported at its Work's generation, and its member controller observed it.
	Current bool
	// Rank orders copies from best (0, available) to worst; the worst copy's
	// conditions are reflected.
	Rank int
	// Replicas is the member object's spec.replicas, -1 when not reported.
	Replicas int64
}

// NewCopy reads a copy from its feedback values; reported says the agent
// reported them at the Work's current generation.
func NewCopy(cluster string, values map[string]any, reported bool, hubGeneration int64, rank int) Copy {
	c := Copy{Cluster: cluster, Rank: rank, Replicas: -1}
	c.Status, _ = normalize(values[StatusValue]).(map[string]any)
	if n, ok := integer(values[ReplicasValue]); ok {
		c.Replicas = n
	}
	gen, hasGen := integer(values[GenerationValue])
	observed, hasObserved := integer(c.Status["observedGeneration"])
	hub, _ := integer(values[HubGenerationValue])
	c.Current = reported && hub == hubGeneration && (!hasObserved || hasGen && observed >= gen)
	return c
}

// Hub is what Status needs of the hub object and its Placement.
type Hub struct {
	// Selected is how many clusters the object's status is made of: the
	// decided clusters, or those that run a share of a divided workload.
	Selected int
	// Generation and ObservedGeneration are the hub object's: its
	// metadata.generation and the status.observedGeneration written before.
	Generation, ObservedGeneration int64
	// Replicas is the hub object's spec.replicas (1 when it leaves it out, as
	// the API server defaults it).
	Replicas int64
	// Divided: the Placement divides the workload's replicas over the clusters,
	// so its spec.replicas is the fleet's total, not each cluster's.
	Divided bool
}

// Status is the status the hub object of kind gk shows for its copies, and false
// when it shows none (a kind that is not summed placed on other than exactly one
// cluster, or no copy reports a status). observedGeneration is the hub's
// generation once every copy is current on every selected cluster, else the
// previous one (0: left out).
func Status(gk schema.GroupKind, copies []Copy, hub Hub) (map[string]any, bool) {
	if len(copies) == 0 {
		return nil, false
	}
	sort.Slice(copies, func(i, j int) bool {
		if copies[i].Rank != copies[j].Rank {
			return copies[i].Rank > copies[j].Rank
		}
		return copies[i].Cluster < copies[j].Cluster
	})
	worst := copies[0]
	out := map[string]any{}
	fields, isSummed := summed[gk]
	switch {
	case isSummed && perCluster[gk] && !hub.Divided:
		shortfalls(out, fields, copies, hub)
	case isSummed:
		for _, f := range fields {
			var sum int64
			for _, c := range copies {
				v, _ := integer(c.Status[f])
				sum += v
			}
			out[f] = sum
		}
	case hub.Selected == 1 && len(copies) == 1 && worst.Status != nil:
		for k, v := range worst.Status {
			out[k] = v
		}
	default:
		return nil, false
	}
	if isSummed {
		for _, f := range append([]string{"conditions"}, fromWorst[gk]...) {
			if v, ok := worst.Status[f]; ok {
				out[f] = v
			}
		}
		if gk == (schema.GroupKind{Group: "batch", Kind: "Job"}) {
			jobTimes(out, copies)
		}
	}
	// observedGeneration only where the kind has one: the workload kinds, and a
	// kind whose member status carries it (a Service's status has none, and the
	// API server refuses a field its schema does not declare).
	_, hasGeneration := out["observedGeneration"]
	delete(out, "observedGeneration")
	if !isSummed && !hasGeneration || noObservedGeneration[gk] {
		return out, true
	}
	current := len(copies) == hub.Selected
	for _, c := range copies {
		current = current && c.Current
	}
	switch {
	case current:
		out["observedGeneration"] = hub.Generation
	case hub.ObservedGeneration > 0:
		out["observedGeneration"] = hub.ObservedGeneration
	}
	return out, true
}

// perCluster are the workload kinds whose spec.replicas, when the Placement
// does not divide them, is what each cluster runs (less or more, when an
// override says so). Their hub object shows its own spec.replicas less the
// worst cluster's shortfall against what that cluster was given: every
// cluster's full count reads as the hub's spec.replicas (2/2 on any number
// of clusters), and one cluster short of one ready replica reads 1/2. So the
// status compares with the spec as kstatus, helm's wait and kubectl rollout
// status compare them. A sum (4/2 on two clusters) would read as two pods too
// many to every one of them.
var perCluster = map[schema.GroupKind]bool{
	{Group: "apps", Kind: "Deployment"}: true, {Group: "apps", Kind: "StatefulSet"}: true, {Group: "apps", Kind: "ReplicaSet"}: true,
}

// excesses are the counts of perCluster kinds that grow with what is wrong:
// the hub shows the worst cluster's.
var excesses = map[string]bool{"unavailableReplicas": true}

// shortfalls writes the counts of a perCluster kind: the hub's replicas less
// the largest shortfall of a cluster against the replicas it was given (its
// copy's spec.replicas); replicas itself also shows the largest excess (a
// rollout's surge). A selected cluster without a copy falls short by all.
func shortfalls(out map[string]any, fields []string, copies []Copy, hub Hub) {
	for _, f := range fields {
		var short, excess int64
		if len(copies) < hub.Selected {
			short = hub.Replicas
		}
		for _, c := range copies {
			v, _ := integer(c.Status[f])
			if excesses[f] {
				excess = max(excess, v)
				continue
			}
			want := c.Replicas
			if want < 0 {
				want = hub.Replicas
			}
			short = max(short, want-v)
			excess = max(excess, v-want)
		}
		switch {
		case excesses[f]:
			out[f] = excess
		case f == "replicas" && excess > 0:
			out[f] = hub.Replicas + excess
		default:
			out[f] = max(0, hub.Replicas-short)
		}
	}
}

// jobTimes sets a Job's startTime to the earliest of its copies and, once every
// copy completed, completionTime to the latest.
func jobTimes(out map[string]any, copies []Copy) {
	var start, done string
	complete := true
	for _, c := range copies {
		if s, ok := c.Status["startTime"].(string); ok && (start == "" || s < start) {
			start = s
		}
		d, ok := c.Status["completionTime"].(string)
		complete = complete && ok
		if ok && d > done {
			done = d
		}
	}
	if start != "" {
		out["startTime"] = start
	}
	if complete && done != "" {
		out["completionTime"] = done
	}
}

// normalize turns json.Numbers into int64 or float64, throughout.
func normalize(v any) any {
	switch v := v.(type) {
	case map[string]any:
		out := make(map[string]any, len(v))
		for k, e := range v {
			out[k] = normalize(e)
		}
		return out
	case []any:
		out := make([]any, len(v))
		for i, e := range v {
			out[i] = normalize(e)
		}
		return out
	case json.Number:
		if i, err := v.Int64(); err == nil {
			return i
		}
		f, _ := v.Float64()
		return f
	}
	return v
}

func integer(v any) (int64, bool) {
	switch v := v.(type) {
	case int64:
		return v, true
	case float64:
		return int64(v), true
	case json.Number:
		i, err := v.Int64()
		return i, err == nil
	case string:
		i, err := strconv.ParseInt(v, 10, 64)
		return i, err == nil
	}
	return 0, false
}
