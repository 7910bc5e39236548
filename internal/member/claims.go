package member

import (
	"context"
	"fmt"
	"regexp"
	"slices"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/lodestar-dev/lodestar/internal/claims"
	"github.com/lodestar-dev/lodestar/internal/workapply"
)

// maxClaimsRead bounds the claims read for one StatefulSet: one page.
const maxClaimsRead = 500

var (
	claimKind       = schema.GroupKind{Kind: "PersistentVolumeClaim"}
	statefulSetKind = schema.GroupKind{Group: "apps", Kind: "StatefulSet"}
)

// defaultClassAnnotation marks the member's default StorageClass.
const defaultClassAnnotation = "storageclass.kubernetes.io/is-default-class"

// ReadClaims sets the claims report of every result whose object is a placed
// claim, or a placed StatefulSet with claim templates (the claims its
// controller made on the member). Claims are read from the member's API server
// directly, and only for such objects; a claim that cannot be read leaves the
// result without a report.
func (m *Member) ReadClaims(ctx context.Context, results []workapply.Result) {
	classes := &storageClasses{member: m.Client}
	for i := range results {
		res := &results[i]
		if res.Live == nil || res.Record == nil {
			continue
		}
		var found []corev1.PersistentVolumeClaim
		var err error
		switch res.Live.GroupVersionKind().GroupKind() {
		case claimKind:
			pvc := corev1.PersistentVolumeClaim{}
			err = runtime.DefaultUnstructuredConverter.FromUnstructured(res.Live.Object, &pvc)
			found = []corev1.PersistentVolumeClaim{pvc}
		case statefulSetKind:
			found, err = m.statefulSetClaims(ctx, res)
		default:
			continue
		}
		if err == nil && len(found) > 0 {
			var report claims.Report
			report, err = m.claimsReport(ctx, found, classes)
			res.Claims = &report
		}
		if err != nil {
			ctrl.LoggerFrom(ctx).V(1).Info("Cannot read the claims of a placed object", "object", workapply.DescribeObject(res.Live), "error", err.Error())
			res.Claims = nil
		}
	}
}

// statefulSetClaims are the claims a StatefulSet's controller made on the
// member: <template>-<statefulset>-<ordinal>, labelled with its selector's
// matchLabels, whatever its replicas now (a claim left by a scale-down still
// holds data).
func (m *Member) statefulSetClaims(ctx context.Context, res *workapply.Result) ([]corev1.PersistentVolumeClaim, error) {
	sts := appsv1.StatefulSet{}
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(res.Live.Object, &sts); err != nil {
		return nil, err
	}
	if len(sts.Spec.VolumeClaimTemplates) == 0 {
		return nil, nil
	}
	var names []string
	for _, t := range sts.Spec.VolumeClaimTemplates {
		names = append(names, regexp.QuoteMeta(t.Name+"-"+sts.Name+"-"))
	}
	generated := regexp.MustCompile(`^(` + strings.Join(names, "|") + `)(0|[1-9][0-9]*)$`)
	opts := []client.ListOption{client.InNamespace(sts.Namespace), client.Limit(maxClaimsRead)}
	if sts.Spec.Selector != nil && len(sts.Spec.Selector.MatchLabels) > 0 {
		opts = append(opts, client.MatchingLabels(sts.Spec.Selector.MatchLabels))
	}
	list := &corev1.PersistentVolumeClaimList{}
	if err := m.Client.List(ctx, list, opts...); err != nil {
		return nil, err
	}
	out := slices.DeleteFunc(list.Items, func(c corev1.PersistentVolumeClaim) bool { return !generated.MatchString(c.Name) })
	slices.SortFunc(out, func(a, b corev1.PersistentVolumeClaim) int { return claimOrder(a.Name, b.Name) })
	return out, nil
}

// claimOrder sorts names by length then text, so that data-db-2 comes before
// data-db-10.
func claimOrder(a, b string) int {
	if len(a) != len(b) {
		return len(a) - len(b)
	}
	return strings.Compare(a, b)
}

