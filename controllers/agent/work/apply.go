package work

import (
	"context"
	"errors"
	"fmt"
	"sort"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	workv1alpha1 "sigs.k8s.io/work-api/pkg/apis/v1alpha1"

	lodestarworkv1alpha1 "github.com/lodestar-dev/lodestar/api/work/v1alpha1"
)

// Reasons of a manifest's Applied condition.
const (
	ReasonApplied         = "Applied"
	ReasonDecodeFailed    = "DecodeFailed"
	ReasonInvalidManifest = "InvalidManifest"
	ReasonDuplicate       = "DuplicateManifest"
	ReasonUnknownKind     = "UnknownKind"
	ReasonNotOwned        = "NotOwnedByWork"
	ReasonApplyFailed     = "ApplyFailed"
)

// CreatedNamespaceLabel marks a namespace the agent created because a manifest
// needed it. The agent never deletes namespaces it created this way: other objects
// may live in them.
const CreatedNamespaceLabel = "work.lodestar.dev/created-for-manifests"

// result is what applying one manifest came to.
type result struct {
	id        workv1alpha1.ResourceIdentifier
	key       string // group/kind/namespace/name; empty when the manifest is not valid
	record    *lodestarworkv1alpha1.AppliedResource
	condition metav1.Condition
	transient error // set when a retry may succeed
}

// applyAll applies every manifest of the Work: Namespaces first, then
// CustomResourceDefinitions, then the rest in the Work's order. A manifest that
// fails fails only itself.
func (r *Reconciler) applyAll(ctx context.Context, work *workv1alpha1.Work, applied *lodestarworkv1alpha1.AppliedWork) []result {
	order := make([]int, len(work.Spec.Workload.Manifests))
	prio := make([]int, len(order))
	for i, m := range work.Spec.Workload.Manifests {
		order[i] = i
		prio[i] = applyPriority(m.Raw)
	}
	sort.SliceStable(order, func(a, b int) bool { return prio[order[a]] < prio[order[b]] })

	results := make([]result, len(order))
	seen := map[string]int{}
	for _, i := range order {
		results[i] = r.applyOne(ctx, i, work.Spec.Workload.Manifests[i].Raw, applied, seen)
	}
	return results
}

// applyPriority orders Namespaces (0) and CRDs (1) before everything else (2).
func applyPriority(raw []byte) int {
	u := &unstructured.Unstructured{}
	if u.UnmarshalJSON(raw) != nil {
		return 2
	}
	switch u.GroupVersionKind().GroupKind() {
	case schema.GroupKind{Kind: "Namespace"}:
		return 0
	case schema.GroupKind{Group: "apiextensions.k8s.io", Kind: "CustomResourceDefinition"}:
		return 1
	}
	return 2
}

