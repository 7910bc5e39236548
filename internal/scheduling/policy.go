package scheduling

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/utils/ptr"

	placementv1alpha1 "github.com/lodestar-dev/lodestar/api/placement/v1alpha1"
	qty "github.com/lodestar-dev/lodestar/internal/quantity"
)

// InvalidPolicyError is a Placement whose rules can never be applied.
type InvalidPolicyError struct {
	Reason string
	Err    error
}

func (e *InvalidPolicyError) Error() string { return e.Err.Error() }
func (e *InvalidPolicyError) Unwrap() error { return e.Err }

func invalid(reason, format string, args ...any) error {
	return &InvalidPolicyError{Reason: reason, Err: fmt.Errorf(format, args...)}
}

// MaxTenantDrainToleration is the longest a tenant's Placement tolerates the
// drain taint, whatever its toleration says: a platform admin's drain moves
// every tenant away within it. Only a ClusterPlacement (a platform admin's)
// may tolerate a drain for longer, or for good.
const MaxTenantDrainToleration int64 = 600

// PolicyOf is PolicyFor a Placement, with a tenant's Placement (any but the
// carriers of ClusterPlacements) tolerating the drain taint for at most
// MaxTenantDrainToleration seconds.
func PolicyOf(placement *placementv1alpha1.Placement) (Policy, error) {
	spec := placement.Spec.Scheduling
	tenant := placement.Namespace != placementv1alpha1.ClusterPlacementNamespace
	if tenant {
		spec.Tolerations = slices.Clone(spec.Tolerations)
		for i, t := range spec.Tolerations {
			if t.Key == placementv1alpha1.DrainTaintKey && (t.TolerationSeconds == nil || *t.TolerationSeconds > MaxTenantDrainToleration) {
				spec.Tolerations[i].TolerationSeconds = ptr.To(MaxTenantDrainToleration)
			}
		}
	}
	p, err := PolicyFor(spec, placement.Namespace+"/"+placement.Name)
	p.Tenant = tenant
	return p, err
}

// PolicyFor checks and compiles a Placement's spec.scheduling. seed makes the
// tiebreak deterministic for this Placement.
func PolicyFor(spec placementv1alpha1.Scheduling, seed string) (Policy, error) {
	p := Policy{Seed: seed, Tolerations: spec.Tolerations}
	switch {
	case spec.ClusterSelector != nil:
		sel, err := metav1.LabelSelectorAsSelector(spec.ClusterSelector)
		if err != nil {
			return p, invalid(placementv1alpha1.ReasonInvalidClusterSelector, "spec.scheduling.clusterSelector is invalid: %v", err)
		}
		p.Selector = sel
	case len(spec.ClusterNames) > 0:
		p.Selector = labels.Everything()
	default:
		p.Selector = labels.Nothing()
	}
	if len(spec.ClusterNames) > 0 {
		p.Names = map[string]bool{}
		for _, n := range spec.ClusterNames {
			p.Names[n] = true
		}
	}
	if spec.ClusterExpression != "" {
		e, err := CompileExpression(spec.ClusterExpression)
		if err != nil {
			return p, invalid(placementv1alpha1.ReasonInvalidClusterExpression, "spec.scheduling.clusterExpression does not compile: %v", err)
		}
		p.Expression = e
	}
	if c := spec.RequiredCapacity; c != nil {
		var err error
		if p.CPU, err = parseQuantity("spec.scheduling.requiredCapacity.cpu", c.CPU); err != nil {
			return p, err
		}
		if p.Memory, err = parseQuantity("spec.scheduling.requiredCapacity.memory", c.Memory); err != nil {
			return p, err
		}
		for i, r := range c.Resources {
			q, err := parseQuantity(fmt.Sprintf("spec.scheduling.requiredCapacity.resources[%d].quantity", i), r.Quantity)
			if err != nil {
				return p, err
			}
			if q == nil {
				continue
			}
			ask := ResourceAsk{Name: r.Name, Quantity: *q, OnOneNode: r.OnOneNode, Property: r.Name + placementv1alpha1.ResourceFreeSuffix}
			if r.OnOneNode {
				ask.Property = r.Name + placementv1alpha1.ResourceLargestFreeSuffix
			}
			p.Resources = append(p.Resources, ask)
		}
	}
	p.StorageClasses = spec.RequiredStorageClasses
	if spec.NumberOfClusters != nil {
		n := int(*spec.NumberOfClusters)
		p.N = &n
	}
	if f := spec.Failover; f != nil {
		after := 300 * time.Second
		if f.TolerationSeconds != nil {
			after = time.Duration(*f.TolerationSeconds) * time.Second
		}
		p.FailoverAfter = &after
	}
	for i, pref := range spec.Preferences {
		cp := Preference{Weight: int(pref.Weight)}
		switch {
		case pref.Expression != "":
			e, err := CompileExpression(pref.Expression)
			if err != nil {
				return p, invalid(placementv1alpha1.ReasonInvalidPreference, "spec.scheduling.preferences[%d].expression does not compile: %v", i, err)
			}
			cp.Expression = e
		case pref.PropertySort != nil:
			cp.Property = pref.PropertySort.Name
			cp.Descending = pref.PropertySort.Order != placementv1alpha1.Ascending
		default:
			return p, invalid(placementv1alpha1.ReasonInvalidPreference, "spec.scheduling.preferences[%d] needs expression or propertySort", i)
		}
		p.Preferences = append(p.Preferences, cp)
	}
	if s := spec.TopologySpread; s != nil {
		p.SpreadKey, p.MaxSkew = s.TopologyKey, max(int(s.MaxSkew), 1)
	}
	return p, nil
}

