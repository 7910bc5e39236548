// Package serviceimport is the hub's Multicluster Services controller: for
// every namespace/name that members export (ExportedServices in their cluster
// namespaces), it merges the exports as KEP-1645 says (internal/mcs), answers
// each export with its Valid, Ready and Conflict conditions, and writes an
// ImportedService into the namespace of every cluster of the exporters'
// cluster sets, holding the merged properties and the endpoints of each
// exporting cluster whose exports lease is live. The ImportedServices exist
// while any valid export does.
package serviceimport

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"
	cpv1alpha1 "sigs.k8s.io/cluster-inventory-api/apis/v1alpha1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"
	mcsv1beta1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"
	workv1alpha1 "sigs.k8s.io/work-api/pkg/apis/v1alpha1"

	placementv1alpha1 "github.com/lodestar-dev/lodestar/api/placement/v1alpha1"
	servicesv1alpha1 "github.com/lodestar-dev/lodestar/api/services/v1alpha1"
	"github.com/lodestar-dev/lodestar/internal/lookup"
	"github.com/lodestar-dev/lodestar/internal/mcs"
	"github.com/lodestar-dev/lodestar/internal/message"
	"github.com/lodestar-dev/lodestar/internal/names"
	"github.com/lodestar-dev/lodestar/internal/patch"
)

// Name is the controller's field owner.
const Name = "lodestar-serviceimport"

// Reconciler merges the exports of one namespace/name (the request) into the
// imports.
type Reconciler struct {
	Client client.Client
	// Scope is what this hub manager takes: the cluster sets it manages, and
	// whether it is the hub-wide manager (docs/scale.md).
	Scope lookup.Scope
	// ExportableNamespaces are the namespaces among kube-* and default that the
	// platform lets members export from; exports from the others of them are
	// Valid=False.
	ExportableNamespaces []string
	// Sources tells which exporting clusters' endpoints are served.
	Sources *Sources
	// Workers is the number of concurrent reconciles.
	Workers int

	// moved remembers, by "cluster/namespace/name", the UID of the export a
	// move withdrew.
	moved sync.Map
}

// +kubebuilder:rbac:groups=services.lodestar.dev,resources=exportedservices,verbs=get;list;watch
// +kubebuilder:rbac:groups=services.lodestar.dev,resources=exportedservices/status,verbs=get;patch;update
// +kubebuilder:rbac:groups=services.lodestar.dev,resources=importedservices,verbs=get;list;watch;create;update;patch;delete
// +kubebuilder:rbac:groups=multicluster.x-k8s.io,resources=clusterprofiles,verbs=get;list;watch
// +kubebuilder:rbac:groups=coordination.k8s.io,resources=leases,verbs=get;list;watch
// +kubebuilder:rbac:groups=placement.lodestar.dev,resources=clustersetbindings,verbs=get;list;watch
// +kubebuilder:rbac:groups=multicluster.x-k8s.io,resources=works,verbs=get;list;watch
// +kubebuilder:rbac:groups="",resources=namespaces,verbs=get;list;watch

