package services

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"
	mcsv1beta1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"
	workv1alpha1 "sigs.k8s.io/work-api/pkg/apis/v1alpha1"

	placementv1alpha1 "github.com/lodestar-dev/lodestar/api/placement/v1alpha1"
	servicesv1alpha1 "github.com/lodestar-dev/lodestar/api/services/v1alpha1"
	"github.com/lodestar-dev/lodestar/internal/names"
	"github.com/lodestar-dev/lodestar/internal/patch"
)

// Importer serves one ImportedService of the hub (the request is the
// Service's namespace/name) on the member: a ServiceImport, for ClusterSetIP a
// derived ClusterIP Service without selector whose IP is the import's (stable
// for the import's life: the Service is made once), and one EndpointSlice per
// slice of each source cluster, labelled as the KEP says. It deletes only the
// objects it made (labelled ManagedBy), and only when the hub's ImportedService
// is gone from a synced cache, never because the hub is unreachable.
type Importer struct {
	// Hub is the agent's client of its cluster namespace on the hub.
	Hub client.Client
	// Member reads and writes the member; MemberCache watches it.
	Member      client.Client
	MemberCache cache.Cache
	// Namespace is the cluster's namespace on the hub.
	Namespace string
	// Unserved says the member does not serve the Multicluster Services API:
	// each import only reads so on the hub (Ready=False NotServed), so that
	// moves do not wait for this cluster.
	Unserved bool
}

// +kubebuilder:rbac:groups=services.lodestar.dev,resources=importedservices,verbs=get;list;watch
// +kubebuilder:rbac:groups=services.lodestar.dev,resources=importedservices/status,verbs=get;patch;update

// Reconcile serves req's import.
func (im *Importer) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	ctx = ctrl.LoggerInto(ctx, ctrl.LoggerFrom(ctx).WithValues("serviceImport", req.NamespacedName))
	imported := &servicesv1alpha1.ImportedService{}
	err := im.Hub.Get(ctx, client.ObjectKey{Namespace: im.Namespace, Name: names.ServiceObject(req.Namespace, req.Name)}, imported)
	if apierrors.IsNotFound(err) {
		return ctrl.Result{}, im.remove(ctx, req.NamespacedName)
	}
	if err != nil {
		return ctrl.Result{}, err
	}
	ready := metav1.Condition{Type: string(mcsv1beta1.ServiceImportConditionReady), Status: metav1.ConditionTrue,
		Reason: string(mcsv1beta1.ServiceImportReasonReady), Message: "served on the member"}
	if im.Unserved {
		ready.Status, ready.Reason = metav1.ConditionFalse, servicesv1alpha1.ReasonNotServed
		ready.Message = "the member does not serve the Multicluster Services API (multicluster.x-k8s.io/v1beta1 ServiceExport and ServiceImport): install the agent chart's CRDs and restart the agent"
		return ctrl.Result{}, im.report(ctx, imported, nil, ready)
	}
	var ips []string
	// In a cluster set of namespace sameness the import lands in the
	// member's namespace of the name whoever made it; otherwise only where
	// the hub places the namespace.
	placed := imported.Spec.NamespaceSameness == servicesv1alpha1.NamespaceSamenessClusterSet
	if !placed {
		if placed, err = im.placed(ctx, req.Namespace); err != nil {
			return ctrl.Result{}, err
		}
	}
	ns := &corev1.Namespace{}
	err = im.MemberCache.Get(ctx, client.ObjectKey{Name: req.Namespace}, ns)
	switch {
	case !placed:
		// A hub places imports only where it places the namespace: one that
		// does not (forged, or late) is not served, and what was is removed.
		ready.Status, ready.Reason = metav1.ConditionFalse, servicesv1alpha1.ReasonNamespaceNotPlaced
		ready.Message = fmt.Sprintf("the hub places nothing of namespace %s on this cluster: imports land only in namespaces the hub places here", req.Namespace)
		if err := im.remove(ctx, req.NamespacedName); err != nil {
			return ctrl.Result{}, err
		}
	case apierrors.IsNotFound(err):
		ready.Status, ready.Reason = metav1.ConditionFalse, servicesv1alpha1.ReasonNamespaceMissing
		ready.Message = fmt.Sprintf("the member has no namespace %s: the import appears when it does", req.Namespace)
	case err != nil:
		return ctrl.Result{}, err
	default:
		ips, err = im.serve(ctx, imported)
		var notOurs *notOursError
		if errors.As(err, &notOurs) {
			ready.Status, ready.Reason, ready.Message = metav1.ConditionFalse, servicesv1alpha1.ReasonNotOurs, notOurs.Error()
		} else if err != nil {
			return ctrl.Result{}, err
		}
	}
	return ctrl.Result{}, im.report(ctx, imported, ips, ready)
}

