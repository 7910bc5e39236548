package fleet

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/client"

	placementv1alpha1 "github.com/lodestar-dev/lodestar/api/placement/v1alpha1"
	"github.com/lodestar-dev/lodestar/internal/scheduling"
)

// TaintChange is one argument of `kubectl lodestar taint`, as `kubectl taint`
// reads it: key[=value]:Effect adds (or, with overwrite, changes) a taint;
// key:Effect- removes the taint of that key and effect, key- every taint of
// that key.
type TaintChange struct {
	Taint  placementv1alpha1.Taint
	Remove bool
}

// ParseTaintChanges reads `kubectl lodestar taint` arguments and checks each
// taint as the scheduler would read it.
func ParseTaintChanges(args []string) ([]TaintChange, error) {
	if len(args) == 0 {
		return nil, fmt.Errorf("name at least one taint: key[=value]:Effect to add, key[:Effect]- to remove")
	}
	out := make([]TaintChange, 0, len(args))
	for _, arg := range args {
		spec, remove := strings.CutSuffix(arg, "-")
		keyValue, effect, hasEffect := strings.Cut(spec, ":")
		key, value, hasValue := strings.Cut(keyValue, "=")
		t := placementv1alpha1.Taint{Key: key, Value: value, Effect: placementv1alpha1.TaintEffect(effect)}
		switch {
		case remove && hasValue:
			return nil, fmt.Errorf("%q: a taint to remove is key or key:Effect, without a value", arg)
		case !remove && !hasEffect:
			return nil, fmt.Errorf("%q: a taint to add is key[=value]:Effect, with Effect NoSchedule, PreferNoSchedule or NoExecute", arg)
		}
		check := t
		if remove && !hasEffect {
			check.Effect = placementv1alpha1.TaintNoSchedule // any effect: only the key is checked
		}
		if _, err := scheduling.CheckTaints([]placementv1alpha1.Taint{check}); err != nil {
			return nil, fmt.Errorf("%q: %w", arg, err)
		}
		out = append(out, TaintChange{Taint: t, Remove: remove})
	}
	return out, nil
}

// Taint applies taint changes to the cluster's taints. Adding a taint whose key
// and effect the cluster already has with another value is an error unless
// overwrite; removing one it does not have is an error. NoExecute taints get
// their time added (now), which starts tolerating Placements' tolerationSeconds.
func Taint(ctx context.Context, c client.Client, clusterSet, name string, changes []TaintChange, overwrite bool, now time.Time) error {
	var problem error
	err := editTaints(ctx, c, clusterSet, name, func(taints []placementv1alpha1.Taint) []placementv1alpha1.Taint {
		problem = nil
		original := slices.Clone(taints)
		for _, ch := range changes {
			same := func(t placementv1alpha1.Taint) bool {
				return t.Key == ch.Taint.Key && (ch.Taint.Effect == "" || t.Effect == ch.Taint.Effect)
			}
			i := slices.IndexFunc(taints, same)
			switch {
			case ch.Remove && i < 0:
				problem = fmt.Errorf("cluster %s has no taint %s to remove", name, describe(ch.Taint))
				return original
			case ch.Remove:
				taints = slices.DeleteFunc(taints, same)
			case i >= 0 && taints[i].Value == ch.Taint.Value:
				// Already there: nothing changes, its time added stays.
			case i >= 0 && !overwrite:
				problem = fmt.Errorf("cluster %s already has taint %s; --overwrite changes it", name, taints[i].String())
				return original
			default:
				t := ch.Taint
				if t.Effect == placementv1alpha1.TaintNoExecute {
					t.TimeAdded = now.UTC().Format(time.RFC3339)
				}
				if i >= 0 {
					taints[i] = t
				} else {
					taints = append(taints, t)
				}
			}
		}
		return taints
	})
	if err != nil {
		return err
	}
	return problem
}

// describe names a taint to remove: key, or key:Effect.
func describe(t placementv1alpha1.Taint) string {
	if t.Effect == "" {
		return t.Key
	}
	return t.Key + ":" + string(t.Effect)
}
