// Package memberaccess copies member-access tokens to the consumer namespaces
// that MemberAccessGrants name: for each granted cluster whose agent keeps a
// current token in its hub namespace, the Secret <namespace>/<cluster> that the
// upstream secretreader credential plugin reads. It removes the copies of
// clusters no longer granted (left the set or the selector, unjoined, token
// expired) and, through a finalizer, of deleted grants; it never touches a
// Secret that is not its copy.
package memberaccess

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/selection"
	"k8s.io/klog/v2"
	"k8s.io/utils/ptr"
	cpv1alpha1 "sigs.k8s.io/cluster-inventory-api/apis/v1alpha1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"

	placementv1alpha1 "github.com/lodestar-dev/lodestar/api/placement/v1alpha1"
	"github.com/lodestar-dev/lodestar/internal/conditions"
	"github.com/lodestar-dev/lodestar/internal/handlers"
	"github.com/lodestar-dev/lodestar/internal/lookup"
	"github.com/lodestar-dev/lodestar/internal/names"
	"github.com/lodestar-dev/lodestar/internal/patch"
	"github.com/lodestar-dev/lodestar/internal/requeue"
)

// Name is the controller's field owner.
const Name = "lodestar-memberaccess"

// Reconciler keeps the copies of one MemberAccessGrant.
type Reconciler struct {
	Client client.Client
	// Secrets reads the Secrets of member access (labelled MemberAccessLabel)
	// from a cache of their own, so that the hub caches no other Secret.
	Secrets client.Reader
	// APIReader reads a Secret in the way of a copy, which the cache does not hold.
	APIReader client.Reader
	// Scope is what this hub manager takes: the cluster sets it manages, and
	// whether it is the hub-wide manager (docs/scale.md).
	Scope lookup.Scope
}

// +kubebuilder:rbac:groups=placement.lodestar.dev,resources=memberaccessgrants,verbs=get;list;watch;update;patch
// +kubebuilder:rbac:groups=placement.lodestar.dev,resources=memberaccessgrants/status,verbs=get;patch;update
// +kubebuilder:rbac:groups=placement.lodestar.dev,resources=memberaccessgrants/finalizers,verbs=update
// +kubebuilder:rbac:groups=multicluster.x-k8s.io,resources=clusterprofiles,verbs=get;list;watch
// +kubebuilder:rbac:groups="",resources=secrets,verbs=get;list;watch;create;update;patch;delete
// +kubebuilder:rbac:groups="",resources=namespaces,verbs=get;list;watch

// Reconcile copies the grant's credentials and writes its status.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (_ ctrl.Result, retErr error) {
	grant := &placementv1alpha1.MemberAccessGrant{}
	if err := r.Client.Get(ctx, req.NamespacedName, grant); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	ctx = ctrl.LoggerInto(ctx, ctrl.LoggerFrom(ctx).WithValues("memberAccessGrant", klog.KObj(grant)))

	if !grant.DeletionTimestamp.IsZero() {
		left, err := r.removeCopies(ctx, grant, nil)
		if err != nil || left > 0 {
			return ctrl.Result{RequeueAfter: time.Second}, err
		}
		return ctrl.Result{}, patch.SetFinalizer(ctx, r.Client, grant, placementv1alpha1.MemberAccessFinalizer, false)
	}
	if err := patch.SetFinalizer(ctx, r.Client, grant, placementv1alpha1.MemberAccessFinalizer, true); err != nil {
		return ctrl.Result{}, err
	}

	st := status{}
	defer func() {
		if err := r.applyStatus(ctx, grant, st); err != nil {
			retErr = errors.Join(retErr, err)
		}
	}()
	sel, err := lookup.GrantSelector(grant.Spec.ClusterSelector)
	if err != nil {
		st.invalid = err
		_, rmErr := r.removeCopies(ctx, grant, nil)
		return ctrl.Result{}, errors.Join(rmErr, reconcile.TerminalError(err))
	}
	return r.copyCredentials(ctx, grant, sel, &st)
}

// copyCredentials copies the granted clusters' credentials into the grant's
// namespace, removes the copies no longer granted, and says when the next
// token expires.
func (r *Reconciler) copyCredentials(ctx context.Context, grant *placementv1alpha1.MemberAccessGrant, sel labels.Selector, st *status) (ctrl.Result, error) {
	clusters, err := lookup.Granted(ctx, r.Client, r.Scope.Sets, grant.Spec.ClusterSet, sel)
	if err != nil {
		return ctrl.Result{}, err
	}
	st.clusters = len(clusters)
	now := time.Now()
	credentials, err := r.credentials(ctx, clusters, now, st)
	if err != nil {
		return ctrl.Result{}, err
	}
	ns := &corev1.Namespace{}
	if err := r.Client.Get(ctx, client.ObjectKey{Name: grant.Spec.Namespace}, ns); err != nil {
		if !apierrors.IsNotFound(err) {
			return ctrl.Result{}, err
		}
		st.missingNamespace = true
		credentials = nil
	}
	keep := map[string]bool{}
	for _, cluster := range slices.Sorted(maps.Keys(credentials)) {
		copied, err := r.writeCopy(ctx, grant, cluster, credentials[cluster])
		if err != nil {
			return ctrl.Result{}, err
		}
		if !copied {
			st.conflicts = append(st.conflicts, cluster)
			continue
		}
		keep[cluster] = true
	}
	st.copied = len(keep)
	if _, err := r.removeCopies(ctx, grant, keep); err != nil {
		return ctrl.Result{}, err
	}
	// The copies go when their token expires, unless a renewed one comes first.
	var next time.Duration
	for cluster := range keep {
		next = requeue.Soonest(next, credentials[cluster].Expires.Sub(now)+time.Second)
	}
	return ctrl.Result{RequeueAfter: next}, nil
}

