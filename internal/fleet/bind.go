package fleet

import (
	"context"
	"fmt"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	placementv1alpha1 "github.com/lodestar-dev/lodestar/api/placement/v1alpha1"
)

// BindClusterSet lets the Placements of namespace use the clusters of set: it
// creates the namespace's ClusterSetBinding for set, named after it, unless there
// is one. The caller needs the bind verb on clustersets/<set> in group
// placement.lodestar.dev (the hub's admission policy checks it).
func BindClusterSet(ctx context.Context, c client.Client, namespace, set string) error {
	b := &placementv1alpha1.ClusterSetBinding{
		ObjectMeta: metav1.ObjectMeta{Name: set, Namespace: namespace},
		Spec:       placementv1alpha1.ClusterSetBindingSpec{ClusterSet: set},
	}
	if err := client.IgnoreAlreadyExists(c.Create(ctx, b)); err != nil {
		return fmt.Errorf("binding cluster set %s to namespace %s: %w", set, namespace, err)
	}
	return nil
}