// Reconcile merges the exports of req (a Service's namespace/name).
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	ctx = ctrl.LoggerInto(ctx, ctrl.LoggerFrom(ctx).WithValues("service", req.NamespacedName))
	exports := &servicesv1alpha1.ExportedServiceList{}
	if err := r.Client.List(ctx, exports, client.MatchingFields{lookup.ServicesByName: req.String()}); err != nil {
		return ctrl.Result{}, err
	}
	sets, err := r.clusterSets(ctx)
	if err != nil {
		return ctrl.Result{}, err
	}
	// The namespace's cluster set: the clusters of the sets its
	// ClusterSetBindings name; a namespace bound to none shares a Service with
	// the clusters of each exporter's sets.
	bound, err := lookup.ClusterSets(ctx, r.Client, req.Namespace, r.Scope.Sets)
	if err != nil {
		return ctrl.Result{}, err
	}
	var members []string
	for _, set := range bound {
		members = append(members, sets.clusters[set]...)
	}
	// A cluster shares the Services of a namespace only where the hub places
	// that namespace's objects: it exports from it, and imports into it.
	placed, err := lookup.PlacedOn(ctx, r.Client, req.Namespace)
	if err != nil {
		return ctrl.Result{}, err
	}
	valid, invalid, byCluster := r.classify(req, exports.Items, sets, bound, members, placed)
	shares := sharesOf(valid, sets, bound, members, placed)
	withdrawn, err := r.withdrawn(ctx, req.NamespacedName, valid)
	if err != nil {
		return ctrl.Result{}, err
	}
	// One importer that cannot be written does not hold the others, nor the
	// exports' answers: the errors are returned together, and retried.
	leftOut, err := r.writeImports(ctx, req.NamespacedName, shares, byCluster, withdrawn)
	errs := []error{err}
	for cluster, e := range byCluster {
		var merged mcs.Merged
		importers := 0
		if sh := shares[sets.domains.Of(cluster)]; sh != nil {
			merged, importers = sh.merged, len(sh.importers)
		}
		errs = append(errs, r.answer(ctx, e, invalid[cluster], merged, importers, leftOut[cluster]))
	}
	return ctrl.Result{}, errors.Join(errs...)
}

// classify sorts a Service's exports into the valid ones and, by cluster, the
// invalid ones' reasons; byCluster are the reports of clusters still in a set.
func (r *Reconciler) classify(req ctrl.Request, exports []servicesv1alpha1.ExportedService, sets clusterSets, bound, members []string, placed map[string]bool) (
	[]mcs.Export, map[string]*servicesv1alpha1.Invalid, map[string]*servicesv1alpha1.ExportedService) {
	var valid []mcs.Export
	invalid := map[string]*servicesv1alpha1.Invalid{}
	byCluster := map[string]*servicesv1alpha1.ExportedService{}
	for i := range exports {
		e := &exports[i]
		cluster, ok := names.ClusterFromNamespace(e.Namespace)
		if !ok || len(sets.of[cluster]) == 0 || !e.DeletionTimestamp.IsZero() {
			continue // not a cluster's report, or of a cluster gone
		}
		byCluster[cluster] = e
		// A cluster of a set in namespace sameness exports from any of its
		// namespaces, among that set's clusters only: the hub's bindings and
		// placements of the namespace are another domain's.
		hubPlaced := sets.domains.Of(cluster) == mcs.HubPlaced
		switch {
		case e.Spec.Invalid != nil:
			invalid[cluster] = e.Spec.Invalid
		case !r.exportable(req.Namespace):
			invalid[cluster] = &servicesv1alpha1.Invalid{Reason: servicesv1alpha1.ReasonNamespaceNotExported,
				Message: fmt.Sprintf("the platform does not let members export from namespace %s (the hub's exportable namespaces: %s)", req.Namespace, orNone(r.ExportableNamespaces))}
		case hubPlaced && len(bound) > 0 && !slices.Contains(members, cluster):
			invalid[cluster] = &servicesv1alpha1.Invalid{Reason: servicesv1alpha1.ReasonClusterNotBound,
				Message: fmt.Sprintf("namespace %s shares Services among the clusters of cluster sets %s, and %s is in none of them", req.Namespace, strings.Join(bound, ", "), cluster)}
		case hubPlaced && !placed[cluster]:
			invalid[cluster] = &servicesv1alpha1.Invalid{Reason: servicesv1alpha1.ReasonNamespaceNotPlaced,
				Message: fmt.Sprintf("the hub places nothing of namespace %s on %s: a cluster exports only from the namespaces the hub places there, unless its cluster set's namespace is labelled %s=%s (namespace sameness)",
					req.Namespace, cluster, servicesv1alpha1.NamespaceSamenessLabel, servicesv1alpha1.NamespaceSamenessClusterSet)}
		case e.Spec.Service == nil:
			invalid[cluster] = &servicesv1alpha1.Invalid{Reason: string(mcsv1beta1.ServiceExportReasonNoService), Message: "the export reports no Service"}
		default:
			valid = append(valid, mcs.Export{Cluster: cluster, Created: e.Spec.ExportCreated, Service: *e.Spec.Service, UID: e.UID})
		}
	}
	return valid, invalid, byCluster
}