// credentials are the current credentials of the clusters, by cluster; the
// clusters without one are pending in st.
func (r *Reconciler) credentials(ctx context.Context, clusters []string, now time.Time, st *status) (map[string]Credential, error) {
	out := map[string]Credential{}
	for _, cluster := range clusters {
		source := &corev1.Secret{}
		err := r.Secrets.Get(ctx, client.ObjectKey{Namespace: names.ClusterNamespace(cluster), Name: placementv1alpha1.MemberAccessSecret}, source)
		if client.IgnoreNotFound(err) != nil {
			return nil, fmt.Errorf("reading the member-access Secret of %s: %w", cluster, err)
		}
		if err == nil {
			if c, ok := Current(source, now); ok {
				out[cluster] = c
				continue
			}
		}
		st.pending = append(st.pending, cluster)
	}
	return out, nil
}

// writeCopy creates or updates the grant's copy of a cluster's credential, and
// reports false when a Secret that is not that copy is in the way.
func (r *Reconciler) writeCopy(ctx context.Context, grant *placementv1alpha1.MemberAccessGrant, cluster string, c Credential) (bool, error) {
	key := client.ObjectKey{Namespace: grant.Spec.Namespace, Name: cluster}
	want := Copy(grant, cluster, c)
	existing := &corev1.Secret{}
	err := r.Secrets.Get(ctx, key, existing)
	if apierrors.IsNotFound(err) {
		// Not a copy; perhaps a Secret of someone else's.
		err = r.APIReader.Get(ctx, key, existing)
		if apierrors.IsNotFound(err) {
			if err := r.Client.Create(ctx, want); err != nil {
				return false, fmt.Errorf("creating Secret %s: %w", key, err)
			}
			ctrl.LoggerFrom(ctx).Info("Copied a member-access credential", "secret", key, "expires", c.Expires)
			return true, nil
		}
	}
	if err != nil {
		return false, fmt.Errorf("reading Secret %s: %w", key, err)
	}
	if !IsCopyOf(existing, grant.Name) {
		return false, nil
	}
	if maps.EqualFunc(existing.Data, want.Data, func(a, b []byte) bool { return string(a) == string(b) }) &&
		existing.Annotations[placementv1alpha1.MemberAccessExpiresAnnotation] == want.Annotations[placementv1alpha1.MemberAccessExpiresAnnotation] {
		return true, nil
	}
	patch := client.MergeFromWithOptions(existing.DeepCopy(), client.MergeFromWithOptimisticLock{})
	existing.Data = want.Data
	existing.Annotations = want.Annotations
	if err := r.Client.Patch(ctx, existing, patch); err != nil {
		return false, fmt.Errorf("updating Secret %s: %w", key, err)
	}
	return true, nil
}

// removeCopies deletes the grant's copies of clusters not in keep, and returns
// how many of its copies were still there.
func (r *Reconciler) removeCopies(ctx context.Context, grant *placementv1alpha1.MemberAccessGrant, keep map[string]bool) (int, error) {
	list := &corev1.SecretList{}
	if err := r.Secrets.List(ctx, list, client.MatchingLabels{
		placementv1alpha1.MemberAccessLabel: "copy", placementv1alpha1.MemberAccessGrantLabel: grant.Name,
	}); err != nil {
		return 0, fmt.Errorf("listing the grant's copies: %w", err)
	}
	var errs []error
	left := 0
	for i := range list.Items {
		s := &list.Items[i]
		cluster := s.Labels[placementv1alpha1.MemberAccessClusterLabel]
		if keep[cluster] && s.Namespace == grant.Spec.Namespace {
			continue
		}
		left++
		err := r.Client.Delete(ctx, s, client.Preconditions{UID: &s.UID})
		if client.IgnoreNotFound(err) != nil && !apierrors.IsConflict(err) {
			errs = append(errs, fmt.Errorf("deleting Secret %s: %w", client.ObjectKeyFromObject(s), err))
			continue
		}
		ctrl.LoggerFrom(ctx).Info("Removed a member-access credential", "secret", klog.KObj(s))
	}
	return left, errors.Join(errs...)
}

// status is what a reconcile found.
type status struct {
	invalid          error
	clusters, copied int
	pending          []string
	conflicts        []string
	missingNamespace bool
}

