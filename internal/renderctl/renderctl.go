// Package renderctl is `kubectl lodestar render`: what a cluster's Work of a
// Placement holds, by the work generator's own selection and rendering, from the
// hub's objects or from a file before it is applied.
package renderctl

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	cpv1alpha1 "sigs.k8s.io/cluster-inventory-api/apis/v1alpha1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	workv1alpha1 "sigs.k8s.io/work-api/pkg/apis/v1alpha1"

	placementv1alpha1 "github.com/lodestar-dev/lodestar/api/placement/v1alpha1"
	"github.com/lodestar-dev/lodestar/internal/clusterworks"
	"github.com/lodestar-dev/lodestar/internal/division"
	"github.com/lodestar-dev/lodestar/internal/lookup"
	"github.com/lodestar-dev/lodestar/internal/message"
	"github.com/lodestar-dev/lodestar/internal/overrides"
	"github.com/lodestar-dev/lodestar/internal/render"
	"github.com/lodestar-dev/lodestar/internal/scheduling"
	"github.com/lodestar-dev/lodestar/internal/selection"
)

// Options say what to render.
type Options struct {
	// Placement names the Placement.
	Placement client.ObjectKey
	// Cluster is the name of the cluster's ClusterProfile.
	Cluster string
	// Local are objects to use instead of the hub's copies: the Placement, and
	// objects it may select.
	Local []*unstructured.Unstructured
	// Kinds returns the namespaced kinds the hub serves, for resource selectors
	// without kind (watches.NamespacedKinds).
	Kinds func(ctx context.Context) ([]schema.GroupVersionKind, error)
	// Note, when set, is told what the hub would say beside the Work (a
	// workload whose replicas are not divided, and why).
	Note func(string)
	// Fleet, when set, reads the Fleet another way when the user may not read
	// the clusters' ClusterProfiles and Works (a tenant): through the hub
	// manager (the debug API's placements/fleet).
	Fleet func(ctx context.Context) (Fleet, error)
}

// Fleet is what a render reads beyond the Placement's namespace: the clusters
// it may render for (those of the namespace's cluster sets that it names or
// the Placement decided), as the work generator sees them, with the shares of
// divided workloads their Works carry now.
type Fleet struct {
	Clusters map[string]FleetCluster `json:"clusters"`
	// Sets are the cluster sets the namespace may use.
	Sets []string `json:"sets,omitempty"`
}

// FleetCluster is one cluster of a Fleet.
type FleetCluster struct {
	Name       string            `json:"name"`
	Namespace  string            `json:"namespace"`
	Labels     map[string]string `json:"labels,omitempty"`
	Properties map[string]string `json:"properties,omitempty"`
	// Prev are the shares its Works carry, and Carried the replicas, by
	// workload (division.Carried).
	Prev    *division.Shares `json:"prev,omitempty"`
	Carried map[string]int64 `json:"carried,omitempty"`
}

// view is the cluster as overrides and division see it.
func (f FleetCluster) view() scheduling.Cluster {
	return scheduling.Cluster{Name: f.Name, Namespace: f.Namespace, Labels: f.Labels, Properties: f.Properties}
}

// FleetOf is ReadFleet as the hub manager's debug API answers it for a user
// who may not read the fleet (debugv1alpha1.Fleet).
func FleetOf(ctx context.Context, c client.Reader, placement *placementv1alpha1.Placement, cluster string) (any, error) {
	return ReadFleet(ctx, c, placement, cluster)
}