// share is one domain's part of a Service (mcs.Domains): its valid exports
// merged, and the exporting clusters each of its importers sees.
type share struct {
	sameness  bool
	merged    mcs.Merged
	importers map[string][]string // importing cluster -> exporting clusters it sees
}

// sharesOf merges the valid exports of each domain and says which exporting
// clusters each importer sees. A sameness domain's clusters all import its
// exports. Otherwise the importers are the namespace's cluster set (or each
// exporter's sets when it is bound to none), only where the hub places the
// namespace, and never a cluster of a sameness domain.
func sharesOf(valid []mcs.Export, sets clusterSets, bound, members []string, placed map[string]bool) map[string]*share {
	byDomain := map[string][]mcs.Export{}
	for _, e := range valid {
		d := sets.domains.Of(e.Cluster)
		byDomain[d] = append(byDomain[d], e)
	}
	// Each importer once per exporter (a cluster may be in several sets):
	// without a search of what it has, as a Service exported from and
	// imported on 1 000 clusters is a million pairs.
	unique := func(clusters []string) []string {
		out := make([]string, 0, len(clusters))
		seen := make(map[string]bool, len(clusters))
		for _, c := range clusters {
			if !seen[c] {
				seen[c] = true
				out = append(out, c)
			}
		}
		return out
	}
	members = unique(members)
	out := make(map[string]*share, len(byDomain))
	for d, exports := range byDomain {
		sh := &share{sameness: d != mcs.HubPlaced, merged: mcs.Merge(exports), importers: map[string][]string{}}
		var domainClusters []string
		if sh.sameness {
			domainClusters = sets.domains.Clusters(d)
		}
		// Oldest first: each importer's exporters, and so the endpoints an
		// import carries first (mcs.Fit), follow that order.
		mcs.Oldest(exports)
		for _, e := range exports {
			domain := members
			switch {
			case sh.sameness:
				domain = domainClusters
			case len(bound) == 0:
				domain = nil
				for _, set := range sets.of[e.Cluster] {
					domain = append(domain, sets.clusters[set]...)
				}
				domain = unique(domain)
			}
			for _, importer := range domain {
				// Imports land only in namespaces the hub places there, or in
				// any namespace of a sameness domain's cluster.
				if sh.sameness || (placed[importer] && sets.domains.Of(importer) == mcs.HubPlaced) {
					sh.importers[importer] = append(sh.importers[importer], e.Cluster)
				}
			}
		}
		out[d] = sh
	}
	return out
}

