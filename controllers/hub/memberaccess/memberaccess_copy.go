package memberaccess

import (
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	placementv1alpha1 "github.com/lodestar-dev/lodestar/api/placement/v1alpha1"
)

// TokenKey is the Secret key of the token, in the agent's Secret and in the
// copies (the upstream secretreader plugin reads "token").
const TokenKey = "token"

// Credential is a cluster's current member-access token.
type Credential struct {
	Token   []byte
	Expires time.Time
}

// Current is the credential in a cluster's member-access Secret, and false when
// it holds none, or one that has expired (or whose expiry cannot be read).
func Current(source *corev1.Secret, now time.Time) (Credential, bool) {
	token := source.Data[TokenKey]
	if len(token) == 0 {
		return Credential{}, false
	}
	expires, err := time.Parse(time.RFC3339, source.Annotations[placementv1alpha1.MemberAccessExpiresAnnotation])
	if err != nil || !now.Before(expires) {
		return Credential{}, false
	}
	return Credential{Token: token, Expires: expires}, true
}

// Copy is the grant's copy of the cluster's credential: the Secret
// <grant namespace>/<cluster>.
func Copy(grant *placementv1alpha1.MemberAccessGrant, cluster string, c Credential) *corev1.Secret {
	return &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{
			Name: cluster, Namespace: grant.Spec.Namespace,
			Labels: map[string]string{
				placementv1alpha1.MemberAccessLabel:        "copy",
				placementv1alpha1.MemberAccessGrantLabel:   grant.Name,
				placementv1alpha1.MemberAccessClusterLabel: cluster,
			},
			Annotations: map[string]string{placementv1alpha1.MemberAccessExpiresAnnotation: c.Expires.UTC().Format(time.RFC3339)},
		},
		Type: corev1.SecretTypeOpaque,
		Data: map[string][]byte{TokenKey: c.Token},
	}
}

// IsCopyOf tells whether s is the grant's copy (and so Lodestar's to change).
func IsCopyOf(s *corev1.Secret, grant string) bool {
	return s.Labels[placementv1alpha1.MemberAccessLabel] == "copy" && s.Labels[placementv1alpha1.MemberAccessGrantLabel] == grant
}
