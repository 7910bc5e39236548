package main

import (
	"archive/tar"
	"bytes"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"debug/elf"
	"encoding/pem"
	"errors"
	"io"
	"log"
	"math/big"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/registry"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/remote"
)

// root is the repository's root, from this module's directory.
const root = "../../.."

// TestImages builds the images as `make images` does, of the binaries `make
// build` put in bin/ (static, stamped with VERSION) for this machine's
// platform and of a stand-in for the other one, then reads the layout back:
// each image's entrypoint, user, platform and labels, the binary in its layer
// (of the right architecture; on this machine, run with --version), the
// nonroot user and the CA certificates; builds it again to the same digests;
// pushes it to a registry on loopback; and checks that the charts' default
// images are what it tags.
func TestImages(t *testing.T) {
	bin := os.Getenv("LODESTAR_BIN")
	if bin == "" {
		t.Fatal("LODESTAR_BIN is not set: run through `make test`, which builds the binaries the images carry into bin/")
	}
	version := readVersion(t)
	dir := t.TempDir()
	host, other := "linux/"+runtime.GOARCH, "linux/arm64"
	if runtime.GOARCH == "arm64" {
		other = "linux/amd64"
	}
	binaries := filepath.Join(dir, "binaries")
	for _, name := range Images {
		copyFile(t, filepath.Join(bin, name), filepath.Join(binaries, "linux-"+runtime.GOARCH, name))
	}
	tiny := filepath.Join(dir, "tiny")
	build := exec.Command("go", "build", "-o", tiny, "./testdata/tiny")
	build.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS=linux", "GOARCH="+strings.TrimPrefix(other, "linux/"))
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("building the stand-in for %s: %v\n%s", other, err, out)
	}
	for _, name := range Images {
		copyFile(t, tiny, filepath.Join(binaries, strings.ReplaceAll(other, "/", "-"), name))
	}
	certs := filepath.Join(dir, "ca.crt")
	if err := os.WriteFile(certs, testCertificate(t), 0o644); err != nil {
		t.Fatal(err)
	}
	spec := Spec{Binaries: binaries, Repository: DefaultRepository, Version: version, Revision: "0123abc",
		Created: time.Date(2026, 11, 29, 0, 0, 0, 0, time.UTC), Platforms: []string{host, other},
		CACertificates: certs, Source: "https://github.com/lodestar-dev/lodestar"}
	out := filepath.Join(dir, "oci")
	refs, err := Build(spec, out)
	if err != nil {
		t.Fatal(err)
	}

	digests := checkLayout(t, out, spec, host, dir)
	if len(digests) != len(Images) {
		t.Fatalf("the layout holds %d images, want %d (%v)", len(digests), len(Images), Images)
	}

	// Reproducible: the same inputs make the same bytes.
	if _, err := Build(spec, filepath.Join(dir, "again")); err != nil {
		t.Fatal(err)
	}
	for ref, digest := range indexDigests(t, filepath.Join(dir, "again")) {
		if digests[ref] != digest {
			t.Errorf("%s built twice: %s then %s", ref, digests[ref], digest)
		}
	}

	// Pushed under another repository, on a registry on loopback.
	reg := httptest.NewServer(registry.New(registry.Logger(log.New(io.Discard, "", 0))))
	defer reg.Close()
	target := strings.TrimPrefix(reg.URL, "http://") + "/platform"
	pushed, err := Push(out, target, true)
	if err != nil {
		t.Fatal(err)
	}
	if len(pushed) != len(refs) {
		t.Errorf("pushed %v, want %d images", pushed, len(refs))
	}
	for _, ref := range refs {
		moved, err := retag(ref, target)
		if err != nil {
			t.Fatal(err)
		}
		r, err := name.ParseReference(moved, name.Insecure)
		if err != nil {
			t.Fatal(err)
		}
		desc, err := remote.Head(r)
		if err != nil {
			t.Fatalf("reading %s back from the registry: %v", moved, err)
		}
		if desc.Digest != digests[ref] {
			t.Errorf("%s in the registry is %s, the layout's is %s", moved, desc.Digest, digests[ref])
		}
	}

	// The charts' default images are the ones tagged here.
	for _, chart := range []string{"lodestar-hub", "lodestar-agent"} {
		values := readFile(t, filepath.Join(root, "charts", chart, "values.yaml"))
		meta := readFile(t, filepath.Join(root, "charts", chart, "Chart.yaml"))
		repo := match(t, `(?m)^image:\n(?:\s+#.*\n)*\s+repository:\s*(\S+)`, values, chart+" values.yaml image.repository")
		appVersion := match(t, `(?m)^appVersion:\s*"?([^"\s]+)"?`, meta, chart+" Chart.yaml appVersion")
		chartVersion := match(t, `(?m)^version:\s*(\S+)`, meta, chart+" Chart.yaml version")
		if ref := repo + ":" + appVersion; digests[ref] == (v1.Hash{}) {
			t.Errorf("the %s chart's default image %s is not one make images tags (%v)", chart, ref, refs)
		}
		if appVersion != version || "v"+chartVersion != version {
			t.Errorf("the %s chart is version %s, appVersion %s; VERSION is %s (make set-version NEW=%s writes all three)",
				chart, chartVersion, appVersion, version, version)
		}
	}
}

