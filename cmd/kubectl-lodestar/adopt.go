package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"

	"github.com/spf13/cobra"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/restmapper"
	"k8s.io/client-go/tools/clientcmd"
	aboutv1alpha1 "sigs.k8s.io/about-api/pkg/apis/v1alpha1"
	cpv1alpha1 "sigs.k8s.io/cluster-inventory-api/apis/v1alpha1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	placementv1alpha1 "github.com/lodestar-dev/lodestar/api/placement/v1alpha1"
	"github.com/lodestar-dev/lodestar/internal/adopt"
	"github.com/lodestar-dev/lodestar/internal/message"
	"github.com/lodestar-dev/lodestar/internal/scheme"
)

// wholeNamespace are the kinds `adopt --all` takes from a member namespace.
var wholeNamespace = []schema.GroupVersionKind{
	{Group: "apps", Version: "v1", Kind: "Deployment"}, {Group: "apps", Version: "v1", Kind: "StatefulSet"},
	{Group: "apps", Version: "v1", Kind: "DaemonSet"}, {Group: "batch", Version: "v1", Kind: "CronJob"},
	{Version: "v1", Kind: "Service"}, {Version: "v1", Kind: "ConfigMap"}, {Version: "v1", Kind: "Secret"},
	{Version: "v1", Kind: "ServiceAccount"}, {Version: "v1", Kind: "PersistentVolumeClaim"},
	{Group: "networking.k8s.io", Version: "v1", Kind: "Ingress"}, {Group: "policy", Version: "v1", Kind: "PodDisruptionBudget"},
}

// adoptLong is adopt's help.
const adoptLong = `Adopt objects that already run on member clusters: write each as the hub
object (cleaned of status and of what belongs to the member), and a Placement
pinned to the members that run them, whose agents take the copies over
(applyStrategy takeover IfNoDiff) without changing them, so that nothing
restarts. Where the members' copies differ, the hub object is the first
member's (by name) and the others' differences become the Placement's
overrides, listed as they are found; a member without an object gets a delete
override for it. --all adopts every Deployment, StatefulSet, DaemonSet,
CronJob, Service, ConfigMap, Secret, ServiceAccount, PersistentVolumeClaim,
Ingress and PodDisruptionBudget of the namespace (not what the member's
controllers make, nor what every namespace has). The hub namespace must exist
and be bound to the members' cluster set. --dry-run prints what would be
written (docs/adopt.md).`

// newAdoptCommand is `kubectl lodestar adopt`.
func newAdoptCommand(o *options) *cobra.Command {
	var (
		from      map[string]string
		all       bool
		placement string
		dryRun    bool
	)
	cmd := &cobra.Command{
		Use:   "adopt (<kind>/<name>... | --all) --from <cluster>=<kubeconfig>...",
		Short: "Take workloads that already run on members under Lodestar, restarting nothing",
		Long:  adoptLong,
		Example: `  kubectl lodestar adopt deployment/web configmap/web-settings -n shop \
      --from member-1=member-1.kubeconfig --from member-2=member-2.kubeconfig
  kubectl lodestar adopt --all -n shop --from member-1=member-1.kubeconfig --dry-run`,
		RunE: func(cmd *cobra.Command, args []string) error {
			if len(from) == 0 {
				return errors.New("--from <cluster>=<kubeconfig> names the members to adopt from, at least one")
			}
			if all == (len(args) > 0) {
				return errors.New("name the objects to adopt as <kind>/<name>, or give --all")
			}
			hub, ns, err := o.hubIn()
			if err != nil {
				return err
			}
			a := &adoption{namespace: ns, from: from, out: o.Out, seen: map[string]bool{}}
			if err := a.checkMembers(cmd.Context(), hub); err != nil {
				return err
			}
			if err := a.read(cmd.Context(), args); err != nil {
				return err
			}
			if placement == "" {
				placement = "adopted-" + a.objects[0].GetName()
				if all {
					placement = "adopted"
				}
			}
			p, err := a.plan(placement)
			if err != nil {
				return err
			}
			if dryRun {
				return a.print(p)
			}
			return a.write(cmd.Context(), hub, p)
		},
	}
	cmd.Flags().StringToStringVar(&from, "from", nil, "A member to adopt from and the path of its kubeconfig, as <cluster>=<path>; repeat for each member.")
	cmd.Flags().BoolVar(&all, "all", false, "Adopt the whole member namespace (the kinds listed above).")
	cmd.Flags().StringVar(&placement, "placement", "", "The Placement's name (default adopted-<first object>, or adopted with --all).")
	cmd.Flags().BoolVar(&dryRun, "dry-run", false, "Print the hub objects and the Placement, and the differences, without writing them.")
	return cmd
}

