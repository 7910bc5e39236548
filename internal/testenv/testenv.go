// Package testenv starts real Kubernetes control planes (kube-apiserver and etcd,
// through controller-runtime's envtest) for a hub and its members, installs the
// Lodestar CRDs, and registers members on the hub until registration exists. Tests
// and the quick start use it alike.
package testenv

import (
	"context"
	"errors"
	"fmt"
	"os"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"k8s.io/utils/ptr"
	cpv1alpha1 "sigs.k8s.io/cluster-inventory-api/apis/v1alpha1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/lodestar-dev/lodestar/config"
	"github.com/lodestar-dev/lodestar/controllers/hub/scheduler"
	"github.com/lodestar-dev/lodestar/internal/names"
)

// AssetsEnv names the directory of the kube-apiserver, etcd and kubectl binaries.
const AssetsEnv = "KUBEBUILDER_ASSETS"

// AgentServiceAccount is the name of each agent's ServiceAccount in its cluster's
// namespace on the hub.
const AgentServiceAccount = "lodestar-agent"

// ControlPlane is one running kube-apiserver with its etcd.
type ControlPlane struct {
	Name   string
	Config *rest.Config
	Client client.Client
	env    *envtest.Environment
	// procs are further processes (controller manager, scheduler, kwok) and dirs
	// their working directories.
	procs []process
	dirs  []string
}

// Stop stops the processes of the control plane, the API server and etcd last.
func (cp *ControlPlane) Stop() error {
	if cp == nil || cp.env == nil {
		return nil
	}
	cp.stopProcesses()
	return cp.env.Stop()
}

// StartHub starts a hub control plane with the hub CRDs.
func StartHub(scheme *runtime.Scheme) (*ControlPlane, error) {
	crds, err := config.HubCRDs()
	if err != nil {
		return nil, err
	}
	return start("hub", scheme, crds)
}

// StartMember starts a member control plane with the member CRDs.
func StartMember(name string, scheme *runtime.Scheme) (*ControlPlane, error) {
	crds, err := config.MemberCRDs()
	if err != nil {
		return nil, err
	}
	return start(name, scheme, crds)
}

func start(name string, scheme *runtime.Scheme, crds []*apiextensionsv1.CustomResourceDefinition) (*ControlPlane, error) {
	if os.Getenv(AssetsEnv) == "" {
		return nil, fmt.Errorf("%s is not set: run the tests through `make test`, which builds kube-apiserver and etcd into bin/", AssetsEnv)
	}
	env := &envtest.Environment{
		CRDInstallOptions:     envtest.CRDInstallOptions{CRDs: crds},
		ErrorIfCRDPathMissing: true,
		Scheme:                scheme,
	}
	cfg, err := env.Start()
	if err != nil {
		// Start may fail after the processes run (installing CRDs): stop them.
		return nil, errors.Join(fmt.Errorf("starting the %s control plane: %w", name, err), env.Stop())
	}
	c, err := client.New(cfg, client.Options{Scheme: scheme})
	if err != nil {
		return nil, errors.Join(err, env.Stop())
	}
	return &ControlPlane{Name: name, Config: cfg, Client: c, env: env}, nil
}

// Member describes a member cluster to register on the hub.
type Member struct {
	// Name is the cluster's name, and its ClusterProfile's.
	Name string
	// Labels are the ClusterProfile's labels.
	Labels map[string]string
}

// DefaultMembers are the two members of the test fleet and the quick start.
func DefaultMembers() []Member {
	return []Member{
		{Name: "member-1", Labels: map[string]string{"env": "production", "region": "eu-west"}},
		{Name: "member-2", Labels: map[string]string{"env": "staging", "region": "us-east"}},
	}
}

