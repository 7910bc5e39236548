// The one file that writes to the member: the placed objects (apply, adopt,
// change of owner, delete), the namespaces the agent creates for them, and the
// AppliedWorks, its record book. The rest of the package decides; this writes.

package work

import (
	"context"
	"fmt"
	"slices"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	lodestarworkv1alpha1 "github.com/lodestar-dev/lodestar/api/work/v1alpha1"
	"github.com/lodestar-dev/lodestar/internal/diff"
	"github.com/lodestar-dev/lodestar/internal/patch"
)

// apply applies obj with the AppliedWork as an owner and returns the result.
func (r *Reconciler) apply(ctx context.Context, obj *unstructured.Unstructured, applied *lodestarworkv1alpha1.AppliedWork) (*unstructured.Unstructured, error) {
	out := withOwner(obj, applied)
	if err := r.Member.Apply(ctx, client.ApplyConfigurationFromUnstructured(out), client.FieldOwner(FieldManager), client.ForceOwnership); err != nil {
		return nil, err
	}
	return out, nil
}

// createdBy names another manager of live, the object an apply meant to create
// returned, or is empty when the agent's apply is its only writer. An apply
// creates the object or patches one that appeared after the agent read: only
// in the second case has anyone else written it.
func createdBy(live *unstructured.Unstructured) string {
	for _, f := range live.GetManagedFields() {
		if f.Manager != FieldManager {
			return f.Manager
		}
	}
	return ""
}

// withOwner returns a copy of obj with the AppliedWork among its owners.
func withOwner(obj *unstructured.Unstructured, applied *lodestarworkv1alpha1.AppliedWork) *unstructured.Unstructured {
	out := obj.DeepCopy()
	out.SetOwnerReferences(append(out.GetOwnerReferences(), ownerReference(applied)))
	return out
}

// adopt makes the AppliedWork an owner of existing without changing anything else.
func (r *Reconciler) adopt(ctx context.Context, existing *unstructured.Unstructured, applied *lodestarworkv1alpha1.AppliedWork) (*unstructured.Unstructured, error) {
	out := &unstructured.Unstructured{}
	out.SetGroupVersionKind(existing.GroupVersionKind())
	out.SetNamespace(existing.GetNamespace())
	out.SetName(existing.GetName())
	out.SetOwnerReferences([]metav1.OwnerReference{ownerReference(applied)})
	if err := r.Member.Apply(ctx, client.ApplyConfigurationFromUnstructured(out), client.FieldOwner(FieldManager), client.ForceOwnership); err != nil {
		return nil, err
	}
	return out, nil
}

// dryRunDiff returns the fields that applying obj would change on existing.
func (r *Reconciler) dryRunDiff(ctx context.Context, obj, existing *unstructured.Unstructured) ([]string, error) {
	out := obj.DeepCopy()
	if err := r.Member.Apply(ctx, client.ApplyConfigurationFromUnstructured(out), client.FieldOwner(FieldManager), client.ForceOwnership, client.DryRunAll); err != nil {
		return nil, err
	}
	return diff.PathsWithin(obj.Object, existing.Object, out.Object, maxDiffPaths), nil
}

func ownerReference(applied *lodestarworkv1alpha1.AppliedWork) metav1.OwnerReference {
	return metav1.OwnerReference{
		APIVersion: lodestarworkv1alpha1.GroupVersion.String(),
		Kind:       "AppliedWork",
		Name:       applied.Name,
		UID:        applied.UID,
		// Not a controller, and no blocking: the agent deletes what it created itself.
		Controller:         ptr.To(false),
		BlockOwnerDeletion: ptr.To(false),
	}
}

// podSecurityEnforceLabel is the Pod Security admission label that enforces a
// standard on a namespace's pods.
const podSecurityEnforceLabel = "pod-security.kubernetes.io/enforce"

// ensureNamespace creates namespace ns when it does not exist.
func (r *Reconciler) ensureNamespace(ctx context.Context, ns string) error {
	err := r.Member.Get(ctx, client.ObjectKey{Name: ns}, &corev1.Namespace{})
	if !apierrors.IsNotFound(err) {
		return err
	}
	created := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns, Labels: map[string]string{lodestarworkv1alpha1.CreatedNamespaceLabel: "true"}}}
	if level := r.Policy.PodSecurity(); level != "" {
		// The member's policy: pods in namespaces the agent makes meet this
		// Pod Security Standard.
		created.Labels[podSecurityEnforceLabel] = level
	}
	if err := r.Member.Create(ctx, created); err != nil && !apierrors.IsAlreadyExists(err) {
		return err
	}
	ctrl.LoggerFrom(ctx).Info("Created namespace for placed objects", "namespace", ns)
	return nil
}

// setOwner replaces the AppliedWork among obj's owners by next (or removes it, for
// a nil next), at the resourceVersion read.
func (r *Reconciler) setOwner(ctx context.Context, obj *unstructured.Unstructured, applied, next *lodestarworkv1alpha1.AppliedWork) error {
	base := obj.DeepCopy()
	refs := slices.DeleteFunc(obj.GetOwnerReferences(), func(ref metav1.OwnerReference) bool { return ref.UID == applied.UID })
	if next != nil {
		refs = append(refs, ownerReference(next))
	}
	obj.SetOwnerReferences(refs)
	return r.Member.Patch(ctx, obj, client.MergeFromWithOptions(base, client.MergeFromWithOptimisticLock{}))
}