// writeImports makes each importer's ImportedService what it should be and
// deletes the others of the Service. An import carries at most
// mcs.MaxImportBytes of endpoints, the oldest exports' first; it returns, by
// exporting cluster, on how many importers its endpoints were left out.
func (r *Reconciler) writeImports(ctx context.Context, svc types.NamespacedName, shares map[string]*share, exports map[string]*servicesv1alpha1.ExportedService, withdrawn map[string]bool) (map[string]int, error) {
	importers := map[string]*share{} // the domains' importers are apart: a cluster is in one
	for _, sh := range shares {
		for importer := range sh.importers {
			importers[importer] = sh
		}
	}
	existing := &servicesv1alpha1.ImportedServiceList{}
	if err := r.Client.List(ctx, existing, client.MatchingFields{lookup.ServicesByName: svc.String()}); err != nil {
		return nil, err
	}
	sizes := map[string]int{}
	size := func(cluster string) int {
		if n, ok := sizes[cluster]; ok {
			return n
		}
		b, _ := json.Marshal(servicesv1alpha1.SourceSlices{Cluster: cluster, Slices: exports[cluster].Spec.Slices})
		sizes[cluster] = len(b)
		return len(b)
	}
	leftOut := map[string]int{}
	have := map[string]*servicesv1alpha1.ImportedService{}
	var errs []error
	for i := range existing.Items {
		im := &existing.Items[i]
		cluster, _ := names.ClusterFromNamespace(im.Namespace)
		if _, keep := importers[cluster]; !keep {
			if err := r.Client.Delete(ctx, im, client.Preconditions{UID: &im.UID}); client.IgnoreNotFound(err) != nil {
				errs = append(errs, fmt.Errorf("deleting ImportedService %s: %w", klog.KObj(im), err))
			}
			continue
		}
		have[cluster] = im
	}
	for importer, sh := range importers {
		exporters := sh.importers[importer]
		spec := servicesv1alpha1.ImportedServiceSpec{Namespace: svc.Namespace, Name: svc.Name, Service: sh.merged.Service, Clusters: exporters}
		if sh.sameness {
			spec.NamespaceSameness = servicesv1alpha1.NamespaceSamenessClusterSet
		}
		for _, exporter := range exporters {
			if r.Sources.Served(exporter) && !withdrawn[exporter] {
				spec.Sources = append(spec.Sources, servicesv1alpha1.SourceSlices{Cluster: exporter, Slices: exports[exporter].Spec.Slices})
			}
		}
		var left []string
		spec.Sources, left = mcs.Fit(spec.Sources, size, mcs.MaxImportBytes)
		for _, exporter := range left {
			leftOut[exporter]++
		}
		if im := have[importer]; im != nil {
			if equality.Semantic.DeepEqual(im.Spec, spec) {
				continue
			}
			// The hub alone writes the spec: a patch, not an update, so that the
			// agent's status writes never make it conflict.
			patched := im.DeepCopy()
			patched.Spec = spec
			if err := r.Client.Patch(ctx, patched, client.MergeFrom(im)); err != nil {
				errs = append(errs, fmt.Errorf("updating ImportedService %s: %w", klog.KObj(im), err))
			}
			continue
		}
		im := &servicesv1alpha1.ImportedService{ObjectMeta: metav1.ObjectMeta{Namespace: names.ClusterNamespace(importer), Name: names.ServiceObject(svc.Namespace, svc.Name)}, Spec: spec}
		if err := r.Client.Create(ctx, im); err != nil && !apierrors.IsAlreadyExists(err) {
			errs = append(errs, fmt.Errorf("creating ImportedService %s: %w", klog.KObj(im), err))
		}
	}
	return leftOut, errors.Join(errs...)
}

// withdrawn are the exporters whose endpoints of svc a move has withdrawn:
// a Work of a Placement of svc's namespace on that cluster names svc in
// ServicesWithdrawnAnnotation (the work generator's traffic-keeping move).
func (r *Reconciler) withdrawn(ctx context.Context, svc types.NamespacedName, exports []mcs.Export) (map[string]bool, error) {
	out := map[string]bool{}
	for _, e := range exports {
		works := &workv1alpha1.WorkList{}
		if err := r.Client.List(ctx, works, client.InNamespace(names.ClusterNamespace(e.Cluster)),
			client.MatchingLabels{placementv1alpha1.PlacementNamespaceLabel: svc.Namespace}); err != nil {
			return nil, err
		}
		key := e.Cluster + "/" + svc.String()
		for _, w := range works.Items {
			if slices.Contains(strings.Split(w.Annotations[placementv1alpha1.ServicesWithdrawnAnnotation], ","), svc.Name) {
				out[e.Cluster] = true
			}
		}
		// Once the moved copy's Work is gone, its export goes a moment later
		// (the agent deletes the ServiceExport): it stays withdrawn meanwhile.
		// A Work back on the cluster without the annotation (the move undone)
		// gives the endpoints back.
		switch {
		case out[e.Cluster]:
			r.moved.Store(key, e.UID)
		case len(works.Items) == 0:
			if uid, ok := r.moved.Load(key); ok && uid == e.UID {
				out[e.Cluster] = true
			}
		default:
			r.moved.Delete(key)
		}
	}
	return out, nil
}

