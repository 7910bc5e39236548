package work

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	lodestarworkv1alpha1 "github.com/lodestar-dev/lodestar/api/work/v1alpha1"
	"github.com/lodestar-dev/lodestar/internal/diff"
)

// applyPass is what one pass over a Work's manifests shares: the objects named so
// far (by ordinal) and the AppliedWork's records by object key.
type applyPass struct {
	seen    map[string]int
	records map[string]*lodestarworkv1alpha1.AppliedResource
	// autoscaled are the workloads member autoscalers target, by namespace.
	autoscaled map[string]map[string]bool
}

// claim marks res's object as named by its manifest; a second manifest naming the
// same object fails as a duplicate and claims nothing.
func (pass *applyPass) claim(res *result) bool {
	if first, dup := pass.seen[res.key]; dup {
		res.key, res.transient, res.waiting = "", nil, false
		res.fail(lodestarworkv1alpha1.ReasonDuplicate, "the same object as manifest %d", first)
		return false
	}
	pass.seen[res.key] = res.id.Ordinal
	return true
}

// applyPriority orders Namespaces (0) and CRDs (1) before everything else (2).
func applyPriority(raw []byte) int {
	u := &unstructured.Unstructured{}
	if u.UnmarshalJSON(raw) != nil {
		return 2
	}
	switch u.GroupVersionKind().GroupKind() {
	case namespaceKind:
		return 0
	case crdKind:
		return 1
	}
	return 2
}

// manifest is one manifest of a Work made ready for the member: decoded,
// validated, mapped to its resource, and allowed by the member's policy.
type manifest struct {
	// obj is the object to apply, without what must not be sent.
	obj  *unstructured.Unstructured
	gvk  schema.GroupVersionKind
	hash string
	// prev is what the agent recorded for the object before, if anything.
	prev *lodestarworkv1alpha1.AppliedResource
	// ignored are the fields left to the member's controllers.
	ignored  []diff.Pointer
	isSecret bool
	strategy lodestarworkv1alpha1.ApplyStrategy
}

// prepare decodes and checks a manifest. When it cannot be applied, res says why
// and prepare returns false.
func (r *Reconciler) prepare(ctx context.Context, res *result, raw []byte, p plan, pass *applyPass) (manifest, bool) {
	obj := &unstructured.Unstructured{}
	if err := obj.UnmarshalJSON(raw); err != nil {
		res.fail(lodestarworkv1alpha1.ReasonDecodeFailed, "cannot be decoded: %v", err)
		return manifest{}, false
	}
	gvk := obj.GroupVersionKind()
	res.id.Group, res.id.Version, res.id.Kind = gvk.Group, gvk.Version, gvk.Kind
	res.id.Namespace, res.id.Name = obj.GetNamespace(), obj.GetName()
	switch {
	case gvk.Kind == "" || gvk.Version == "":
		res.fail(lodestarworkv1alpha1.ReasonInvalidManifest, "apiVersion and kind are required")
		return manifest{}, false
	case obj.GetName() == "" && obj.GetGenerateName() != "":
		res.fail(lodestarworkv1alpha1.ReasonInvalidManifest, "metadata.generateName is not supported: a placed object needs a fixed metadata.name")
		return manifest{}, false
	case obj.GetName() == "":
		res.fail(lodestarworkv1alpha1.ReasonInvalidManifest, "metadata.name is required")
		return manifest{}, false
	}

	mapping, err := r.Member.RESTMapper().RESTMapping(gvk.GroupKind(), gvk.Version)
	if err != nil {
		// The object is still known by its name: what the Work wants is known, so
		// objects of its other, earlier manifests can be cleaned up.
		res.key = objectKey(gvk.Group, gvk.Kind, obj.GetNamespace(), obj.GetName())
		if !pass.claim(res) {
			return manifest{}, false
		}
		// Keep what the agent answers for under this name: the kind may be served
		// again (a CRD being replaced, an API server restarting).
		res.record = pass.records[res.key].DeepCopy()
		switch {
		case !meta.IsNoMatchError(err):
			res.transient = err
			res.fail(lodestarworkv1alpha1.ReasonApplyFailed, "mapping %s: %v", gvk, err)
		case p.crds[gvk.GroupKind()] != "":
			res.waiting = true
			res.fail(lodestarworkv1alpha1.ReasonWaitingForCRD, "waiting for CustomResourceDefinition %s of this Work to be established", p.crds[gvk.GroupKind()])
		default:
			res.transient = err
			res.fail(lodestarworkv1alpha1.ReasonUnknownKind, "the member does not serve %s; retrying with backoff", gvk)
		}
		return manifest{}, false
	}
	res.id.Resource = mapping.Resource.Resource
	if mapping.Scope.Name() == meta.RESTScopeNameNamespace {
		if obj.GetNamespace() == "" {
			res.fail(lodestarworkv1alpha1.ReasonInvalidManifest, "%s is namespaced and needs metadata.namespace", gvk.Kind)
			return manifest{}, false
		}
	} else {
		obj.SetNamespace("")
		res.id.Namespace = ""
	}
	res.key = objectKey(gvk.Group, gvk.Kind, obj.GetNamespace(), obj.GetName())
	if !pass.claim(res) {
		return manifest{}, false
	}
	if !r.underPolicy(res, gvk, obj) {
		return manifest{}, false
	}
	if p.strategy.Claims != lodestarworkv1alpha1.ClaimsDelete {
		retainClaims(gvk, obj)
	}
	if r.Watch != nil {
		if err := r.Watch(gvk); err != nil {
			ctrl.LoggerFrom(ctx).Error(err, "Watching placed objects on the member", "kind", gvk)
		}
	}
	strip(obj)
	ignored := p.ignored(gvk.GroupKind(), obj.GetName())
	if r.autoscaled(ctx, pass, gvk.GroupKind(), obj.GetNamespace(), obj.GetName()) {
		ignored = append(ignored, replicasPointer)
	}
	return manifest{
		obj: obj, gvk: gvk, hash: manifestHash(obj), prev: pass.records[res.key],
		ignored: ignored, isSecret: gvk.GroupKind() == secretKind, strategy: p.strategy,
	}, true
}