// writeRecords stores the list of objects the agent answers for, when it changed.
func (r *Reconciler) writeRecords(ctx context.Context, applied *lodestarworkv1alpha1.AppliedWork, records []lodestarworkv1alpha1.AppliedResource) error {
	if equalRecords(applied.Status.AppliedResources, records) {
		return nil
	}
	base := applied.DeepCopy()
	applied.Status.AppliedResources = records
	if err := r.Member.Status().Patch(ctx, applied, client.MergeFromWithOptions(base, client.MergeFromWithOptimisticLock{})); err != nil {
		return fmt.Errorf("recording applied objects: %w", err)
	}
	return nil
}

// recordDeletionPolicy keeps the Work's deletion policy on its AppliedWork (absent
// for the default, Delete), for the sweeper to honour once the Work is gone.
func (r *Reconciler) recordDeletionPolicy(ctx context.Context, applied *lodestarworkv1alpha1.AppliedWork, policy lodestarworkv1alpha1.DeletionPolicy, claims lodestarworkv1alpha1.ClaimPolicy) error {
	deleteClaims := claims == lodestarworkv1alpha1.ClaimsDelete
	if recordedDeletionPolicy(applied) == policy && (recordedClaims(applied) == lodestarworkv1alpha1.ClaimsDelete) == deleteClaims {
		return nil
	}
	base := applied.DeepCopy()
	if deleteClaims {
		if applied.Annotations == nil {
			applied.Annotations = map[string]string{}
		}
		applied.Annotations[lodestarworkv1alpha1.RecordedClaimsAnnotation] = string(claims)
	} else {
		delete(applied.Annotations, lodestarworkv1alpha1.RecordedClaimsAnnotation)
	}
	if policy != lodestarworkv1alpha1.DeletionDelete {
		if applied.Annotations == nil {
			applied.Annotations = map[string]string{}
		}
		applied.Annotations[lodestarworkv1alpha1.RecordedDeletionPolicyAnnotation] = string(policy)
	} else {
		delete(applied.Annotations, lodestarworkv1alpha1.RecordedDeletionPolicyAnnotation)
	}
	if err := r.Member.Patch(ctx, applied, client.MergeFrom(base)); err != nil {
		return fmt.Errorf("recording the deletion policy on AppliedWork %s: %w", applied.Name, err)
	}
	return nil
}

// markWorkMissing sets (or with an empty since, removes) the missing-since
// annotation of an AppliedWork whose Work the hub does not have.
func (r *Reconciler) markWorkMissing(ctx context.Context, applied *lodestarworkv1alpha1.AppliedWork, since string) error {
	base := applied.DeepCopy()
	if since == "" {
		delete(applied.Annotations, lodestarworkv1alpha1.WorkMissingSinceAnnotation)
	} else {
		if applied.Annotations == nil {
			applied.Annotations = map[string]string{}
		}
		applied.Annotations[lodestarworkv1alpha1.WorkMissingSinceAnnotation] = since
	}
	return r.Member.Patch(ctx, applied, client.MergeFrom(base))
}

// deleteObject deletes a placed object while it is the one recorded (uid), in
// the background.
func (r *Reconciler) deleteObject(ctx context.Context, obj *unstructured.Unstructured, uid types.UID) error {
	return r.Member.Delete(ctx, obj, client.Preconditions{UID: &uid}, client.PropagationPolicy(metav1.DeletePropagationBackground))
}

// createAppliedWork creates a Work's AppliedWork, held by its finalizer.
func (r *Reconciler) createAppliedWork(ctx context.Context, applied *lodestarworkv1alpha1.AppliedWork) error {
	controllerutil.AddFinalizer(applied, lodestarworkv1alpha1.AppliedWorkFinalizer)
	if err := r.Member.Create(ctx, applied); err != nil {
		return fmt.Errorf("creating AppliedWork: %w", err)
	}
	return nil
}

// holdAppliedWork adds (held) or removes the AppliedWork's finalizer, which keeps
// it, and with it the objects that name it as their owner, while its Work lives.
func (r *Reconciler) holdAppliedWork(ctx context.Context, applied *lodestarworkv1alpha1.AppliedWork, held bool) error {
	if err := patch.SetFinalizer(ctx, r.Member, applied, lodestarworkv1alpha1.AppliedWorkFinalizer, held); err != nil {
		return fmt.Errorf("setting the finalizer of AppliedWork %s: %w", applied.Name, err)
	}
	return nil
}

// deleteAppliedWork releases and deletes an AppliedWork whose objects are all
// removed or released.
func (r *Reconciler) deleteAppliedWork(ctx context.Context, applied *lodestarworkv1alpha1.AppliedWork) error {
	if err := r.holdAppliedWork(ctx, applied, false); err != nil {
		return err
	}
	if err := r.Member.Delete(ctx, applied, client.Preconditions{UID: &applied.UID}); err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("deleting AppliedWork: %w", err)
	}
	return nil
}