func (r *Reconciler) applyOne(ctx context.Context, ordinal int, raw []byte, applied *lodestarworkv1alpha1.AppliedWork, seen map[string]int) result {
	res := result{id: workv1alpha1.ResourceIdentifier{Ordinal: ordinal}}
	fail := func(reason, format string, args ...any) result {
		res.condition = appliedCondition(metav1.ConditionFalse, reason, fmt.Sprintf("manifest %d (%s): ", ordinal, describe(res.id))+fmt.Sprintf(format, args...))
		return res
	}

	obj := &unstructured.Unstructured{}
	if err := obj.UnmarshalJSON(raw); err != nil {
		return fail(ReasonDecodeFailed, "cannot be decoded: %v", err)
	}
	gvk := obj.GroupVersionKind()
	res.id.Group, res.id.Version, res.id.Kind = gvk.Group, gvk.Version, gvk.Kind
	res.id.Namespace, res.id.Name = obj.GetNamespace(), obj.GetName()
	switch {
	case gvk.Kind == "" || gvk.Version == "":
		return fail(ReasonInvalidManifest, "apiVersion and kind are required")
	case obj.GetName() == "" && obj.GetGenerateName() != "":
		return fail(ReasonInvalidManifest, "metadata.generateName is not supported: a placed object needs a fixed metadata.name")
	case obj.GetName() == "":
		return fail(ReasonInvalidManifest, "metadata.name is required")
	}

	mapping, err := r.Member.RESTMapper().RESTMapping(gvk.GroupKind(), gvk.Version)
	if err != nil {
		res.transient = err
		if meta.IsNoMatchError(err) {
			return fail(ReasonUnknownKind, "the member does not serve %s", gvk)
		}
		return fail(ReasonApplyFailed, "mapping %s: %v", gvk, err)
	}
	res.id.Resource = mapping.Resource.Resource
	if mapping.Scope.Name() == meta.RESTScopeNameNamespace {
		if obj.GetNamespace() == "" {
			return fail(ReasonInvalidManifest, "%s is namespaced and needs metadata.namespace", gvk.Kind)
		}
	} else {
		obj.SetNamespace("")
		res.id.Namespace = ""
	}

	res.key = objectKey(gvk.Group, gvk.Kind, obj.GetNamespace(), obj.GetName())
	if first, dup := seen[res.key]; dup {
		res.key = ""
		return fail(ReasonDuplicate, "the same object as manifest %d", first)
	}
	seen[res.key] = ordinal

	if ns := obj.GetNamespace(); ns != "" {
		if err := r.ensureNamespace(ctx, ns); err != nil {
			res.transient = err
			return fail(ReasonApplyFailed, "creating namespace %s: %v", ns, err)
		}
	}

	existing := &unstructured.Unstructured{}
	existing.SetGroupVersionKind(gvk)
	err = r.Member.Get(ctx, client.ObjectKeyFromObject(obj), existing)
	switch {
	case apierrors.IsNotFound(err):
	case err != nil:
		res.transient = err
		return fail(ReasonApplyFailed, "reading the object on the member: %v", err)
	case !ownedBy(existing, applied):
		return fail(ReasonNotOwned, "the object exists on the member and was not created by this Work; it is left untouched")
	}

	prepare(obj, applied)
	if err := r.Member.Apply(ctx, client.ApplyConfigurationFromUnstructured(obj), client.FieldOwner(FieldManager), client.ForceOwnership); err != nil {
		res.transient = err
		return fail(ReasonApplyFailed, "%v", err)
	}
	res.record = &lodestarworkv1alpha1.AppliedResource{
		Group: gvk.Group, Version: gvk.Version, Kind: gvk.Kind, Resource: mapping.Resource.Resource,
		Namespace: obj.GetNamespace(), Name: obj.GetName(), UID: obj.GetUID(),
	}
	res.condition = appliedCondition(metav1.ConditionTrue, ReasonApplied, "applied with server-side apply")
	return res
}

// prepare removes what must not be sent with an apply and makes the AppliedWork an
// owner of the object, which marks it as created by this Work.
func prepare(obj *unstructured.Unstructured, applied *lodestarworkv1alpha1.AppliedWork) {
	delete(obj.Object, "status")
	for _, f := range []string{"uid", "resourceVersion", "generation", "creationTimestamp", "managedFields", "selfLink"} {
		unstructured.RemoveNestedField(obj.Object, "metadata", f)
	}
	refs := obj.GetOwnerReferences()
	refs = append(refs, metav1.OwnerReference{
		APIVersion: lodestarworkv1alpha1.GroupVersion.String(),
		Kind:       "AppliedWork",
		Name:       applied.Name,
		UID:        applied.UID,
		// Not a controller: another Work may place the same object later.
		Controller:         ptr.To(false),
		BlockOwnerDeletion: ptr.To(false),
	})
	obj.SetOwnerReferences(refs)
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

// ensureNamespace creates namespace ns when it does not exist.
func (r *Reconciler) ensureNamespace(ctx context.Context, ns string) error {
	err := r.Member.Get(ctx, client.ObjectKey{Name: ns}, &corev1.Namespace{})
	if !apierrors.IsNotFound(err) {
		return err
	}
	created := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns, Labels: map[string]string{CreatedNamespaceLabel: "true"}}}
	if err := r.Member.Create(ctx, created); err != nil && !apierrors.IsAlreadyExists(err) {
		return err
	}
	ctrl.LoggerFrom(ctx).Info("Created namespace for placed objects", "namespace", ns)
	return nil
}

// transientErrors joins the errors of manifests that a retry may fix.
func transientErrors(results []result) error {
	var errs []error
	for _, res := range results {
		if res.transient != nil {
			errs = append(errs, fmt.Errorf("manifest %d (%s): %w", res.id.Ordinal, describe(res.id), res.transient))
		}
	}
	return errors.Join(errs...)
}

func objectKey(group, kind, namespace, name string) string {
	return group + "/" + kind + "/" + namespace + "/" + name
}

func describe(id workv1alpha1.ResourceIdentifier) string {
	switch {
	case id.Kind == "":
		return "unknown object"
	case id.Namespace == "":
		return id.Kind + " " + id.Name
	default:
		return id.Kind + " " + id.Namespace + "/" + id.Name
	}
}

func appliedCondition(status metav1.ConditionStatus, reason, message string) metav1.Condition {
	return metav1.Condition{Type: ConditionApplied, Status: status, Reason: reason, Message: message}
}
