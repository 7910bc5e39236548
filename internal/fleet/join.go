// Package fleet registers member clusters with the hub and changes their place in
// the fleet (cordon, drain, unjoin). The kubectl-lodestar plugin and the tests use
// it, so that what the tests prove is what an operator runs.
package fleet

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	cpv1alpha1 "sigs.k8s.io/cluster-inventory-api/apis/v1alpha1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	placementv1alpha1 "github.com/lodestar-dev/lodestar/api/placement/v1alpha1"
	"github.com/lodestar-dev/lodestar/config"
	"github.com/lodestar-dev/lodestar/internal/agentidentity"
	"github.com/lodestar-dev/lodestar/internal/lookup"
	"github.com/lodestar-dev/lodestar/internal/names"
	"github.com/lodestar-dev/lodestar/internal/patch"
	"github.com/lodestar-dev/lodestar/internal/teardown"
)

// maxNameLength keeps lodestar-cluster-<name> a valid namespace name.
var maxNameLength = validation.DNS1123LabelMaxLength - len(names.ClusterNamespace(""))

// JoinOptions describe a cluster to register.
type JoinOptions struct {
	// Name of the cluster: its ClusterProfile's name.
	Name string
	// ClusterSet is the cluster-set namespace of its ClusterProfile.
	ClusterSet string
	// Labels of the ClusterProfile (used by cluster selectors).
	Labels map[string]string
	// ClusterID is the member's kube-system namespace UID (id.k8s.io), when known:
	// a later join of the same name from another cluster is refused.
	ClusterID string
	// TokenTTL is the lifetime of the first token (at least 10 minutes).
	TokenTTL time.Duration
}

// ConflictError says that the name is taken by another cluster or identity.
type ConflictError struct{ msg string }

func (e *ConflictError) Error() string { return e.msg }

// Join registers a cluster with the hub, or brings an existing registration of the
// same cluster up to date: its ClusterProfile in the cluster set, its namespace
// lodestar-cluster-<name>, the agent's ServiceAccount with its Roles (Works, Lease and
// token in its namespace; its own ClusterProfile's status in the cluster set), the
// empty Secret for its member-access token, and
// returns a connection to the hub as that identity, with a token of opts.TokenTTL.
//
// A join that fails after it started to register a new cluster removes what it
// made: a half-registered cluster is never left for Placements to choose.
func Join(ctx context.Context, hub *rest.Config, c client.Client, opts JoinOptions) (_ *rest.Config, err error) {
	if errs := validation.IsDNS1123Label(opts.Name); len(errs) > 0 {
		return nil, fmt.Errorf("cluster name %q: %v", opts.Name, errs)
	}
	if slices.Contains(placementv1alpha1.ReservedClusterNames, opts.Name) {
		return nil, fmt.Errorf("cluster name %q is reserved: choose another", opts.Name)
	}
	if len(opts.Name) > maxNameLength {
		return nil, fmt.Errorf("cluster name %q: at most %d characters (its hub namespace is %s)", opts.Name, maxNameLength, names.ClusterNamespace(opts.Name))
	}
	if opts.ClusterSet == "" {
		opts.ClusterSet = placementv1alpha1.DefaultClusterSet
	}
	if opts.TokenTTL == 0 {
		opts.TokenTTL = agentidentity.DefaultTokenTTL
	}
	if err := checkFree(ctx, c, opts); err != nil {
		return nil, err
	}

	ns := names.ClusterNamespace(opts.Name)
	existing := &cpv1alpha1.ClusterProfile{}
	switch getErr := c.Get(ctx, client.ObjectKey{Namespace: opts.ClusterSet, Name: opts.Name}, existing); {
	case apierrors.IsNotFound(getErr):
		// A new cluster: undone if the join fails.
		defer func() {
			if err != nil {
				err = errors.Join(err, undoJoin(context.WithoutCancel(ctx), c, opts))
			}
		}()
	case getErr != nil:
		return nil, fmt.Errorf("reading ClusterProfile %s/%s: %w", opts.ClusterSet, opts.Name, getErr)
	}
	if err := createIfMissing(ctx, c, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: opts.ClusterSet}}); err != nil {
		return nil, err
	}
	if err := reserveNamespace(ctx, c, opts.Name, ns); err != nil {
		return nil, err
	}
	profile := &cpv1alpha1.ClusterProfile{ObjectMeta: metav1.ObjectMeta{Name: opts.Name, Namespace: opts.ClusterSet}}
	if _, err := controllerutil.CreateOrPatch(ctx, c, profile, func() error {
		if profile.Labels == nil {
			profile.Labels = map[string]string{}
		}
		maps.Copy(profile.Labels, opts.Labels)
		profile.Labels[cpv1alpha1.LabelClusterManagerKey] = placementv1alpha1.ClusterManagerName
		profile.Labels[placementv1alpha1.WorkNamespaceLabel] = ns
		if profile.Annotations == nil {
			profile.Annotations = map[string]string{}
		}
		profile.Annotations[placementv1alpha1.AgentIdentityAnnotation] = agentidentity.User(opts.Name)
		if opts.ClusterID != "" {
			profile.Annotations[placementv1alpha1.ClusterIDAnnotation] = opts.ClusterID
		}
		controllerutil.AddFinalizer(profile, placementv1alpha1.ClusterCleanupFinalizer)
		profile.Spec.ClusterManager.Name = placementv1alpha1.ClusterManagerName
		if profile.Spec.DisplayName == "" {
			profile.Spec.DisplayName = opts.Name
		}
		return nil
	}); err != nil {
		return nil, fmt.Errorf("writing ClusterProfile %s/%s: %w", opts.ClusterSet, opts.Name, err)
	}

	if err := grant(ctx, c, opts, ns); err != nil {
		return nil, err
	}
	// The Secret in which an agent with member access keeps its member token:
	// the agent may write only it, and RBAC cannot let it create only one name.
	if err := createIfMissing(ctx, c, &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: placementv1alpha1.MemberAccessSecret, Namespace: ns,
			Labels: map[string]string{placementv1alpha1.MemberAccessLabel: "source"}},
		Type: corev1.SecretTypeOpaque,
	}); err != nil {
		return nil, err
	}
	return AgentConfig(ctx, hub, opts.Name, opts.TokenTTL)
}

