package main

import (
	"archive/tar"
	"bytes"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// DefaultRepository is where the charts' images live by default
// (charts/*/values.yaml image.repository is DefaultRepository/<name>; the image
// test checks that they agree).
const DefaultRepository = "ghcr.io/lodestar-dev"

// Images are the binaries that become images, each its own.
var Images = []string{"lodestar-hub", "lodestar-agent", "lodestar-credentials"}

// NonRoot is the user and group every image runs as (distroless's nonroot).
const NonRoot = 65532

// RefAnnotation names an image index in the layout's index.json: the full
// reference it is tagged as (containerd and skopeo read it the same way).
const RefAnnotation = "org.opencontainers.image.ref.name"

// Spec is what to build: every image for every platform.
type Spec struct {
	// Binaries holds <os>-<arch>/<image name>: static binaries (CGO_ENABLED=0).
	Binaries string
	// Repository the images are tagged in: Repository/<name>:Version.
	Repository string
	Version    string
	Revision   string
	// Created is the images' creation time (the commit's, so that a build is
	// reproducible); every file in the layers carries it too.
	Created time.Time
	// Platforms: os/arch.
	Platforms []string
	// CACertificates is the bundle copied to /etc/ssl/certs/ca-certificates.crt
	// (Debian's ca-certificates package on the build machine).
	CACertificates string
	// Source is the repository's address, for the source label.
	Source string
}

// Build writes every image of spec, as one multi-platform index each, into
// an OCI layout at out (replacing what was there), and returns their references.
func Build(spec Spec, out string) ([]string, error) {
	base, err := baseLayer(spec)
	if err != nil {
		return nil, err
	}
	if err := os.RemoveAll(out); err != nil {
		return nil, err
	}
	path, err := layout.Write(out, empty.Index)
	if err != nil {
		return nil, err
	}
	var refs []string
	for _, name := range Images {
		idx, err := imageIndex(spec, name, base)
		if err != nil {
			return nil, err
		}
		ref := fmt.Sprintf("%s/%s:%s", spec.Repository, name, spec.Version)
		if err := path.AppendIndex(idx, layout.WithAnnotations(map[string]string{RefAnnotation: ref})); err != nil {
			return nil, fmt.Errorf("writing %s: %w", ref, err)
		}
		refs = append(refs, ref)
	}
	return refs, nil
}

// imageIndex is one image for every platform.
func imageIndex(spec Spec, name string, base v1.Layer) (v1.ImageIndex, error) {
	idx := mutate.IndexMediaType(empty.Index, types.OCIImageIndex)
	for _, platform := range spec.Platforms {
		osName, arch, ok := strings.Cut(platform, "/")
		if !ok {
			return nil, fmt.Errorf("platform %q: want os/arch", platform)
		}
		img, err := image(spec, name, osName, arch, base)
		if err != nil {
			return nil, fmt.Errorf("%s for %s: %w", name, platform, err)
		}
		idx = mutate.AppendManifests(idx, mutate.IndexAddendum{Add: img, Descriptor: v1.Descriptor{
			Platform: &v1.Platform{OS: osName, Architecture: arch},
		}})
	}
	return mutate.Annotations(idx, labels(spec, name)).(v1.ImageIndex), nil
}

// image is one image for one platform: the base layer and the binary.
func image(spec Spec, name, osName, arch string, base v1.Layer) (v1.Image, error) {
	binary, err := os.ReadFile(filepath.Join(spec.Binaries, osName+"-"+arch, name))
	if err != nil {
		return nil, fmt.Errorf("reading the binary (make images builds it): %w", err)
	}
	app, err := layer(spec.Created, []file{{name: name, mode: 0o755, data: binary}})
	if err != nil {
		return nil, err
	}
	img, err := mutate.AppendLayers(mutate.MediaType(mutate.ConfigMediaType(empty.Image, types.OCIConfigJSON), types.OCIManifestSchema1), base, app)
	if err != nil {
		return nil, err
	}
	cfg, err := img.ConfigFile()
	if err != nil {
		return nil, err
	}
	cfg = cfg.DeepCopy()
	cfg.OS, cfg.Architecture = osName, arch
	cfg.Created = v1.Time{Time: spec.Created}
	cfg.Author = "Lodestar"
	cfg.Config.Entrypoint = []string{"/" + name}
	cfg.Config.User = fmt.Sprintf("%d:%d", NonRoot, NonRoot)
	cfg.Config.WorkingDir = "/home/nonroot"
	cfg.Config.Env = []string{"PATH=/", "SSL_CERT_FILE=/etc/ssl/certs/ca-certificates.crt"}
	cfg.Config.Labels = labels(spec, name)
	return mutate.ConfigFile(img, cfg)
}

// labels are the OCI annotations every image and index carries.
func labels(spec Spec, name string) map[string]string {
	return map[string]string{
		"org.opencontainers.image.title":       name,
		"org.opencontainers.image.version":     spec.Version,
		"org.opencontainers.image.revision":    spec.Revision,
		"org.opencontainers.image.created":     spec.Created.UTC().Format(time.RFC3339),
		"org.opencontainers.image.source":      spec.Source,
		"org.opencontainers.image.licenses":    "Apache-2.0",
		"org.opencontainers.image.description": "Lodestar " + strings.TrimPrefix(name, "lodestar-"),
	}
}

// baseLayer is the minimal root every image shares: the nonroot user and
// group, its home, /tmp, and the CA certificates. Nothing is downloaded.
func baseLayer(spec Spec) (v1.Layer, error) {
	certs, err := os.ReadFile(spec.CACertificates)
	if err != nil {
		return nil, fmt.Errorf("reading CA certificates (Debian's ca-certificates package installs %s): %w", spec.CACertificates, err)
	}
	if !bytes.Contains(certs, []byte("BEGIN CERTIFICATE")) {
		return nil, fmt.Errorf("%s holds no PEM certificate", spec.CACertificates)
	}
	passwd := fmt.Sprintf("root:x:0:0:root:/root:/sbin/nologin\nnonroot:x:%d:%d:nonroot:/home/nonroot:/sbin/nologin\n", NonRoot, NonRoot)
	group := fmt.Sprintf("root:x:0:\nnonroot:x:%d:\n", NonRoot)
	return layer(spec.Created, []file{
		{name: "etc/", mode: 0o755},
		{name: "etc/passwd", mode: 0o644, data: []byte(passwd)},
		{name: "etc/group", mode: 0o644, data: []byte(group)},
		{name: "etc/ssl/", mode: 0o755},
		{name: "etc/ssl/certs/", mode: 0o755},
		{name: "etc/ssl/certs/ca-certificates.crt", mode: 0o644, data: certs},
		{name: "home/", mode: 0o755},
		{name: "home/nonroot/", mode: 0o700, uid: NonRoot},
		{name: "tmp/", mode: 0o1777},
	})
}

// file is an entry of a layer; a name ending in / is a directory.
type file struct {
	name string
	mode int64
	uid  int
	data []byte
}

// layer is a gzipped tar of files, every entry stamped with created.
func layer(created time.Time, files []file) (v1.Layer, error) {
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, f := range files {
		h := &tar.Header{Name: f.name, Mode: f.mode, Uid: f.uid, Gid: f.uid, ModTime: created, Format: tar.FormatPAX}
		if strings.HasSuffix(f.name, "/") {
			h.Typeflag = tar.TypeDir
		} else {
			h.Typeflag, h.Size = tar.TypeReg, int64(len(f.data))
		}
		if err := tw.WriteHeader(h); err != nil {
			return nil, err
		}
		if _, err := tw.Write(f.data); err != nil {
			return nil, err
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	data := buf.Bytes()
	return tarball.LayerFromOpener(func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(data)), nil },
		tarball.WithMediaType(types.OCILayer))
}
