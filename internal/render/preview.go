// Preview: what a cluster's Work of a Placement holds, by the work generator's own
// steps, for `kubectl lodestar render`.

package render

import (
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"

	placementv1alpha1 "github.com/lodestar-dev/lodestar/api/placement/v1alpha1"
	"github.com/lodestar-dev/lodestar/internal/division"
	"github.com/lodestar-dev/lodestar/internal/overrides"
	"github.com/lodestar-dev/lodestar/internal/scheduling"
)

// Override applies overrides bound to a cluster to manifests, and checks that
// the result fits in a Work.
func Override(bound *overrides.Bound, manifests []runtime.RawExtension) (overrides.Result, error) {
	res, err := bound.Apply(manifests)
	if err != nil {
		return overrides.Result{}, err
	}
	return res, checkSize(res.Manifests)
}

// Preview is what the Work of the Placement on a cluster holds for the objects
// objs, by the work generator's own steps: the manifests rendered from the
// objects (returned too, as base), the cluster's shares of the divided
// workloads written in (spec.scheduling.replicas; shares from Divide, kinds
// reads the replicas of custom kinds), and the
// overrides applied for the cluster.
func Preview(objs []*unstructured.Unstructured, placement *placementv1alpha1.Placement, cluster scheduling.Cluster, kinds division.Kinds,
	divide func(base []runtime.RawExtension) (*division.Shares, error)) ([]runtime.RawExtension, overrides.Result, error) {
	base, _, err := Manifests(objs, placement.Spec.Reporting.Reflection == placementv1alpha1.ReflectionAggregate)
	if err != nil {
		return nil, overrides.Result{}, err
	}
	manifests := base
	if placement.Spec.Scheduling.Replicas != nil && divide != nil {
		shares, err := divide(base)
		if err != nil {
			return nil, overrides.Result{}, err
		}
		if manifests, err = division.Apply(base, division.Workloads(base, kinds), *shares, nil, ""); err != nil {
			return nil, overrides.Result{}, err
		}
	}
	set, err := overrides.Compile(placement.Spec.Overrides)
	if err != nil {
		return nil, overrides.Result{}, err
	}
	bound, err := set.Bind(cluster)
	if err != nil {
		return nil, overrides.Result{}, err
	}
	res, err := Override(bound, manifests)
	return base, res, err
}

// checkSize refuses an overridden object larger than a Work may carry.
func checkSize(manifests []runtime.RawExtension) error {
	if err := CheckSizes(manifests); err != nil {
		return &overrides.Error{Rule: "(all)", Action: "result", Err: err}
	}
	return nil
}
