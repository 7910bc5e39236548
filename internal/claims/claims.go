// Package claims is what Lodestar knows of the PersistentVolumeClaims of placed
// workloads: the state an agent reports for a manifest (a placed claim, or the
// claims a placed StatefulSet made on the member), its encoding in the
// manifest's Claims condition, and the rule that holds a move: a claim that is
// Bound and can be written from one node only (ReadWriteOnce, ReadWriteOncePod)
// stands for data that lives on its cluster and nowhere else.
//
// The encoding, which readers of Work status can rely on: the manifest
// condition of type Claims has a message that is a JSON object
//
//	{"claims": [{"name": "data-db-0", "phase": "Bound", "storageClass": "fast",
//	  "accessModes": ["ReadWriteOnce"], "requested": "10Gi", "capacity": "10Gi",
//	  "reclaimDelete": true, "reason": "..."}, ...],
//	 "holding": 3, "more": 0}
//
// where "holding" counts every Bound single-writer claim (listed or not), and
// "more" the claims left out to stay within the message's budget.
package claims

import (
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	workv1alpha1 "sigs.k8s.io/work-api/pkg/apis/v1alpha1"

	lodestarworkv1alpha1 "github.com/lodestar-dev/lodestar/api/work/v1alpha1"
	"github.com/lodestar-dev/lodestar/internal/clusterworks"
)

// Access modes and phases as the API spells them.
const (
	ReadWriteOnce    = "ReadWriteOnce"
	ReadWriteOncePod = "ReadWriteOncePod"
	ReadWriteMany    = "ReadWriteMany"
	PhaseBound       = "Bound"
)

// Claim is the state of one claim on a member.
type Claim struct {
	Name         string   `json:"name"`
	Phase        string   `json:"phase"`
	StorageClass string   `json:"storageClass,omitempty"`
	AccessModes  []string `json:"accessModes,omitempty"`
	// Requested is the storage the claim asks for; Capacity what its volume has.
	Requested string `json:"requested,omitempty"`
	Capacity  string `json:"capacity,omitempty"`
	// ReclaimDelete is set when the bound volume's reclaim policy is Delete:
	// deleting the claim deletes the data.
	ReclaimDelete bool `json:"reclaimDelete,omitempty"`
	// Reason says why a claim is not Bound.
	Reason string `json:"reason,omitempty"`
}

// Holds tells whether the claim keeps its workload where it is: Bound, and
// writable from one node only. A claim that is also ReadWriteMany is taken to
// be on storage the other clusters can reach.
func (c Claim) Holds() bool {
	if c.Phase != PhaseBound || slices.Contains(c.AccessModes, ReadWriteMany) {
		return false
	}
	return slices.Contains(c.AccessModes, ReadWriteOnce) || slices.Contains(c.AccessModes, ReadWriteOncePod)
}

// Report is what an agent reports of one manifest's claims.
type Report struct {
	Claims []Claim `json:"claims"`
	// Holding counts the claims that hold (Claim.Holds), listed or not.
	Holding int `json:"holding,omitempty"`
	// More counts the claims not listed.
	More int `json:"more,omitempty"`
}

// NewReport is the report of claims, their holding ones counted.
func NewReport(claims []Claim) Report {
	r := Report{Claims: claims}
	for _, c := range claims {
		if c.Holds() {
			r.Holding++
		}
	}
	return r
}

// Bound tells whether every listed claim is Bound.
func (r Report) Bound() bool {
	return !slices.ContainsFunc(r.Claims, func(c Claim) bool { return c.Phase != PhaseBound })
}

// Encode is the report as a Claims condition's message of at most budget bytes:
// claims are left out, from the last, until it fits.
func Encode(r Report, budget int) string {
	for {
		b, err := json.Marshal(r)
		if err != nil {
			return `{"claims":[]}` // Plain strings and ints always encode.
		}
		if len(b) <= budget || len(r.Claims) == 0 {
			return string(b)
		}
		r.More++
		r.Claims = r.Claims[:len(r.Claims)-1]
	}
}

// Decode reads a Claims condition's message.
func Decode(msg string) (Report, error) {
	var r Report
	if err := json.Unmarshal([]byte(msg), &r); err != nil {
		return Report{}, fmt.Errorf("the Claims condition cannot be read: %w", err)
	}
	return r, nil
}

// Workload is one manifest's claims as its agent last reported them.
type Workload struct {
	Kind, Namespace, Name string
	Report
}

// String names the workload as users write it, "StatefulSet shop/db".
func (w Workload) String() string {
	return w.Kind + " " + w.Namespace + "/" + w.Name
}

