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

// trafficRecheck is how often a move of exported Services looks again at the
// importers while it waits for them.
const trafficRecheck = time.Second

// defaultDrain is spec.services.drainSeconds' default.
const defaultDrain = 5 * time.Second

// +kubebuilder:rbac:groups=services.lodestar.dev,resources=exportedservices;importedservices,verbs=get;list;watch

// servicesGate keeps, among the clusters the removal lets go, those whose
// copy exports a Service (a ServiceExport reported to the hub) until its
// traffic has moved: every importer serves the endpoints of a selected
// cluster that exports it, then the leaving cluster's endpoints are withdrawn
// from every importer (ServicesWithdrawnAnnotation on its Work, which the
// import controller honours), and the drain time has passed since. A removal
// forced by the progress deadline is not held, nor one of a cluster the
// namespace may no longer use (its binding or ClusterProfile removed): a
// revocation is immediate, and there is nothing to move traffic for.
func (r *Reconciler) servicesGate(ctx context.Context, s *scope) error {
	if len(s.removal.Remove) == 0 {
		return nil
	}
	usable, err := r.usable(ctx, s.placement.Namespace, s.removal.Remove)
	if err != nil {
		return err
	}
	var kept []string
	for _, cluster := range s.removal.Remove {
		if slices.Contains(s.removal.Forced, cluster) || !usable[cluster] {
			continue
		}
		why, recheck, err := r.moveTraffic(ctx, s, cluster)
		if err != nil {
			return err
		}
		if why == "" {
			continue
		}
		kept = append(kept, cluster)
		s.trafficHeld = append(s.trafficHeld, fmt.Sprintf("%s: %s", cluster, why))
		if s.removal.RecheckAfter == 0 || recheck < s.removal.RecheckAfter {
			s.removal.RecheckAfter = recheck
		}
	}
	s.removal.Remove = slices.DeleteFunc(s.removal.Remove, func(c string) bool { return slices.Contains(kept, c) })
	s.removal.Kept = append(s.removal.Kept, kept...)
	return nil
}

// usable are those of clusters that namespace's Placements may still use: a
// ClusterProfile of theirs, not being deleted, in a cluster set bound to it.
func (r *Reconciler) usable(ctx context.Context, namespace string, clusters []string) (map[string]bool, error) {
	sets, err := lookup.ClusterSets(ctx, r.Client, namespace, r.Scope.Sets)
	if err != nil {
		return nil, err
	}
	out := map[string]bool{}
	for _, cluster := range clusters {
		for _, set := range sets {
			p, err := lookup.ManagedProfile(ctx, r.Client, client.ObjectKey{Namespace: set, Name: cluster}, sets)
			if err != nil {
				return nil, err
			}
			if p != nil && p.DeletionTimestamp.IsZero() {
				out[cluster] = true
				break
			}
		}
	}
	return out, nil
}

// moveTraffic says why the copy on cluster (which the Placement left) must
// stay for its exported Services' traffic, and when to look again; "" lets
// it go. The phases: every importer serves a replacement's endpoints; the
// leaving copy's endpoints are withdrawn from every importer; the drain time
// passes.
func (r *Reconciler) moveTraffic(ctx context.Context, s *scope, cluster string) (string, time.Duration, error) {
	exported, err := r.exportedBy(ctx, s, cluster)
	if err != nil || len(exported) == 0 {
		return "", 0, err
	}
	for _, phase := range []func(context.Context, *scope, string, []string) (string, time.Duration, error){
		r.replacementsServed, r.withdrawn, r.drained,
	} {
		if why, recheck, err := phase(ctx, s, cluster, exported); err != nil || why != "" {
			return why, recheck, err
		}
	}
	return "", 0, nil
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

// replacementsServed holds the move until every importer serves the endpoints
// of a selected cluster that exports each Service with ready endpoints.
func (r *Reconciler) replacementsServed(ctx context.Context, s *scope, cluster string, exported []string) (string, time.Duration, error) {
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
				return "", 0, err
			}
			if e != nil && mcs.Endpoints(e.Spec.Slices) > 0 {
				replacements = append(replacements, c)
			}
		}
		if len(replacements) == 0 {
			return fmt.Sprintf("Service %s is not exported with ready endpoints by any cluster the Placement selects yet", svc), trafficRecheck, nil
		}
		behind, total, err := r.importers(ctx, s, svc, func(im *servicesv1alpha1.ImportedService) bool {
			return slices.ContainsFunc(im.Spec.Sources, func(src servicesv1alpha1.SourceSlices) bool {
				return slices.Contains(replacements, src.Cluster) && mcs.Endpoints(src.Slices) > 0
			})
		})
		if err != nil {
			return "", 0, err
		}
		if behind > 0 {
			return fmt.Sprintf("%d of %d importers of Service %s do not serve the endpoints of %s yet", behind, total, svc, strings.Join(replacements, ", ")), trafficRecheck, nil
		}
	}
	return "", 0, nil
}

