// Package services is the agent's part of the Multicluster Services API: it
// reports the member's ServiceExports to the hub (ExportedServices in the
// cluster's namespace, with the Service's properties and its ready and
// serving-terminating endpoints), copies the hub's answer onto each
// ServiceExport's status, keeps the exports lease that says the cluster's
// endpoints are live, and serves the hub's ImportedServices on the member as
// ServiceImports with a derived Service (the stable clusterset IP) and
// EndpointSlices per source cluster.
package services

import (
	"context"
	"encoding/json"
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

	servicesv1alpha1 "github.com/lodestar-dev/lodestar/api/services/v1alpha1"
	"github.com/lodestar-dev/lodestar/internal/names"
	"github.com/lodestar-dev/lodestar/internal/patch"
)

// FieldOwner is the field owner of what the agent's services controllers
// write.
const FieldOwner = "lodestar-agent-services"

// Exporter reports one ServiceExport of the member (the request) to the hub.
type Exporter struct {
	// Hub is the agent's client of its cluster namespace on the hub.
	Hub client.Client
	// Member reads and writes the member; MemberCache watches it.
	Member      client.Client
	MemberCache cache.Cache
	// Namespace is the cluster's namespace on the hub.
	Namespace string
	// Lease is the exports lease, live before the first report.
	Lease *ExportsLease
}

// +kubebuilder:rbac:groups=services.lodestar.dev,resources=exportedservices,verbs=get;list;watch;create;update;patch;delete
// +kubebuilder:rbac:groups=coordination.k8s.io,resources=leases,verbs=create
// +kubebuilder:rbac:groups=coordination.k8s.io,resources=leases,resourceNames=lodestar-exports,verbs=get;update

// Reconcile reports req's ServiceExport, or withdraws its report when the
// export is gone.
func (e *Exporter) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	ctx = ctrl.LoggerInto(ctx, ctrl.LoggerFrom(ctx).WithValues("serviceExport", req.NamespacedName))
	export := &mcsv1beta1.ServiceExport{}
	err := e.MemberCache.Get(ctx, req.NamespacedName, export)
	if apierrors.IsNotFound(err) || err == nil && !export.DeletionTimestamp.IsZero() {
		return ctrl.Result{}, e.withdraw(ctx, req.NamespacedName)
	}
	if err != nil {
		return ctrl.Result{}, err
	}
	spec, err := e.report(ctx, export)
	if err != nil {
		return ctrl.Result{}, err
	}
	if err := e.Lease.Ensure(ctx); err != nil {
		return ctrl.Result{}, fmt.Errorf("renewing the exports lease: %w", err)
	}
	reported := &servicesv1alpha1.ExportedService{}
	key := client.ObjectKey{Namespace: e.Namespace, Name: names.ServiceObject(req.Namespace, req.Name)}
	err = e.Hub.Get(ctx, key, reported)
	switch {
	case apierrors.IsNotFound(err):
		reported = &servicesv1alpha1.ExportedService{ObjectMeta: metav1.ObjectMeta{Namespace: key.Namespace, Name: key.Name}, Spec: spec}
		if err := e.Hub.Create(ctx, reported); err != nil {
			return ctrl.Result{}, fmt.Errorf("reporting the export: %w", err)
		}
	case err != nil:
		return ctrl.Result{}, err
	case !equality.Semantic.DeepEqual(reported.Spec, spec):
		// The agent alone writes the spec: a patch, so that the hub's status
		// writes never make it conflict.
		patched := reported.DeepCopy()
		patched.Spec = spec
		if err := e.Hub.Patch(ctx, patched, client.MergeFrom(reported)); err != nil {
			return ctrl.Result{}, fmt.Errorf("reporting the export: %w", err)
		}
		reported = patched
	}
	return ctrl.Result{}, e.answer(ctx, export, reported)
}

// withdraw deletes the report of an export that is gone.
func (e *Exporter) withdraw(ctx context.Context, svc types.NamespacedName) error {
	reported := &servicesv1alpha1.ExportedService{}
	err := e.Hub.Get(ctx, client.ObjectKey{Namespace: e.Namespace, Name: names.ServiceObject(svc.Namespace, svc.Name)}, reported)
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return err
	}
	if err := e.Hub.Delete(ctx, reported, client.Preconditions{UID: &reported.UID}); client.IgnoreNotFound(err) != nil {
		return fmt.Errorf("withdrawing the export: %w", err)
	}
	ctrl.LoggerFrom(ctx).Info("Withdrew the export")
	return nil
}

