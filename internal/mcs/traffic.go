package mcs

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	mcsv1beta1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"
	workv1alpha1 "sigs.k8s.io/work-api/pkg/apis/v1alpha1"

	placementv1alpha1 "github.com/lodestar-dev/lodestar/api/placement/v1alpha1"
	servicesv1alpha1 "github.com/lodestar-dev/lodestar/api/services/v1alpha1"
	"github.com/lodestar-dev/lodestar/internal/clusterworks"
	"github.com/lodestar-dev/lodestar/internal/lookup"
	"github.com/lodestar-dev/lodestar/internal/names"
	"github.com/lodestar-dev/lodestar/internal/rollout"
)

// DefaultDrain is spec.services.drainSeconds' default.
const DefaultDrain = 5 * time.Second

// Mover reads, from the hub's cache, what the importers show of the Services
// a copy a Placement left exports: the facts of rollout.Depart's traffic gate.
type Mover struct {
	Reader client.Reader
	// Reachable tells whether a cluster's agent is reachable: an importer
	// whose agent is not cannot be waited for (at thousands of edge sites
	// some always are not); it catches up when back.
	Reachable func(ctx context.Context, cluster string) (bool, error)
}

// Leaver is a copy a Placement left: its cluster, the Placement's namespace,
// its Works (in part order), and the clusters the Placement selects.
type Leaver struct {
	Cluster, Namespace string
	Parts              []*workv1alpha1.Work
	Selected           []string
	// Drain is spec.services.drainSeconds (DefaultDrain when zero).
	Drain time.Duration
}

// Traffic is what the importers show of the Services the copy exports (nil
// when it exports none): whether every importer serves the endpoints of a
// selected cluster that exports each Service, whether the copy's endpoints
// are marked withdrawn (ServicesWithdrawnAnnotation on its part 0, which the
// import controller honours) and left every importer, and the drain time.
func (m Mover) Traffic(ctx context.Context, l Leaver, now time.Time) (*rollout.Traffic, error) {
	exported, err := m.exportedBy(ctx, l)
	if err != nil || len(exported) == 0 {
		return nil, err
	}
	part0 := l.Parts[0] // exportedBy found Services: there are parts, in part order
	t := &rollout.Traffic{Services: exported, Drain: l.Drain,
		Withdrawn:   part0.Annotations[placementv1alpha1.ServicesWithdrawnAnnotation] == strings.Join(exported, ","),
		WithdrawnAt: rollout.ParseTime(part0.Annotations[placementv1alpha1.ServicesWithdrawnAtAnnotation], now)}
	if t.Drain == 0 {
		t.Drain = DefaultDrain
	}
	if t.Unserved, err = m.replacementsServed(ctx, l, exported); err != nil || t.Unserved != "" || !t.Withdrawn {
		return t, err
	}
	t.StillServed, err = m.stillServed(ctx, l, exported)
	return t, err
}

// exportedBy are the placed Services the copy on cluster exports (ready or not).
func (m Mover) exportedBy(ctx context.Context, l Leaver) ([]string, error) {
	var exported []string
	for _, name := range placedServices(l.Parts) {
		e, err := m.validExport(ctx, l.Cluster, l.Namespace, name)
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
func (m Mover) replacementsServed(ctx context.Context, l Leaver, exported []string) (string, error) {
	ns, cluster := l.Namespace, l.Cluster
	for _, name := range exported {
		svc := types.NamespacedName{Namespace: ns, Name: name}
		var replacements []string
		for _, c := range l.Selected {
			if c == cluster {
				continue
			}
			e, err := m.validExport(ctx, c, ns, name)
			if err != nil {
				return "", err
			}
			if e != nil && Endpoints(e.Spec.Slices) > 0 {
				replacements = append(replacements, c)
			}
		}
		if len(replacements) == 0 {
			return fmt.Sprintf("Service %s is not exported with ready endpoints by any cluster the Placement selects yet", svc), nil
		}
		behind, total, err := m.importers(ctx, svc, func(im *servicesv1alpha1.ImportedService) bool {
			return slices.ContainsFunc(im.Spec.Sources, func(src servicesv1alpha1.SourceSlices) bool {
				return slices.Contains(replacements, src.Cluster) && Endpoints(src.Slices) > 0
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
func (m Mover) stillServed(ctx context.Context, l Leaver, exported []string) (string, error) {
	for _, name := range exported {
		svc := types.NamespacedName{Namespace: l.Namespace, Name: name}
		behind, total, err := m.importers(ctx, svc, func(im *servicesv1alpha1.ImportedService) bool {
			return !slices.ContainsFunc(im.Spec.Sources, func(src servicesv1alpha1.SourceSlices) bool { return src.Cluster == l.Cluster })
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
func (m Mover) validExport(ctx context.Context, cluster, ns, name string) (*servicesv1alpha1.ExportedService, error) {
	e := &servicesv1alpha1.ExportedService{}
	err := m.Reader.Get(ctx, client.ObjectKey{Namespace: names.ClusterNamespace(cluster), Name: names.ServiceObject(ns, name)}, e)
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
func (m Mover) importers(ctx context.Context, svc types.NamespacedName, ok func(*servicesv1alpha1.ImportedService) bool) (behind, total int, err error) {
	list := &servicesv1alpha1.ImportedServiceList{}
	if err := m.Reader.List(ctx, list, client.MatchingFields{lookup.ServicesByName: svc.String()}); err != nil {
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
		if reachable, err := m.Reachable(ctx, cluster); err != nil {
			return 0, 0, err
		} else if !reachable {
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
