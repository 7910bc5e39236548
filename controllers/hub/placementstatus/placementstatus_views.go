package placementstatus

import (
	"bytes"
	"cmp"
	"encoding/json"
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strings"
	"sync"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	workv1alpha1 "sigs.k8s.io/work-api/pkg/apis/v1alpha1"

	placementv1alpha1 "github.com/lodestar-dev/lodestar/api/placement/v1alpha1"
	lodestarworkv1alpha1 "github.com/lodestar-dev/lodestar/api/work/v1alpha1"
	"github.com/lodestar-dev/lodestar/internal/claims"
	"github.com/lodestar-dev/lodestar/internal/clusterworks"
	"github.com/lodestar-dev/lodestar/internal/division"
	"github.com/lodestar-dev/lodestar/internal/feedback"
	"github.com/lodestar-dev/lodestar/internal/message"
	"github.com/lodestar-dev/lodestar/internal/names"
	"github.com/lodestar-dev/lodestar/internal/reflection"
)

// maxObjectMessage bounds an object's message in the Placement's status.
const maxObjectMessage = 512

// view is what the status aggregator reads of one Work: per placed object, its
// state and feedback as the agent reported them. Views are kept between
// reconciles while the Work's resourceVersion is unchanged, so a reconcile decodes
// only the Works that changed since the last.
type view struct {
	rv      string
	cluster string
	// part is the Work's part of its cluster's Works (clusterworks.Part).
	part    int
	objects []objectView
	// generation and ids are the Work's generation and the identities of its
	// manifests, by ordinal: what an agent's report must name to count.
	generation int64
	ids        []workv1alpha1.ResourceIdentifier
	// shares are the cluster's shares of divided workloads (part 0's
	// placementv1alpha1.SharesAnnotation).
	shares string
}

// objectView is one manifest's report.
type objectView struct {
	id      workv1alpha1.ResourceIdentifier
	state   placementv1alpha1.ObjectState
	message string
	// current: the agent reported this manifest at the Work's generation.
	current bool
	// feedback is the JSON object of the feedback values, when there are any.
	feedback []byte
	// values are the feedback values decoded (numbers as json.Number).
	values map[string]any
	// claims are the object's claims, as last reported.
	claims *claims.Report
}

// manifestPrefix is the "manifest N (Kind ns/name): " an agent's Applied message
// starts with; the Placement names the object itself.
var manifestPrefix = regexp.MustCompile(`^manifest \d+ \([^)]*\): `)

// maxFeedbackRead bounds the feedback read from one Work's status: what the
// agent's budget lets it write (an agent that writes more is not believed
// beyond it).
const maxFeedbackRead = 64 << 10

// reports is the report of the manifest at its ordinal: the agent's identifier
// names the Work's manifest there (a cluster-scoped object's without the
// namespace the manifest may carry).
func reports(id, manifest workv1alpha1.ResourceIdentifier) bool {
	return manifest.Kind != "" && id.Group == manifest.Group && id.Kind == manifest.Kind && id.Name == manifest.Name &&
		(id.Namespace == manifest.Namespace || id.Namespace == "")
}

// viewOf reads the agent's reports in w's status: each counts only for the
// manifest at its ordinal, once, and is named by that manifest (not by what
// the agent wrote); feedback is read up to maxFeedbackRead. ids are the
// manifests' identities when known (the Work's generation unchanged), or nil.
func viewOf(w *workv1alpha1.Work, ids []workv1alpha1.ResourceIdentifier) *view {
	cluster, _ := names.ClusterFromNamespace(w.Namespace)
	if ids == nil {
		ids = clusterworks.ManifestIDs(w)
	}
	v := &view{rv: w.ResourceVersion, cluster: cluster, part: clusterworks.Part(w), generation: w.Generation, ids: ids,
		objects: make([]objectView, 0, min(len(w.Status.ManifestConditions), len(ids)))}
	if v.part == 0 {
		v.shares = w.Annotations[placementv1alpha1.SharesAnnotation]
	}
	reported := make([]bool, len(ids))
	feedbackRead := 0
	for _, mc := range w.Status.ManifestConditions {
		i := mc.Identifier.Ordinal
		if i < 0 || i >= len(ids) || reported[i] || !reports(mc.Identifier, ids[i]) {
			continue // Not a report of this Work's manifests: not believed.
		}
		reported[i] = true
		o := objectView{id: ids[i], state: placementv1alpha1.ObjectUnknown}
		applied := meta.FindStatusCondition(mc.Conditions, lodestarworkv1alpha1.ConditionApplied)
		o.current = applied != nil && applied.ObservedGeneration == w.Generation
		avail := meta.FindStatusCondition(mc.Conditions, lodestarworkv1alpha1.ConditionAvailable)
		degraded := meta.FindStatusCondition(mc.Conditions, lodestarworkv1alpha1.ConditionDegraded)
		switch {
		case !o.current:
			o.message = fmt.Sprintf("not reported for generation %d of the Work yet", w.Generation)
		case applied.Status != metav1.ConditionTrue:
			o.state, o.message = placementv1alpha1.ObjectNotApplied, manifestPrefix.ReplaceAllString(applied.Message, "")
		case avail != nil && avail.Status == metav1.ConditionTrue:
			o.state = placementv1alpha1.ObjectAvailable
		case degraded != nil && degraded.Status == metav1.ConditionTrue:
			o.state, o.message = placementv1alpha1.ObjectDegraded, degraded.Message
		case avail != nil:
			o.state, o.message = placementv1alpha1.ObjectProgressing, avail.Message
		default:
			o.message = "no availability reported"
		}
		if c := meta.FindStatusCondition(mc.Conditions, lodestarworkv1alpha1.ConditionClaims); c != nil {
			if r, err := claims.Decode(c.Message); err == nil {
				o.claims = &r
				o.message = withClaimReason(o, r)
			}
		}
		o.message = message.Truncate(o.message, maxObjectMessage)
		if fb := meta.FindStatusCondition(mc.Conditions, lodestarworkv1alpha1.ConditionStatusFeedback); fb != nil && fb.ObservedGeneration == w.Generation &&
			feedbackRead+len(fb.Message) <= maxFeedbackRead {
			feedbackRead += len(fb.Message)
			if values, err := feedback.Decode(fb.Message); err == nil && len(values) > 0 {
				o.values = values
				o.feedback = usersFeedback(values)
			}
		}
		v.objects = append(v.objects, o)
	}
	return v
}

