// Package sealed keeps Secret values out of PlacementRevisions: Seal takes the
// data of the Secrets among a revision's manifests out (each Secret's manifest
// keeps a digest of it), to be stored in a Secret of their own; Unseal puts it
// back, for the Works, checking the digests.
package sealed

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation"

	placementv1alpha1 "github.com/lodestar-dev/lodestar/api/placement/v1alpha1"
)

// fields are what Seal takes out of a Secret.
var fields = []string{"data", "stringData"}

// maybeSecret tells, without decoding it, whether a manifest may be a
// Secret: most are not, and this runs for every manifest of every revision.
func maybeSecret(raw []byte) bool {
	return bytes.Contains(raw, []byte(`"Secret"`))
}

// isSecret tells whether a manifest is a core Secret.
func isSecret(u *unstructured.Unstructured) bool {
	return u.GetAPIVersion() == "v1" && u.GetKind() == "Secret"
}

// Seal returns manifests with each Secret's values taken out and a digest of
// them in its SealedDataAnnotation, and what was taken out, by Secret name (a
// Key). Manifests of other kinds, and
// Secrets without values, are returned as they are.
func Seal(manifests []runtime.RawExtension) ([]runtime.RawExtension, map[string][]byte, error) {
	out := make([]runtime.RawExtension, len(manifests))
	var data map[string][]byte
	for i, m := range manifests {
		out[i] = m
		if !maybeSecret(m.Raw) {
			continue
		}
		u := &unstructured.Unstructured{}
		if err := u.UnmarshalJSON(m.Raw); err != nil || !isSecret(u) {
			continue
		}
		values := map[string]any{}
		for _, f := range fields {
			if v, ok := u.Object[f]; ok {
				values[f] = v
				delete(u.Object, f)
			}
		}
		if len(values) == 0 {
			continue
		}
		taken, err := json.Marshal(values)
		if err != nil {
			return nil, nil, fmt.Errorf("sealing Secret %s: %w", u.GetName(), err)
		}
		if data == nil {
			data = map[string][]byte{}
		}
		data[Key(u.GetNamespace(), u.GetName())] = taken
		annotations := u.GetAnnotations()
		if annotations == nil {
			annotations = map[string]string{}
		}
		annotations[placementv1alpha1.SealedDataAnnotation] = Digest(taken)
		u.SetAnnotations(annotations)
		raw, err := json.Marshal(u.Object)
		if err != nil {
			return nil, nil, fmt.Errorf("sealing Secret %s: %w", u.GetName(), err)
		}
		out[i] = runtime.RawExtension{Raw: raw}
	}
	return out, data, nil
}

// Key is the key of a Secret's values in a revision's data Secret:
// <namespace>.<name> (a namespace has no dot), or a digest of both when that
// is longer than a Secret's key may be.
func Key(namespace, name string) string {
	if k := namespace + "." + name; len(k) <= validation.DNS1123SubdomainMaxLength {
		return k
	}
	sum := sha256.Sum256([]byte(namespace + "/" + name))
	return "sha256-" + hex.EncodeToString(sum[:])
}

// Digest is how a sealed Secret names what was taken out of it.
func Digest(b []byte) string {
	sum := sha256.Sum256(b)
	return "sha256:" + hex.EncodeToString(sum[:])
}

// Sealed tells whether any of manifests is a sealed Secret.
func Sealed(manifests []runtime.RawExtension) bool {
	for _, m := range manifests {
		if !bytes.Contains(m.Raw, []byte(placementv1alpha1.SealedDataAnnotation)) {
			continue
		}
		u := &unstructured.Unstructured{}
		if err := u.UnmarshalJSON(m.Raw); err == nil && isSecret(u) && u.GetAnnotations()[placementv1alpha1.SealedDataAnnotation] != "" {
			return true
		}
	}
	return false
}

// Unseal returns manifests with each sealed Secret's values put back from
// data (what Seal took out, by Key) and its digest annotation gone:
// the manifests as they were selected. A sealed Secret whose values are
// missing, or do not match its digest, is an error naming it.
func Unseal(manifests []runtime.RawExtension, data map[string][]byte) ([]runtime.RawExtension, error) {
	out := make([]runtime.RawExtension, len(manifests))
	for i, m := range manifests {
		out[i] = m
		if !bytes.Contains(m.Raw, []byte(placementv1alpha1.SealedDataAnnotation)) {
			continue
		}
		u := &unstructured.Unstructured{}
		if err := u.UnmarshalJSON(m.Raw); err != nil || !isSecret(u) {
			continue
		}
		annotations := u.GetAnnotations()
		digest := annotations[placementv1alpha1.SealedDataAnnotation]
		if digest == "" {
			continue
		}
		taken, ok := data[Key(u.GetNamespace(), u.GetName())]
		if !ok {
			return nil, fmt.Errorf("the values of Secret %s/%s are not in the revision's data Secret", u.GetNamespace(), u.GetName())
		}
		if Digest(taken) != digest {
			return nil, fmt.Errorf("the values of Secret %s/%s in the revision's data Secret are not those the revision was made with (digest %s, not %s)",
				u.GetNamespace(), u.GetName(), Digest(taken), digest)
		}
		values := map[string]any{}
		if err := json.Unmarshal(taken, &values); err != nil {
			return nil, fmt.Errorf("reading the values of Secret %s: %w", u.GetName(), err)
		}
		for _, f := range fields {
			if v, ok := values[f]; ok {
				u.Object[f] = v
			}
		}
		delete(annotations, placementv1alpha1.SealedDataAnnotation)
		if len(annotations) == 0 {
			annotations = nil
		}
		u.SetAnnotations(annotations)
		raw, err := json.Marshal(u.Object)
		if err != nil {
			return nil, fmt.Errorf("unsealing Secret %s: %w", u.GetName(), err)
		}
		out[i] = runtime.RawExtension{Raw: raw}
	}
	return out, nil
}