// adoption is one adopt command's reading of the members.
type adoption struct {
	namespace string
	from      map[string]string
	out       io.Writer
	// objects are the hub objects; copies each one's cleaned copies, by cluster.
	objects []*unstructured.Unstructured
	copies  []map[string]*unstructured.Unstructured
	// clusters are the members that run at least one.
	clusters []string
	// seen are the objects named that some member has.
	seen map[string]bool
	// members are the members' clients, made once (each reads discovery).
	members map[string]client.Client
}

// member is the client of the member --from names cluster.
func (a *adoption) member(cluster string) (client.Client, error) {
	if c, ok := a.members[cluster]; ok {
		return c, nil
	}
	c, err := memberClient(a.from[cluster])
	if err != nil {
		return nil, err
	}
	if a.members == nil {
		a.members = map[string]client.Client{}
	}
	a.members[cluster] = c
	return c, nil
}

// checkMembers makes sure each --from names a cluster of the cluster sets
// bound to the namespace, and that its kubeconfig reaches that cluster: the
// ID the member reports (its cluster.clusterset.k8s.io ClusterProperty, else
// its kube-system namespace's UID) is the one its ClusterProfile on the hub
// records. A Placement pinned to a name that is no cluster, or adopting one
// member's objects as another's, would place what nobody asked.
func (a *adoption) checkMembers(ctx context.Context, hub client.Client) error {
	sets, err := bindingSets(ctx, hub, a.namespace)
	if err != nil {
		return err
	}
	if len(sets) == 0 {
		return fmt.Errorf("namespace %s is bound to no cluster set (a ClusterSetBinding): adopt places on the clusters of its bound sets (docs/adopt.md)", a.namespace)
	}
	for _, cluster := range slices.Sorted(maps.Keys(a.from)) {
		var profile *cpv1alpha1.ClusterProfile
		for _, set := range sets {
			p := &cpv1alpha1.ClusterProfile{}
			err := hub.Get(ctx, client.ObjectKey{Namespace: set, Name: cluster}, p)
			if err == nil {
				profile = p
				break
			}
			if !apierrors.IsNotFound(err) {
				return fmt.Errorf("reading the ClusterProfile of %s in %s: %w", cluster, set, err)
			}
		}
		if profile == nil {
			return fmt.Errorf("--from %s: no cluster %s in the cluster sets bound to namespace %s (%s); `kubectl lodestar get clusters` lists them",
				cluster, cluster, a.namespace, strings.Join(sets, ", "))
		}
		joined, reported := profile.Annotations[placementv1alpha1.ClusterIDAnnotation], propertyOf(profile, profileIDProperty)
		if joined == "" && reported == "" {
			continue // joined without an ID, and its agent has not reported one yet: nothing to compare
		}
		c, err := a.member(cluster)
		if err != nil {
			return fmt.Errorf("member %s: %w", cluster, err)
		}
		uid, prop, err := memberIDs(ctx, c)
		if err != nil {
			return fmt.Errorf("member %s: reading its cluster ID to check that the kubeconfig reaches %s: %w", cluster, cluster, err)
		}
		if (joined == "" || uid != joined) && (reported == "" || prop != reported) {
			return fmt.Errorf("--from %s=%s reaches another cluster: its kube-system namespace's UID is %s, and %s's ClusterProfile records %s; give %s's own kubeconfig",
				cluster, a.from[cluster], uid, cluster, orDefault(joined, reported), cluster)
		}
	}
	return nil
}