// placed tells whether the hub places anything of namespace ns on this
// cluster: a Work of a Placement of ns in the cluster's hub namespace.
func (im *Importer) placed(ctx context.Context, ns string) (bool, error) {
	works := &workv1alpha1.WorkList{}
	if err := im.Hub.List(ctx, works, client.InNamespace(im.Namespace), client.MatchingLabels{placementv1alpha1.PlacementNamespaceLabel: ns}); err != nil {
		return false, fmt.Errorf("listing the Works of namespace %s: %w", ns, err)
	}
	return len(works.Items) > 0, nil
}

type notOursError struct{ svc types.NamespacedName }

func (e *notOursError) Error() string {
	return fmt.Sprintf("the member has a ServiceImport %s that Lodestar did not create: it is left as it is", e.svc)
}

// serve writes the ServiceImport, its derived Service and its slices, and
// returns the import's IPs.
func (im *Importer) serve(ctx context.Context, imported *servicesv1alpha1.ImportedService) ([]string, error) {
	svc := types.NamespacedName{Namespace: imported.Spec.Namespace, Name: imported.Spec.Name}
	si := &mcsv1beta1.ServiceImport{}
	err := im.Member.Get(ctx, svc, si)
	if apierrors.IsNotFound(err) {
		si = &mcsv1beta1.ServiceImport{ObjectMeta: metav1.ObjectMeta{Namespace: svc.Namespace, Name: svc.Name, Labels: importLabels(imported),
			Annotations: exportedAnnotations(&mcsv1beta1.ServiceImport{}, imported)}, Spec: importSpec(imported, nil)}
		if err := im.Member.Create(ctx, si); err != nil {
			return nil, fmt.Errorf("creating the ServiceImport: %w", err)
		}
		ctrl.LoggerFrom(ctx).Info("Created the ServiceImport")
	} else if err != nil {
		return nil, err
	} else if si.Labels[managedByLabel] != servicesv1alpha1.ManagedBy {
		return nil, &notOursError{svc}
	}
	owner := metav1.OwnerReference{APIVersion: mcsv1beta1.GroupVersion.String(), Kind: "ServiceImport", Name: si.Name, UID: si.UID}
	var ips []string
	serviceName := ""
	if imported.Spec.Service.Type == mcsv1beta1.ClusterSetIP {
		derived, err := im.derived(ctx, svc, imported, owner)
		if err != nil {
			return nil, err
		}
		ips, serviceName = derived.Spec.ClusterIPs, derived.Name
	} else if err := im.deleteDerived(ctx, svc); err != nil {
		return nil, err
	}
	spec := importSpec(imported, ips)
	labels, annotations := importLabels(imported), exportedAnnotations(si, imported)
	if !equality.Semantic.DeepEqual(si.Spec, spec) || !equality.Semantic.DeepEqual(si.Labels, labels) || !equality.Semantic.DeepEqual(si.Annotations, annotations) {
		patched := si.DeepCopy()
		patched.Spec, patched.Labels, patched.Annotations = spec, labels, annotations
		if err := im.Member.Patch(ctx, patched, client.MergeFrom(si)); err != nil {
			return nil, fmt.Errorf("writing the ServiceImport: %w", err)
		}
		si = patched
	}
	var clusters []mcsv1beta1.ClusterStatus
	for _, c := range imported.Spec.Clusters {
		clusters = append(clusters, mcsv1beta1.ClusterStatus{Cluster: c})
	}
	status := si.Status.DeepCopy()
	status.Clusters = clusters
	status.EndpointSliceObjects = mcsv1beta1.EndpointSliceObjectsPresent
	meta.SetStatusCondition(&status.Conditions, metav1.Condition{Type: string(mcsv1beta1.ServiceImportConditionReady), Status: metav1.ConditionTrue,
		Reason: string(mcsv1beta1.ServiceImportReasonReady), Message: "the import's endpoints are written", ObservedGeneration: si.Generation})
	if !equality.Semantic.DeepEqual(&si.Status, status) {
		desired := si.DeepCopy()
		desired.Status = *status
		// The agent alone writes the status of the ServiceImports it makes.
		if err := patch.ReplaceStatus(ctx, im.Member, si, desired, FieldOwner, nil); err != nil {
			return nil, err
		}
	}
	return ips, im.slices(ctx, svc, imported, serviceName, owner)
}

