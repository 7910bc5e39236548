// Package consumeraccess keeps what a ConsumerAccessGrant makes
// (internal/consumeraccess): the hub role and binding that let its consumers
// use the tunnel access provider of its clusters, and on each of those
// clusters a Work carrying a ClusterRole of its rules bound to the consumers'
// member identities. It withdraws both from clusters that leave the grant and,
// through a finalizer, when the grant is deleted; its status says which
// members hold the rules.
package consumeraccess

import (
	"context"
	"errors"
	"fmt"
	"time"

	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/klog/v2"
	"k8s.io/utils/ptr"
	cpv1alpha1 "sigs.k8s.io/cluster-inventory-api/apis/v1alpha1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	workv1alpha1 "sigs.k8s.io/work-api/pkg/apis/v1alpha1"

	placementv1alpha1 "github.com/lodestar-dev/lodestar/api/placement/v1alpha1"
	"github.com/lodestar-dev/lodestar/internal/conditions"
	"github.com/lodestar-dev/lodestar/internal/consumeraccess"
	"github.com/lodestar-dev/lodestar/internal/handlers"
	"github.com/lodestar-dev/lodestar/internal/lookup"
	"github.com/lodestar-dev/lodestar/internal/patch"
)

// Name is the controller's field owner.
const Name = "lodestar-consumeraccess"

// Reconciler keeps what one ConsumerAccessGrant makes.
type Reconciler struct {
	// APIReader reads the hub's RBAC objects of a grant, which the cache does not hold.
	APIReader client.Reader
	// Client reads grants, ClusterProfiles and the grants' Works (the
	// manager's cache holds this manager's Works) and writes.
	Client client.Client
	// Scope is what this hub manager takes (docs/scale.md): grants of its
	// cluster sets, whose Works carry its name.
	Scope lookup.Scope
}

// +kubebuilder:rbac:groups=placement.lodestar.dev,resources=consumeraccessgrants,verbs=get;list;watch;update;patch
// +kubebuilder:rbac:groups=placement.lodestar.dev,resources=consumeraccessgrants/status,verbs=get;patch;update
// +kubebuilder:rbac:groups=placement.lodestar.dev,resources=consumeraccessgrants/finalizers,verbs=update
// +kubebuilder:rbac:groups=rbac.authorization.k8s.io,resources=clusterroles;clusterrolebindings,verbs=get;create;update;patch;delete
// +kubebuilder:rbac:groups=debug.lodestar.dev,resources=clusters/proxy,verbs=get;list;watch;create;update;patch;delete
// +kubebuilder:rbac:groups=multicluster.x-k8s.io,resources=works,verbs=get;list;watch;create;update;patch;delete

// Reconcile writes the grant's hub role and Works and its status.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (_ ctrl.Result, retErr error) {
	grant := &placementv1alpha1.ConsumerAccessGrant{}
	if err := r.Client.Get(ctx, req.NamespacedName, grant); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	ctx = ctrl.LoggerInto(ctx, ctrl.LoggerFrom(ctx).WithValues("consumerAccessGrant", klog.KObj(grant)))
	if !grant.DeletionTimestamp.IsZero() {
		return r.withdraw(ctx, grant)
	}
	if err := patch.SetFinalizer(ctx, r.Client, grant, placementv1alpha1.ConsumerAccessFinalizer, true); err != nil {
		return ctrl.Result{}, err
	}
	// An invalid selector selects no cluster: what it granted is withdrawn.
	var clusters []string
	sel, invalid := lookup.GrantSelector(grant.Spec.ClusterSelector)
	if invalid == nil {
		var err error
		if clusters, err = lookup.Granted(ctx, r.Client, r.Scope.Sets, grant.Spec.ClusterSet, sel); err != nil {
			return ctrl.Result{}, err
		}
	}
	if err := r.writeHub(ctx, grant, clusters); err != nil {
		return ctrl.Result{}, err
	}
	works, err := r.writeWorks(ctx, grant, clusters)
	if err != nil {
		return ctrl.Result{}, err
	}
	if err := r.applyStatus(ctx, grant, clusters, invalid, works); err != nil {
		return ctrl.Result{}, err
	}
	if invalid != nil {
		return ctrl.Result{}, reconcile.TerminalError(invalid)
	}
	return ctrl.Result{}, nil
}

