// Command lodestar-credentials is the credential plugin of Lodestar's tunnel
// access provider (lodestar-tunnel, docs/extending.md): a client.go exec
// plugin that gives a consumer's client the consumer's own hub credential.
// The provider's server is the hub's API server (the debug API's
// clusters/<cluster>/proxy), so the token is a hub token: the consumer's
// ServiceAccount token (--token-file, by default the in-cluster one), or one
// requested for a ServiceAccount (--service-account) with the current
// kubeconfig's rights.
//
// A consumer names it in its access provider file:
//
//	{"providers": [{"name": "lodestar-tunnel", "execConfig": {
//	    "apiVersion": "client.authentication.k8s.io/v1",
//	    "command": "lodestar-credentials", "provideClusterInfo": true}}]}
package main

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"flag"
	"fmt"
	"github.com/lodestar-dev/lodestar/internal/version"
	"os"
	"strings"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
)

// inClusterToken is where a pod's ServiceAccount token is mounted.
const inClusterToken = "/var/run/secrets/kubernetes.io/serviceaccount/token"

func main() {
	tokenFile := flag.String("token-file", inClusterToken, "File holding the consumer's hub token (a projected ServiceAccount token is read again at each call).")
	sa := flag.String("service-account", "", "Request a token for this hub ServiceAccount (<namespace>/<name>) instead, with --kubeconfig's rights (serviceaccounts/token create).")
	kubeconfig := flag.String("kubeconfig", "", "Kubeconfig of the hub for --service-account (default: $KUBECONFIG, ~/.kube/config or in-cluster).")
	ttl := flag.Duration("token-ttl", time.Hour, "Lifetime of a requested token (--service-account); at least 10m.")
	showVersion := version.AddFlag(flag.CommandLine)
	flag.Parse()
	if showVersion.Print(os.Stdout, "lodestar-credentials") {
		return
	}
	cred, err := credential(*tokenFile, *sa, *kubeconfig, *ttl)
	if err != nil {
		fmt.Fprintln(os.Stderr, "lodestar-credentials:", err)
		os.Exit(1)
	}
	if err := json.NewEncoder(os.Stdout).Encode(cred); err != nil {
		fmt.Fprintln(os.Stderr, "lodestar-credentials:", err)
		os.Exit(1)
	}
}

// execCredential is client.authentication.k8s.io's ExecCredential, as much of
// it as a plugin answers.
type execCredential struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
	Status     struct {
		Token               string       `json:"token"`
		ExpirationTimestamp *metav1.Time `json:"expirationTimestamp,omitempty"`
	} `json:"status"`
}

// credential is the ExecCredential of the consumer's hub token, in the API
// version client-go asked for (KUBERNETES_EXEC_INFO).
func credential(tokenFile, sa, kubeconfig string, ttl time.Duration) (*execCredential, error) {
	out := &execCredential{APIVersion: "client.authentication.k8s.io/v1", Kind: "ExecCredential"}
	if info := os.Getenv("KUBERNETES_EXEC_INFO"); info != "" {
		var in struct {
			APIVersion string `json:"apiVersion"`
		}
		if err := json.Unmarshal([]byte(info), &in); err != nil {
			return nil, fmt.Errorf("reading KUBERNETES_EXEC_INFO: %w", err)
		}
		if in.APIVersion != "" {
			out.APIVersion = in.APIVersion
		}
	}
	if sa != "" {
		token, expires, err := requestToken(sa, kubeconfig, ttl)
		if err != nil {
			return nil, err
		}
		out.Status.Token, out.Status.ExpirationTimestamp = token, &metav1.Time{Time: expires}
		return out, nil
	}
	b, err := os.ReadFile(tokenFile)
	if err != nil {
		return nil, fmt.Errorf("reading the consumer's hub token: %w (outside a hub pod, pass --token-file or --service-account)", err)
	}
	out.Status.Token = strings.TrimSpace(string(b))
	if out.Status.Token == "" {
		return nil, fmt.Errorf("%s is empty", tokenFile)
	}
	if exp, ok := expiry(out.Status.Token); ok {
		out.Status.ExpirationTimestamp = &metav1.Time{Time: exp}
	}
	return out, nil
}

// requestToken asks the hub for a token of the ServiceAccount namespace/name.
func requestToken(sa, kubeconfig string, ttl time.Duration) (string, time.Time, error) {
	namespace, name, ok := strings.Cut(sa, "/")
	if !ok || namespace == "" || name == "" {
		return "", time.Time{}, fmt.Errorf("--service-account %q is not <namespace>/<name>", sa)
	}
	rules := clientcmd.NewDefaultClientConfigLoadingRules()
	rules.ExplicitPath = kubeconfig
	cfg, err := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, nil).ClientConfig()
	if err != nil {
		return "", time.Time{}, fmt.Errorf("the hub's kubeconfig: %w", err)
	}
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return "", time.Time{}, err
	}
	seconds := int64(ttl / time.Second)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	tr, err := cs.CoreV1().ServiceAccounts(namespace).CreateToken(ctx, name, &authenticationv1.TokenRequest{
		Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: &seconds},
	}, metav1.CreateOptions{})
	if err != nil {
		return "", time.Time{}, fmt.Errorf("requesting a token of ServiceAccount %s: %w", sa, err)
	}
	return tr.Status.Token, tr.Status.ExpirationTimestamp.Time, nil
}

// expiry is a JWT's exp claim, read without checking the token (the hub checks it).
func expiry(token string) (time.Time, bool) {
	parts := strings.Split(token, ".")
	if len(parts) != 3 {
		return time.Time{}, false
	}
	payload, err := base64.RawURLEncoding.DecodeString(parts[1])
	if err != nil {
		return time.Time{}, false
	}
	var claims struct {
		Exp int64 `json:"exp"`
	}
	if err := json.Unmarshal(payload, &claims); err != nil || claims.Exp == 0 {
		return time.Time{}, false
	}
	return time.Unix(claims.Exp, 0), true
}