// withdrawn marks the leaving copy's endpoints withdrawn (on its part 0) and
// holds the move until no importer serves them.
func (r *Reconciler) withdrawn(ctx context.Context, s *scope, cluster string, exported []string) (string, time.Duration, error) {
	part0 := s.works[cluster][0] // placedServices found Services: there are parts, in part order
	if part0.Annotations[placementv1alpha1.ServicesWithdrawnAnnotation] != strings.Join(exported, ",") {
		at := s.now.UTC().Format(time.RFC3339Nano)
		body, _ := json.Marshal(map[string]any{"metadata": map[string]any{"annotations": map[string]string{
			placementv1alpha1.ServicesWithdrawnAnnotation: strings.Join(exported, ","), placementv1alpha1.ServicesWithdrawnAtAnnotation: at}}})
		obj := &workv1alpha1.Work{ObjectMeta: metav1.ObjectMeta{Name: part0.Name, Namespace: part0.Namespace}}
		if err := r.Client.Patch(ctx, obj, client.RawPatch(types.MergePatchType, body)); err != nil && !apierrors.IsNotFound(err) {
			return "", 0, fmt.Errorf("withdrawing the Services of Work %s: %w", klog.KObj(part0), err)
		}
		ctrl.LoggerFrom(ctx).Info("Withdrawing the endpoints of a cluster the Placement left from the importers", "cluster", cluster, "services", exported)
		return fmt.Sprintf("withdrawing its endpoints of %s from the importers", strings.Join(exported, ", ")), trafficRecheck, nil
	}
	for _, name := range exported {
		svc := types.NamespacedName{Namespace: s.placement.Namespace, Name: name}
		behind, total, err := r.importers(ctx, s, svc, func(im *servicesv1alpha1.ImportedService) bool {
			return !slices.ContainsFunc(im.Spec.Sources, func(src servicesv1alpha1.SourceSlices) bool { return src.Cluster == cluster })
		})
		if err != nil {
			return "", 0, err
		}
		if behind > 0 {
			return fmt.Sprintf("%d of %d importers of Service %s still serve its endpoints", behind, total, svc), trafficRecheck, nil
		}
	}
	return "", 0, nil
}

// drained holds the move until the drain time has passed since the withdrawal.
func (r *Reconciler) drained(_ context.Context, s *scope, cluster string, _ []string) (string, time.Duration, error) {
	at := rollout.ParseTime(s.works[cluster][0].Annotations[placementv1alpha1.ServicesWithdrawnAtAnnotation], s.now)
	drain := defaultDrain
	if ps := s.placement.Spec.Services; ps != nil && ps.DrainSeconds != nil {
		drain = time.Duration(*ps.DrainSeconds) * time.Second
	}
	if wait := at.Add(drain).Sub(s.now); wait > 0 {
		return fmt.Sprintf("draining: its endpoints left every importer; deleted in %s", wait.Round(time.Second)), wait, nil
	}
	return "", 0, nil
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
