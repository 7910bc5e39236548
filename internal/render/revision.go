package render

import (
	"bytes"
	"compress/gzip"
	"encoding/json"
	"fmt"
	"io"

	"k8s.io/apimachinery/pkg/runtime"

	placementv1alpha1 "github.com/lodestar-dev/lodestar/api/placement/v1alpha1"
)

// CompressAbove is the size of a revision's manifests (their JSON list) above
// which a PlacementRevision keeps them compressed.
const CompressAbove = 512 << 10

// maxRevisionManifests bounds what a compressed revision expands to, so that a
// revision cannot make its readers hold more than this in memory.
const maxRevisionManifests = 64 << 20

// SetRevisionManifests stores manifests in a revision's spec: as they are, or
// gzip-compressed when their JSON list is larger than CompressAbove.
func SetRevisionManifests(spec *placementv1alpha1.PlacementRevisionSpec, manifests []runtime.RawExtension) error {
	spec.Manifests, spec.CompressedManifests = nil, nil
	if size(manifests) <= CompressAbove {
		for _, m := range manifests {
			spec.Manifests = append(spec.Manifests, placementv1alpha1.RevisionManifest{RawExtension: m})
		}
		return nil
	}
	list, err := json.Marshal(manifests)
	if err != nil {
		return err
	}
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	if _, err := zw.Write(list); err != nil {
		return err
	}
	if err := zw.Close(); err != nil {
		return err
	}
	spec.CompressedManifests = buf.Bytes()
	return nil
}

// RevisionManifests returns the manifests a revision's spec holds, decompressed
// when they are kept compressed.
func RevisionManifests(spec *placementv1alpha1.PlacementRevisionSpec) ([]runtime.RawExtension, error) {
	if len(spec.CompressedManifests) == 0 {
		out := make([]runtime.RawExtension, 0, len(spec.Manifests))
		for _, m := range spec.Manifests {
			out = append(out, m.RawExtension)
		}
		return out, nil
	}
	zr, err := gzip.NewReader(bytes.NewReader(spec.CompressedManifests))
	if err != nil {
		return nil, fmt.Errorf("reading the compressed manifests of revision %d: %w", spec.Revision, err)
	}
	list, err := io.ReadAll(io.LimitReader(zr, maxRevisionManifests+1))
	if err != nil {
		return nil, fmt.Errorf("reading the compressed manifests of revision %d: %w", spec.Revision, err)
	}
	if len(list) > maxRevisionManifests {
		return nil, fmt.Errorf("the compressed manifests of revision %d expand to more than %d MiB", spec.Revision, maxRevisionManifests>>20)
	}
	var out []runtime.RawExtension
	if err := json.Unmarshal(list, &out); err != nil {
		return nil, fmt.Errorf("decoding the compressed manifests of revision %d: %w", spec.Revision, err)
	}
	return out, nil
}
