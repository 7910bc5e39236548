package workgenerator

import (
	"context"
	"fmt"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	placementv1alpha1 "github.com/lodestar-dev/lodestar/api/placement/v1alpha1"
	"github.com/lodestar-dev/lodestar/internal/lookup"
	"github.com/lodestar-dev/lodestar/internal/quota"
)

// +kubebuilder:rbac:groups=placement.lodestar.dev,resources=fleetquotas;clusterfleetquotas,verbs=get;list;watch
// +kubebuilder:rbac:groups="",resources=namespaces,verbs=get;list;watch

// quotaTarget is the revision to roll out in a namespace a FleetQuota or a
// ClusterFleetQuota bounds:
// the newest one the fleet quota controller admitted (the QuotaAdmitted
// condition says why a newer one waits). False when none is admitted yet, as
// st says: nothing is rolled out.
func (r *Reconciler) quotaTarget(ctx context.Context, s *scope) (bool, error) {
	if s.target.Annotations[placementv1alpha1.QuotaAdmittedAnnotation] == "true" {
		return true, nil
	}
	if bounded, err := lookup.QuotaBounded(ctx, r.Client, s.placement.Namespace); err != nil || !bounded {
		return !bounded, err
	}
	var best *placementv1alpha1.PlacementRevision
	for i := range s.revs {
		rv := &s.revs[i]
		if rv.Annotations[placementv1alpha1.QuotaAdmittedAnnotation] == "true" && rv.Spec.Revision < s.target.Spec.Revision &&
			(best == nil || rv.Spec.Revision > best.Spec.Revision) {
			best = rv
		}
	}
	if best == nil {
		s.st.set(metav1.ConditionFalse, placementv1alpha1.ReasonWaitingForQuota,
			"revision %d waits for the namespace's FleetQuotas to admit it (the QuotaAdmitted condition says why not)", s.target.Spec.Revision)
		return false, nil
	}
	s.target = best
	return true, nil
}

// quotaHold says why the clusters that have no Work of the Placement get
// none ("" when they may): in a namespace a quota bounds, the revision rolled
// out was admitted for other clusters than those decided now, and what the
// clusters added would run is not admitted yet.
func (r *Reconciler) quotaHold(ctx context.Context, s *scope) (string, error) {
	a := s.target.Annotations
	if a[placementv1alpha1.QuotaAdmittedAnnotation] != "true" || a[placementv1alpha1.QuotaAdmittedClustersAnnotation] == quota.ClustersDigest(s.decided.Clusters) {
		return "", nil
	}
	if bounded, err := lookup.QuotaBounded(ctx, r.Client, s.placement.Namespace); err != nil || !bounded {
		return "", err
	}
	return fmt.Sprintf("the clusters chosen changed since revision %d was admitted: those without a copy get one once the namespace's FleetQuotas admit it there "+
		"(the QuotaAdmitted condition says why not yet)", s.target.Spec.Revision), nil
}