// withdraw removes the grant's hub role and Works, and its finalizer once the
// Works are gone (their agents removed the members' roles).
func (r *Reconciler) withdraw(ctx context.Context, grant *placementv1alpha1.ConsumerAccessGrant) (ctrl.Result, error) {
	if err := r.deleteHub(ctx, grant.Name); err != nil {
		return ctrl.Result{}, err
	}
	have, err := r.works(ctx, grant.Name)
	if err != nil {
		return ctrl.Result{}, err
	}
	if err := r.removeWorks(ctx, have, nil); err != nil || len(have) > 0 {
		return ctrl.Result{RequeueAfter: 2 * time.Second}, err
	}
	return ctrl.Result{}, patch.SetFinalizer(ctx, r.Client, grant, placementv1alpha1.ConsumerAccessFinalizer, false)
}

// writeHub applies the grant's hub ClusterRole (the tunnel provider of its
// clusters) and its binding to the consumers, where the hub's differ (read
// from the API server: the manager caches no RBAC). A grant reconciles at
// each of its Works' status changes; most change nothing here.
func (r *Reconciler) writeHub(ctx context.Context, grant *placementv1alpha1.ConsumerAccessGrant, clusters []string) error {
	role, binding := consumeraccess.HubRole(grant.Name, clusters), consumeraccess.HubBinding(grant)
	haveRole, haveBinding := &rbacv1.ClusterRole{}, &rbacv1.ClusterRoleBinding{}
	for _, w := range []struct {
		want, have client.Object
		same       func() bool
	}{
		{role, haveRole, func() bool { return equality.Semantic.DeepEqual(haveRole.Rules, role.Rules) }},
		{binding, haveBinding, func() bool {
			return haveBinding.RoleRef == binding.RoleRef && equality.Semantic.DeepEqual(haveBinding.Subjects, binding.Subjects)
		}},
	} {
		err := r.APIReader.Get(ctx, client.ObjectKeyFromObject(w.want), w.have)
		if client.IgnoreNotFound(err) != nil {
			return fmt.Errorf("reading the hub's %s %s: %w", w.want.GetObjectKind().GroupVersionKind().Kind, w.want.GetName(), err)
		}
		if err == nil && w.same() && w.have.GetLabels()[placementv1alpha1.ConsumerAccessGrantLabel] == grant.Name {
			continue
		}
		if err := patch.Apply(ctx, r.Client, w.want, Name); err != nil {
			return fmt.Errorf("writing the hub's %s %s: %w", w.want.GetObjectKind().GroupVersionKind().Kind, w.want.GetName(), err)
		}
	}
	return nil
}

// deleteHub deletes the grant's hub role and binding.
func (r *Reconciler) deleteHub(ctx context.Context, grant string) error {
	name := consumeraccess.RoleName(grant)
	for _, obj := range []client.Object{&rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: name}}, &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: name}}} {
		if err := r.Client.Delete(ctx, obj); client.IgnoreNotFound(err) != nil {
			return fmt.Errorf("deleting the hub's %T %s: %w", obj, name, err)
		}
	}
	return nil
}

// works are the grant's Works as the manager's cache holds them.
func (r *Reconciler) works(ctx context.Context, grant string) ([]workv1alpha1.Work, error) {
	list := &workv1alpha1.WorkList{}
	if err := r.Client.List(ctx, list, client.MatchingLabels{placementv1alpha1.ConsumerAccessGrantLabel: grant}); err != nil {
		return nil, fmt.Errorf("listing the grant's Works: %w", err)
	}
	return list.Items, nil
}

// writeWorks writes the grant's Work to each cluster where the hub's is
// missing or carries something else, removes it from the clusters it no
// longer grants, and returns, by cluster, the Works that were already
// current (those just written are pending).
func (r *Reconciler) writeWorks(ctx context.Context, grant *placementv1alpha1.ConsumerAccessGrant, clusters []string) (map[string]*workv1alpha1.Work, error) {
	have, err := r.works(ctx, grant.Name)
	if err != nil {
		return nil, err
	}
	byNamespace := map[string]*workv1alpha1.Work{}
	for i := range have {
		byNamespace[have[i].Namespace] = &have[i]
	}
	keep, current := map[string]bool{}, map[string]*workv1alpha1.Work{}
	for _, cluster := range clusters {
		w, err := consumeraccess.Work(grant, cluster, r.Scope.ManagerName())
		if err != nil {
			return nil, err
		}
		keep[w.Namespace] = true
		if existing := byNamespace[w.Namespace]; existing != nil && consumeraccess.Current(existing, w) {
			current[cluster] = existing
			continue
		}
		if err := patch.Apply(ctx, r.Client, w, Name); err != nil {
			return nil, fmt.Errorf("writing Work %s: %w", klog.KObj(w), err)
		}
	}
	return current, r.removeWorks(ctx, have, keep)
}

