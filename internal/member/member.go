// Package member is the work agent's one writer to its member cluster: the
// placed objects (apply, adopt, change of owner, delete), the namespaces it
// creates for them, and the AppliedWorks, its record book; with what it
// remembers of its own writes (so that an unchanged object is read, not
// written again) and what it reads there beside the placed objects (the claims
// of a StatefulSet, the pods that hold a workload back). The Work reconciler
// decides (internal/workapply); this writes.
package member

import (
	"context"
	"fmt"
	"slices"
	"sync"

	"github.com/lodestar-dev/lodestar/internal/policy"
	"github.com/lodestar-dev/lodestar/internal/readiness"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	lodestarworkv1alpha1 "github.com/lodestar-dev/lodestar/api/work/v1alpha1"
	"github.com/lodestar-dev/lodestar/internal/diff"
	"github.com/lodestar-dev/lodestar/internal/patch"
	"github.com/lodestar-dev/lodestar/internal/workapply"
)

// FieldManager is the agent's server-side apply field manager on members and its
// field owner of Work status on the hub.
const FieldManager = "lodestar-agent"

// Member writes to, and reads from, the member cluster for the Work reconciler.
type Member struct {
	// Client reaches the member's API server.
	Client client.Client
	// Policy, when set, is the member's own limit on what is applied (the Pod
	// Security level of the namespaces the agent creates).
	Policy *policy.Checker
	// Readiness decides whether placed objects are available (a workload that
	// is not has its pods read for what holds it back).
	Readiness *readiness.Checker
	// written remembers, by object key, what the agent last applied to each
	// object and how that left it (UnchangedSinceWritten).
	written sync.Map
}

// Apply applies obj with the AppliedWork as an owner and returns the result.
func (m *Member) Apply(ctx context.Context, obj *unstructured.Unstructured, applied *lodestarworkv1alpha1.AppliedWork) (*unstructured.Unstructured, error) {
	out := WithOwner(obj, applied)
	if err := m.Client.Apply(ctx, client.ApplyConfigurationFromUnstructured(out), client.FieldOwner(FieldManager), client.ForceOwnership); err != nil {
		return nil, err
	}
	return out, nil
}

// CreatedBy names another manager of live, the object an apply meant to create
// returned, or is empty when the agent's apply is its only writer. An apply
// creates the object or patches one that appeared after the agent read: only
// in the second case has anyone else written it.
func CreatedBy(live *unstructured.Unstructured) string {
	for _, f := range live.GetManagedFields() {
		if f.Manager != FieldManager {
			return f.Manager
		}
	}
	return ""
}

// WithOwner returns a copy of obj with the AppliedWork among its owners.
func WithOwner(obj *unstructured.Unstructured, applied *lodestarworkv1alpha1.AppliedWork) *unstructured.Unstructured {
	out := obj.DeepCopy()
	out.SetOwnerReferences(append(out.GetOwnerReferences(), workapply.OwnerReference(applied)))
	return out
}

// Adopt makes the AppliedWork an owner of existing without changing anything else.
func (m *Member) Adopt(ctx context.Context, existing *unstructured.Unstructured, applied *lodestarworkv1alpha1.AppliedWork) (*unstructured.Unstructured, error) {
	out := &unstructured.Unstructured{}
	out.SetGroupVersionKind(existing.GroupVersionKind())
	out.SetNamespace(existing.GetNamespace())
	out.SetName(existing.GetName())
	out.SetOwnerReferences([]metav1.OwnerReference{workapply.OwnerReference(applied)})
	if err := m.Client.Apply(ctx, client.ApplyConfigurationFromUnstructured(out), client.FieldOwner(FieldManager), client.ForceOwnership); err != nil {
		return nil, err
	}
	return out, nil
}

// DryRunDiff returns the fields that applying obj would change on existing.
func (m *Member) DryRunDiff(ctx context.Context, obj, existing *unstructured.Unstructured) ([]string, error) {
	out := obj.DeepCopy()
	if err := m.Client.Apply(ctx, client.ApplyConfigurationFromUnstructured(out), client.FieldOwner(FieldManager), client.ForceOwnership, client.DryRunAll); err != nil {
		return nil, err
	}
	return diff.PathsWithin(obj.Object, existing.Object, out.Object, workapply.MaxDiffPaths), nil
}

// PodSecurityEnforceLabel is the Pod Security admission label that enforces a
// standard on a namespace's pods.
const PodSecurityEnforceLabel = "pod-security.kubernetes.io/enforce"

// EnsureNamespace creates namespace ns when it does not exist.
func (m *Member) EnsureNamespace(ctx context.Context, ns string) error {
	err := m.Client.Get(ctx, client.ObjectKey{Name: ns}, &corev1.Namespace{})
	if !apierrors.IsNotFound(err) {
		return err
	}
	created := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns, Labels: map[string]string{lodestarworkv1alpha1.CreatedNamespaceLabel: "true"}}}
	if level := m.Policy.PodSecurity(); level != "" {
		// The member's policy: pods in namespaces the agent makes meet this
		// Pod Security Standard.
		created.Labels[PodSecurityEnforceLabel] = level
	}
	if err := m.Client.Create(ctx, created); err != nil && !apierrors.IsAlreadyExists(err) {
		return err
	}
	ctrl.LoggerFrom(ctx).Info("Created namespace for placed objects", "namespace", ns)
	return nil
}