// withClaimReason is an object's message with why its first unbound claim
// waits: for a placed claim, the reason itself ("storageclass.storage.k8s.io
// "fast" not found"); for a StatefulSet, naming the claim.
func withClaimReason(o objectView, r claims.Report) string {
	if o.state == placementv1alpha1.ObjectAvailable || !o.current {
		return o.message
	}
	i := slices.IndexFunc(r.Claims, func(c claims.Claim) bool { return c.Phase != claims.PhaseBound && c.Reason != "" })
	switch {
	case i < 0:
		return o.message
	case o.id.Group == "" && o.id.Kind == "PersistentVolumeClaim":
		return r.Claims[i].Reason
	default:
		return fmt.Sprintf("%s; claim %s is %s: %s", o.message, r.Claims[i].Name, r.Claims[i].Phase, r.Claims[i].Reason)
	}
}

// claimStatuses are the claims of a cluster's objects, at most max, within
// the budget.
func (v *view) claimStatuses(max int, b *detailBudget) []placementv1alpha1.ClaimStatus {
	var out []placementv1alpha1.ClaimStatus
	for _, o := range v.objects {
		if o.claims == nil {
			continue
		}
		for _, c := range o.claims.Claims {
			size := len(c.Name) + len(o.id.Kind) + len(o.id.Namespace) + len(o.id.Name) + len(c.StorageClass) + len(c.Reason) + 128
			if len(out) == max || b.claims+size > claimsBudget {
				return out
			}
			b.claims += size
			out = append(out, placementv1alpha1.ClaimStatus{
				Name: c.Name, Workload: describeID(o.id), Phase: c.Phase, StorageClass: c.StorageClass,
				AccessModes: c.AccessModes, Requested: c.Requested, Capacity: c.Capacity, ReclaimDelete: c.ReclaimDelete,
				Holds: c.Holds(), Reason: message.Truncate(c.Reason, 512),
			})
		}
	}
	return out
}

// usersFeedback is the JSON of the feedback values the Placement's own rules
// name, without those status reflection reads (reflection.StatusValue, ...), or
// nil when there are none.
func usersFeedback(values map[string]any) []byte {
	own := make(map[string]any, len(values))
	for k, v := range values {
		if !strings.HasPrefix(k, reflection.ValuePrefix) {
			own[k] = v
		}
	}
	if len(own) == 0 {
		return nil
	}
	b, _ := json.Marshal(own)
	return b
}

// describeID names an object as the Placement's messages do: "Kind ns/name".
func describeID(id workv1alpha1.ResourceIdentifier) string {
	if id.Namespace == "" {
		return id.Kind + " " + id.Name
	}
	return id.Kind + " " + id.Namespace + "/" + id.Name
}

// reasons are the first why-nots of a cluster, each naming its object.
func (v *view) reasons(n int) []string {
	var out []string
	for _, o := range v.objects {
		if o.state == placementv1alpha1.ObjectAvailable || !o.current {
			continue
		}
		out = append(out, message.Truncate(describeID(o.id)+": "+o.message, 1024))
		if len(out) == n {
			break
		}
	}
	return out
}

// detailBudget bounds what the objects of the listed clusters add to the
// Placement's status: past it, feedback is left out, then whole objects.
type detailBudget struct{ objects, feedback, claims int }