// removeWorks deletes the Works of have outside the namespaces in keep.
func (r *Reconciler) removeWorks(ctx context.Context, have []workv1alpha1.Work, keep map[string]bool) error {
	var errs []error
	for i := range have {
		w := &have[i]
		if keep[w.Namespace] || !w.DeletionTimestamp.IsZero() {
			continue
		}
		if err := r.Client.Delete(ctx, w); client.IgnoreNotFound(err) != nil {
			errs = append(errs, fmt.Errorf("deleting Work %s: %w", klog.KObj(w), err))
			continue
		}
		ctrl.LoggerFrom(ctx).Info("Withdrew the grant's rules from a cluster", "work", klog.KObj(w))
	}
	return errors.Join(errs...)
}

// applyStatus writes how many clusters the grant selects, how many hold its
// rules, and its Ready condition.
func (r *Reconciler) applyStatus(ctx context.Context, grant *placementv1alpha1.ConsumerAccessGrant, clusters []string, invalid error, works map[string]*workv1alpha1.Work) error {
	failed := map[string]string{}
	var pending []string
	applied := 0
	for _, cluster := range clusters {
		w := works[cluster]
		if w == nil {
			pending = append(pending, cluster)
			continue
		}
		ok, failure := consumeraccess.Applied(w)
		switch {
		case ok:
			applied++
		case failure != "":
			failed[cluster] = failure
		default:
			pending = append(pending, cluster)
		}
	}
	ready := consumeraccess.Ready(invalid, failed, pending)
	ready.ObservedGeneration = grant.Generation
	if conditions.Same(grant.Status.Conditions, ready) && grant.Status.ObservedGeneration == grant.Generation &&
		ptr.Deref(grant.Status.Clusters, -1) == int32(len(clusters)) && ptr.Deref(grant.Status.Applied, -1) == int32(applied) {
		return nil
	}
	out := &placementv1alpha1.ConsumerAccessGrant{ObjectMeta: metav1.ObjectMeta{Name: grant.Name}}
	out.Status = placementv1alpha1.ConsumerAccessGrantStatus{
		Conditions:         []metav1.Condition{conditions.Merge(grant.Status.Conditions, ready)},
		ObservedGeneration: grant.Generation,
		Clusters:           ptr.To(int32(len(clusters))),
		Applied:            ptr.To(int32(applied)),
	}
	return patch.ApplyStatus(ctx, r.Client, out, Name)
}

// SetupWithManager registers the controller: grants, ClusterProfiles coming,
// going and relabelled, and the grants' Works (applied, refused, gone).
func (r *Reconciler) SetupWithManager(mgr ctrl.Manager) error {
	// Grants are few, and each reconcile reads caches: a change any grant may
	// care about enqueues them all.
	allGrants := handlers.All(mgr.GetClient(), func() client.ObjectList { return &placementv1alpha1.ConsumerAccessGrantList{} })
	return ctrl.NewControllerManagedBy(mgr).
		Named("consumeraccess").
		For(&placementv1alpha1.ConsumerAccessGrant{}, builder.WithPredicates(predicate.GenerationChangedPredicate{})).
		Watches(&cpv1alpha1.ClusterProfile{}, handler.EnqueueRequestsFromMapFunc(allGrants),
			builder.WithPredicates(predicate.Or(predicate.LabelChangedPredicate{}, predicate.GenerationChangedPredicate{}))).
		Watches(&workv1alpha1.Work{}, handler.EnqueueRequestsFromMapFunc(func(_ context.Context, o client.Object) []reconcile.Request {
			grant := o.GetLabels()[placementv1alpha1.ConsumerAccessGrantLabel]
			if grant == "" {
				return nil
			}
			return []reconcile.Request{{NamespacedName: client.ObjectKey{Name: grant}}}
		})).
		Complete(lookup.OnlySets(r.Scope, mgr.GetClient(), r, func() *placementv1alpha1.ConsumerAccessGrant { return &placementv1alpha1.ConsumerAccessGrant{} },
			func(o *placementv1alpha1.ConsumerAccessGrant) string { return o.Spec.ClusterSet }))
}
