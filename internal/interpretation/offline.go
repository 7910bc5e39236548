// Offline: an interpretation evaluated against objects from files, for
// `kubectl lodestar interpret`, by the same code the hub and the agents run.

package interpretation

import (
	"fmt"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	placementv1alpha1 "github.com/lodestar-dev/lodestar/api/placement/v1alpha1"
)

// The operations an interpretation answers.
const (
	OperationHealth       = "health"
	OperationReplicas     = "replicas"
	OperationDependencies = "dependencies"
	OperationAggregate    = "aggregate"
)

// Operations are the operations, in the order the docs give them.
var Operations = []string{OperationHealth, OperationReplicas, OperationDependencies, OperationAggregate}

// Request is one offline evaluation.
type Request struct {
	Operation string
	// Object is the object: as a member returns it (health), as written on
	// the hub (replicas, dependencies, aggregate).
	Object map[string]any
	// Share, with replicas, is a cluster's share to write into the object.
	Share *int64
	// Clusters, with aggregate, are the copies' statuses.
	Clusters []ClusterStatus
}

// Evaluate answers r by ri: a value to print, or the error (a CEL error
// with its position, or what the expression yields that does not fit).
func Evaluate(ri *placementv1alpha1.ResourceInterpretation, r Request) (any, error) {
	in := Compile(ri)
	if in.Err != nil {
		return nil, in.Err
	}
	if kind, _ := r.Object["kind"].(string); kind != in.Kind.Kind {
		return nil, fmt.Errorf("the object is a %q, the interpretation is for %s", kind, in.Kind.String())
	}
	switch r.Operation {
	case OperationHealth:
		return in.evaluateHealth(r.Object)
	case OperationReplicas:
		return in.evaluateReplicas(r.Object, r.Share)
	case OperationDependencies:
		if in.Spec.Dependencies == nil {
			return nil, fmt.Errorf("ResourceInterpretation %s says nothing of dependencies", in.Name)
		}
		deps, err := in.Dependencies(r.Object)
		if deps == nil {
			deps = []Dependency{}
		}
		return deps, err
	case OperationAggregate:
		status, err := in.Aggregate(r.Object, r.Clusters)
		return map[string]any{"status": status}, err
	}
	return nil, fmt.Errorf("operation %q: one of %v", r.Operation, Operations)
}

func (in *Interpretation) evaluateHealth(obj map[string]any) (any, error) {
	if in.health == nil {
		return nil, fmt.Errorf("ResourceInterpretation %s says nothing of health", in.Name)
	}
	state, message, err := in.health.State(&unstructured.Unstructured{Object: obj})
	if err != nil {
		return nil, &ExpressionError{Name: in.Name, Field: "spec.health.expression", Err: err}
	}
	out := map[string]any{"state": state}
	if message != "" {
		out["message"] = message
	}
	return out, nil
}

func (in *Interpretation) evaluateReplicas(obj map[string]any, share *int64) (any, error) {
	total, requests, err := in.Replicas(obj)
	if err != nil {
		return nil, err
	}
	out := map[string]any{"replicas": total}
	if len(requests) > 0 {
		perReplica := map[string]string{}
		for name, q := range requests {
			perReplica[name] = q.String()
		}
		out["requestsPerReplica"] = perReplica
	}
	if share != nil {
		written := (&unstructured.Unstructured{Object: obj}).DeepCopy().Object
		in.WriteReplicas(written, *share)
		out["written"] = written
	}
	return out, nil
}