// bindingSets are the cluster sets the namespace's ClusterSetBindings name,
// but for those the hub refused (Bound False): a binding made a moment ago
// counts before the hub marks it.
func bindingSets(ctx context.Context, c client.Client, namespace string) ([]string, error) {
	return setsOf(ctx, c, namespace, func(b *placementv1alpha1.ClusterSetBinding) bool {
		return b.DeletionTimestamp.IsZero() && !meta.IsStatusConditionFalse(b.Status.Conditions, placementv1alpha1.BoundCondition)
	})
}

// profileIDProperty is the cluster ID a member's agent reports on its
// ClusterProfile (KEP-2149).
const profileIDProperty = "cluster.clusterset.k8s.io"

// propertyOf is the value of a ClusterProfile's property ("" if it has none).
func propertyOf(p *cpv1alpha1.ClusterProfile, name string) string {
	for _, prop := range p.Status.Properties {
		if prop.Name == name {
			return prop.Value
		}
	}
	return ""
}

// memberIDs are what a member says of its identity: the UID of its
// kube-system namespace (what join records) and its cluster.clusterset.k8s.io
// ClusterProperty ("" when it has none or it may not be read: what its agent
// reports).
func memberIDs(ctx context.Context, c client.Client) (uid, property string, err error) {
	ks := &corev1.Namespace{}
	if err := c.Get(ctx, client.ObjectKey{Name: "kube-system"}, ks); err != nil {
		return "", "", err
	}
	prop := &aboutv1alpha1.ClusterProperty{}
	switch err := c.Get(ctx, client.ObjectKey{Name: profileIDProperty}, prop); {
	case err == nil:
		property = prop.Spec.Value
	case !apierrors.IsNotFound(err) && !meta.IsNoMatchError(err) && !apierrors.IsForbidden(err):
		return "", "", err
	}
	return string(ks.UID), property, nil
}

// read finds the objects on each member.
func (a *adoption) read(ctx context.Context, refs []string) error {
	byKey := map[string]map[string]*unstructured.Unstructured{}
	var order []string
	for _, cluster := range slices.Sorted(maps.Keys(a.from)) {
		c, err := a.member(cluster)
		if err != nil {
			return fmt.Errorf("member %s: %w", cluster, err)
		}
		found, err := a.find(ctx, c, refs)
		if err != nil {
			return fmt.Errorf("member %s: %w", cluster, err)
		}
		for _, obj := range found {
			key := obj.GroupVersionKind().GroupKind().String() + "/" + obj.GetName()
			if byKey[key] == nil {
				byKey[key] = map[string]*unstructured.Unstructured{}
				order = append(order, key)
			}
			byKey[key][cluster] = adopt.Clean(obj)
		}
		if len(found) > 0 {
			a.clusters = append(a.clusters, cluster)
		}
	}
	members := strings.Join(slices.Sorted(maps.Keys(a.from)), ", ")
	var missing []string
	for _, ref := range refs {
		if !a.seen[ref] {
			missing = append(missing, ref)
		}
	}
	if len(missing) > 0 {
		return fmt.Errorf("%s: not in namespace %s of %s; nothing is adopted", strings.Join(missing, ", "), a.namespace, members)
	}
	if len(order) == 0 {
		return fmt.Errorf("nothing to adopt in namespace %s of %s", a.namespace, members)
	}
	for _, key := range order {
		copies := byKey[key]
		first := copies[slices.Sorted(maps.Keys(copies))[0]]
		a.objects = append(a.objects, first.DeepCopy())
		a.copies = append(a.copies, copies)
	}
	return nil
}

