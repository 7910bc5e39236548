package workgenerator

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	mcsv1beta1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"
	workv1alpha1 "sigs.k8s.io/work-api/pkg/apis/v1alpha1"

	placementv1alpha1 "github.com/lodestar-dev/lodestar/api/placement/v1alpha1"
	servicesv1alpha1 "github.com/lodestar-dev/lodestar/api/services/v1alpha1"
	"github.com/lodestar-dev/lodestar/internal/clusterworks"
	"github.com/lodestar-dev/lodestar/internal/lookup"
	"github.com/lodestar-dev/lodestar/internal/mcs"
	"github.com/lodestar-dev/lodestar/internal/names"
	"github.com/lodestar-dev/lodestar/internal/rollout"
)

// defaultDrain is spec.services.drainSeconds' default.
const defaultDrain = 5 * time.Second

// +kubebuilder:rbac:groups=services.lodestar.dev,resources=exportedservices;importedservices,verbs=get;list;watch

// trafficOf collects what the importers show of the Services the copy on a
// cluster the Placement left exports (nil when it exports none), for
// rollout.Depart's traffic gate: whether every importer serves the endpoints
// of a selected cluster that exports each Service, whether the copy's
// endpoints are marked withdrawn (ServicesWithdrawnAnnotation on its part 0,
// which the import controller honours) and left every importer, and the
// drain time. It reads the cache only.
func (r *Reconciler) trafficOf(ctx context.Context, s *scope, cluster string) (*rollout.Traffic, error) {
	exported, err := r.exportedBy(ctx, s, cluster)
	if err != nil || len(exported) == 0 {
		return nil, err
	}
	part0 := s.works[cluster][0] // exportedBy found Services: there are parts, in part order
	t := &rollout.Traffic{Services: exported, Drain: defaultDrain,
		Withdrawn:   part0.Annotations[placementv1alpha1.ServicesWithdrawnAnnotation] == strings.Join(exported, ","),
		WithdrawnAt: rollout.ParseTime(part0.Annotations[placementv1alpha1.ServicesWithdrawnAtAnnotation], s.now)}
	if ps := s.placement.Spec.Services; ps != nil && ps.DrainSeconds != nil {
		t.Drain = time.Duration(*ps.DrainSeconds) * time.Second
	}
	if t.Unserved, err = r.replacementsServed(ctx, s, cluster, exported); err != nil || t.Unserved != "" || !t.Withdrawn {
		return t, err
	}
	t.StillServed, err = r.stillServed(ctx, s, cluster, exported)
	return t, err
}

// withdraw marks the endpoints of the copy on cluster withdrawn from the
// importers (rollout.Removal.Withdraw).
func (r *Reconciler) withdraw(ctx context.Context, s *scope, cluster string) error {
	l := s.leavingNamed(cluster)
	if l == nil || l.Traffic == nil {
		return nil
	}
	part0 := s.works[cluster][0]
	services := strings.Join(l.Traffic.Services, ",")
	body, _ := json.Marshal(map[string]any{"metadata": map[string]any{"annotations": map[string]string{
		placementv1alpha1.ServicesWithdrawnAnnotation: services, placementv1alpha1.ServicesWithdrawnAtAnnotation: s.now.UTC().Format(time.RFC3339Nano)}}})
	obj := &workv1alpha1.Work{ObjectMeta: metav1.ObjectMeta{Name: part0.Name, Namespace: part0.Namespace}}
	if err := r.Client.Patch(ctx, obj, client.RawPatch(types.MergePatchType, body)); err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("withdrawing the Services of Work %s: %w", klog.KObj(part0), err)
	}
	ctrl.LoggerFrom(ctx).Info("Withdrawing the endpoints of a cluster the Placement left from the importers", "cluster", cluster, "services", services)
	return nil
}

// exportedBy are the placed Services the copy on cluster exports (ready or not).
func (r *Reconciler) exportedBy(ctx context.Context, s *scope, cluster string) ([]string, error) {
	var exported []string
	for _, name := range placedServices(s.works[cluster]) {
		e, err := r.validExport(ctx, cluster, s.placement.Namespace, name)
		if err != nil {
			return nil, err
		}
		if e != nil {
			exported = append(exported, name)
		}
	}
	return exported, nil
}