// servicesOfWork maps a Work to the Services its withdrawal annotation names
// and, when it comes or goes, the exported Services of its namespace.
func (r *Reconciler) servicesOfWork(ctx context.Context, obj client.Object) []reconcile.Request {
	ns := obj.GetLabels()[placementv1alpha1.PlacementNamespaceLabel]
	if ns == "" {
		return nil
	}
	seen := map[types.NamespacedName]bool{}
	var out []reconcile.Request
	add := func(svc types.NamespacedName) {
		if !seen[svc] {
			seen[svc] = true
			out = append(out, reconcile.Request{NamespacedName: svc})
		}
	}
	for _, name := range strings.Split(obj.GetAnnotations()[placementv1alpha1.ServicesWithdrawnAnnotation], ",") {
		if name != "" {
			add(types.NamespacedName{Namespace: ns, Name: name})
		}
	}
	for _, req := range r.servicesOfNamespace(ctx, ns) {
		add(req.NamespacedName)
	}
	return out
}

// workChanged passes a Work's creation and deletion (its namespace placed on
// its cluster, or no longer), and a change of what it withdraws.
func workChanged() predicate.Predicate {
	return predicate.Funcs{
		UpdateFunc: func(e event.UpdateEvent) bool {
			return e.ObjectOld.GetAnnotations()[placementv1alpha1.ServicesWithdrawnAnnotation] != e.ObjectNew.GetAnnotations()[placementv1alpha1.ServicesWithdrawnAnnotation]
		},
		GenericFunc: func(event.GenericEvent) bool { return false },
	}
}

// answer writes an export's conditions.
func (r *Reconciler) answer(ctx context.Context, e *servicesv1alpha1.ExportedService, invalid *servicesv1alpha1.Invalid, merged mcs.Merged, importers, leftOut int) error {
	cluster, _ := names.ClusterFromNamespace(e.Namespace)
	var conds []metav1.Condition
	cond := func(t mcsv1beta1.ServiceExportConditionType, s metav1.ConditionStatus, reason, msg string) {
		conds = append(conds, metav1.Condition{Type: string(t), Status: s, Reason: reason, Message: msg, ObservedGeneration: e.Generation})
	}
	if invalid != nil {
		cond(mcsv1beta1.ServiceExportConditionValid, metav1.ConditionFalse, invalid.Reason, invalid.Message)
		cond(mcsv1beta1.ServiceExportConditionReady, metav1.ConditionFalse, string(mcsv1beta1.ServiceExportReasonFailed), "not exported: "+invalid.Message)
	} else {
		cond(mcsv1beta1.ServiceExportConditionValid, metav1.ConditionTrue, string(mcsv1beta1.ServiceExportReasonValid), "the Service is exported")
		if leftOut > 0 {
			cond(mcsv1beta1.ServiceExportConditionReady, metav1.ConditionFalse, servicesv1alpha1.ReasonImportTooLarge,
				fmt.Sprintf("its endpoints are left out of the import on %s: with them it would carry more than %d KiB of endpoints (the oldest exports' come first)",
					message.Count(leftOut, "cluster"), mcs.MaxImportBytes/1024))
		} else {
			cond(mcsv1beta1.ServiceExportConditionReady, metav1.ConditionTrue, string(mcsv1beta1.ServiceExportReasonExported),
				"imported by "+message.Count(importers, "cluster"))
		}
		if c, ok := merged.Conflicts[cluster]; ok {
			cond(mcsv1beta1.ServiceExportConditionConflict, metav1.ConditionTrue, c.Reason, c.Message)
		} else {
			cond(mcsv1beta1.ServiceExportConditionConflict, metav1.ConditionFalse, string(mcsv1beta1.ServiceExportReasonNoConflicts), "no conflicts with the other exports")
		}
	}
	status := e.Status.DeepCopy()
	status.ObservedGeneration = e.Generation
	changed := status.ObservedGeneration != e.Status.ObservedGeneration
	for _, c := range conds {
		changed = meta.SetStatusCondition(&status.Conditions, c) || changed
	}
	if invalid != nil {
		changed = meta.RemoveStatusCondition(&status.Conditions, string(mcsv1beta1.ServiceExportConditionConflict)) || changed
	}
	if !changed {
		return nil
	}
	desired := e.DeepCopy()
	desired.Status = *status
	// The hub alone writes an export's answer.
	return patch.ReplaceStatus(ctx, r.Client, e, desired, Name, nil)
}