// ReadFleet reads the Fleet of a render of placement for cluster with c: the
// cluster's ClusterProfile in a cluster set its namespace may use, and those
// of the clusters the Placement decided, with their Works' shares.
func ReadFleet(ctx context.Context, c client.Reader, placement *placementv1alpha1.Placement, cluster string) (Fleet, error) {
	d, err := decidedClusters(ctx, c, placement)
	if err != nil {
		return Fleet{}, err
	}
	sets, err := lookup.UsableSets(ctx, c, placement.Namespace)
	if err != nil {
		return Fleet{}, err
	}
	views, err := clusterViews(ctx, c, sets)
	if err != nil {
		return Fleet{}, err
	}
	var byCluster map[string][]*workv1alpha1.Work
	if placement.UID != "" {
		works := &workv1alpha1.WorkList{}
		if err := c.List(ctx, works, client.MatchingLabels(lookup.WorkLabels(placement))); err != nil {
			return Fleet{}, fmt.Errorf("listing the Works of placement %s: %w", placement.Name, err)
		}
		byCluster = clusterworks.ByCluster(works.Items)
	}
	out := Fleet{Clusters: map[string]FleetCluster{}, Sets: sets}
	for _, name := range append(slices.Clone(d.clusters), cluster) {
		v, ok := views[name]
		if !ok {
			continue
		}
		fc := FleetCluster{Name: v.Name, Namespace: v.Namespace, Labels: v.Labels, Properties: v.Properties}
		fc.Prev, fc.Carried = division.Carried(byCluster[name])
		out.Clusters[name] = fc
	}
	return out, nil
}

// Render returns the manifests before overrides (base) and what the cluster's
// Work holds, with the changes each rule made.
func Render(ctx context.Context, c client.Client, o Options) ([]runtime.RawExtension, overrides.Result, error) {
	placement, err := placementFor(ctx, c, o.Placement, o.Local)
	if err != nil {
		return nil, overrides.Result{}, err
	}
	fleet, err := ReadFleet(ctx, c, placement, o.Cluster)
	if apierrors.IsForbidden(err) && o.Fleet != nil {
		fleet, err = o.Fleet(ctx)
	}
	if err != nil {
		return nil, overrides.Result{}, err
	}
	target, ok := fleet.Clusters[o.Cluster]
	if !ok {
		return nil, overrides.Result{}, fmt.Errorf("cluster %s has no ClusterProfile in the cluster sets namespace %s may use (%s)",
			o.Cluster, o.Placement.Namespace, strings.Join(fleet.Sets, ", "))
	}
	d, err := decidedClusters(ctx, c, placement)
	if err != nil {
		return nil, overrides.Result{}, err
	}
	if err := chosen(placement, d, o.Cluster); err != nil {
		return nil, overrides.Result{}, err
	}
	kinds, err := lookup.Interpretations(ctx, c, nil)
	if apierrors.IsForbidden(err) && o.Note != nil {
		// A hub without the tenancy roles' binding: custom kinds are shown
		// as written, which the hub may divide.
		o.Note("the hub's ResourceInterpretations cannot be read (forbidden): interpreted kinds are shown undivided, and what they depend on is not followed")
		kinds, err = nil, nil
	}
	if err != nil {
		return nil, overrides.Result{}, err
	}
	sel, err := selection.SelectObjects(ctx, placement, selection.Source{Mapper: c.RESTMapper(), List: skipUnreadable(placement, hubAndLocal(c, o.Local), o.Note), Kinds: o.Kinds,
		Interpretations: kinds, MayFollowSecret: writerMayGetSecret(c, o.Note)})
	if err == nil {
		// A preview refuses what the hub would refuse (the hub places the
		// other selectors' objects and says so in the Rendered condition).
		err = sel.Strict()
	}
	if err != nil {
		return nil, overrides.Result{}, err
	}
	if len(sel.NotFollowed) > 0 && o.Note != nil {
		o.Note("dependencies: " + sel.FollowedMessage())
	}
	base, res, err := render.Preview(sel.Objects, placement, target.view(), kinds, func(base []runtime.RawExtension) (*division.Shares, error) {
		return shares(fleet, placement, d.clusters, base, o.Cluster, kinds, o.Note), nil
	})
	if err != nil {
		return nil, overrides.Result{}, fmt.Errorf("placement %s on cluster %s: %w", o.Placement.Name, o.Cluster, err)
	}
	return base, res, nil
}