// undoJoin removes what a failed join of a new cluster made: its ClusterProfile
// (with the cleanup finalizer, which no Work needs yet) and its hub side
// (teardown.RemoveHubSide). The profile is deleted before its finalizer is removed: the
// hub's cleanup controller adds the finalizer to a profile that lacks it, but
// nothing can add one to a profile being deleted.
func undoJoin(ctx context.Context, c client.Client, opts JoinOptions) error {
	var errs []error
	key := client.ObjectKey{Namespace: opts.ClusterSet, Name: opts.Name}
	profile := &cpv1alpha1.ClusterProfile{}
	if err := c.Get(ctx, key, profile); err == nil {
		errs = append(errs, client.IgnoreNotFound(c.Delete(ctx, profile)))
		if err := c.Get(ctx, key, profile); err == nil {
			errs = append(errs, patch.SetFinalizer(ctx, c, profile, placementv1alpha1.ClusterCleanupFinalizer, false))
		} else if !apierrors.IsNotFound(err) {
			errs = append(errs, err)
		}
	} else if !apierrors.IsNotFound(err) {
		errs = append(errs, err)
	}
	_, err := teardown.RemoveHubSide(ctx, c, opts.ClusterSet, opts.Name)
	if err := errors.Join(append(errs, err)...); err != nil {
		return fmt.Errorf("undoing the failed join of %s (remove it with kubectl lodestar unjoin %s): %w", opts.Name, opts.Name, err)
	}
	return nil
}

// checkFree refuses a join whose name belongs to another cluster: a ClusterProfile
// of that name managed by someone else, in another cluster set, for another agent
// identity, or recorded with another cluster ID; and a join of a member (by its
// cluster ID) that is already joined under another name.
func checkFree(ctx context.Context, c client.Client, opts JoinOptions) error {
	list := &cpv1alpha1.ClusterProfileList{}
	if err := c.List(ctx, list); err != nil {
		return fmt.Errorf("listing ClusterProfiles: %w", err)
	}
	for i := range list.Items {
		p := &list.Items[i]
		if id := p.Annotations[placementv1alpha1.ClusterIDAnnotation]; p.Name != opts.Name && opts.ClusterID != "" && id == opts.ClusterID &&
			p.Spec.ClusterManager.Name == placementv1alpha1.ClusterManagerName {
			return &ConflictError{fmt.Sprintf("the member with cluster ID %s is already joined as %q (ClusterProfile %s/%s): one member, one name; unjoin it first",
				id, p.Name, p.Namespace, p.Name)}
		}
		if p.Name != opts.Name {
			continue
		}
		where := p.Namespace + "/" + p.Name
		switch {
		case p.Namespace != opts.ClusterSet:
			return &ConflictError{fmt.Sprintf("cluster %q is already registered in cluster set %q (ClusterProfile %s); cluster names are unique across sets: unjoin it there first or choose another name", opts.Name, p.Namespace, where)}
		case p.Spec.ClusterManager.Name != placementv1alpha1.ClusterManagerName:
			return &ConflictError{fmt.Sprintf("ClusterProfile %s is managed by %q, not %s: refusing to take it over", where, p.Spec.ClusterManager.Name, placementv1alpha1.ClusterManagerName)}
		case p.Annotations[placementv1alpha1.AgentIdentityAnnotation] != "" && p.Annotations[placementv1alpha1.AgentIdentityAnnotation] != agentidentity.User(opts.Name):
			return &ConflictError{fmt.Sprintf("ClusterProfile %s belongs to agent identity %s, not %s: unjoin it first", where, p.Annotations[placementv1alpha1.AgentIdentityAnnotation], agentidentity.User(opts.Name))}
		case opts.ClusterID != "" && p.Annotations[placementv1alpha1.ClusterIDAnnotation] != "" && p.Annotations[placementv1alpha1.ClusterIDAnnotation] != opts.ClusterID:
			return &ConflictError{fmt.Sprintf("cluster %q is registered for the member with cluster ID %s, not %s: another cluster already uses this name; unjoin it first or choose another name", opts.Name, p.Annotations[placementv1alpha1.ClusterIDAnnotation], opts.ClusterID)}
		}
	}
	return nil
}

