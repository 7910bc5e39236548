// Package cheapest is an example of an external scheduler: Placements whose
// spec.scheduling.schedulerName is its Name are left to it by Lodestar's own
// scheduler, and it writes their PlacementDecisions, the standard
// cluster-inventory-api object Lodestar's work generator reads. It chooses, of
// one cluster set, the cluster with the lowest cost.example.com property (a
// ClusterProperty a producer writes on each member). See docs/extending.md.
package cheapest

import (
	"context"
	"fmt"
	"math"
	"strconv"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	cpv1alpha1 "sigs.k8s.io/cluster-inventory-api/apis/v1alpha1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	placementv1alpha1 "github.com/lodestar-dev/lodestar/api/placement/v1alpha1"
)

// CostProperty is the ClusterProfile property the scheduler compares.
const CostProperty = "cost.example.com"

// Scheduler writes the decisions of the Placements that name it.
type Scheduler struct {
	Client client.Client
	// Name is the schedulerName it answers to.
	Name string
	// ClusterSet is the set it chooses from.
	ClusterSet string
}

// Reconcile writes one Placement's PlacementDecision: the cheapest cluster.
func (s *Scheduler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	p := &placementv1alpha1.Placement{}
	if err := s.Client.Get(ctx, req.NamespacedName, p); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if p.Spec.Scheduling.SchedulerName != s.Name || !p.DeletionTimestamp.IsZero() {
		return ctrl.Result{}, nil
	}
	cluster, cost, err := s.cheapest(ctx)
	if err != nil {
		return ctrl.Result{}, err
	}
	pd := &cpv1alpha1.PlacementDecision{ObjectMeta: metav1.ObjectMeta{Namespace: p.Namespace, Name: p.Name + "-" + s.Name}}
	_, err = ctrl.CreateOrUpdate(ctx, s.Client, pd, func() error {
		if pd.Labels == nil {
			pd.Labels = map[string]string{}
		}
		pd.Labels[cpv1alpha1.PlacementKeyLabel] = p.Name
		// Owned by the Placement: the decisions go with it.
		pd.OwnerReferences = []metav1.OwnerReference{{APIVersion: placementv1alpha1.GroupVersion.String(), Kind: "Placement", Name: p.Name, UID: p.UID}}
		pd.SchedulerName = s.Name
		pd.Decisions = nil
		if cluster != "" {
			pd.Decisions = []cpv1alpha1.ClusterDecision{{
				ClusterProfileRef: cpv1alpha1.ClusterProfileReference{Namespace: s.ClusterSet, Name: cluster},
				Reason:            fmt.Sprintf("the lowest %s (%g)", CostProperty, cost),
			}}
		}
		return nil
	})
	return ctrl.Result{}, err
}

// cheapest is the set's cluster of the lowest cost ("" when none has one).
func (s *Scheduler) cheapest(ctx context.Context) (string, float64, error) {
	list := &cpv1alpha1.ClusterProfileList{}
	if err := s.Client.List(ctx, list, client.InNamespace(s.ClusterSet)); err != nil {
		return "", 0, err
	}
	best, lowest := "", math.Inf(1)
	for i := range list.Items {
		c := &list.Items[i]
		for _, prop := range c.Status.Properties {
			if prop.Name != CostProperty {
				continue
			}
			v, err := strconv.ParseFloat(prop.Value, 64)
			if err == nil && (v < lowest || v == lowest && c.Name < best) {
				best, lowest = c.Name, v
			}
		}
	}
	return best, lowest, nil
}

// SetupWithManager reconciles Placements, and all of its Placements when a
// ClusterProfile changes (a cost changed).
func (s *Scheduler) SetupWithManager(mgr ctrl.Manager) error {
	return ctrl.NewControllerManagedBy(mgr).
		Named("cheapest-scheduler").
		For(&placementv1alpha1.Placement{}).
		Watches(&cpv1alpha1.ClusterProfile{}, handler.EnqueueRequestsFromMapFunc(func(ctx context.Context, _ client.Object) []reconcile.Request {
			list := &placementv1alpha1.PlacementList{}
			if err := mgr.GetClient().List(ctx, list); err != nil {
				return nil
			}
			var reqs []reconcile.Request
			for i := range list.Items {
				if list.Items[i].Spec.Scheduling.SchedulerName == s.Name {
					reqs = append(reqs, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(&list.Items[i])})
				}
			}
			return reqs
		})).
		Complete(s)
}