// importSpec is the ServiceImport's spec.
func importSpec(imported *servicesv1alpha1.ImportedService, ips []string) mcsv1beta1.ServiceImportSpec {
	p := imported.Spec.Service
	return mcsv1beta1.ServiceImportSpec{Ports: p.Ports, IPs: ips, Type: p.Type, SessionAffinity: p.SessionAffinity, SessionAffinityConfig: p.SessionAffinityConfig,
		IPFamilies: p.IPFamilies, InternalTrafficPolicy: p.InternalTrafficPolicy, TrafficDistribution: p.TrafficDistribution}
}

// DerivedName is the name of a ServiceImport's derived Service:
// "derived-" and a hash of the namespace/name, as the MCS reference controller
// names it.
func DerivedName(svc types.NamespacedName) string { return "derived-" + names.Hash(svc.String())[:10] }

// derived makes the derived Service: created once (its cluster IP stays for
// the import's life), its ports kept to the import's.
func (im *Importer) derived(ctx context.Context, svc types.NamespacedName, imported *servicesv1alpha1.ImportedService, owner metav1.OwnerReference) (*corev1.Service, error) {
	var ports []corev1.ServicePort
	for _, p := range imported.Spec.Service.Ports {
		ports = append(ports, corev1.ServicePort{Name: p.Name, Protocol: p.Protocol, AppProtocol: p.AppProtocol, Port: p.Port, TargetPort: intstr.FromInt32(p.Port)})
	}
	d := &corev1.Service{}
	key := client.ObjectKey{Namespace: svc.Namespace, Name: DerivedName(svc)}
	err := im.Member.Get(ctx, key, d)
	if apierrors.IsNotFound(err) {
		d = &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: key.Namespace, Name: key.Name, Labels: managedLabels(svc.Name), OwnerReferences: []metav1.OwnerReference{owner}},
			Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeClusterIP, Ports: ports, SessionAffinity: imported.Spec.Service.SessionAffinity,
				SessionAffinityConfig: imported.Spec.Service.SessionAffinityConfig, IPFamilies: imported.Spec.Service.IPFamilies}}
		if len(imported.Spec.Service.IPFamilies) > 1 {
			d.Spec.IPFamilyPolicy = ptr.To(corev1.IPFamilyPolicyPreferDualStack)
		}
		if err := im.Member.Create(ctx, d); err != nil {
			return nil, fmt.Errorf("creating the derived Service: %w", err)
		}
		return d, nil
	}
	if err != nil {
		return nil, err
	}
	if !slices.EqualFunc(d.Spec.Ports, ports, func(a, b corev1.ServicePort) bool {
		return a.Name == b.Name && a.Port == b.Port && a.Protocol == b.Protocol && ptr.Equal(a.AppProtocol, b.AppProtocol)
	}) {
		patched := d.DeepCopy()
		patched.Spec.Ports = ports
		if err := im.Member.Patch(ctx, patched, client.MergeFrom(d)); err != nil {
			return nil, fmt.Errorf("writing the derived Service: %w", err)
		}
		d = patched
	}
	return d, nil
}

func (im *Importer) deleteDerived(ctx context.Context, svc types.NamespacedName) error {
	d := &corev1.Service{}
	err := im.Member.Get(ctx, client.ObjectKey{Namespace: svc.Namespace, Name: DerivedName(svc)}, d)
	if apierrors.IsNotFound(err) || err == nil && d.Labels[managedByLabel] != servicesv1alpha1.ManagedBy {
		return nil
	}
	if err != nil {
		return err
	}
	return client.IgnoreNotFound(im.Member.Delete(ctx, d, client.Preconditions{UID: &d.UID}))
}

