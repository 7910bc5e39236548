package work

import (
	"context"
	"errors"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	ctrl "sigs.k8s.io/controller-runtime"

	lodestarworkv1alpha1 "github.com/lodestar-dev/lodestar/api/work/v1alpha1"
	"github.com/lodestar-dev/lodestar/internal/diff"
	"github.com/lodestar-dev/lodestar/internal/member"
	"github.com/lodestar-dev/lodestar/internal/workapply"
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
func (pass *applyPass) claim(res *workapply.Result) bool {
	if first, dup := pass.seen[res.Key]; dup {
		res.Key, res.Transient, res.Waiting = "", nil, false
		res.Fail(lodestarworkv1alpha1.ReasonDuplicate, "the same object as manifest %d", first)
		return false
	}
	pass.seen[res.Key] = res.ID.Ordinal
	return true
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
func (r *Reconciler) prepare(ctx context.Context, res *workapply.Result, raw []byte, p workapply.Plan, pass *applyPass) (manifest, bool) {
	obj := &unstructured.Unstructured{}
	if err := obj.UnmarshalJSON(raw); err != nil {
		res.Fail(lodestarworkv1alpha1.ReasonDecodeFailed, "cannot be decoded: %v", err)
		return manifest{}, false
	}
	gvk := obj.GroupVersionKind()
	res.ID.Group, res.ID.Version, res.ID.Kind = gvk.Group, gvk.Version, gvk.Kind
	res.ID.Namespace, res.ID.Name = obj.GetNamespace(), obj.GetName()
	switch {
	case gvk.Kind == "" || gvk.Version == "":
		res.Fail(lodestarworkv1alpha1.ReasonInvalidManifest, "apiVersion and kind are required")
		return manifest{}, false
	case obj.GetName() == "" && obj.GetGenerateName() != "":
		res.Fail(lodestarworkv1alpha1.ReasonInvalidManifest, "metadata.generateName is not supported: a placed object needs a fixed metadata.name")
		return manifest{}, false
	case obj.GetName() == "":
		res.Fail(lodestarworkv1alpha1.ReasonInvalidManifest, "metadata.name is required")
		return manifest{}, false
	}

	mapping, err := r.Member.RESTMapper().RESTMapping(gvk.GroupKind(), gvk.Version)
	if err != nil {
		// The object is still known by its name: what the Work wants is known, so
		// objects of its other, earlier manifests can be cleaned up.
		res.Key = workapply.ObjectKey(gvk.Group, gvk.Kind, obj.GetNamespace(), obj.GetName())
		if !pass.claim(res) {
			return manifest{}, false
		}
		// Keep what the agent answers for under this name: the kind may be served
		// again (a CRD being replaced, an API server restarting).
		res.Record = pass.records[res.Key].DeepCopy()
		switch {
		case !meta.IsNoMatchError(err):
			res.Transient = err
			res.Fail(lodestarworkv1alpha1.ReasonApplyFailed, "mapping %s: %v", gvk, err)
		case p.CRDs[gvk.GroupKind()] != "":
			res.Waiting = true
			res.Fail(lodestarworkv1alpha1.ReasonWaitingForCRD, "waiting for CustomResourceDefinition %s of this Work to be established", p.CRDs[gvk.GroupKind()])
		default:
			res.Transient = err
			res.Fail(lodestarworkv1alpha1.ReasonUnknownKind, "the member does not serve %s; retrying with backoff", gvk)
		}
		return manifest{}, false
	}
	res.ID.Resource = mapping.Resource.Resource
	if mapping.Scope.Name() == meta.RESTScopeNameNamespace {
		if obj.GetNamespace() == "" {
			res.Fail(lodestarworkv1alpha1.ReasonInvalidManifest, "%s is namespaced and needs metadata.namespace", gvk.Kind)
			return manifest{}, false
		}
	} else {
		obj.SetNamespace("")
		res.ID.Namespace = ""
	}
	res.Key = workapply.ObjectKey(gvk.Group, gvk.Kind, obj.GetNamespace(), obj.GetName())
	if !pass.claim(res) {
		return manifest{}, false
	}
	if !r.underPolicy(res, gvk, obj) {
		return manifest{}, false
	}
	if p.Strategy.Claims != lodestarworkv1alpha1.ClaimsDelete {
		workapply.RetainClaims(gvk, obj)
	}
	if r.Watch != nil {
		if err := r.Watch(gvk); err != nil {
			ctrl.LoggerFrom(ctx).Error(err, "Watching placed objects on the member", "kind", gvk)
		}
	}
	workapply.Strip(obj)
	ignored := p.Ignored(gvk.GroupKind(), obj.GetName())
	if r.autoscaled(ctx, pass, gvk.GroupKind(), obj.GetNamespace(), obj.GetName()) {
		ignored = append(ignored, replicasPointer)
	}
	return manifest{
		obj: obj, gvk: gvk, hash: workapply.ManifestHash(obj), prev: pass.records[res.Key],
		ignored: ignored, isSecret: gvk.GroupKind() == workapply.SecretKind, strategy: p.Strategy,
	}, true
}

// underPolicy applies the member's policy to obj: false when it denies it (a
// denial that may lift, as for a binding to a role not there yet, is retried),
// and a Namespace gets the member's Pod Security standard, as one the agent
// creates: a manifest cannot label its way out of it. Denied before anything is
// read or written, the object still counts as wanted, so a tightened policy
// never deletes what was applied before.
func (r *Reconciler) underPolicy(res *workapply.Result, gvk schema.GroupVersionKind, obj *unstructured.Unstructured) bool {
	if r.Policy == nil {
		return true
	}
	if why, retry := r.Policy.Check(gvk, obj.GetNamespace(), obj); why != "" {
		if retry {
			res.Transient = errors.New(why)
		}
		res.Fail(lodestarworkv1alpha1.ReasonDeniedByPolicy, "%s", why)
		return false
	}
	if level := r.Policy.PodSecurity(); level != "" && gvk.Group == "" && gvk.Kind == "Namespace" {
		labels := obj.GetLabels()
		if labels == nil {
			labels = map[string]string{}
		}
		labels[member.PodSecurityEnforceLabel] = level
		obj.SetLabels(labels)
	}
	return true
}