// clusterSets are the managed cluster sets' clusters, each cluster's sets,
// and each cluster's domain (the sets in namespace sameness, or the hub's
// placements).
type clusterSets struct {
	clusters map[string][]string
	of       map[string][]string
	domains  mcs.Domains
}

func (r *Reconciler) clusterSets(ctx context.Context) (clusterSets, error) {
	s := clusterSets{clusters: map[string][]string{}, of: map[string][]string{}}
	sameness := map[string]bool{}
	for _, set := range r.Scope.Sets {
		ns := &corev1.Namespace{}
		if err := r.Client.Get(ctx, client.ObjectKey{Name: set}, ns); client.IgnoreNotFound(err) != nil {
			return s, err
		}
		sameness[set] = ns.Labels[servicesv1alpha1.NamespaceSamenessLabel] == servicesv1alpha1.NamespaceSamenessClusterSet
		profiles := &cpv1alpha1.ClusterProfileList{}
		if err := r.Client.List(ctx, profiles, client.InNamespace(set)); err != nil {
			return s, err
		}
		for i := range profiles.Items {
			p := &profiles.Items[i]
			if !p.DeletionTimestamp.IsZero() || !lookup.Managed(p) {
				continue // only the clusters Lodestar manages have a namespace and an agent
			}
			s.clusters[set] = append(s.clusters[set], p.Name)
			s.of[p.Name] = append(s.of[p.Name], set)
		}
	}
	s.domains = mcs.SamenessDomains(s.clusters, sameness)
	return s, nil
}

// exportable tells whether members may export from ns: any namespace but
// default and kube-*, unless the platform lists it.
func (r *Reconciler) exportable(ns string) bool {
	if ns != "default" && !strings.HasPrefix(ns, "kube-") {
		return true
	}
	return slices.Contains(r.ExportableNamespaces, ns)
}

func orNone(list []string) string {
	if len(list) == 0 {
		return "none"
	}
	return strings.Join(list, ", ")
}

// SetupWithManager registers the controller and the lease tracker (the
// index is lookup.AddServiceIndexes').
func (r *Reconciler) SetupWithManager(mgr ctrl.Manager) error {
	if r.Sources == nil {
		r.Sources = &Sources{}
	}
	r.Sources.Reader = mgr.GetAPIReader()
	changes := make(chan event.TypedGenericEvent[client.Object], 64)
	r.Sources.changed = func(cluster string) {
		changes <- event.TypedGenericEvent[client.Object]{Object: &cpv1alpha1.ClusterProfile{ObjectMeta: metav1.ObjectMeta{Name: cluster}}}
	}
	if err := mgr.Add(r.Sources); err != nil {
		return err
	}
	toService := handler.EnqueueRequestsFromMapFunc(func(_ context.Context, obj client.Object) []reconcile.Request {
		return []reconcile.Request{{NamespacedName: lookup.ServiceOf(obj)}}
	})
	return ctrl.NewControllerManagedBy(mgr).
		Named("serviceimport").
		WithOptions(controller.Options{MaxConcurrentReconciles: max(r.Workers, 1)}).
		Watches(&servicesv1alpha1.ExportedService{}, toService).
		Watches(&servicesv1alpha1.ImportedService{}, toService, builder.WithPredicates(predicate.GenerationChangedPredicate{})).
		// A cluster joining or leaving a set changes the importers of every
		// Service; a cluster whose lease changed, the Services it exports.
		Watches(&cpv1alpha1.ClusterProfile{}, handler.EnqueueRequestsFromMapFunc(r.allServices), builder.WithPredicates(membership())).
		// A move withdraws (or gives back) a cluster's endpoints; a namespace
		// placed on a cluster, or no longer, lets it export and import there.
		Watches(&workv1alpha1.Work{}, handler.EnqueueRequestsFromMapFunc(r.servicesOfWork), builder.WithPredicates(workChanged())).
		Watches(&placementv1alpha1.ClusterSetBinding{}, handler.EnqueueRequestsFromMapFunc(r.allServices), builder.WithPredicates(predicate.GenerationChangedPredicate{})).
		// A cluster set turned to namespace sameness, or back.
		Watches(&corev1.Namespace{}, handler.EnqueueRequestsFromMapFunc(r.allServices), builder.WithPredicates(samenessChanged())).
		WatchesRawSource(source.Channel(changes, handler.EnqueueRequestsFromMapFunc(r.exportsOf))).
		Complete(r.Scope.Only(mgr.GetClient(), r))
}

