package testenv

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// StandInProvisioner is the provisioner of the StorageClasses StandInStorage
// makes: no real one, so that the quick start's members bind claims without a
// storage system.
const StandInProvisioner = "quickstart.lodestar.dev/hostpath"

// StandInStorage gives a member the StorageClasses the docs' examples name
// (classes) and, until ctx ends, a PersistentVolume for every Pending claim of
// those classes (a hostPath no pod uses: the members' pods are kwok's), which
// the member's volume binder binds: the stateful examples run on the quick
// start as written. It checks every interval.
func StandInStorage(ctx context.Context, c client.Client, classes []string, interval time.Duration) error {
	for _, name := range classes {
		sc := &storagev1.StorageClass{ObjectMeta: metav1.ObjectMeta{Name: name}, Provisioner: StandInProvisioner,
			ReclaimPolicy: ptr.To(corev1.PersistentVolumeReclaimDelete), VolumeBindingMode: ptr.To(storagev1.VolumeBindingImmediate)}
		if err := c.Create(ctx, sc); err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("creating StorageClass %s: %w", name, err)
		}
	}
	ours := map[string]bool{}
	for _, n := range classes {
		ours[n] = true
	}
	go func() {
		t := time.NewTicker(interval)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
			claims := &corev1.PersistentVolumeClaimList{}
			if err := c.List(ctx, claims); err != nil {
				continue
			}
			for i := range claims.Items {
				if pvc := &claims.Items[i]; pvc.Status.Phase == corev1.ClaimPending && pvc.Spec.VolumeName == "" && ours[ptr.Deref(pvc.Spec.StorageClassName, "")] {
					_ = c.Create(ctx, volumeFor(pvc))
				}
			}
		}
	}()
	return nil
}

// volumeFor is a PersistentVolume made for a claim, reserved for it.
func volumeFor(pvc *corev1.PersistentVolumeClaim) *corev1.PersistentVolume {
	return &corev1.PersistentVolume{
		ObjectMeta: metav1.ObjectMeta{Name: "pv-" + string(pvc.UID)},
		Spec: corev1.PersistentVolumeSpec{
			Capacity:                      corev1.ResourceList{corev1.ResourceStorage: pvc.Spec.Resources.Requests[corev1.ResourceStorage]},
			AccessModes:                   pvc.Spec.AccessModes,
			StorageClassName:              ptr.Deref(pvc.Spec.StorageClassName, ""),
			PersistentVolumeReclaimPolicy: corev1.PersistentVolumeReclaimDelete,
			ClaimRef:                      &corev1.ObjectReference{Kind: "PersistentVolumeClaim", Namespace: pvc.Namespace, Name: pvc.Name, UID: pvc.UID},
			PersistentVolumeSource:        corev1.PersistentVolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: "/tmp/lodestar-quickstart/" + string(pvc.UID)}},
		},
	}
}
