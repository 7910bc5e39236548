// Package dependencies is what a placed object references in its namespace:
// the ConfigMaps, Secrets, ServiceAccounts and PersistentVolumeClaims of a pod
// template, a ServiceAccount's image pull Secrets, and what a
// ResourceInterpretation's dependencies expression names for a custom kind.
// The revision maker follows them for a Placement with spec.dependencies:
// Follow (docs/dependencies.md).
package dependencies

import (
	"fmt"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/lodestar-dev/lodestar/internal/interpretation"
)

// Ref is an object of the same namespace that another one needs.
type Ref = interpretation.Dependency

// Kinds interprets custom kinds: the hub's ResourceInterpretations.
type Kinds interface {
	For(gk schema.GroupKind) *interpretation.Interpretation
}

// The kinds a pod template references.
var (
	ConfigMap             = schema.GroupKind{Kind: "ConfigMap"}
	Secret                = schema.GroupKind{Kind: "Secret"}
	ServiceAccount        = schema.GroupKind{Kind: "ServiceAccount"}
	PersistentVolumeClaim = schema.GroupKind{Kind: "PersistentVolumeClaim"}
)

// podSpecPaths is where the built-in kinds that run pods keep their pod spec.
var podSpecPaths = map[schema.GroupKind][]string{
	{Kind: "Pod"}:                        {"spec"},
	{Kind: "ReplicationController"}:      {"spec", "template", "spec"},
	{Group: "apps", Kind: "Deployment"}:  {"spec", "template", "spec"},
	{Group: "apps", Kind: "StatefulSet"}: {"spec", "template", "spec"},
	{Group: "apps", Kind: "DaemonSet"}:   {"spec", "template", "spec"},
	{Group: "apps", Kind: "ReplicaSet"}:  {"spec", "template", "spec"},
	{Group: "batch", Kind: "Job"}:        {"spec", "template", "spec"},
	{Group: "batch", Kind: "CronJob"}:    {"spec", "jobTemplate", "spec", "template", "spec"},
}

// PodSpecPath is where a built-in kind that runs pods keeps its pod spec, and
// whether gk is one.
func PodSpecPath(gk schema.GroupKind) ([]string, bool) {
	path, ok := podSpecPaths[gk]
	return path, ok
}

// Of returns what obj references, sorted and each once: from its pod spec for
// the built-in kinds that run pods, its image pull Secrets for a
// ServiceAccount, and its interpretation's dependencies expression for a kind
// kinds interprets (nil kinds interprets none). The error is an
// interpretation's that fails on obj.
func Of(obj *unstructured.Unstructured, kinds Kinds) ([]Ref, error) {
	gk := obj.GroupVersionKind().GroupKind()
	if path, ok := podSpecPaths[gk]; ok {
		raw, found, err := unstructured.NestedMap(obj.Object, path...)
		if err != nil {
			return nil, fmt.Errorf("reading the pod template at %s: %w", strings.Join(path, "."), err)
		}
		if !found {
			return nil, nil
		}
		spec := &corev1.PodSpec{}
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(raw, spec); err != nil {
			return nil, fmt.Errorf("reading the pod template at %s: %w", strings.Join(path, "."), err)
		}
		return sorted(OfPodSpec(spec)), nil
	}
	if gk == ServiceAccount {
		sa := &corev1.ServiceAccount{}
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(obj.Object, sa); err != nil {
			return nil, fmt.Errorf("reading the ServiceAccount: %w", err)
		}
		var refs []Ref
		for _, s := range sa.ImagePullSecrets {
			refs = appendRef(refs, Secret, s.Name)
		}
		return sorted(refs), nil
	}
	if kinds == nil {
		return nil, nil
	}
	if in := kinds.For(gk); in != nil {
		return in.Dependencies(obj.Object)
	}
	return nil, nil
}

// OfPodSpec returns what a pod spec references, in the order it names them,
// possibly repeated.
func OfPodSpec(spec *corev1.PodSpec) []Ref {
	var refs []Ref
	if spec.ServiceAccountName != "" {
		refs = appendRef(refs, ServiceAccount, spec.ServiceAccountName)
	}
	for _, s := range spec.ImagePullSecrets {
		refs = appendRef(refs, Secret, s.Name)
	}
	for _, v := range spec.Volumes {
		refs = append(refs, ofVolume(v.VolumeSource)...)
	}
	for _, c := range spec.InitContainers {
		refs = append(refs, ofContainer(c.Env, c.EnvFrom)...)
	}
	for _, c := range spec.Containers {
		refs = append(refs, ofContainer(c.Env, c.EnvFrom)...)
	}
	for _, c := range spec.EphemeralContainers {
		refs = append(refs, ofContainer(c.Env, c.EnvFrom)...)
	}
	return refs
}

func ofVolume(v corev1.VolumeSource) []Ref {
	var refs []Ref
	switch {
	case v.ConfigMap != nil:
		refs = appendRef(refs, ConfigMap, v.ConfigMap.Name)
	case v.Secret != nil:
		refs = appendRef(refs, Secret, v.Secret.SecretName)
	case v.PersistentVolumeClaim != nil:
		refs = appendRef(refs, PersistentVolumeClaim, v.PersistentVolumeClaim.ClaimName)
	case v.Projected != nil:
		for _, p := range v.Projected.Sources {
			if p.ConfigMap != nil {
				refs = appendRef(refs, ConfigMap, p.ConfigMap.Name)
			}
			if p.Secret != nil {
				refs = appendRef(refs, Secret, p.Secret.Name)
			}
		}
	}
	return refs
}

func ofContainer(env []corev1.EnvVar, envFrom []corev1.EnvFromSource) []Ref {
	var refs []Ref
	for _, e := range envFrom {
		if e.ConfigMapRef != nil {
			refs = appendRef(refs, ConfigMap, e.ConfigMapRef.Name)
		}
		if e.SecretRef != nil {
			refs = appendRef(refs, Secret, e.SecretRef.Name)
		}
	}
	for _, e := range env {
		if e.ValueFrom == nil {
			continue
		}
		if r := e.ValueFrom.ConfigMapKeyRef; r != nil {
			refs = appendRef(refs, ConfigMap, r.Name)
		}
		if r := e.ValueFrom.SecretKeyRef; r != nil {
			refs = appendRef(refs, Secret, r.Name)
		}
	}
	return refs
}

// appendRef adds a reference by name; an empty name (a field left unset)
// references nothing.
func appendRef(refs []Ref, gk schema.GroupKind, name string) []Ref {
	if name == "" {
		return refs
	}
	return append(refs, Ref{Group: gk.Group, Kind: gk.Kind, Name: name})
}

func sorted(refs []Ref) []Ref {
	slices.SortFunc(refs, func(a, b Ref) int { return strings.Compare(a.String(), b.String()) })
	return slices.Compact(refs)
}

// GroupKind is a reference's kind.
func GroupKind(r Ref) schema.GroupKind { return schema.GroupKind{Group: r.Group, Kind: r.Kind} }
