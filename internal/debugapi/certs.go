package debugapi

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
	"fmt"
	"net"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	debugv1alpha1 "github.com/lodestar-dev/lodestar/api/debug/v1alpha1"
	"github.com/lodestar-dev/lodestar/internal/pki"
)

// certificateValidity is how long the serving certificate Lodestar makes is
// valid; delete its Secret to have the hub make a new one on its next start.
const certificateValidity = 5 * 365 * 24 * time.Hour

// ServingCertificate returns the debug server's certificate and its CA (PEM):
// those in Secret namespace/secret when it exists (every replica serves the
// same), else a new self-signed CA and a certificate for the Service's DNS
// names, stored there. With several replicas starting at once, the first to
// create the Secret wins and the others read it.
func ServingCertificate(ctx context.Context, c client.Client, namespace, secret, service string) (tls.Certificate, []byte, error) {
	s := &corev1.Secret{}
	err := c.Get(ctx, client.ObjectKey{Namespace: namespace, Name: secret}, s)
	if apierrors.IsNotFound(err) {
		ca, crt, key, genErr := newServingCertificate(service, namespace)
		if genErr != nil {
			return tls.Certificate{}, nil, genErr
		}
		s = &corev1.Secret{
			ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: secret},
			Type:       corev1.SecretTypeTLS,
			Data:       map[string][]byte{"ca.crt": ca, corev1.TLSCertKey: crt, corev1.TLSPrivateKeyKey: key},
		}
		err = c.Create(ctx, s)
		if apierrors.IsAlreadyExists(err) {
			err = c.Get(ctx, client.ObjectKey{Namespace: namespace, Name: secret}, s)
		}
	}
	if err != nil {
		return tls.Certificate{}, nil, fmt.Errorf("the debug server's certificate (Secret %s/%s): %w", namespace, secret, err)
	}
	cert, err := tls.X509KeyPair(s.Data[corev1.TLSCertKey], s.Data[corev1.TLSPrivateKeyKey])
	if err != nil {
		return tls.Certificate{}, nil, fmt.Errorf("the debug server's certificate (Secret %s/%s): %w", namespace, secret, err)
	}
	ca := s.Data["ca.crt"]
	if len(ca) == 0 {
		ca = s.Data[corev1.TLSCertKey]
	}
	return cert, ca, nil
}

// PublishCA sets the CA the hub API server trusts for the debug APIService.
func PublishCA(ctx context.Context, c client.Client, ca []byte) error {
	svc := &unstructured.Unstructured{}
	svc.SetAPIVersion("apiregistration.k8s.io/v1")
	svc.SetKind("APIService")
	svc.SetName(debugv1alpha1.APIServiceName)
	patch := fmt.Appendf(nil, `{"spec":{"caBundle":%q,"insecureSkipTLSVerify":false}}`, base64.StdEncoding.EncodeToString(ca))
	if err := c.Patch(ctx, svc, client.RawPatch(types.MergePatchType, patch)); err != nil {
		return fmt.Errorf("publishing the debug server's CA in APIService %s: %w", debugv1alpha1.APIServiceName, err)
	}
	return nil
}

func newServingCertificate(service, namespace string) (ca, crt, key []byte, err error) {
	authority, err := pki.NewCA("lodestar-debug-ca", certificateValidity)
	if err != nil {
		return nil, nil, nil, err
	}
	host := service + "." + namespace + ".svc"
	crt, key, err = authority.Issue(host, x509.ExtKeyUsageServerAuth,
		[]string{service, service + "." + namespace, host, host + ".cluster.local", "localhost"},
		[]net.IP{net.IPv4(127, 0, 0, 1), net.IPv6loopback}, certificateValidity)
	return authority.PEM, crt, key, err
}