// find reads the named objects (a name absent there is skipped) or, with no
// names, the adoptable objects of the namespace, from one member.
func (a *adoption) find(ctx context.Context, c client.Client, refs []string) ([]*unstructured.Unstructured, error) {
	var out []*unstructured.Unstructured
	if len(refs) == 0 {
		for _, gvk := range wholeNamespace {
			list := &unstructured.UnstructuredList{}
			list.SetGroupVersionKind(gvk.GroupVersion().WithKind(gvk.Kind + "List"))
			if err := c.List(ctx, list, client.InNamespace(a.namespace)); err != nil {
				return nil, fmt.Errorf("listing %s: %w", gvk.Kind, err)
			}
			for i := range list.Items {
				obj := &list.Items[i]
				obj.SetGroupVersionKind(gvk)
				if adopt.Adoptable(obj) == "" {
					out = append(out, obj)
				}
			}
		}
		return out, nil
	}
	for _, ref := range refs {
		kind, name, ok := strings.Cut(ref, "/")
		if !ok || name == "" {
			return nil, fmt.Errorf("%q: name an object as <kind>/<name>, for example deployment/web", ref)
		}
		gvk, err := c.RESTMapper().KindFor(schema.ParseGroupResource(kind).WithVersion(""))
		if err != nil {
			return nil, fmt.Errorf("%q: %w", ref, err)
		}
		obj := &unstructured.Unstructured{}
		obj.SetGroupVersionKind(gvk)
		if err := c.Get(ctx, client.ObjectKey{Namespace: a.namespace, Name: name}, obj); apierrors.IsNotFound(err) {
			continue
		} else if err != nil {
			return nil, err
		}
		if why := adopt.Adoptable(obj); why != "" {
			return nil, fmt.Errorf("%s is not adopted: %s", ref, why)
		}
		a.seen[ref] = true
		out = append(out, obj)
	}
	return out, nil
}

// memberClient connects to a member with its kubeconfig. Its mapper knows
// the member's short names (deploy, cm, svc), as kubectl does.
func memberClient(path string) (client.Client, error) {
	cfg, err := clientcmd.BuildConfigFromFlags("", path)
	if err != nil {
		return nil, err
	}
	dc, err := discovery.NewDiscoveryClientForConfig(cfg)
	if err != nil {
		return nil, err
	}
	cached := memory.NewMemCacheClient(dc)
	mapper := restmapper.NewShortcutExpander(restmapper.NewDeferredDiscoveryRESTMapper(cached), cached, nil)
	return client.New(cfg, client.Options{Scheme: scheme.Agent(), Mapper: mapper})
}

// plan is the Placement, with the members' differences as overrides (each
// listed on the output).
func (a *adoption) plan(name string) (*placementv1alpha1.Placement, error) {
	var overrides []placementv1alpha1.Override
	for i, obj := range a.objects {
		copies := a.copies[i]
		base := slices.Sorted(maps.Keys(copies))[0]
		diffs, secret := adopt.WithoutSecretValues(obj, adopt.Differences(copies))
		for _, path := range secret {
			fmt.Fprintf(a.out, "# %s %s differs at %s between the members: a Secret's values are never written into an override (whoever reads the Placement would read them); "+
				"the Secret is placed as %s's copy, and a member whose copy differs keeps it (takeover IfNoDiff) until you make the copies alike or place a Secret per cluster\n",
				obj.GetKind(), obj.GetName(), path, base)
		}
		for _, d := range diffs {
			fmt.Fprintf(a.out, "# %s %s differs at %s:", obj.GetKind(), obj.GetName(), d.Path)
			for _, c := range slices.Sorted(maps.Keys(d.Values)) {
				fmt.Fprintf(a.out, " %s=%v", c, d.Values[c])
			}
			fmt.Fprintln(a.out)
		}
		rules, err := adopt.Overrides(obj, diffs, base, slices.Sorted(maps.Keys(copies)))
		if err != nil {
			return nil, err
		}
		overrides = append(overrides, rules...)
		for _, c := range a.clusters {
			if _, ok := copies[c]; !ok {
				fmt.Fprintf(a.out, "# %s %s is not on %s: a delete override keeps it off\n", obj.GetKind(), obj.GetName(), c)
				gvk := obj.GroupVersionKind()
				overrides = append(overrides, placementv1alpha1.Override{Name: adopt.OverrideName("absent-", obj.GetKind(), obj.GetName(), c), ClusterNames: []string{c},
					Targets: []placementv1alpha1.OverrideTarget{{Group: gvk.Group, Kind: gvk.Kind, Name: obj.GetName()}}, Delete: true})
			}
		}
	}
	if len(overrides) > adopt.MaxOverrides {
		return nil, fmt.Errorf("the members' copies differ in %d ways, more than a Placement's %d overrides: adopt fewer objects at once, or make the copies alike first",
			len(overrides), adopt.MaxOverrides)
	}
	return adopt.Placement(name, a.namespace, a.objects, a.clusters, overrides), nil
}

