package debugapi

import (
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"net/http"
	"testing"
	"time"

	"github.com/lodestar-dev/lodestar/internal/pki"
)

func clientCert(t *testing.T, ca *pki.CA, cn string) *x509.Certificate {
	t.Helper()
	crt, _, err := ca.Issue(cn, x509.ExtKeyUsageClientAuth, nil, nil, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	block, _ := pem.Decode(crt)
	c, err := x509.ParseCertificate(block.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// Only the hub API server's proxy (a certificate of the request-header CA with
// an allowed name) may say who a request is for.
func TestFrontProxyAuthenticate(t *testing.T) {
	ca, err := pki.NewCA("front-proxy-ca", time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	other, err := pki.NewCA("other", time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	f := &FrontProxy{CAs: x509.NewCertPool(), AllowedNames: []string{"front-proxy-client"},
		UserHeaders: []string{"X-Remote-User"}, GroupHeaders: []string{"X-Remote-Group"}, ExtraPrefixes: []string{"X-Remote-Extra-"}}
	block, _ := pem.Decode(ca.PEM)
	caCert, _ := x509.ParseCertificate(block.Bytes)
	f.CAs.AddCert(caCert)

	request := func(cert *x509.Certificate) *http.Request {
		r, _ := http.NewRequest(http.MethodGet, "/", nil)
		r.Header.Set("X-Remote-User", "alice")
		r.Header.Add("X-Remote-Group", "dev")
		r.Header.Add("X-Remote-Group", "system:authenticated")
		r.Header.Set("X-Remote-Extra-Scopes", "a")
		if cert != nil {
			r.TLS = &tls.ConnectionState{PeerCertificates: []*x509.Certificate{cert}}
		}
		return r
	}
	u, err := f.Authenticate(request(clientCert(t, ca, "front-proxy-client")))
	if err != nil {
		t.Fatal(err)
	}
	if u.Name != "alice" || len(u.Groups) != 2 || u.Extra["scopes"][0] != "a" {
		t.Errorf("user %+v", u)
	}
	for name, r := range map[string]*http.Request{
		"no certificate":     request(nil),
		"another CA":         request(clientCert(t, other, "front-proxy-client")),
		"a name not allowed": request(clientCert(t, ca, "someone")),
	} {
		if _, err := f.Authenticate(r); err == nil {
			t.Errorf("%s: authenticated", name)
		}
	}
	for _, h := range []string{"X-Remote-User", "x-remote-group", "X-Remote-Extra-Scopes", "Impersonate-User", "Impersonate-Group", "Authorization"} {
		if !f.IdentityHeader(h) {
			t.Errorf("%s is not an identity header", h)
		}
	}
	if f.IdentityHeader("Accept") {
		t.Error("Accept is an identity header")
	}
}