// ReadObjects reads the YAML or JSON documents of a file; objects without a
// namespace get namespace.
func ReadObjects(path, namespace string) ([]*unstructured.Unstructured, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer func() { _ = f.Close() }()
	dec := utilyaml.NewYAMLOrJSONDecoder(f, 4096)
	var out []*unstructured.Unstructured
	for {
		obj := &unstructured.Unstructured{}
		if err := dec.Decode(&obj.Object); errors.Is(err, io.EOF) {
			return out, nil
		} else if err != nil {
			return nil, fmt.Errorf("reading %s: %w", path, err)
		}
		if len(obj.Object) == 0 {
			continue
		}
		if obj.GetKind() == "" || obj.GetName() == "" {
			return nil, fmt.Errorf("reading %s: a document without kind or metadata.name", path)
		}
		if obj.GetNamespace() == "" {
			obj.SetNamespace(namespace)
		}
		out = append(out, obj)
	}
}

// placementFor is the Placement of key from the file's objects, or else the hub's.
func placementFor(ctx context.Context, c client.Client, key client.ObjectKey, local []*unstructured.Unstructured) (*placementv1alpha1.Placement, error) {
	for _, o := range local {
		if o.GroupVersionKind().GroupKind() != placementv1alpha1.GroupVersion.WithKind("Placement").GroupKind() || o.GetName() != key.Name {
			continue
		}
		p := &placementv1alpha1.Placement{}
		if err := runtime.DefaultUnstructuredConverter.FromUnstructuredWithValidation(o.Object, p, true); err != nil {
			return nil, fmt.Errorf("placement %s in the file: %w", key.Name, err)
		}
		p.Namespace = key.Namespace
		return p, nil
	}
	p := &placementv1alpha1.Placement{}
	if err := c.Get(ctx, key, p); err != nil {
		return nil, fmt.Errorf("reading placement %s: %w", key, err)
	}
	return p, nil
}

// decided are the clusters a Placement's PlacementDecisions name, and
// whether it has any (a Placement from a file has none: where it goes is not
// decided yet).
type decided struct {
	clusters []string
	found    bool
}

func decidedClusters(ctx context.Context, c client.Reader, placement *placementv1alpha1.Placement) (decided, error) {
	if placement.UID == "" {
		return decided{}, nil
	}
	list, err := lookup.PlacementDecisions(ctx, c, placement)
	if err != nil {
		return decided{}, err
	}
	out := decided{found: len(list.Items) > 0}
	for i := range list.Items {
		for _, d := range list.Items[i].Decisions {
			out.clusters = append(out.clusters, d.ClusterProfileRef.Name)
		}
	}
	return out, nil
}

// chosen says, as an error, that the Placement's decisions do not name the
// cluster: its Work would not exist, so there is nothing to preview. A
// Placement without decisions (not scheduled yet, or a file not applied) may
// be previewed for any cluster.
func chosen(placement *placementv1alpha1.Placement, d decided, cluster string) error {
	if !d.found || slices.Contains(d.clusters, cluster) {
		return nil
	}
	named := d.clusters
	return fmt.Errorf("placement %s does not choose cluster %s (it chooses %d: %s); `kubectl lodestar why %s --cluster %s` says why",
		client.ObjectKeyFromObject(placement), cluster, len(named), message.List(named, 5, ", "), placement.Name, cluster)
}

// hubAndLocal lists the hub's objects, with those of the file in place of the
// hub's of the same name.
// skipUnreadable lists with list, but a kind the user may not list that no
// selector names (one a selector without kind reaches: PodTemplates, say) is
// skipped with a note, not an error: the preview shows what the user may see,
// and says what it could not.
func skipUnreadable(placement *placementv1alpha1.Placement, list selection.Lister, note func(string)) selection.Lister {
	named := func(gvk schema.GroupVersionKind) bool {
		return slices.ContainsFunc(placement.Spec.ResourceSelectors, func(sel placementv1alpha1.ResourceSelector) bool {
			return sel.Kind == gvk.Kind && sel.Group == gvk.Group
		})
	}
	return func(ctx context.Context, gvk schema.GroupVersionKind, namespace string, selector labels.Selector) ([]unstructured.Unstructured, error) {
		out, err := list(ctx, gvk, namespace, selector)
		if apierrors.IsForbidden(err) && !named(gvk) {
			if note != nil {
				note(fmt.Sprintf("you may not list %s in %s: a selector without kind would reach them; the preview leaves them out (the hub does not)", gvk.GroupKind(), namespace))
			}
			return nil, nil
		}
		return out, err
	}
}