const (
	maxObjectsPerCluster = 32
	objectsBudget        = 96 << 10
	feedbackBudget       = 128 << 10
	claimsBudget         = 64 << 10
)

// objectStatuses lists the objects of a cluster that are not available or report
// feedback, within the budget, and how many it left out.
func (v *view) objectStatuses(b *detailBudget) ([]placementv1alpha1.ObjectStatus, int32) {
	var out []placementv1alpha1.ObjectStatus
	var unlisted int32
	for _, o := range v.objects {
		if o.state == placementv1alpha1.ObjectAvailable && o.feedback == nil {
			continue
		}
		size := len(o.id.Group) + len(o.id.Kind) + len(o.id.Namespace) + len(o.id.Name) + len(o.message) + 64
		if len(out) == maxObjectsPerCluster || b.objects+size > objectsBudget {
			unlisted++
			continue
		}
		b.objects += size
		os := placementv1alpha1.ObjectStatus{Group: o.id.Group, Kind: o.id.Kind, Namespace: o.id.Namespace, Name: o.id.Name, State: o.state}
		if o.state != placementv1alpha1.ObjectAvailable {
			os.Message = o.message
		}
		if o.feedback != nil && b.feedback+len(o.feedback) <= feedbackBudget {
			b.feedback += len(o.feedback)
			os.Feedback = jsonOf(o.feedback)
		}
		out = append(out, os)
	}
	return out, unlisted
}

// views keeps the views of each Placement's Works between reconciles.
type views struct {
	mu          sync.Mutex
	byPlacement map[types.NamespacedName]map[string]*view
}

// refresh returns the views of works, reusing those whose Work did not change,
// and keeps them (only them) for the next reconcile of the Placement.
func (vs *views) refresh(key types.NamespacedName, works []workv1alpha1.Work) map[string]*view {
	vs.mu.Lock()
	prev := vs.byPlacement[key]
	vs.mu.Unlock()
	next := make(map[string]*view, len(works))
	for i := range works {
		w := &works[i]
		key := w.Namespace + "/" + w.Name
		v, ok := prev[key]
		if ok && v.rv == w.ResourceVersion {
			next[key] = v
			continue
		}
		var ids []workv1alpha1.ResourceIdentifier
		if ok && v.generation == w.Generation {
			ids = v.ids
		}
		next[key] = viewOf(w, ids)
	}
	vs.mu.Lock()
	defer vs.mu.Unlock()
	if vs.byPlacement == nil {
		vs.byPlacement = map[types.NamespacedName]map[string]*view{}
	}
	vs.byPlacement[key] = next
	return next
}

// forget drops the views of a Placement that is gone.
func (vs *views) forget(key types.NamespacedName) {
	vs.mu.Lock()
	defer vs.mu.Unlock()
	delete(vs.byPlacement, key)
}

// byCluster indexes views by cluster name; the views of a cluster's parts
// become one, their objects in part order.
func byCluster(vs map[string]*view) map[string]*view {
	all := slices.SortedFunc(maps.Values(vs), func(a, b *view) int {
		return cmp.Or(strings.Compare(a.cluster, b.cluster), cmp.Compare(a.part, b.part))
	})
	out := make(map[string]*view, len(vs))
	for _, v := range all {
		prev, ok := out[v.cluster]
		if !ok {
			out[v.cluster] = v
			continue
		}
		out[v.cluster] = &view{cluster: v.cluster, objects: append(slices.Clone(prev.objects), v.objects...),
			ids: append(slices.Clone(prev.ids), v.ids...), shares: prev.shares}
	}
	return out
}

func jsonOf(b []byte) *placementv1alpha1.JSON {
	return &placementv1alpha1.JSON{Raw: bytes.Clone(b)}
}

// shareStatuses are the cluster's shares of the divided workloads, by key.
func (v *view) shareStatuses(max int) []placementv1alpha1.ShareStatus {
	shares, ok := division.ParseShares(v.shares)
	if !ok {
		return nil
	}
	out := make([]placementv1alpha1.ShareStatus, 0, min(len(shares.Workloads), max))
	for _, key := range slices.Sorted(maps.Keys(shares.Workloads)) {
		if len(out) == max {
			break
		}
		s := shares.Workloads[key]
		out = append(out, placementv1alpha1.ShareStatus{Object: key, Replicas: ptr.Deref(s.Overridden, s.Replicas), Target: s.Target,
			Reason: message.Truncate(s.Reason, 256)})
	}
	return out
}

// carries tells whether the cluster's Works carry a manifest of id's kind and
// name (a divided workload whose share there is 0 is not carried).
func (v *view) carries(id workv1alpha1.ResourceIdentifier) bool {
	return slices.ContainsFunc(v.ids, func(m workv1alpha1.ResourceIdentifier) bool {
		return m.Group == id.Group && m.Kind == id.Kind && m.Name == id.Name && m.Namespace == id.Namespace
	})
}