func parseQuantity(field, s string) (*resource.Quantity, error) {
	if s == "" {
		return nil, nil
	}
	q, err := qty.Parse(s)
	if err != nil {
		return nil, invalid(placementv1alpha1.ReasonInvalidCapacity, "%s: %v", field, err)
	}
	return &q, nil
}

// ParseTaints reads and checks the taints annotation of a ClusterProfile.
func ParseTaints(annotation string) ([]placementv1alpha1.Taint, error) {
	if strings.TrimSpace(annotation) == "" {
		return nil, nil
	}
	var taints []placementv1alpha1.Taint
	if err := json.Unmarshal([]byte(annotation), &taints); err != nil {
		return nil, fmt.Errorf("annotation %s is not a JSON list of taints: %w", placementv1alpha1.TaintsAnnotation, err)
	}
	return CheckTaints(taints)
}

// CheckTaints checks taints as the scheduler reads them: label keys and values,
// a known effect, an RFC 3339 time added.
func CheckTaints(taints []placementv1alpha1.Taint) ([]placementv1alpha1.Taint, error) {
	for i, t := range taints {
		if errs := validation.IsQualifiedName(t.Key); len(errs) > 0 {
			return nil, fmt.Errorf("taint %d: key %q: %s", i, t.Key, strings.Join(errs, "; "))
		}
		if errs := validation.IsValidLabelValue(t.Value); len(errs) > 0 {
			return nil, fmt.Errorf("taint %d: value %q: %s", i, t.Value, strings.Join(errs, "; "))
		}
		switch t.Effect {
		case placementv1alpha1.TaintNoSchedule, placementv1alpha1.TaintPreferNoSchedule, placementv1alpha1.TaintNoExecute:
		default:
			return nil, fmt.Errorf("taint %d: effect %q is not NoSchedule, PreferNoSchedule or NoExecute", i, t.Effect)
		}
		if t.TimeAdded != "" {
			if _, err := time.Parse(time.RFC3339, t.TimeAdded); err != nil {
				return nil, fmt.Errorf("taint %d: timeAdded %q is not RFC 3339", i, t.TimeAdded)
			}
		}
		if t.ForceAt != "" {
			if t.Key != placementv1alpha1.DrainTaintKey {
				return nil, fmt.Errorf("taint %d: forceAt is for the drain taint %s only, not %s", i, placementv1alpha1.DrainTaintKey, t.Key)
			}
			if _, err := time.Parse(time.RFC3339, t.ForceAt); err != nil {
				return nil, fmt.Errorf("taint %d: forceAt %q is not RFC 3339", i, t.ForceAt)
			}
		}
	}
	return taints, nil
}
