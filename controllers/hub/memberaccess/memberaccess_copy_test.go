package memberaccess

import (
	"errors"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	placementv1alpha1 "github.com/lodestar-dev/lodestar/api/placement/v1alpha1"
)

func TestCurrentCopyAndReady(t *testing.T) {
	g := NewWithT(t)
	now := time.Date(2026, 11, 24, 12, 0, 0, 0, time.UTC)
	source := func(token, expires string) *corev1.Secret {
		return &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Annotations: map[string]string{placementv1alpha1.MemberAccessExpiresAnnotation: expires}},
			Data: map[string][]byte{TokenKey: []byte(token)}}
	}
	c, ok := Current(source("t1", "2026-11-24T12:10:00Z"), now)
	g.Expect(ok).To(BeTrue())
	g.Expect(c.Expires).To(Equal(now.Add(10 * time.Minute)))
	_, ok = Current(source("t1", "2026-11-24T12:00:00Z"), now)
	g.Expect(ok).To(BeFalse(), "expired at now")
	_, ok = Current(source("", "2026-11-24T12:10:00Z"), now)
	g.Expect(ok).To(BeFalse(), "empty, as join creates it")
	_, ok = Current(source("t1", "soon"), now)
	g.Expect(ok).To(BeFalse(), "expiry unreadable")

	grant := &placementv1alpha1.MemberAccessGrant{ObjectMeta: metav1.ObjectMeta{Name: "platform"}, Spec: placementv1alpha1.MemberAccessGrantSpec{Namespace: "ops"}}
	cp := Copy(grant, "edge-1", c)
	g.Expect(cp.Namespace + "/" + cp.Name).To(Equal("ops/edge-1"))
	g.Expect(cp.Data).To(HaveKeyWithValue("token", []byte("t1")))
	g.Expect(IsCopyOf(cp, "platform")).To(BeTrue())
	g.Expect(IsCopyOf(cp, "other")).To(BeFalse())
	g.Expect(IsCopyOf(&corev1.Secret{}, "platform")).To(BeFalse(), "a Secret of someone else's")

	for _, tc := range []struct {
		invalid           error
		missing           bool
		pending, conflict []string
		status            metav1.ConditionStatus
		reason, message   string
	}{
		{status: metav1.ConditionTrue, reason: placementv1alpha1.ReasonCredentialsCopied},
		{pending: []string{"b"}, status: metav1.ConditionFalse, reason: placementv1alpha1.ReasonCredentialsPending, message: "of b"},
		{conflict: []string{"a"}, pending: []string{"b"}, status: metav1.ConditionFalse, reason: placementv1alpha1.ReasonSecretConflict, message: "Secrets a in namespace ops"},
		{missing: true, pending: []string{"b"}, status: metav1.ConditionFalse, reason: placementv1alpha1.ReasonCredentialsPending, message: "namespace ops does not exist"},
		{invalid: errors.New("bad selector"), status: metav1.ConditionFalse, reason: placementv1alpha1.ReasonInvalidGrantSelector, message: "bad selector"},
	} {
		c := Ready("ops", tc.invalid, tc.missing, tc.pending, tc.conflict)
		g.Expect(c.Status).To(Equal(tc.status))
		g.Expect(c.Reason).To(Equal(tc.reason))
		g.Expect(c.Message).To(ContainSubstring(tc.message))
	}
}