// replacementsServed says which importers do not serve the endpoints of a
// selected cluster that exports each Service with ready endpoints yet ("" when
// all do).
func (r *Reconciler) replacementsServed(ctx context.Context, s *scope, cluster string, exported []string) (string, error) {
	ns := s.placement.Namespace
	for _, name := range exported {
		svc := types.NamespacedName{Namespace: ns, Name: name}
		var replacements []string
		for _, c := range s.decided.Clusters {
			if c == cluster {
				continue
			}
			e, err := r.validExport(ctx, c, ns, name)
			if err != nil {
				return "", err
			}
			if e != nil && mcs.Endpoints(e.Spec.Slices) > 0 {
				replacements = append(replacements, c)
			}
		}
		if len(replacements) == 0 {
			return fmt.Sprintf("Service %s is not exported with ready endpoints by any cluster the Placement selects yet", svc), nil
		}
		behind, total, err := r.importers(ctx, s, svc, func(im *servicesv1alpha1.ImportedService) bool {
			return slices.ContainsFunc(im.Spec.Sources, func(src servicesv1alpha1.SourceSlices) bool {
				return slices.Contains(replacements, src.Cluster) && mcs.Endpoints(src.Slices) > 0
			})
		})
		if err != nil {
			return "", err
		}
		if behind > 0 {
			return fmt.Sprintf("%d of %d importers of Service %s do not serve the endpoints of %s yet", behind, total, svc, strings.Join(replacements, ", ")), nil
		}
	}
	return "", nil
}

// stillServed says which importers still serve the withdrawn endpoints of the
// copy on cluster ("" when none does).
func (r *Reconciler) stillServed(ctx context.Context, s *scope, cluster string, exported []string) (string, error) {
	for _, name := range exported {
		svc := types.NamespacedName{Namespace: s.placement.Namespace, Name: name}
		behind, total, err := r.importers(ctx, s, svc, func(im *servicesv1alpha1.ImportedService) bool {
			return !slices.ContainsFunc(im.Spec.Sources, func(src servicesv1alpha1.SourceSlices) bool { return src.Cluster == cluster })
		})
		if err != nil {
			return "", err
		}
		if behind > 0 {
			return fmt.Sprintf("%d of %d importers of Service %s still serve its endpoints", behind, total, svc), nil
		}
	}
	return "", nil
}

// validExport is cluster's report of its export of ns/name when the export is
// valid, or nil.
func (r *Reconciler) validExport(ctx context.Context, cluster, ns, name string) (*servicesv1alpha1.ExportedService, error) {
	e := &servicesv1alpha1.ExportedService{}
	err := r.Client.Get(ctx, client.ObjectKey{Namespace: names.ClusterNamespace(cluster), Name: names.ServiceObject(ns, name)}, e)
	if apierrors.IsNotFound(err) || meta.IsNoMatchError(err) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	if e.Spec.Service == nil || meta.IsStatusConditionFalse(e.Status.Conditions, string(mcsv1beta1.ServiceExportConditionValid)) {
		return nil, nil
	}
	return e, nil
}

// importers counts the importers of svc that serve it (Ready is not False for
// a missing namespace or a ServiceImport not Lodestar's) and are not ok or
// have not served the latest spec yet, and how many serve it.
func (r *Reconciler) importers(ctx context.Context, s *scope, svc types.NamespacedName, ok func(*servicesv1alpha1.ImportedService) bool) (behind, total int, err error) {
	list := &servicesv1alpha1.ImportedServiceList{}
	if err := r.Client.List(ctx, list, client.MatchingFields{lookup.ServicesByName: svc.String()}); err != nil {
		return 0, 0, err
	}
	for i := range list.Items {
		im := &list.Items[i]
		if c := meta.FindStatusCondition(im.Status.Conditions, string(mcsv1beta1.ServiceImportConditionReady)); c != nil && c.Status == metav1.ConditionFalse &&
			slices.Contains([]string{servicesv1alpha1.ReasonNamespaceMissing, servicesv1alpha1.ReasonNotOurs, servicesv1alpha1.ReasonNotServed}, c.Reason) {
			continue // the member serves no import of it: nothing to wait for
		}
		// An importer whose agent is not reachable cannot be waited for (at
		// thousands of edge sites some always are not): it catches up when back.
		cluster, _ := names.ClusterFromNamespace(im.Namespace)
		if state, err := r.profileState(ctx, cluster, s.decided.Sets); err != nil {
			return 0, 0, err
		} else if !state.reachable {
			continue
		}
		total++
		if im.Status.ObservedGeneration != im.Generation || !ok(im) {
			behind++
		}
	}
	return behind, total, nil
}

// placedServices are the names of the Services the Works carry.
func placedServices(parts []*workv1alpha1.Work) []string {
	var out []string
	for _, w := range parts {
		for _, id := range clusterworks.ManifestIDs(w) {
			if id.Group == "" && id.Kind == "Service" && !slices.Contains(out, id.Name) {
				out = append(out, id.Name)
			}
		}
	}
	slices.Sort(out)
	return out
}