// checkLayout reads every image of the layout at dir and returns their
// digests by reference.
func checkLayout(t *testing.T, dir string, spec Spec, host, tmp string) map[string]v1.Hash {
	t.Helper()
	index, digests := readLayout(t, dir)
	for _, name := range Images {
		ref := spec.Repository + "/" + name + ":" + spec.Version
		digest, ok := digests[ref]
		if !ok {
			t.Errorf("no image tagged %s in the layout (%v)", ref, digests)
			continue
		}
		idx, err := index.ImageIndex(digest)
		if err != nil {
			t.Fatal(err)
		}
		m, err := idx.IndexManifest()
		if err != nil {
			t.Fatal(err)
		}
		if got := m.Annotations["org.opencontainers.image.version"]; got != spec.Version {
			t.Errorf("%s: index version label %q, want %q", ref, got, spec.Version)
		}
		var platforms []string
		for _, desc := range m.Manifests {
			platform := desc.Platform.OS + "/" + desc.Platform.Architecture
			platforms = append(platforms, platform)
			img, err := idx.Image(desc.Digest)
			if err != nil {
				t.Fatal(err)
			}
			checkImage(t, ref+" "+platform, img, name, platform, spec, platform == host, tmp)
		}
		if strings.Join(platforms, ",") != strings.Join(spec.Platforms, ",") {
			t.Errorf("%s holds %v, want %v", ref, platforms, spec.Platforms)
		}
	}
	return digests
}

// checkImage checks one platform's image of one binary.
func checkImage(t *testing.T, what string, img v1.Image, name, platform string, spec Spec, runnable bool, tmp string) {
	t.Helper()
	cfg, err := img.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	if got := cfg.OS + "/" + cfg.Architecture; got != platform {
		t.Errorf("%s: config platform %s", what, got)
	}
	if got := strings.Join(cfg.Config.Entrypoint, " "); got != "/"+name {
		t.Errorf("%s: entrypoint %q, want /%s", what, got, name)
	}
	if cfg.Config.User != "65532:65532" {
		t.Errorf("%s: user %q, want 65532:65532 (nonroot)", what, cfg.Config.User)
	}
	for label, want := range map[string]string{"org.opencontainers.image.version": spec.Version,
		"org.opencontainers.image.revision": spec.Revision, "org.opencontainers.image.title": name} {
		if got := cfg.Config.Labels[label]; got != want {
			t.Errorf("%s: label %s = %q, want %q", what, label, got, want)
		}
	}
	files := filesOf(t, img)
	binary, ok := files[name]
	if !ok {
		t.Fatalf("%s: no /%s in the image's layers (%d files)", what, name, len(files))
	}
	f, err := elf.NewFile(bytes.NewReader(binary.data))
	if err != nil {
		t.Fatalf("%s: /%s is not an ELF binary: %v", what, name, err)
	}
	if want := map[string]elf.Machine{"amd64": elf.EM_X86_64, "arm64": elf.EM_AARCH64}[cfg.Architecture]; f.Machine != want {
		t.Errorf("%s: /%s is for %s, want %s", what, name, f.Machine, want)
	}
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP {
			t.Errorf("%s: /%s is dynamically linked (built with cgo): the image has no libc", what, name)
		}
	}
	if binary.mode&0o111 == 0 {
		t.Errorf("%s: /%s is not executable (mode %o)", what, name, binary.mode)
	}
	if !bytes.Contains(files["etc/passwd"].data, []byte("nonroot:x:65532:65532:")) {
		t.Errorf("%s: /etc/passwd has no nonroot user 65532:\n%s", what, files["etc/passwd"].data)
	}
	if want := readFile(t, spec.CACertificates); string(files["etc/ssl/certs/ca-certificates.crt"].data) != want {
		t.Errorf("%s: /etc/ssl/certs/ca-certificates.crt is not the build machine's bundle", what)
	}
	if files["tmp"].mode&0o1777 != 0o1777 {
		t.Errorf("%s: /tmp mode %o, want 1777", what, files["tmp"].mode)
	}
	if !runnable {
		return
	}
	exe := filepath.Join(tmp, "run-"+name)
	if err := os.WriteFile(exe, binary.data, 0o755); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(exe, "--version").CombinedOutput()
	if err != nil {
		t.Fatalf("%s: /%s --version: %v\n%s", what, name, err, out)
	}
	if want := name + " " + spec.Version + " "; !strings.HasPrefix(string(out), want) {
		t.Errorf("%s: /%s --version printed %q, want it to start with %q (make build stamps VERSION)", what, name, out, want)
	}
}

type entry struct {
	mode int64
	data []byte
}