// OfWorks are the workloads of a cluster's Works with claims, as last reported
// whatever the Works' generation: the data is where the last report said, even
// when the cluster no longer reports.
func OfWorks(parts []*workv1alpha1.Work) []Workload {
	var out []Workload
	for _, w := range parts {
		for _, mc := range w.Status.ManifestConditions {
			c := meta.FindStatusCondition(mc.Conditions, lodestarworkv1alpha1.ConditionClaims)
			if c == nil {
				continue
			}
			r, err := Decode(c.Message)
			if err != nil {
				continue
			}
			out = append(out, Workload{Kind: mc.Identifier.Kind, Namespace: mc.Identifier.Namespace, Name: mc.Identifier.Name, Report: r})
		}
	}
	return out
}

// Holding are the workloads of a cluster's Works whose claims hold them there.
func Holding(parts []*workv1alpha1.Work) []Workload {
	return slices.DeleteFunc(OfWorks(parts), func(w Workload) bool { return w.Holding == 0 })
}

// Describe says why the workload is held on cluster:
// "StatefulSet shop/db on member-1 has 3 bound ReadWriteOnce claims (data-db-0..2)".
func Describe(cluster string, w Workload) string {
	var names, modes []string
	for _, c := range w.Claims {
		if !c.Holds() {
			continue
		}
		names = append(names, c.Name)
		for _, m := range c.AccessModes {
			if (m == ReadWriteOnce || m == ReadWriteOncePod) && !slices.Contains(modes, m) {
				modes = append(modes, m)
			}
		}
	}
	noun := "claims"
	if w.Holding == 1 {
		noun = "claim"
	}
	list := Names(names)
	if unlisted := w.Holding - len(names); unlisted > 0 {
		list += fmt.Sprintf(" and %d more", unlisted)
	}
	return fmt.Sprintf("%s on %s has %d bound %s %s (%s)", w, cluster, w.Holding, strings.Join(modes, "/"), noun, list)
}

// DescribeAll describes the holding workloads of a cluster, the first few in
// full.
func DescribeAll(cluster string, held []Workload, max int) string {
	parts := make([]string, 0, min(len(held), max))
	for i, w := range held {
		if i == max {
			parts = append(parts, fmt.Sprintf("and %d more workloads", len(held)-max))
			break
		}
		parts = append(parts, Describe(cluster, w))
	}
	return strings.Join(parts, "; ")
}

// Names lists claim names, runs of a common prefix and consecutive numbers
// folded: data-db-0, data-db-1, data-db-2, logs → "data-db-0..2, logs".
func Names(names []string) string {
	type run struct {
		prefix     string
		first, end int // end is the last number
		plain      string
	}
	var runs []run
	for _, n := range names {
		i := strings.LastIndexByte(n, '-')
		num, err := strconv.Atoi(n[i+1:])
		if i < 0 || err != nil || num < 0 || strconv.Itoa(num) != n[i+1:] {
			runs = append(runs, run{plain: n})
			continue
		}
		prefix := n[:i+1]
		if k := len(runs) - 1; k >= 0 && runs[k].plain == "" && runs[k].prefix == prefix && runs[k].end+1 == num {
			runs[k].end = num
			continue
		}
		runs = append(runs, run{prefix: prefix, first: num, end: num})
	}
	out := make([]string, len(runs))
	for i, r := range runs {
		switch {
		case r.plain != "":
			out[i] = r.plain
		case r.first == r.end:
			out[i] = r.prefix + strconv.Itoa(r.first)
		default:
			out[i] = fmt.Sprintf("%s%d..%d", r.prefix, r.first, r.end)
		}
	}
	return strings.Join(out, ", ")
}

// Condition is a manifest's Claims condition for r, its message within budget.
func Condition(r Report, budget int) metav1.Condition {
	c := metav1.Condition{Type: lodestarworkv1alpha1.ConditionClaims, Status: metav1.ConditionTrue, Reason: lodestarworkv1alpha1.ReasonClaimsBound, Message: Encode(r, budget)}
	if !r.Bound() {
		c.Status, c.Reason = metav1.ConditionFalse, lodestarworkv1alpha1.ReasonClaimsPending
	}
	return c
}

// RetainedBy are the claims a cluster keeps with their data when Work w goes
// (applyStrategy.claims: Retain, the default), as namespace/name: the placed
// claims and those its placed StatefulSets made there.
func RetainedBy(w *workv1alpha1.Work) []string {
	if strategy, err := clusterworks.Strategy(w); err != nil || strategy.Claims == lodestarworkv1alpha1.ClaimsDelete {
		return nil
	}
	var kept []string
	for _, id := range clusterworks.ManifestIDs(w) {
		if id.Group == "" && id.Kind == "PersistentVolumeClaim" {
			kept = append(kept, id.Namespace+"/"+id.Name)
		}
	}
	for _, wl := range OfWorks([]*workv1alpha1.Work{w}) {
		if wl.Kind == "PersistentVolumeClaim" {
			continue // listed above, reported or not
		}
		for _, c := range wl.Claims {
			kept = append(kept, wl.Namespace+"/"+c.Name)
		}
	}
	return kept
}