// slices writes one EndpointSlice per slice of each source and deletes the
// import's others.
func (im *Importer) slices(ctx context.Context, svc types.NamespacedName, imported *servicesv1alpha1.ImportedService, serviceName string, owner metav1.OwnerReference) error {
	want := map[string]*discoveryv1.EndpointSlice{}
	for _, src := range imported.Spec.Sources {
		for i, s := range src.Slices {
			name := fmt.Sprintf("%s-%s-%d", DerivedName(svc), names.Hash(src.Cluster)[:8], i)
			labels := managedLabels(svc.Name)
			labels[discoveryv1.LabelManagedBy] = servicesv1alpha1.ManagedBy
			labels[mcsv1beta1.LabelServiceName] = svc.Name
			labels[mcsv1beta1.LabelSourceCluster] = src.Cluster
			if serviceName != "" {
				labels[discoveryv1.LabelServiceName] = serviceName // kube-proxy routes the derived Service to them
			}
			slice := &discoveryv1.EndpointSlice{ObjectMeta: metav1.ObjectMeta{Namespace: svc.Namespace, Name: name, Labels: labels,
				OwnerReferences: []metav1.OwnerReference{owner}}, AddressType: s.AddressType, Ports: s.Ports}
			for _, ep := range s.Endpoints {
				slice.Endpoints = append(slice.Endpoints, discoveryv1.Endpoint{Addresses: ep.Addresses, Conditions: ep.Conditions, Hostname: ep.Hostname, Zone: ep.Zone})
			}
			want[name] = slice
		}
	}
	have := &discoveryv1.EndpointSliceList{}
	if err := im.MemberCache.List(ctx, have, client.InNamespace(svc.Namespace), client.MatchingLabels{servicesv1alpha1.ImportLabel: svc.Name, discoveryv1.LabelManagedBy: servicesv1alpha1.ManagedBy}); err != nil {
		return err
	}
	for i := range have.Items {
		cur := &have.Items[i]
		w, keep := want[cur.Name]
		if !keep {
			if err := im.Member.Delete(ctx, cur, client.Preconditions{UID: &cur.UID}); client.IgnoreNotFound(err) != nil {
				return fmt.Errorf("deleting EndpointSlice %s: %w", cur.Name, err)
			}
			continue
		}
		delete(want, cur.Name)
		if cur.AddressType != w.AddressType {
			// The address type is immutable: make it again.
			if err := im.Member.Delete(ctx, cur, client.Preconditions{UID: &cur.UID}); client.IgnoreNotFound(err) != nil {
				return err
			}
			want[cur.Name] = w
			continue
		}
		if equality.Semantic.DeepEqual(cur.Labels, w.Labels) && equality.Semantic.DeepEqual(cur.Ports, w.Ports) && equality.Semantic.DeepEqual(cur.Endpoints, w.Endpoints) {
			continue
		}
		updated := cur.DeepCopy()
		updated.Labels, updated.Ports, updated.Endpoints, updated.OwnerReferences = w.Labels, w.Ports, w.Endpoints, w.OwnerReferences
		if err := im.Member.Update(ctx, updated); err != nil {
			return fmt.Errorf("writing EndpointSlice %s: %w", cur.Name, err)
		}
	}
	for _, w := range want {
		if err := im.Member.Create(ctx, w); err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("creating EndpointSlice %s: %w", w.Name, err)
		}
	}
	return nil
}

// remove deletes what Lodestar made for an import that is gone: its
// ServiceImport (when Lodestar made it), the derived Service and the slices.
func (im *Importer) remove(ctx context.Context, svc types.NamespacedName) error {
	si := &mcsv1beta1.ServiceImport{}
	err := im.MemberCache.Get(ctx, svc, si)
	if err == nil && si.Labels[managedByLabel] == servicesv1alpha1.ManagedBy {
		if err := im.Member.Delete(ctx, si, client.Preconditions{UID: &si.UID}); client.IgnoreNotFound(err) != nil {
			return fmt.Errorf("deleting the ServiceImport: %w", err)
		}
		ctrl.LoggerFrom(ctx).Info("Deleted the ServiceImport: no cluster exports it any more")
	} else if client.IgnoreNotFound(err) != nil {
		return err
	}
	if err := im.deleteDerived(ctx, svc); err != nil {
		return err
	}
	return client.IgnoreNotFound(im.Member.DeleteAllOf(ctx, &discoveryv1.EndpointSlice{}, client.InNamespace(svc.Namespace),
		client.MatchingLabels{servicesv1alpha1.ImportLabel: svc.Name, discoveryv1.LabelManagedBy: servicesv1alpha1.ManagedBy}))
}

// report writes the import's status on the hub.
func (im *Importer) report(ctx context.Context, imported *servicesv1alpha1.ImportedService, ips []string, ready metav1.Condition) error {
	status := imported.Status.DeepCopy()
	status.ObservedGeneration, status.IPs = imported.Generation, ips
	ready.ObservedGeneration = imported.Generation
	meta.SetStatusCondition(&status.Conditions, ready)
	if equality.Semantic.DeepEqual(&imported.Status, status) {
		return nil
	}
	desired := imported.DeepCopy()
	desired.Status = *status
	// The member's agent alone writes its import's status on the hub.
	return patch.ReplaceStatus(ctx, im.Hub, imported, desired, FieldOwner, nil)
}