// report is what the hub is told of an export.
func (e *Exporter) report(ctx context.Context, export *mcsv1beta1.ServiceExport) (servicesv1alpha1.ExportedServiceSpec, error) {
	spec := servicesv1alpha1.ExportedServiceSpec{Namespace: export.Namespace, Name: export.Name, ExportCreated: export.CreationTimestamp}
	svc := &corev1.Service{}
	err := e.MemberCache.Get(ctx, client.ObjectKeyFromObject(export), svc)
	switch {
	case apierrors.IsNotFound(err):
		spec.Invalid = &servicesv1alpha1.Invalid{Reason: string(mcsv1beta1.ServiceExportReasonNoService),
			Message: fmt.Sprintf("there is no Service %s/%s on this cluster", export.Namespace, export.Name)}
		return spec, nil
	case err != nil:
		return spec, err
	case svc.Spec.Type == corev1.ServiceTypeExternalName:
		spec.Invalid = &servicesv1alpha1.Invalid{Reason: string(mcsv1beta1.ServiceExportReasonInvalidServiceType),
			Message: "an ExternalName Service cannot be exported"}
		return spec, nil
	}
	spec.Service = Properties(svc, export)
	list := &discoveryv1.EndpointSliceList{}
	if err := e.MemberCache.List(ctx, list, client.InNamespace(export.Namespace), client.MatchingLabels{discoveryv1.LabelServiceName: export.Name}); err != nil {
		return spec, err
	}
	spec.Slices = Slices(list.Items)
	if n, endpoints := endpointBytes(spec.Slices); n > servicesv1alpha1.MaxEndpointBytes {
		// A report no import could carry, and perhaps over etcd's limit:
		// said on the export, the others unharmed.
		spec.Slices = nil
		spec.Invalid = &servicesv1alpha1.Invalid{Reason: servicesv1alpha1.ReasonExportTooLarge,
			Message: fmt.Sprintf("the Service's %d ready endpoints on this cluster take %d KiB; an export carries at most %d KiB of endpoints (an import holds those of every exporting cluster)",
				endpoints, n>>10, servicesv1alpha1.MaxEndpointBytes>>10)}
	}
	return spec, nil
}

// endpointBytes is the size of slices as a report carries them (JSON), and
// how many endpoints they hold.
func endpointBytes(slices []servicesv1alpha1.Slice) (size, endpoints int) {
	for _, s := range slices {
		endpoints += len(s.Endpoints)
	}
	raw, err := json.Marshal(slices)
	if err != nil {
		return 0, endpoints
	}
	return len(raw), endpoints
}

// Properties are what an export of svc tells importers.
func Properties(svc *corev1.Service, export *mcsv1beta1.ServiceExport) *servicesv1alpha1.ServiceProperties {
	p := &servicesv1alpha1.ServiceProperties{
		Type:                  mcsv1beta1.ClusterSetIP,
		SessionAffinity:       svc.Spec.SessionAffinity,
		SessionAffinityConfig: svc.Spec.SessionAffinityConfig,
		IPFamilies:            svc.Spec.IPFamilies,
		InternalTrafficPolicy: svc.Spec.InternalTrafficPolicy,
		TrafficDistribution:   svc.Spec.TrafficDistribution,
		Labels:                export.Spec.ExportedLabels,
		Annotations:           export.Spec.ExportedAnnotations,
	}
	if svc.Spec.ClusterIP == corev1.ClusterIPNone {
		p.Type = mcsv1beta1.Headless
	}
	for _, port := range svc.Spec.Ports {
		p.Ports = append(p.Ports, mcsv1beta1.ServicePort{Name: port.Name, Protocol: port.Protocol, AppProtocol: port.AppProtocol, Port: port.Port})
	}
	return p
}

// EndpointSliceController is the managed-by label value of the slices the
// Kubernetes EndpointSlice controller makes from a Service's pods.
const EndpointSliceController = "endpointslice-controller.k8s.io"

// Slices are the exported form of a Service's EndpointSlices: the endpoints
// ready, or serving while terminating, in the slices' name order. Only the
// EndpointSlice controller's slices are exported: a slice anyone else wrote
// (a tenant with endpointslices create, CVE-2021-25740; Lodestar's own imports)
// could name any address, and would reach every importer.
func Slices(items []discoveryv1.EndpointSlice) []servicesv1alpha1.Slice {
	items = slices.Clone(items)
	slices.SortFunc(items, func(a, b discoveryv1.EndpointSlice) int { return strings.Compare(a.Name, b.Name) })
	var out []servicesv1alpha1.Slice
	for _, s := range items {
		if s.Labels[discoveryv1.LabelManagedBy] != EndpointSliceController {
			continue
		}
		out1 := servicesv1alpha1.Slice{AddressType: s.AddressType, Ports: s.Ports}
		for _, ep := range s.Endpoints {
			ready := ptr.Deref(ep.Conditions.Ready, true)
			servingTerminating := ptr.Deref(ep.Conditions.Serving, false) && ptr.Deref(ep.Conditions.Terminating, false)
			if !ready && !servingTerminating {
				continue
			}
			out1.Endpoints = append(out1.Endpoints, servicesv1alpha1.Endpoint{Addresses: ep.Addresses, Conditions: ep.Conditions, Hostname: ep.Hostname, Zone: ep.Zone})
		}
		out = append(out, out1)
	}
	return out
}