// claimsReport is the state of claims as the hub shows it: phase, class, modes,
// sizes, whether deleting the claim deletes the data, and why one is not Bound.
func (m *Member) claimsReport(ctx context.Context, pvcs []corev1.PersistentVolumeClaim, classes *storageClasses) (claims.Report, error) {
	out := make([]claims.Claim, 0, len(pvcs))
	for i := range pvcs {
		pvc := &pvcs[i]
		c := claims.Claim{Name: pvc.Name, Phase: string(pvc.Status.Phase), StorageClass: ptrString(pvc.Spec.StorageClassName)}
		if c.Phase == "" {
			c.Phase = string(corev1.ClaimPending)
		}
		for _, m := range pvc.Spec.AccessModes {
			c.AccessModes = append(c.AccessModes, string(m))
		}
		if q, ok := pvc.Spec.Resources.Requests[corev1.ResourceStorage]; ok {
			c.Requested = q.String()
		}
		if q, ok := pvc.Status.Capacity[corev1.ResourceStorage]; ok {
			c.Capacity = q.String()
		}
		switch {
		case pvc.Status.Phase == corev1.ClaimBound && pvc.Spec.VolumeName != "":
			pv := &corev1.PersistentVolume{}
			if err := m.Client.Get(ctx, client.ObjectKey{Name: pvc.Spec.VolumeName}, pv); err != nil && !apierrors.IsNotFound(err) {
				return claims.Report{}, err
			} else if err == nil {
				c.ReclaimDelete = pv.Spec.PersistentVolumeReclaimPolicy == corev1.PersistentVolumeReclaimDelete
			}
		case pvc.Status.Phase == corev1.ClaimLost:
			c.Reason = "the claim lost its volume"
		default:
			why, err := classes.pendingReason(ctx, pvc)
			if err != nil {
				return claims.Report{}, err
			}
			c.Reason = why
		}
		out = append(out, c)
	}
	return claims.NewReport(out), nil
}

// storageClasses reads the member's storage classes for one reconcile, each
// at most once however many claims wait on it.
type storageClasses struct {
	member client.Reader
	// byName are the classes read, nil for one the member does not have.
	byName map[string]*storagev1.StorageClass
	// defaultName is the default class ("" for none), once read.
	defaultName *string
}

// get is the class of that name, nil when the member does not have it.
func (sc *storageClasses) get(ctx context.Context, name string) (*storagev1.StorageClass, error) {
	if c, ok := sc.byName[name]; ok {
		return c, nil
	}
	c := &storagev1.StorageClass{}
	switch err := sc.member.Get(ctx, client.ObjectKey{Name: name}, c); {
	case apierrors.IsNotFound(err):
		c = nil
	case err != nil:
		return nil, err
	}
	if sc.byName == nil {
		sc.byName = map[string]*storagev1.StorageClass{}
	}
	sc.byName[name] = c
	return c, nil
}

// defaultClass is the name of the member's default class, "" when it has none.
func (sc *storageClasses) defaultClass(ctx context.Context) (string, error) {
	if sc.defaultName == nil {
		list := &storagev1.StorageClassList{}
		if err := sc.member.List(ctx, list); err != nil {
			return "", err
		}
		name := ""
		if i := slices.IndexFunc(list.Items, func(c storagev1.StorageClass) bool { return c.Annotations[defaultClassAnnotation] == "true" }); i >= 0 {
			name = list.Items[i].Name
		}
		sc.defaultName = &name
	}
	return *sc.defaultName, nil
}

// pendingReason says why a claim waits, from what the member has: its storage
// class missing, no default class to fall back on, or a class that binds when a
// pod is scheduled.
func (sc *storageClasses) pendingReason(ctx context.Context, pvc *corev1.PersistentVolumeClaim) (string, error) {
	if pvc.Spec.VolumeName != "" {
		return fmt.Sprintf("waiting to bind volume %s", pvc.Spec.VolumeName), nil
	}
	name := ptrString(pvc.Spec.StorageClassName)
	if pvc.Spec.StorageClassName == nil {
		def, err := sc.defaultClass(ctx)
		if err != nil {
			return "", err
		}
		if def == "" {
			return "the claim names no storage class and the member has no default StorageClass", nil
		}
		name = def
	}
	if name == "" {
		return "waiting for a pre-provisioned volume without a storage class", nil
	}
	class, err := sc.get(ctx, name)
	switch {
	case err != nil:
		return "", err
	case class == nil:
		return fmt.Sprintf("storageclass.storage.k8s.io %q not found", name), nil
	case class.VolumeBindingMode != nil && *class.VolumeBindingMode == storagev1.VolumeBindingWaitForFirstConsumer:
		return fmt.Sprintf("WaitForFirstConsumer: storage class %s binds it when a pod using it is scheduled", name), nil
	}
	return fmt.Sprintf("waiting for storage class %s (provisioner %s) to provide a volume", name, class.Provisioner), nil
}

func ptrString(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}
