package debugapi

import (
	"context"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	debugv1alpha1 "github.com/lodestar-dev/lodestar/api/debug/v1alpha1"
)

// User is the hub identity a request is for, as the hub API server
// authenticated it.
type User struct {
	Name   string
	UID    string
	Groups []string
	Extra  map[string][]string
}

// FrontProxy authenticates the requests the hub API server forwards to an
// aggregated API: by the client certificate of its proxy (signed by the
// request-header CA, with an allowed name) and the identity in its headers,
// as every aggregated API server does.
type FrontProxy struct {
	CAs           *x509.CertPool
	AllowedNames  []string
	UserHeaders   []string
	UIDHeaders    []string
	GroupHeaders  []string
	ExtraPrefixes []string
}

// The ConfigMap in which the hub API server publishes its request-header
// settings for aggregated API servers.
const (
	authenticationConfigMapNamespace = "kube-system"
	authenticationConfigMapName      = "extension-apiserver-authentication"
)

// LoadFrontProxy reads the hub API server's request-header settings.
func LoadFrontProxy(ctx context.Context, c client.Reader) (*FrontProxy, error) {
	cm := &corev1.ConfigMap{}
	if err := c.Get(ctx, client.ObjectKey{Namespace: authenticationConfigMapNamespace, Name: authenticationConfigMapName}, cm); err != nil {
		return nil, fmt.Errorf("reading the hub API server's request-header settings (%s/%s): %w", authenticationConfigMapNamespace, authenticationConfigMapName, err)
	}
	ca := cm.Data["requestheader-client-ca-file"]
	if ca == "" {
		return nil, fmt.Errorf("the hub API server has no request-header CA (--requestheader-client-ca-file): it cannot serve aggregated APIs such as %s", debugv1alpha1.Group)
	}
	f := &FrontProxy{CAs: x509.NewCertPool()}
	if !f.CAs.AppendCertsFromPEM([]byte(ca)) {
		return nil, errors.New("the hub API server's request-header CA holds no certificate")
	}
	for key, into := range map[string]*[]string{
		"requestheader-allowed-names":        &f.AllowedNames,
		"requestheader-username-headers":     &f.UserHeaders,
		"requestheader-uid-headers":          &f.UIDHeaders,
		"requestheader-group-headers":        &f.GroupHeaders,
		"requestheader-extra-headers-prefix": &f.ExtraPrefixes,
	} {
		if v := cm.Data[key]; v != "" {
			if err := json.Unmarshal([]byte(v), into); err != nil {
				return nil, fmt.Errorf("reading %s of %s/%s: %w", key, authenticationConfigMapNamespace, authenticationConfigMapName, err)
			}
		}
	}
	if len(f.UserHeaders) == 0 {
		f.UserHeaders = []string{"X-Remote-User"}
	}
	if len(f.GroupHeaders) == 0 {
		f.GroupHeaders = []string{"X-Remote-Group"}
	}
	if len(f.ExtraPrefixes) == 0 {
		f.ExtraPrefixes = []string{"X-Remote-Extra-"}
	}
	return f, nil
}

// Verified says whether the request comes from the hub API server's proxy.
func (f *FrontProxy) Verified(r *http.Request) error {
	if r.TLS == nil || len(r.TLS.PeerCertificates) == 0 {
		return errors.New("no client certificate: only the hub API server's proxy may call")
	}
	leaf := r.TLS.PeerCertificates[0]
	inter := x509.NewCertPool()
	for _, c := range r.TLS.PeerCertificates[1:] {
		inter.AddCert(c)
	}
	if _, err := leaf.Verify(x509.VerifyOptions{Roots: f.CAs, Intermediates: inter, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}); err != nil {
		return fmt.Errorf("client certificate not from the request-header CA: %w", err)
	}
	if len(f.AllowedNames) > 0 && !slices.Contains(f.AllowedNames, leaf.Subject.CommonName) {
		return fmt.Errorf("client certificate %q is not one of the proxy names the hub API server allows", leaf.Subject.CommonName)
	}
	return nil
}

// Authenticate returns the identity of a request the hub API server forwarded.
func (f *FrontProxy) Authenticate(r *http.Request) (User, error) {
	if err := f.Verified(r); err != nil {
		return User{}, err
	}
	u := User{Name: first(r.Header, f.UserHeaders), UID: first(r.Header, f.UIDHeaders)}
	if u.Name == "" {
		return User{}, errors.New("no user in the request headers")
	}
	for _, h := range f.GroupHeaders {
		u.Groups = append(u.Groups, r.Header.Values(h)...)
	}
	for name, values := range r.Header {
		for _, p := range f.ExtraPrefixes {
			if key, ok := cutPrefixFold(name, p); ok {
				if u.Extra == nil {
					u.Extra = map[string][]string{}
				}
				if k, err := url.PathUnescape(strings.ToLower(key)); err == nil {
					u.Extra[k] = append(u.Extra[k], values...)
				}
			}
		}
	}
	return u, nil
}

// IdentityHeader says whether the header carries identity (the hub API
// server's, or an impersonation request): never passed on to a member.
func (f *FrontProxy) IdentityHeader(name string) bool {
	for _, h := range slices.Concat(f.UserHeaders, f.UIDHeaders, f.GroupHeaders) {
		if strings.EqualFold(name, h) {
			return true
		}
	}
	for _, p := range f.ExtraPrefixes {
		if _, ok := cutPrefixFold(name, p); ok {
			return true
		}
	}
	_, imp := cutPrefixFold(name, "Impersonate-")
	return imp || strings.EqualFold(name, "Authorization")
}

func first(h http.Header, names []string) string {
	for _, n := range names {
		if v := h.Get(n); v != "" {
			return v
		}
	}
	return ""
}

func cutPrefixFold(s, prefix string) (string, bool) {
	if len(s) >= len(prefix) && strings.EqualFold(s[:len(prefix)], prefix) {
		return s[len(prefix):], true
	}
	return "", false
}