// answer copies the hub's conditions onto the ServiceExport; an export the
// agent knows is invalid says so at once.
func (e *Exporter) answer(ctx context.Context, export *mcsv1beta1.ServiceExport, reported *servicesv1alpha1.ExportedService) error {
	conds := slices.Clone(export.Status.Conditions)
	changed := false
	if reported.Status.ObservedGeneration == reported.Generation {
		for _, c := range reported.Status.Conditions {
			c.ObservedGeneration = export.Generation
			changed = meta.SetStatusCondition(&conds, c) || changed
		}
		if meta.FindStatusCondition(reported.Status.Conditions, string(mcsv1beta1.ServiceExportConditionConflict)) == nil {
			changed = meta.RemoveStatusCondition(&conds, string(mcsv1beta1.ServiceExportConditionConflict)) || changed
		}
	} else if inv := reported.Spec.Invalid; inv != nil {
		changed = meta.SetStatusCondition(&conds, metav1.Condition{Type: string(mcsv1beta1.ServiceExportConditionValid), Status: metav1.ConditionFalse,
			Reason: inv.Reason, Message: inv.Message, ObservedGeneration: export.Generation})
	} else if meta.FindStatusCondition(conds, string(mcsv1beta1.ServiceExportConditionReady)) == nil {
		// A first report. A later one (new endpoints, say) keeps the hub's last
		// answer until the next: the export does not flap to Pending.
		changed = meta.SetStatusCondition(&conds, metav1.Condition{Type: string(mcsv1beta1.ServiceExportConditionReady), Status: metav1.ConditionFalse,
			Reason: string(mcsv1beta1.ServiceExportReasonPending), Message: "reported to the hub; waiting for its answer", ObservedGeneration: export.Generation})
	}
	if !changed {
		return nil
	}
	desired := export.DeepCopy()
	desired.Status.Conditions = conds
	// The export's conditions are the agent's (the hub's answer, relayed).
	return patch.ReplaceStatus(ctx, e.Member, export, desired, FieldOwner, nil)
}

// SetupWithManager watches the member's ServiceExports, Services and
// EndpointSlices, and the hub's answers.
func (e *Exporter) SetupWithManager(mgr ctrl.Manager) error {
	same := handler.TypedEnqueueRequestsFromMapFunc(func(_ context.Context, obj client.Object) []reconcile.Request {
		return []reconcile.Request{{NamespacedName: client.ObjectKeyFromObject(obj)}}
	})
	ofSlice := handler.TypedEnqueueRequestsFromMapFunc(func(_ context.Context, obj client.Object) []reconcile.Request {
		name := obj.GetLabels()[discoveryv1.LabelServiceName]
		if name == "" || obj.GetLabels()[discoveryv1.LabelManagedBy] != EndpointSliceController {
			return nil
		}
		return []reconcile.Request{{NamespacedName: types.NamespacedName{Namespace: obj.GetNamespace(), Name: name}}}
	})
	answered := handler.EnqueueRequestsFromMapFunc(func(_ context.Context, obj client.Object) []reconcile.Request {
		r := obj.(*servicesv1alpha1.ExportedService)
		return []reconcile.Request{{NamespacedName: types.NamespacedName{Namespace: r.Spec.Namespace, Name: r.Spec.Name}}}
	})
	return ctrl.NewControllerManagedBy(mgr).
		Named("serviceexport").
		WatchesRawSource(source.Kind(e.MemberCache, client.Object(&mcsv1beta1.ServiceExport{}), same)).
		WatchesRawSource(source.Kind(e.MemberCache, client.Object(&corev1.Service{}), same)).
		WatchesRawSource(source.Kind(e.MemberCache, client.Object(&discoveryv1.EndpointSlice{}), ofSlice)).
		Watches(&servicesv1alpha1.ExportedService{}, answered, builder.WithPredicates(predicate.Or(predicate.GenerationChangedPredicate{}, statusChanged()))).
		Complete(e)
}

// statusChanged passes updates that change an ExportedService's status.
func statusChanged() predicate.Predicate {
	return predicate.Funcs{UpdateFunc: func(ev event.UpdateEvent) bool {
		o, n := ev.ObjectOld.(*servicesv1alpha1.ExportedService), ev.ObjectNew.(*servicesv1alpha1.ExportedService)
		return !equality.Semantic.DeepEqual(o.Status, n.Status)
	}}
}