// Register does on the hub what registration will do: it creates the cluster-set
// namespace, the member's ClusterProfile and namespace, and the agent's own
// identity (a ServiceAccount bound only to the rules the agent's RBAC markers ask
// for, in its own namespace), and returns a connection as that identity.
func Register(ctx context.Context, hub *ControlPlane, m Member) (*rest.Config, error) {
	c := hub.Client
	ns := names.ClusterNamespace(m.Name)
	for _, n := range []string{scheduler.DefaultClusterSetNamespace, ns} {
		if err := ensure(ctx, c, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: n}}); err != nil {
			return nil, err
		}
	}
	profile := &cpv1alpha1.ClusterProfile{ObjectMeta: metav1.ObjectMeta{Name: m.Name, Namespace: scheduler.DefaultClusterSetNamespace}}
	if _, err := controllerutil.CreateOrPatch(ctx, c, profile, func() error {
		profile.Labels = m.Labels
		if profile.Labels == nil {
			profile.Labels = map[string]string{}
		}
		profile.Labels[cpv1alpha1.LabelClusterManagerKey] = scheduler.ClusterManagerName
		profile.Spec.ClusterManager.Name = scheduler.ClusterManagerName
		profile.Spec.DisplayName = m.Name
		return nil
	}); err != nil {
		return nil, fmt.Errorf("writing ClusterProfile %s: %w", m.Name, err)
	}

	rules, err := config.AgentHubRules()
	if err != nil {
		return nil, err
	}
	meta := metav1.ObjectMeta{Name: AgentServiceAccount, Namespace: ns}
	role := &rbacv1.Role{ObjectMeta: meta}
	if _, err := controllerutil.CreateOrUpdate(ctx, c, role, func() error { role.Rules = rules; return nil }); err != nil {
		return nil, fmt.Errorf("writing the agent's Role: %w", err)
	}
	for _, obj := range []client.Object{
		&corev1.ServiceAccount{ObjectMeta: meta},
		&rbacv1.RoleBinding{
			ObjectMeta: meta,
			RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: AgentServiceAccount},
			Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: AgentServiceAccount, Namespace: ns}},
		},
	} {
		if err := ensure(ctx, c, obj); err != nil {
			return nil, err
		}
	}
	return serviceAccountConfig(ctx, hub.Config, ns, AgentServiceAccount)
}

// serviceAccountConfig returns a connection to the API server of admin as the
// ServiceAccount, with a token from the TokenRequest API.
func serviceAccountConfig(ctx context.Context, admin *rest.Config, ns, name string) (*rest.Config, error) {
	cs, err := kubernetes.NewForConfig(admin)
	if err != nil {
		return nil, err
	}
	tr, err := cs.CoreV1().ServiceAccounts(ns).CreateToken(ctx, name, &authenticationv1.TokenRequest{
		Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: ptr.To[int64](48 * 3600)},
	}, metav1.CreateOptions{})
	if err != nil {
		return nil, fmt.Errorf("requesting a token for %s/%s: %w", ns, name, err)
	}
	cfg := rest.AnonymousClientConfig(admin)
	cfg.BearerToken = tr.Status.Token
	return cfg, nil
}

func ensure(ctx context.Context, c client.Client, obj client.Object) error {
	if err := c.Create(ctx, obj); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("creating %T %s: %w", obj, client.ObjectKeyFromObject(obj), err)
	}
	return nil
}

// WriteKubeconfig writes a kubeconfig file for cfg, with context name name.
func WriteKubeconfig(cfg *rest.Config, name, path string) error {
	kc := clientcmdapi.NewConfig()
	kc.Clusters[name] = &clientcmdapi.Cluster{Server: cfg.Host, CertificateAuthorityData: cfg.CAData}
	kc.AuthInfos[name] = &clientcmdapi.AuthInfo{
		Token: cfg.BearerToken, ClientCertificateData: cfg.CertData, ClientKeyData: cfg.KeyData,
	}
	kc.Contexts[name] = &clientcmdapi.Context{Cluster: name, AuthInfo: name}
	kc.CurrentContext = name
	return clientcmd.WriteToFile(*kc, path)
}

// RunWithHub is a TestMain body for a package whose tests share one hub: it starts
// the hub, runs setup, the tests, then what setup returned to stop (controllers
// before their API server), and stops the hub.
func RunWithHub(m interface{ Run() int }, scheme *runtime.Scheme, setup func(*ControlPlane) (stop func(), err error)) int {
	cp, err := StartHub(scheme)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer func() { _ = cp.Stop() }()
	stop, err := setup(cp)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	if stop != nil {
		defer stop()
	}
	return m.Run()
}