// filesOf is the image's flattened filesystem.
func filesOf(t *testing.T, img v1.Image) map[string]entry {
	t.Helper()
	rc := mutate.Extract(img)
	defer func() { _ = rc.Close() }()
	files := map[string]entry{}
	tr := tar.NewReader(rc)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return files
		}
		if err != nil {
			t.Fatal(err)
		}
		data, err := io.ReadAll(tr)
		if err != nil {
			t.Fatal(err)
		}
		files[strings.TrimSuffix(strings.TrimPrefix(h.Name, "/"), "/")] = entry{mode: h.Mode, data: data}
	}
}

// indexDigests are the layout's image indexes by the reference they are tagged as.
func indexDigests(t *testing.T, dir string) map[string]v1.Hash {
	t.Helper()
	_, digests := readLayout(t, dir)
	return digests
}

// readLayout reads the OCI layout at dir: its index, and the digests of the
// image indexes it holds by the reference each is tagged as.
func readLayout(t *testing.T, dir string) (v1.ImageIndex, map[string]v1.Hash) {
	t.Helper()
	path, err := layout.FromPath(dir)
	if err != nil {
		t.Fatal(err)
	}
	index, err := path.ImageIndex()
	if err != nil {
		t.Fatal(err)
	}
	m, err := index.IndexManifest()
	if err != nil {
		t.Fatal(err)
	}
	digests := map[string]v1.Hash{}
	for _, desc := range m.Manifests {
		digests[desc.Annotations[RefAnnotation]] = desc.Digest
	}
	return index, digests
}

func TestRetag(t *testing.T) {
	for _, tc := range []struct{ ref, repository, want string }{
		{"ghcr.io/lodestar-dev/lodestar-hub:v0.1.0", "", "ghcr.io/lodestar-dev/lodestar-hub:v0.1.0"},
		{"ghcr.io/lodestar-dev/lodestar-hub:v0.1.0", "registry.example.com/platform/", "registry.example.com/platform/lodestar-hub:v0.1.0"},
		{"ghcr.io/lodestar-dev/lodestar-agent:v0.1.0", "127.0.0.1:5000", "127.0.0.1:5000/lodestar-agent:v0.1.0"},
	} {
		if got, err := retag(tc.ref, tc.repository); err != nil || got != tc.want {
			t.Errorf("retag(%q, %q) = %q, %v; want %q", tc.ref, tc.repository, got, err, tc.want)
		}
	}
	if _, err := retag("lodestar-hub:v1", "x"); err == nil {
		t.Error("retag of a reference without a repository: want an error")
	}
}

func TestBuildRefusesWhatItCannotMake(t *testing.T) {
	dir := t.TempDir()
	certs := filepath.Join(dir, "ca.crt")
	if err := os.WriteFile(certs, []byte("not a certificate"), 0o644); err != nil {
		t.Fatal(err)
	}
	spec := Spec{Binaries: dir, Repository: DefaultRepository, Version: "v0.0.1", Revision: "x", Platforms: []string{"linux/amd64"}}
	for what, tc := range map[string]struct {
		certs, platform, want string
	}{
		"no CA bundle":          {filepath.Join(dir, "missing"), "linux/amd64", "ca-certificates"},
		"a bundle of no PEM":    {certs, "linux/amd64", "no PEM certificate"},
		"a platform without os": {"", "amd64", "want os/arch"},
		"no binary":             {"", "linux/amd64", "make images builds it"},
	} {
		s := spec
		s.CACertificates, s.Platforms = tc.certs, []string{tc.platform}
		if s.CACertificates == "" {
			s.CACertificates = filepath.Join(dir, "good.crt")
			if err := os.WriteFile(s.CACertificates, testCertificate(t), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		if _, err := Build(s, filepath.Join(dir, "oci")); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: Build error %v, want one saying %q", what, err, tc.want)
		}
	}
}

func readVersion(t *testing.T) string {
	t.Helper()
	v := strings.TrimSpace(readFile(t, filepath.Join(root, "VERSION")))
	if !regexp.MustCompile(`^v\d+\.\d+\.\d+`).MatchString(v) {
		t.Fatalf("VERSION is %q, want vX.Y.Z", v)
	}
	return v
}

func readFile(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func copyFile(t *testing.T, from, to string) {
	t.Helper()
	b, err := os.ReadFile(from)
	if err != nil {
		t.Fatalf("%v (make build writes bin/)", err)
	}
	if err := os.MkdirAll(filepath.Dir(to), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(to, b, 0o755); err != nil {
		t.Fatal(err)
	}
}

func match(t *testing.T, expr, text, what string) string {
	t.Helper()
	m := regexp.MustCompile(expr).FindStringSubmatch(text)
	if m == nil {
		t.Fatalf("cannot find %s", what)
	}
	return m[1]
}

// testCertificate is a self-signed CA certificate in PEM, standing in for the
// build machine's bundle.
func testCertificate(t *testing.T) []byte {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "test CA"}, IsCA: true,
		NotBefore: time.Now(), NotAfter: time.Now().Add(time.Hour), BasicConstraintsValid: true}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
}
