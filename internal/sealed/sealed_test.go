package sealed

import (
	"encoding/json"
	"strings"
	"testing"

	. "github.com/onsi/gomega"
	"k8s.io/apimachinery/pkg/runtime"

	placementv1alpha1 "github.com/lodestar-dev/lodestar/api/placement/v1alpha1"
)

func raw(t *testing.T, obj map[string]any) runtime.RawExtension {
	t.Helper()
	b, err := json.Marshal(obj)
	if err != nil {
		t.Fatal(err)
	}
	return runtime.RawExtension{Raw: b}
}

// A revision's Secrets lose their values and keep a digest; what was taken
// out puts them back byte for byte; other kinds and Secrets without values
// are left as they are.
func TestSealThenUnsealGivesTheManifestsBack(t *testing.T) {
	g := NewWithT(t)
	manifests := []runtime.RawExtension{
		raw(t, map[string]any{"apiVersion": "v1", "kind": "Secret", "metadata": map[string]any{"name": "db", "namespace": "shop"},
			"type": "Opaque", "data": map[string]any{"password": "aHVudGVyMg=="}}),
		raw(t, map[string]any{"apiVersion": "v1", "kind": "Secret", "metadata": map[string]any{"name": "tls", "namespace": "shop",
			"annotations": map[string]any{"team": "web"}}, "stringData": map[string]any{"tls.key": "s3cr3t"}}),
		raw(t, map[string]any{"apiVersion": "v1", "kind": "Secret", "metadata": map[string]any{"name": "empty", "namespace": "shop"}}),
		raw(t, map[string]any{"apiVersion": "v1", "kind": "ConfigMap", "metadata": map[string]any{"name": "db", "namespace": "shop"},
			"data": map[string]any{"password": "not a secret"}}),
	}
	sealedManifests, data, err := Seal(manifests)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(data).To(HaveLen(2))
	g.Expect(data).To(HaveKey("shop.db"))
	g.Expect(data).To(HaveKey("shop.tls"))
	for i, m := range sealedManifests[:2] {
		g.Expect(string(m.Raw)).NotTo(Or(ContainSubstring("aHVudGVyMg=="), ContainSubstring("s3cr3t")), "manifest %d", i)
		g.Expect(string(m.Raw)).To(ContainSubstring(placementv1alpha1.SealedDataAnnotation))
	}
	g.Expect(string(sealedManifests[1].Raw)).To(ContainSubstring(`"team":"web"`))
	g.Expect(sealedManifests[2].Raw).To(Equal(manifests[2].Raw))
	g.Expect(sealedManifests[3].Raw).To(Equal(manifests[3].Raw))
	g.Expect(Sealed(sealedManifests)).To(BeTrue())
	g.Expect(Sealed(manifests)).To(BeFalse())

	back, err := Unseal(sealedManifests, data)
	g.Expect(err).NotTo(HaveOccurred())
	for i := range manifests {
		g.Expect(string(back[i].Raw)).To(Equal(string(manifests[i].Raw)), "manifest %d", i)
	}
	// Manifests never sealed (revisions made before) are read as they are.
	same, err := Unseal(manifests, nil)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(same).To(Equal(manifests))
}

// Values that are missing, or not those the revision was made with (the
// data Secret edited by hand), are an error naming the Secret, never a
// Secret placed with other values.
func TestUnsealRefusesValuesThatDoNotMatch(t *testing.T) {
	g := NewWithT(t)
	manifests := []runtime.RawExtension{raw(t, map[string]any{"apiVersion": "v1", "kind": "Secret",
		"metadata": map[string]any{"name": "db", "namespace": "shop"}, "data": map[string]any{"password": "aHVudGVyMg=="}})}
	sealedManifests, data, err := Seal(manifests)
	g.Expect(err).NotTo(HaveOccurred())

	_, err = Unseal(sealedManifests, nil)
	g.Expect(err).To(MatchError(ContainSubstring("the values of Secret shop/db are not in the revision's data Secret")))
	data["shop.db"] = []byte(strings.Replace(string(data["shop.db"]), "aHVudGVyMg==", "b3RoZXI=", 1))
	_, err = Unseal(sealedManifests, data)
	g.Expect(err).To(MatchError(ContainSubstring("are not those the revision was made with")))
}

// Secrets of two namespaces with one name (a ClusterPlacement of whole
// namespaces) keep their own values; a key never exceeds what a Secret allows.
func TestKeysAreOnePerSecret(t *testing.T) {
	g := NewWithT(t)
	g.Expect(Key("a", "db")).NotTo(Equal(Key("b", "db")))
	long := strings.Repeat("n", 253)
	g.Expect(len(Key(strings.Repeat("s", 63), long))).To(BeNumerically("<=", 253))
	g.Expect(Key("a", long)).NotTo(Equal(Key("b", long)))
}
