// Command images builds Lodestar's container images without a container
// engine, and pushes them (docs/install.md):
//
//	images build --binaries DIR --out LAYOUT --version v0.1.0 --revision SHA --created RFC3339
//	images push --layout LAYOUT [--repository registry.example.com/platform] [--plain-http]
//
// build writes lodestar-hub, lodestar-agent and lodestar-credentials, each
// for every --platforms, from the static binaries `make images` builds, over
// a minimal root made here (the nonroot user 65532, the build machine's CA
// certificates): no base image is downloaded. The result is an OCI image
// layout; push copies its images to a registry, under another repository if
// asked (the name and tag stay), with the credentials of `docker login` /
// `crane auth login` (~/.docker/config.json).
package main

import (
	"flag"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/remote"
)

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: images build|push [flags] (see the package comment)")
		os.Exit(2)
	}
	var err error
	switch os.Args[1] {
	case "build":
		err = build(os.Args[2:])
	case "push":
		err = push(os.Args[2:])
	default:
		err = fmt.Errorf("unknown command %q: want build or push", os.Args[1])
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "images:", err)
		os.Exit(1)
	}
}

func build(args []string) error {
	fs := flag.NewFlagSet("build", flag.ExitOnError)
	spec := Spec{}
	var out, created, platforms string
	fs.StringVar(&spec.Binaries, "binaries", "", "Directory of <os>-<arch>/<name> static binaries.")
	fs.StringVar(&out, "out", "", "The OCI layout to write (replaced).")
	fs.StringVar(&spec.Repository, "repository", DefaultRepository, "Repository the images are tagged in (<repository>/<name>:<version>).")
	fs.StringVar(&spec.Version, "version", "", "The release (VERSION).")
	fs.StringVar(&spec.Revision, "revision", "", "The source revision.")
	fs.StringVar(&created, "created", "", "Creation time, RFC 3339 (the commit's: builds are reproducible).")
	fs.StringVar(&platforms, "platforms", "linux/amd64,linux/arm64", "Comma-separated os/arch.")
	fs.StringVar(&spec.CACertificates, "ca-certificates", "/etc/ssl/certs/ca-certificates.crt", "CA bundle copied into the images.")
	fs.StringVar(&spec.Source, "source", "https://github.com/lodestar-dev/lodestar", "The source label.")
	_ = fs.Parse(args)
	if spec.Binaries == "" || out == "" || spec.Version == "" || spec.Revision == "" {
		return fmt.Errorf("build needs --binaries, --out, --version and --revision")
	}
	t, err := time.Parse(time.RFC3339, created)
	if err != nil {
		return fmt.Errorf("--created: %w", err)
	}
	spec.Created, spec.Platforms = t.UTC(), strings.Split(platforms, ",")
	refs, err := Build(spec, out)
	if err != nil {
		return err
	}
	for _, ref := range refs {
		fmt.Printf("%s (%s) in %s\n", ref, platforms, out)
	}
	return nil
}

func push(args []string) error {
	fs := flag.NewFlagSet("push", flag.ExitOnError)
	var dir, repository string
	var plainHTTP bool
	fs.StringVar(&dir, "layout", "", "The OCI layout `images build` wrote.")
	fs.StringVar(&repository, "repository", "", "Push to this repository instead of the one the images are tagged in (names and tags stay).")
	fs.BoolVar(&plainHTTP, "plain-http", false, "The registry speaks HTTP, not HTTPS (a local test registry).")
	_ = fs.Parse(args)
	if dir == "" {
		return fmt.Errorf("push needs --layout")
	}
	pushed, err := Push(dir, repository, plainHTTP, remote.WithAuthFromKeychain(authn.DefaultKeychain))
	for _, ref := range pushed {
		fmt.Println("pushed", ref)
	}
	return err
}

// Push copies every image index of the layout at dir to the reference it is
// tagged as, or under repository when given, and returns what it pushed.
func Push(dir, repository string, plainHTTP bool, opts ...remote.Option) ([]string, error) {
	path, err := layout.FromPath(dir)
	if err != nil {
		return nil, err
	}
	index, err := path.ImageIndex()
	if err != nil {
		return nil, err
	}
	manifest, err := index.IndexManifest()
	if err != nil {
		return nil, err
	}
	var pushed []string
	for _, desc := range manifest.Manifests {
		tagged := desc.Annotations[RefAnnotation]
		if tagged == "" {
			return pushed, fmt.Errorf("%s in %s has no %s annotation", desc.Digest, dir, RefAnnotation)
		}
		target, err := retag(tagged, repository)
		if err != nil {
			return pushed, err
		}
		var nameOpts []name.Option
		if plainHTTP {
			nameOpts = append(nameOpts, name.Insecure)
		}
		ref, err := name.ParseReference(target, nameOpts...)
		if err != nil {
			return pushed, err
		}
		idx, err := index.ImageIndex(desc.Digest)
		if err != nil {
			return pushed, err
		}
		if err := remote.WriteIndex(ref, idx, opts...); err != nil {
			return pushed, fmt.Errorf("pushing %s: %w", target, err)
		}
		pushed = append(pushed, target+"@"+desc.Digest.String())
	}
	return pushed, nil
}

// retag moves ref (<repository>/<name>:<tag>) under repository; an empty
// repository keeps it.
func retag(ref, repository string) (string, error) {
	if repository == "" {
		return ref, nil
	}
	slash := strings.LastIndex(ref, "/")
	if slash < 0 {
		return "", fmt.Errorf("%q has no repository", ref)
	}
	return strings.TrimSuffix(repository, "/") + ref[slash:], nil
}