// allServices are every exported Service.
func (r *Reconciler) allServices(ctx context.Context, _ client.Object) []reconcile.Request {
	list := &servicesv1alpha1.ExportedServiceList{}
	if err := r.Client.List(ctx, list); err != nil {
		ctrl.LoggerFrom(ctx).Error(err, "Listing ExportedServices")
		return nil
	}
	return requests(list.Items)
}

// servicesOfNamespace are the exported Services of namespace ns.
func (r *Reconciler) servicesOfNamespace(ctx context.Context, ns string) []reconcile.Request {
	list := &servicesv1alpha1.ExportedServiceList{}
	if err := r.Client.List(ctx, list, client.UnsafeDisableDeepCopy); err != nil {
		ctrl.LoggerFrom(ctx).Error(err, "Listing ExportedServices")
		return nil
	}
	list.Items = slices.DeleteFunc(list.Items, func(e servicesv1alpha1.ExportedService) bool { return e.Spec.Namespace != ns })
	return requests(list.Items)
}

// exportsOf are the Services a cluster (the object's name) exports.
func (r *Reconciler) exportsOf(ctx context.Context, obj client.Object) []reconcile.Request {
	list := &servicesv1alpha1.ExportedServiceList{}
	if err := r.Client.List(ctx, list, client.InNamespace(names.ClusterNamespace(obj.GetName()))); err != nil {
		ctrl.LoggerFrom(ctx).Error(err, "Listing ExportedServices", "cluster", obj.GetName())
		return nil
	}
	return requests(list.Items)
}

func requests(items []servicesv1alpha1.ExportedService) []reconcile.Request {
	seen := map[types.NamespacedName]bool{}
	var out []reconcile.Request
	for i := range items {
		svc := lookup.ServiceOf(&items[i])
		if !seen[svc] {
			seen[svc] = true
			out = append(out, reconcile.Request{NamespacedName: svc})
		}
	}
	return out
}

// samenessChanged passes a change of a namespace's
// servicesv1alpha1.NamespaceSamenessLabel (a cluster set's mode).
func samenessChanged() predicate.Predicate {
	return predicate.Funcs{
		CreateFunc: func(event.CreateEvent) bool { return false },
		DeleteFunc: func(event.DeleteEvent) bool { return false },
		UpdateFunc: func(e event.UpdateEvent) bool {
			return e.ObjectOld.GetLabels()[servicesv1alpha1.NamespaceSamenessLabel] != e.ObjectNew.GetLabels()[servicesv1alpha1.NamespaceSamenessLabel]
		},
		GenericFunc: func(event.GenericEvent) bool { return false },
	}
}

// membership passes the ClusterProfile events that change a cluster set's
// clusters: created, deleted, or being deleted.
func membership() predicate.Predicate {
	return predicate.Funcs{
		UpdateFunc: func(e event.UpdateEvent) bool {
			return e.ObjectOld.GetDeletionTimestamp().IsZero() != e.ObjectNew.GetDeletionTimestamp().IsZero()
		},
		GenericFunc: func(event.GenericEvent) bool { return false },
	}
}
