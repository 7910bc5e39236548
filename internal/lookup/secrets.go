package lookup

import (
	"context"
	"fmt"
	"strings"

	authorizationv1 "k8s.io/api/authorization/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	placementv1alpha1 "github.com/lodestar-dev/lodestar/api/placement/v1alpha1"
)

// WriterMayGetSecret asks the hub whether a Placement's last writer (recorded
// by the lodestar-placement-writer admission policy) may get a Secret it would
// follow: a tenant cannot have a Placement place a Secret of its namespace it
// may not read. The answer is why not, or "" when it may; c must be allowed to
// create SubjectAccessReviews (an error says it was not).
func WriterMayGetSecret(c client.Client) func(ctx context.Context, placement *placementv1alpha1.Placement, namespace, name string) (string, error) {
	return func(ctx context.Context, placement *placementv1alpha1.Placement, namespace, name string) (string, error) {
		user := placement.Annotations[placementv1alpha1.LastWriterAnnotation]
		if user == "" {
			return fmt.Sprintf("the Placement carries no %s annotation (the hub's lodestar-placement-writer admission policy records it), so no Secret is followed",
				placementv1alpha1.LastWriterAnnotation), nil
		}
		var groups []string
		if g := placement.Annotations[placementv1alpha1.LastWriterGroupsAnnotation]; g != "" {
			groups = strings.Split(g, ",")
		}
		review := &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{
			User: user, Groups: groups,
			ResourceAttributes: &authorizationv1.ResourceAttributes{Namespace: namespace, Verb: "get", Resource: "secrets", Name: name},
		}}
		if err := c.Create(ctx, review); err != nil {
			return "", fmt.Errorf("asking the hub whether %s may get Secret %s/%s: %w", user, namespace, name, err)
		}
		if review.Status.Allowed {
			return "", nil
		}
		return fmt.Sprintf("%s, who last changed the Placement, may not get it on the hub", user), nil
	}
}
