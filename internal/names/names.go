// Package names derives the deterministic names and label values Lodestar gives the
// objects it creates, so that every object points back to its source.
package names

import (
	"crypto/sha256"
	"encoding/hex"
	"strconv"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation"

	placementv1alpha1 "github.com/lodestar-dev/lodestar/api/placement/v1alpha1"
)

// ClusterNamespacePrefix starts the name of each member cluster's namespace on the hub.
const ClusterNamespacePrefix = placementv1alpha1.ClusterNamespacePrefix

// ClusterNamespace is the hub namespace that holds the Works of a cluster.
func ClusterNamespace(cluster string) string {
	return ClusterNamespacePrefix + cluster
}

// ClusterFromNamespace returns the cluster whose hub namespace ns is, and false when
// ns is not a cluster namespace.
func ClusterFromNamespace(ns string) (string, bool) {
	cluster, ok := strings.CutPrefix(ns, ClusterNamespacePrefix)
	return cluster, ok && cluster != ""
}

// Work is the name of the Work that carries a Placement's objects to a cluster:
// "<namespace>.<placement>", shortened with a hash when that is too long for a name.
func Work(namespace, placement string) string {
	return fit(namespace+"."+placement, validation.DNS1123SubdomainMaxLength)
}

// WorkPart is the name of part i of the Works that carry a Placement's objects
// to a cluster when they do not fit in one: part 0 is Work(namespace,
// placement), part i "<namespace>.<placement>-part<i>", shortened with a hash
// when that is too long for a name.
func WorkPart(namespace, placement string, i int) string {
	if i == 0 {
		return Work(namespace, placement)
	}
	return fit(namespace+"."+placement+"-part"+strconv.Itoa(i), validation.DNS1123SubdomainMaxLength)
}

// AppliedWork is the name of the member's AppliedWork for the Work name in the hub
// namespace workNamespace of the hub hubID: "<hubID>.<workNamespace>.<name>",
// shortened with a hash when that is too long. The hub and the namespace keep two
// agents on one member (of two hubs, or a member joined again under another name)
// from sharing a record.
func AppliedWork(hubID, workNamespace, name string) string {
	return fit(hubID+"."+workNamespace+"."+name, validation.DNS1123SubdomainMaxLength)
}

// HubID is the identity of a hub as its agents know it: the first 12 hex digits
// of the SHA-256 of its API server address (scheme and host, no trailing slash).
// A hub restored from backup under the same address keeps it.
func HubID(host string) string {
	return Hash(strings.TrimRight(strings.ToLower(host), "/"))[:12]
}

// IsShortened tells whether a name made by AppliedWork (or Work) was shortened
// with a hash.
func IsShortened(name string) bool {
	return len(name) == validation.DNS1123SubdomainMaxLength
}

// DecisionSlice is the name of slice i of a Placement's PlacementDecisions.
func DecisionSlice(placement string, i int) string {
	return fit(placement, validation.DNS1123SubdomainMaxLength-8) + "-" + strconv.Itoa(i)
}

// Revision is the name of a Placement's PlacementRevision of the manifests whose
// hash is hash: "<placement>-<first 10 digits of the hash>", shortened when too long.
func Revision(placement, hash string) string {
	return fit(placement, validation.DNS1123SubdomainMaxLength-11) + "-" + hash[:min(10, len(hash))]
}

// RevisionData is the name of the Secret that holds the Secret data of the
// Placement's revision of hash.
func RevisionData(placement, hash string) string {
	return fit(placement, validation.DNS1123SubdomainMaxLength-16) + "-" + hash[:min(10, len(hash))] + "-data"
}

// HashedLabelPrefix starts a label value that stands for a hashed name.
const HashedLabelPrefix = "h-"

// LabelValue returns s when it is a valid label value, or a stable hash of it.
func LabelValue(s string) string {
	if len(validation.IsValidLabelValue(s)) == 0 {
		return s
	}
	return HashedLabelPrefix + Hash(s)[:40]
}

// Hash is the hex SHA-256 of s.
func Hash(s string) string {
	sum := sha256.Sum256([]byte(s))
	return hex.EncodeToString(sum[:])
}

// fit shortens s to max characters, keeping a prefix and a hash of the whole.
func fit(s string, maxLen int) string {
	if len(s) <= maxLen {
		return s
	}
	h := Hash(s)[:16]
	return strings.TrimRight(s[:maxLen-len(h)-1], ".-") + "-" + h
}

// ServiceObject is the name of a Service's ExportedService and ImportedServices
// in the clusters' hub namespaces: "<namespace>.<name>" (two DNS labels, so it
// fits).
func ServiceObject(namespace, name string) string { return namespace + "." + name }