// SetOwner replaces the AppliedWork among obj's owners by next (or removes it, for
// a nil next), at the resourceVersion read.
func (m *Member) SetOwner(ctx context.Context, obj *unstructured.Unstructured, applied, next *lodestarworkv1alpha1.AppliedWork) error {
	base := obj.DeepCopy()
	refs := slices.DeleteFunc(obj.GetOwnerReferences(), func(ref metav1.OwnerReference) bool { return ref.UID == applied.UID })
	if next != nil {
		refs = append(refs, workapply.OwnerReference(next))
	}
	obj.SetOwnerReferences(refs)
	return m.Client.Patch(ctx, obj, client.MergeFromWithOptions(base, client.MergeFromWithOptimisticLock{}))
}

// WriteRecords stores the list of objects the agent answers for, when it changed.
func (m *Member) WriteRecords(ctx context.Context, applied *lodestarworkv1alpha1.AppliedWork, records []lodestarworkv1alpha1.AppliedResource) error {
	if workapply.EqualRecords(applied.Status.AppliedResources, records) {
		return nil
	}
	base := applied.DeepCopy()
	applied.Status.AppliedResources = records
	if err := m.Client.Status().Patch(ctx, applied, client.MergeFromWithOptions(base, client.MergeFromWithOptimisticLock{})); err != nil {
		return fmt.Errorf("recording applied objects: %w", err)
	}
	return nil
}

// RecordDeletionPolicy keeps the Work's deletion policy on its AppliedWork (absent
// for the default, Delete), for the sweeper to honour once the Work is gone.
func (m *Member) RecordDeletionPolicy(ctx context.Context, applied *lodestarworkv1alpha1.AppliedWork, policy lodestarworkv1alpha1.DeletionPolicy, claims lodestarworkv1alpha1.ClaimPolicy) error {
	deleteClaims := claims == lodestarworkv1alpha1.ClaimsDelete
	if workapply.RecordedDeletionPolicy(applied) == policy && (workapply.RecordedClaims(applied) == lodestarworkv1alpha1.ClaimsDelete) == deleteClaims {
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
	if err := m.Client.Patch(ctx, applied, client.MergeFrom(base)); err != nil {
		return fmt.Errorf("recording the deletion policy on AppliedWork %s: %w", applied.Name, err)
	}
	return nil
}

// MarkWorkMissing sets (or with an empty since, removes) the missing-since
// annotation of an AppliedWork whose Work the hub does not have.
func (m *Member) MarkWorkMissing(ctx context.Context, applied *lodestarworkv1alpha1.AppliedWork, since string) error {
	base := applied.DeepCopy()
	if since == "" {
		delete(applied.Annotations, lodestarworkv1alpha1.WorkMissingSinceAnnotation)
	} else {
		if applied.Annotations == nil {
			applied.Annotations = map[string]string{}
		}
		applied.Annotations[lodestarworkv1alpha1.WorkMissingSinceAnnotation] = since
	}
	return m.Client.Patch(ctx, applied, client.MergeFrom(base))
}

// DeleteObject deletes a placed object while it is the one recorded (uid), in
// the background.
func (m *Member) DeleteObject(ctx context.Context, obj *unstructured.Unstructured, uid types.UID) error {
	return m.Client.Delete(ctx, obj, client.Preconditions{UID: &uid}, client.PropagationPolicy(metav1.DeletePropagationBackground))
}

// CreateAppliedWork creates a Work's AppliedWork, held by its finalizer.
func (m *Member) CreateAppliedWork(ctx context.Context, applied *lodestarworkv1alpha1.AppliedWork) error {
	controllerutil.AddFinalizer(applied, lodestarworkv1alpha1.AppliedWorkFinalizer)
	if err := m.Client.Create(ctx, applied); err != nil {
		return fmt.Errorf("creating AppliedWork: %w", err)
	}
	return nil
}

// HoldAppliedWork adds (held) or removes the AppliedWork's finalizer, which keeps
// it, and with it the objects that name it as their owner, while its Work lives.
func (m *Member) HoldAppliedWork(ctx context.Context, applied *lodestarworkv1alpha1.AppliedWork, held bool) error {
	if err := patch.SetFinalizer(ctx, m.Client, applied, lodestarworkv1alpha1.AppliedWorkFinalizer, held); err != nil {
		return fmt.Errorf("setting the finalizer of AppliedWork %s: %w", applied.Name, err)
	}
	return nil
}

// DeleteAppliedWork releases and deletes an AppliedWork whose objects are all
// removed or released.
func (m *Member) DeleteAppliedWork(ctx context.Context, applied *lodestarworkv1alpha1.AppliedWork) error {
	if err := m.HoldAppliedWork(ctx, applied, false); err != nil {
		return err
	}
	if err := m.Client.Delete(ctx, applied, client.Preconditions{UID: &applied.UID}); err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("deleting AppliedWork: %w", err)
	}
	return nil
}