// print writes what adopt would write, as YAML documents.
func (a *adoption) print(p *placementv1alpha1.Placement) error {
	for _, obj := range a.objects {
		b, err := yaml.Marshal(obj.Object)
		if err != nil {
			return err
		}
		fmt.Fprintf(a.out, "---\n%s", b)
	}
	// As a user would write it: without the fields the Go types print empty
	// (reporting: {}, strategy: {}, status: {}, creationTimestamp: null).
	u, err := runtime.DefaultUnstructuredConverter.ToUnstructured(p)
	if err != nil {
		return err
	}
	pruneEmpty(u)
	b, err := yaml.Marshal(u)
	if err != nil {
		return err
	}
	fmt.Fprintf(a.out, "---\n%s", b)
	return nil
}

// pruneEmpty removes, recursively, the null values and the maps left empty.
func pruneEmpty(m map[string]any) {
	for k, v := range m {
		if sub, ok := v.(map[string]any); ok {
			pruneEmpty(sub)
			if len(sub) == 0 {
				delete(m, k)
			}
			continue
		}
		if list, ok := v.([]any); ok {
			for _, item := range list {
				if sub, ok := item.(map[string]any); ok {
					pruneEmpty(sub)
				}
			}
			continue
		}
		if v == nil {
			delete(m, k)
		}
	}
}

// write creates the hub objects (one that exists as it would be written is
// left; one that differs is an error) and the Placement.
func (a *adoption) write(ctx context.Context, hub client.Client, p *placementv1alpha1.Placement) error {
	if err := hub.Get(ctx, client.ObjectKey{Name: a.namespace}, &corev1.Namespace{}); err != nil {
		return fmt.Errorf("hub namespace %s: %w (create it and bind it to the members' cluster set first)", a.namespace, err)
	}
	for _, obj := range a.objects {
		err := hub.Create(ctx, obj.DeepCopy())
		if apierrors.IsAlreadyExists(err) {
			cur := &unstructured.Unstructured{}
			cur.SetGroupVersionKind(obj.GroupVersionKind())
			if err := hub.Get(ctx, client.ObjectKeyFromObject(obj), cur); err != nil {
				return err
			}
			if !equality.Semantic.DeepEqual(adopt.Clean(cur).Object["spec"], obj.Object["spec"]) {
				return fmt.Errorf("%s %s exists on the hub and differs from the members' copy: delete it, or adopt under another namespace", obj.GetKind(), obj.GetName())
			}
			continue
		}
		if err != nil {
			return fmt.Errorf("writing %s %s on the hub: %w", obj.GetKind(), obj.GetName(), err)
		}
	}
	if err := hub.Create(ctx, p); err != nil {
		return fmt.Errorf("writing Placement %s: %w", p.Name, err)
	}
	fmt.Fprintf(a.out, "adopted %s from %s into Placement %s/%s (takeover IfNoDiff: the copies are taken over unchanged)\n",
		message.Count(len(a.objects), "object"), strings.Join(a.clusters, ", "), p.Namespace, p.Name)
	return nil
}
