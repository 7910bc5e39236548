package workgenerator

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	workv1alpha1 "sigs.k8s.io/work-api/pkg/apis/v1alpha1"

	placementv1alpha1 "github.com/lodestar-dev/lodestar/api/placement/v1alpha1"
	"github.com/lodestar-dev/lodestar/internal/lookup"
	"github.com/lodestar-dev/lodestar/internal/mcs"
	"github.com/lodestar-dev/lodestar/internal/rollout"
)

// +kubebuilder:rbac:groups=services.lodestar.dev,resources=exportedservices;importedservices,verbs=get;list;watch

// trafficOf is what the importers show of the Services the copy on a cluster
// the Placement left exports (mcs.Mover.Traffic), nil when it exports none.
func (r *Reconciler) trafficOf(ctx context.Context, s *scope, cluster string) (*rollout.Traffic, error) {
	var drain time.Duration
	if ps := s.placement.Spec.Services; ps != nil && ps.DrainSeconds != nil {
		drain = time.Duration(*ps.DrainSeconds) * time.Second
	}
	mover := mcs.Mover{Reader: r.Client, Reachable: func(ctx context.Context, cluster string) (bool, error) {
		ps, err := lookup.StateOf(ctx, r.Client, cluster, s.decided.Sets)
		return ps.Reachable, err
	}}
	return mover.Traffic(ctx, mcs.Leaver{Cluster: cluster, Namespace: s.placement.Namespace, Parts: s.works[cluster], Selected: s.decided.Clusters, Drain: drain}, s.now)
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