// grant writes the agent's ServiceAccount and its two Roles with their bindings.
func grant(ctx context.Context, c client.Client, opts JoinOptions, ns string) error {
	nsRules, err := config.AgentHubRules()
	if err != nil {
		return err
	}
	profileRules, err := config.AgentClusterProfileRules()
	if err != nil {
		return err
	}
	// The ClusterProfile rules apply to this cluster's profile only.
	for i := range profileRules {
		profileRules[i].ResourceNames = []string{opts.Name}
	}
	subject := rbacv1.Subject{Kind: rbacv1.ServiceAccountKind, Name: agentidentity.ServiceAccount, Namespace: ns}
	if err := createIfMissing(ctx, c, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: agentidentity.ServiceAccount, Namespace: ns}}); err != nil {
		return err
	}
	for _, r := range []struct {
		meta  metav1.ObjectMeta
		rules []rbacv1.PolicyRule
	}{
		{metav1.ObjectMeta{Name: agentidentity.ServiceAccount, Namespace: ns}, nsRules},
		{metav1.ObjectMeta{Name: agentidentity.ProfileRoleName(opts.Name), Namespace: opts.ClusterSet}, profileRules},
	} {
		role := &rbacv1.Role{ObjectMeta: r.meta}
		if _, err := controllerutil.CreateOrUpdate(ctx, c, role, func() error { role.Rules = r.rules; return nil }); err != nil {
			return fmt.Errorf("writing Role %s/%s: %w", r.meta.Namespace, r.meta.Name, err)
		}
		binding := &rbacv1.RoleBinding{ObjectMeta: r.meta}
		if _, err := controllerutil.CreateOrUpdate(ctx, c, binding, func() error {
			binding.RoleRef = rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: r.meta.Name}
			binding.Subjects = []rbacv1.Subject{subject}
			return nil
		}); err != nil {
			return fmt.Errorf("writing RoleBinding %s/%s: %w", r.meta.Namespace, r.meta.Name, err)
		}
	}
	return nil
}

// AgentConfig returns a connection to the hub as the cluster's agent, with a new
// token of the given lifetime.
func AgentConfig(ctx context.Context, hub *rest.Config, cluster string, ttl time.Duration) (*rest.Config, error) {
	cs, err := kubernetes.NewForConfig(hub)
	if err != nil {
		return nil, err
	}
	token, err := agentidentity.RequestToken(ctx, cs, names.ClusterNamespace(cluster), ttl)
	if err != nil {
		return nil, err
	}
	cfg := rest.AnonymousClientConfig(hub)
	cfg.BearerToken = token
	return cfg, nil
}

func createIfMissing(ctx context.Context, c client.Client, obj client.Object) error {
	if err := c.Create(ctx, obj); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("creating %T %s: %w", obj, client.ObjectKeyFromObject(obj), err)
	}
	return nil
}

// reserveNamespace creates the cluster's hub namespace marked as Lodestar's, or
// refuses a namespace of that name that exists without the mark: it is someone
// else's, and would be deleted with the cluster.
func reserveNamespace(ctx context.Context, c client.Client, cluster, ns string) error {
	err := lookup.Reserve(ctx, c, ns, placementv1alpha1.ReservedForCluster)
	var notOurs *lookup.NotReservedError
	if errors.As(err, &notOurs) {
		return &ConflictError{fmt.Sprintf("%v: cluster %q cannot use it; choose another name or remove the namespace", err, cluster)}
	}
	return err
}

// IsConflict tells whether err refuses a join because the name is taken.
func IsConflict(err error) bool {
	var c *ConflictError
	return errors.As(err, &c)
}
