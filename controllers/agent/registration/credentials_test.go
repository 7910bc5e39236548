package registration

import (
	"encoding/base64"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	. "github.com/onsi/gomega"
	"k8s.io/client-go/rest"
)

// jwt returns an unsigned token with the given lifetime claims: the agent reads
// them without verifying (the hub verifies).
func jwt(iat, exp int64) string {
	claims := base64.RawURLEncoding.EncodeToString(fmt.Appendf(nil, `{"iat":%d,"exp":%d}`, iat, exp))
	return "eyJhbGciOiJub25lIn0." + claims + ".sig"
}

func TestWrapStartsFromTheLongestLivedToken(t *testing.T) {
	dir := t.TempDir()
	joined := jwt(1000, 2000)
	tests := []struct {
		name string
		file string // "" for no file
		want string
	}{
		{name: "no token file: the kubeconfig's", want: joined},
		{name: "a renewed token in the file outlives it: the file's", file: jwt(1500, 5000), want: jwt(1500, 5000)},
		{name: "an older token in the file: the kubeconfig's", file: jwt(100, 1500), want: joined},
		{name: "garbage in the file: the kubeconfig's", file: "not a token", want: joined},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			path := filepath.Join(dir, fmt.Sprintf("token-%d", i))
			if tt.file != "" {
				g.Expect(os.WriteFile(path, []byte(tt.file+"\n"), 0o600)).To(Succeed())
			}
			c := &Credentials{Namespace: "lodestar-cluster-x", File: path}
			cfg, err := c.Wrap(&rest.Config{Host: "https://hub.example", BearerToken: joined})
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(c.Token()).To(Equal(tt.want))
			g.Expect(cfg.BearerToken).To(BeEmpty(), "requests carry the current token, set per request")
			g.Expect(cfg.WrapTransport).NotTo(BeNil())
		})
	}
}

func TestWrapNeedsAJWT(t *testing.T) {
	g := NewWithT(t)
	_, err := (&Credentials{}).Wrap(&rest.Config{Host: "https://hub.example"})
	g.Expect(err).To(MatchError(ContainSubstring("has no token")))
	_, err = (&Credentials{}).Wrap(&rest.Config{Host: "https://hub.example", BearerToken: "opaque"})
	g.Expect(err).To(MatchError(ContainSubstring("not a JWT")))
	_, err = (&Credentials{}).Wrap(&rest.Config{Host: "https://hub.example", BearerToken: jwt(0, 0)})
	g.Expect(err).To(MatchError(ContainSubstring("no iat or exp")))
}