func hubAndLocal(c client.Client, local []*unstructured.Unstructured) selection.Lister {
	return func(ctx context.Context, gvk schema.GroupVersionKind, namespace string, selector labels.Selector) ([]unstructured.Unstructured, error) {
		list := &unstructured.UnstructuredList{}
		list.SetGroupVersionKind(gvk.GroupVersion().WithKind(gvk.Kind + "List"))
		if err := c.List(ctx, list, client.InNamespace(namespace), client.MatchingLabelsSelector{Selector: selector}); err != nil {
			return nil, err
		}
		var out []unstructured.Unstructured
		fromFile := map[string]bool{}
		for _, o := range local {
			if o.GroupVersionKind().GroupKind() == gvk.GroupKind() && o.GetNamespace() == namespace && selector.Matches(labels.Set(o.GetLabels())) {
				out = append(out, *o.DeepCopy())
				fromFile[o.GetName()] = true
			}
		}
		for _, o := range list.Items {
			if !fromFile[o.GetName()] {
				out = append(out, o)
			}
		}
		return out, nil
	}
}

// shares are a cluster's shares of a Placement's divided workloads
// (spec.scheduling.replicas) among manifests: the division's target over the
// clusters its decisions name (decided; the cluster alone when there are
// none yet), with the shares their Works carry for a steady division by
// capacity.
func shares(fleet Fleet, placement *placementv1alpha1.Placement, decided []string, manifests []runtime.RawExtension, cluster string, kinds division.Kinds, note func(string)) *division.Shares {
	if !slices.Contains(decided, cluster) {
		decided = append(slices.Clone(decided), cluster)
	}
	carried := map[string]map[string]int64{}
	candidates := make([]division.Candidate, 0, len(decided))
	for _, name := range decided {
		fc := fleet.Clusters[name]
		candidates = append(candidates, division.Candidate{Name: name, Labels: fc.Labels, Free: division.FreeCapacity(fc.Properties), Prev: fc.Prev})
		carried[name] = fc.Carried
		if carried[name] == nil {
			carried[name] = map[string]int64{}
		}
	}
	a := division.Assign(placement.Spec.Scheduling.Replicas, division.Workloads(manifests, kinds), candidates, string(placement.UID), nil)
	a.Surge(carried, true, nil)
	for _, p := range a.Problems {
		if note != nil {
			note(fmt.Sprintf("%s: %s: %s (the shares already placed stay)", p.Key, p.Reason, p.Message))
		}
	}
	shares := a.Of(cluster)
	return &shares
}

// clusterViews are the clusters of the cluster sets, by name.
func clusterViews(ctx context.Context, c client.Reader, sets []string) (map[string]scheduling.Cluster, error) {
	out := map[string]scheduling.Cluster{}
	for _, set := range sets {
		list := &cpv1alpha1.ClusterProfileList{}
		if err := c.List(ctx, list, client.InNamespace(set)); err != nil {
			return nil, err
		}
		for i := range list.Items {
			if lookup.Managed(&list.Items[i]) {
				out[list.Items[i].Name] = scheduling.ClusterOf(&list.Items[i])
			}
		}
	}
	return out, nil
}

// writerMayGetSecret follows a Secret as the hub does (its Placement's last
// writer may get it), or, for a user who may not ask the hub about others, as
// far as the user's own reads go, and says so.
func writerMayGetSecret(c client.Client, note func(string)) func(ctx context.Context, p *placementv1alpha1.Placement, namespace, name string) (string, error) {
	asHub, noted := lookup.WriterMayGetSecret(c), false
	return func(ctx context.Context, p *placementv1alpha1.Placement, namespace, name string) (string, error) {
		why, err := asHub(ctx, p, namespace, name)
		if !apierrors.IsForbidden(err) {
			return why, err
		}
		if !noted && note != nil {
			note("you may not ask the hub who may read Secrets (subjectaccessreviews): followed Secrets are those you may read, the hub follows those the Placement's last writer may")
			noted = true
		}
		return "", nil
	}
}