// underPolicy applies the member's policy to obj: false when it denies it (a
// denial that may lift, as for a binding to a role not there yet, is retried),
// and a Namespace gets the member's Pod Security standard, as one the agent
// creates: a manifest cannot label its way out of it. Denied before anything is
// read or written, the object still counts as wanted, so a tightened policy
// never deletes what was applied before.
func (r *Reconciler) underPolicy(res *result, gvk schema.GroupVersionKind, obj *unstructured.Unstructured) bool {
	if r.Policy == nil {
		return true
	}
	if why, retry := r.Policy.Check(gvk, obj.GetNamespace(), obj); why != "" {
		if retry {
			res.transient = errors.New(why)
		}
		res.fail(lodestarworkv1alpha1.ReasonDeniedByPolicy, "%s", why)
		return false
	}
	if level := r.Policy.PodSecurity(); level != "" && gvk.Group == "" && gvk.Kind == "Namespace" {
		labels := obj.GetLabels()
		if labels == nil {
			labels = map[string]string{}
		}
		labels[podSecurityEnforceLabel] = level
		obj.SetLabels(labels)
	}
	return true
}

// retainClaims makes a StatefulSet keep its claims on the member when it is
// deleted or scaled down (claims: Retain): its persistentVolumeClaimRetentionPolicy
// is Retain whatever the manifest says.
func retainClaims(gvk schema.GroupVersionKind, obj *unstructured.Unstructured) {
	if gvk.Group != "apps" || gvk.Kind != "StatefulSet" {
		return
	}
	policy, found, _ := unstructured.NestedStringMap(obj.Object, "spec", "persistentVolumeClaimRetentionPolicy")
	if !found {
		return // Retain is Kubernetes' default.
	}
	for _, when := range []string{"whenDeleted", "whenScaled"} {
		if policy[when] == "Delete" {
			policy[when] = "Retain"
		}
	}
	_ = unstructured.SetNestedStringMap(obj.Object, policy, "spec", "persistentVolumeClaimRetentionPolicy")
}

// strip removes what must not be sent with an apply.
func strip(obj *unstructured.Unstructured) {
	delete(obj.Object, "status")
	for _, f := range []string{"uid", "resourceVersion", "generation", "creationTimestamp", "managedFields", "selfLink"} {
		unstructured.RemoveNestedField(obj.Object, "metadata", f)
	}
}

// manifestHash identifies a manifest's content (after strip): 128 bits of SHA-256
// of its JSON, whose map keys encoding/json sorts.
func manifestHash(obj *unstructured.Unstructured) string {
	b, err := json.Marshal(obj.Object)
	if err != nil {
		return "" // Cannot happen for a decoded manifest; an empty hash never matches.
	}
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:16])
}

// runsOnce tells whether objects of a kind do their job once: a Job that finished
// and was removed (by its TTL, say) must not be created again, which would run it
// again, while its manifest is the same.
func runsOnce(gk schema.GroupKind) bool { return gk == jobKind }

// withIgnored returns obj with the ignored fields set to existing's values (or
// removed when existing has none), so that applying it leaves them as they are
// on the member. Written with at, a member controller's change made between the
// read and the write is never set back.
func withIgnored(obj, existing *unstructured.Unstructured, ignored []diff.Pointer) *unstructured.Unstructured {
	if existing == nil || len(ignored) == 0 {
		return obj
	}
	out := obj.DeepCopy()
	for _, p := range ignored {
		if v, ok := p.Get(existing.Object); ok {
			p.Set(out.Object, runtime.DeepCopyJSONValue(v))
		} else {
			p.Remove(out.Object)
		}
	}
	return out
}

// otherWork names another AppliedWork that owns obj, if any.
func otherWork(obj *unstructured.Unstructured) string {
	for _, ref := range obj.GetOwnerReferences() {
		if ref.Kind == "AppliedWork" && ref.APIVersion == lodestarworkv1alpha1.GroupVersion.String() {
			return ref.Name
		}
	}
	return ""
}

// ownedBy tells whether obj carries the AppliedWork as an owner.
func ownedBy(obj client.Object, applied *lodestarworkv1alpha1.AppliedWork) bool {
	for _, ref := range obj.GetOwnerReferences() {
		if ref.UID == applied.UID {
			return true
		}
	}
	return false
}

func objectKey(group, kind, namespace, name string) string {
	return group + "/" + kind + "/" + namespace + "/" + name
}