func (r *Reconciler) applyStatus(ctx context.Context, grant *placementv1alpha1.MemberAccessGrant, st status) error {
	ready := Ready(grant.Spec.Namespace, st.invalid, st.missingNamespace, st.pending, st.conflicts)
	ready.ObservedGeneration = grant.Generation
	if conditions.Same(grant.Status.Conditions, ready) && grant.Status.ObservedGeneration == grant.Generation &&
		ptr.Deref(grant.Status.Clusters, -1) == int32(st.clusters) && ptr.Deref(grant.Status.Credentials, -1) == int32(st.copied) {
		return nil
	}
	out := &placementv1alpha1.MemberAccessGrant{ObjectMeta: metav1.ObjectMeta{Name: grant.Name}}
	out.Status = placementv1alpha1.MemberAccessGrantStatus{
		Conditions:         []metav1.Condition{conditions.Merge(grant.Status.Conditions, ready)},
		ObservedGeneration: grant.Generation,
		Clusters:           ptr.To(int32(st.clusters)),
		Credentials:        ptr.To(int32(st.copied)),
	}
	return patch.ApplyStatus(ctx, r.Client, out, Name)
}

// Ready is the grant's Ready condition.
func Ready(namespace string, invalid error, missingNamespace bool, pending, conflicts []string) metav1.Condition {
	c := metav1.Condition{Type: placementv1alpha1.ReadyCondition, Status: metav1.ConditionFalse}
	switch {
	case invalid != nil:
		c.Reason, c.Message = placementv1alpha1.ReasonInvalidGrantSelector, invalid.Error()
	case missingNamespace:
		c.Reason, c.Message = placementv1alpha1.ReasonCredentialsPending, "namespace "+namespace+" does not exist"
	case len(conflicts) > 0:
		c.Reason = placementv1alpha1.ReasonSecretConflict
		c.Message = fmt.Sprintf("Secrets %s in namespace %s are not Lodestar's copies and are left alone", strings.Join(conflicts, ", "), namespace)
	case len(pending) > 0:
		c.Reason = placementv1alpha1.ReasonCredentialsPending
		c.Message = fmt.Sprintf("no current member-access credential of %s (member access off on its agent, or not published yet)", strings.Join(pending, ", "))
	default:
		c.Status, c.Reason = metav1.ConditionTrue, placementv1alpha1.ReasonCredentialsCopied
		c.Message = "every granted cluster's credential is in namespace " + namespace
	}
	return c
}

// SetupWithManager registers the controller and the cache of member-access
// Secrets it reads: grants, ClusterProfiles coming, going and relabelled, and
// the Secrets (a renewed token, a copy changed or deleted by someone else).
func (r *Reconciler) SetupWithManager(mgr ctrl.Manager) error {
	// Grants are few, and each reconcile reads caches: a change any grant may
	// care about enqueues them all.
	allGrants := handlers.All(mgr.GetClient(), func() client.ObjectList { return &placementv1alpha1.MemberAccessGrantList{} })
	secrets, err := cache.New(mgr.GetConfig(), cache.Options{
		Scheme: mgr.GetScheme(), Mapper: mgr.GetRESTMapper(), HTTPClient: mgr.GetHTTPClient(),
		ByObject: map[client.Object]cache.ByObject{&corev1.Secret{}: {Label: labels.NewSelector().Add(mustRequirement())}},
	})
	if err != nil {
		return fmt.Errorf("creating the member-access Secret cache: %w", err)
	}
	if err := mgr.Add(secrets); err != nil {
		return err
	}
	r.Secrets = secrets
	if r.APIReader == nil {
		r.APIReader = mgr.GetAPIReader()
	}
	return ctrl.NewControllerManagedBy(mgr).
		Named("memberaccess").
		For(&placementv1alpha1.MemberAccessGrant{}, builder.WithPredicates(predicate.GenerationChangedPredicate{})).
		Watches(&cpv1alpha1.ClusterProfile{}, handler.EnqueueRequestsFromMapFunc(allGrants),
			builder.WithPredicates(predicate.Or(predicate.LabelChangedPredicate{}, predicate.GenerationChangedPredicate{}))).
		Watches(&corev1.Namespace{}, handler.EnqueueRequestsFromMapFunc(allGrants),
			// A consumer namespace created or deleted; its updates do not matter.
			builder.WithPredicates(predicate.Funcs{UpdateFunc: func(event.UpdateEvent) bool { return false }})).
		WatchesRawSource(source.Kind(secrets, &corev1.Secret{}, handler.TypedEnqueueRequestsFromMapFunc(func(ctx context.Context, s *corev1.Secret) []reconcile.Request {
			return allGrants(ctx, s)
		}))).
		Complete(lookup.OnlySets(r.Scope, mgr.GetClient(), r, func() *placementv1alpha1.MemberAccessGrant { return &placementv1alpha1.MemberAccessGrant{} },
			func(o *placementv1alpha1.MemberAccessGrant) string { return o.Spec.ClusterSet }))
}

func mustRequirement() labels.Requirement {
	req, err := labels.NewRequirement(placementv1alpha1.MemberAccessLabel, selection.Exists, nil)
	if err != nil {
		panic(err) // A static requirement cannot fail.
	}
	return *req
}