const managedByLabel = "app.kubernetes.io/managed-by"

// exportedAnnotationsKey records, on a ServiceImport, which of its annotations
// came from the exports (so that one no longer exported is removed, and
// others' are kept).
const exportedAnnotationsKey = "services.lodestar.dev/exported-annotations"

// importLabels are a ServiceImport's labels: the exports' exportedLabels and
// Lodestar's own.
func importLabels(imported *servicesv1alpha1.ImportedService) map[string]string {
	out := map[string]string{}
	for k, v := range imported.Spec.Service.Labels {
		out[k] = v
	}
	for k, v := range managedLabels(imported.Spec.Name) {
		out[k] = v
	}
	return out
}

// exportedAnnotations are si's annotations with the exports' exportedAnnotations
// in place of those it had from them.
func exportedAnnotations(si *mcsv1beta1.ServiceImport, imported *servicesv1alpha1.ImportedService) map[string]string {
	out := map[string]string{}
	had := strings.Split(si.Annotations[exportedAnnotationsKey], ",")
	for k, v := range si.Annotations {
		if k != exportedAnnotationsKey && !slices.Contains(had, k) {
			out[k] = v
		}
	}
	var keys []string
	for k, v := range imported.Spec.Service.Annotations {
		out[k] = v
		keys = append(keys, k)
	}
	if len(keys) > 0 {
		slices.Sort(keys)
		out[exportedAnnotationsKey] = strings.Join(keys, ",")
	}
	if len(out) == 0 {
		return nil
	}
	return out
}

func managedLabels(name string) map[string]string {
	return map[string]string{managedByLabel: servicesv1alpha1.ManagedBy, servicesv1alpha1.ImportLabel: name}
}

// SetupWithManager watches the hub's ImportedServices, the member's
// namespaces (an import appears when its namespace does), and what the
// importer made on the member.
func (im *Importer) SetupWithManager(mgr ctrl.Manager) error {
	ofImport := handler.EnqueueRequestsFromMapFunc(func(_ context.Context, obj client.Object) []reconcile.Request {
		r := obj.(*servicesv1alpha1.ImportedService)
		return []reconcile.Request{{NamespacedName: types.NamespacedName{Namespace: r.Spec.Namespace, Name: r.Spec.Name}}}
	})
	inNamespace := handler.TypedEnqueueRequestsFromMapFunc(func(ctx context.Context, obj client.Object) []reconcile.Request {
		list := &servicesv1alpha1.ImportedServiceList{}
		if err := im.Hub.List(ctx, list, client.InNamespace(im.Namespace)); err != nil {
			return nil
		}
		var out []reconcile.Request
		for _, r := range list.Items {
			if r.Spec.Namespace == obj.GetName() {
				out = append(out, reconcile.Request{NamespacedName: types.NamespacedName{Namespace: r.Spec.Namespace, Name: r.Spec.Name}})
			}
		}
		return out
	})
	made := handler.TypedEnqueueRequestsFromMapFunc(func(_ context.Context, obj client.Object) []reconcile.Request {
		return []reconcile.Request{{NamespacedName: types.NamespacedName{Namespace: obj.GetNamespace(), Name: obj.GetLabels()[servicesv1alpha1.ImportLabel]}}}
	})
	ours := predicate.NewPredicateFuncs(func(obj client.Object) bool {
		return obj.GetLabels()[managedByLabel] == servicesv1alpha1.ManagedBy && obj.GetLabels()[servicesv1alpha1.ImportLabel] != ""
	})
	b := ctrl.NewControllerManagedBy(mgr).
		Named("serviceimport").
		Watches(&servicesv1alpha1.ImportedService{}, ofImport, builder.WithPredicates(predicate.GenerationChangedPredicate{}))
	if im.Unserved {
		return b.Complete(im)
	}
	return b.
		WatchesRawSource(source.Kind(im.MemberCache, client.Object(&corev1.Namespace{}), inNamespace, predicate.Funcs{UpdateFunc: func(event.UpdateEvent) bool { return false }})).
		WatchesRawSource(source.Kind(im.MemberCache, client.Object(&mcsv1beta1.ServiceImport{}), made, ours)).
		WatchesRawSource(source.Kind(im.MemberCache, client.Object(&discoveryv1.EndpointSlice{}), made, ours)).
		Complete(im)
}
