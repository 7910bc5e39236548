package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/managedfields"
	"k8s.io/client-go/applyconfigurations"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
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
// and for each cluster an in-memory member (controller-runtime's fake client)
// whose Deployments become available as soon as they are applied.
type simulator struct {
	mu         sync.RWMutex
	members    map[string]*work.Reconciler // by cluster namespace on the hub
	hub        client.Client
	scheme     *runtime.Scheme
	mapper     meta.RESTMapper
	converters []managedfields.TypeConverter
	checker    *readiness.Checker
}

func newSimulator(mgr ctrl.Manager, workers int) (*simulator, error) {
	// The in-memory members know only the kinds the benchmark places: the fake
	// client's object tracker rebuilds a REST mapper from its scheme on every
	// write, so a small scheme keeps the simulator from competing with the hub
	// for CPU. The type converters are built once and shared.
	s := &simulator{members: map[string]*work.Reconciler{}, hub: mgr.GetClient(), scheme: runtime.NewScheme()}
	if err := errors.Join(corev1.AddToScheme(s.scheme), appsv1.AddToScheme(s.scheme), lodestarworkv1alpha1.AddToScheme(s.scheme)); err != nil {
		return nil, err
	}
	s.converters = []managedfields.TypeConverter{applyconfigurations.NewTypeConverter(s.scheme), managedfields.NewDeducedTypeConverter()}
	m := meta.NewDefaultRESTMapper(nil)
	for _, k := range []struct {
		gvk   schema.GroupVersionKind
		scope meta.RESTScope
	}{
		{corev1.SchemeGroupVersion.WithKind("Namespace"), meta.RESTScopeRoot},
		{corev1.SchemeGroupVersion.WithKind("ConfigMap"), meta.RESTScopeNamespace},
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
	err = ctrl.NewControllerManagedBy(mgr).Named("simulated-agents").
		For(&workv1alpha1.Work{}, builder.WithPredicates(work.Changed())).
		WithOptions(controller.Options{MaxConcurrentReconciles: workers}).
		Complete(s)
	return s, err
}

// add simulates a member cluster.
func (s *simulator) add(cluster string) {
	member := fake.NewClientBuilder().WithScheme(s.scheme).WithRESTMapper(s.mapper).WithTypeConverters(s.converters...).
		WithStatusSubresource(&appsv1.Deployment{}, &lodestarworkv1alpha1.AppliedWork{}).Build()
	s.mu.Lock()
	s.members[names.ClusterNamespace(cluster)] = &work.Reconciler{Hub: s.hub, Member: &readyMember{Client: member}, Readiness: s.checker}
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

// readyMember is an in-memory member whose Deployments are available as soon as
// they are applied, as if a controller manager, a scheduler and nodes ran them.
type readyMember struct {
	client.Client
}

func (m *readyMember) Apply(ctx context.Context, obj runtime.ApplyConfiguration, opts ...client.ApplyOption) error {
	if err := m.Client.Apply(ctx, obj, opts...); err != nil {
		return err
	}
	b, err := json.Marshal(obj)
	if err != nil {
		return err
	}
	var head struct {
		Kind     string `json:"kind"`
		Metadata struct {
			Name, Namespace string
		} `json:"metadata"`
	}
	if err := json.Unmarshal(b, &head); err != nil || head.Kind != "Deployment" {
		return err
	}
	d := &appsv1.Deployment{}
	if err := m.Get(ctx, client.ObjectKey{Namespace: head.Metadata.Namespace, Name: head.Metadata.Name}, d); err != nil {
		return err
	}
	want := int32(1)
	if d.Spec.Replicas != nil {
		want = *d.Spec.Replicas
	}
	d.Status = appsv1.DeploymentStatus{ObservedGeneration: d.Generation, Replicas: want, UpdatedReplicas: want, ReadyReplicas: want, AvailableReplicas: want}
	if err := m.Status().Update(ctx, d); err != nil {
		return fmt.Errorf("simulating the Deployment's rollout: %w", err)
	}
	d.SetGroupVersionKind(appsv1.SchemeGroupVersion.WithKind("Deployment"))
	u, err := json.Marshal(d)
	if err != nil {
		return err
	}
	// Return the member's answer, status included, as the API server would.
	return json.Unmarshal(u, obj)
}
