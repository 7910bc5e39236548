package main

import (
	"context"
	"errors"
	"sync"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	workv1alpha1 "sigs.k8s.io/work-api/pkg/apis/v1alpha1"

	lodestarworkv1alpha1 "github.com/lodestar-dev/lodestar/api/work/v1alpha1"
	"github.com/lodestar-dev/lodestar/controllers/agent/work"
	"github.com/lodestar-dev/lodestar/internal/names"
	"github.com/lodestar-dev/lodestar/internal/readiness"
)

// simulator runs the real agent code (work.Reconciler) for many simulated member
// clusters in one process: one hub connection and cache shared by all of them,
// and for each cluster an in-memory member (memMember) whose Deployments become
// available as soon as they are applied.
type simulator struct {
	mu      sync.RWMutex
	members map[string]*work.Reconciler // by cluster namespace on the hub
	hub     client.Client
	scheme  *runtime.Scheme
	mapper  meta.RESTMapper
	checker *readiness.Checker
}

func newSimulator(mgr ctrl.Manager, workers int) (*simulator, error) {
	s, err := newSimulatorScheme()
	if err != nil {
		return nil, err
	}
	s.hub = mgr.GetClient()
	err = ctrl.NewControllerManagedBy(mgr).Named("simulated-agents").
		For(&workv1alpha1.Work{}, builder.WithPredicates(work.Changed())).
		WithOptions(controller.Options{MaxConcurrentReconciles: workers, SkipNameValidation: ptr.To(true)}). // M1 runs a second simulator
		Complete(s)
	return s, err
}

// newSimulatorScheme makes a simulator without members or a hub: the kinds its
// in-memory members know (only those the benchmark places) and its readiness
// checker.
func newSimulatorScheme() (*simulator, error) {
	s := &simulator{members: map[string]*work.Reconciler{}, scheme: runtime.NewScheme()}
	if err := errors.Join(corev1.AddToScheme(s.scheme), appsv1.AddToScheme(s.scheme), lodestarworkv1alpha1.AddToScheme(s.scheme)); err != nil {
		return nil, err
	}
	m := meta.NewDefaultRESTMapper(nil)
	for _, k := range []struct {
		gvk   schema.GroupVersionKind
		scope meta.RESTScope
	}{
		{corev1.SchemeGroupVersion.WithKind("Namespace"), meta.RESTScopeRoot},
		{corev1.SchemeGroupVersion.WithKind("ConfigMap"), meta.RESTScopeNamespace},
		{corev1.SchemeGroupVersion.WithKind("Pod"), meta.RESTScopeNamespace},
		{appsv1.SchemeGroupVersion.WithKind("Deployment"), meta.RESTScopeNamespace},
		{lodestarworkv1alpha1.GroupVersion.WithKind("AppliedWork"), meta.RESTScopeRoot},
	} {
		m.Add(k.gvk, k.scope)
	}
	s.mapper = m
	checker, err := readiness.NewChecker(nil)
	if err != nil {
		return nil, err
	}
	s.checker = checker
	return s, nil
}

// add simulates a member cluster.
func (s *simulator) add(cluster string) {
	member := newMemMember(s.scheme, s.mapper)
	s.mu.Lock()
	s.members[names.ClusterNamespace(cluster)] = &work.Reconciler{Hub: s.hub, Member: member, Readiness: s.checker}
	s.mu.Unlock()
}

// Reconcile hands the Work to its cluster's agent.
func (s *simulator) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	s.mu.RLock()
	r := s.members[req.Namespace]
	s.mu.RUnlock()
	if r == nil {
		return reconcile.Result{}, nil
	}
	return r.Reconcile(ctx, req)
}
