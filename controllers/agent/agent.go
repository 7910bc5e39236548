// Package agent assembles the work agent: a manager on the hub whose cache holds
// only its cluster's namespace, and a client of the member cluster.
package agent

import (
	"errors"
	"fmt"

	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	aboutv1alpha1 "sigs.k8s.io/about-api/pkg/apis/v1alpha1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	workv1alpha1 "sigs.k8s.io/work-api/pkg/apis/v1alpha1"

	lodestarworkv1alpha1 "github.com/lodestar-dev/lodestar/api/work/v1alpha1"
	"github.com/lodestar-dev/lodestar/controllers/agent/work"
	"github.com/lodestar-dev/lodestar/internal/names"
)

// Options configure an agent.
type Options struct {
	// ClusterName is the name of the member cluster's ClusterProfile on the hub.
	ClusterName string
	// Hub is the agent's own identity on the hub.
	Hub *rest.Config
	// Member is the agent's identity on the member cluster.
	Member *rest.Config
	// Manager are further manager options (metrics, health probes).
	Manager ctrl.Options
}

// NewScheme returns a scheme with every type the agent uses.
func NewScheme() *runtime.Scheme {
	s := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{
		clientgoscheme.AddToScheme, workv1alpha1.AddToScheme, lodestarworkv1alpha1.AddToScheme, aboutv1alpha1.AddToScheme,
	} {
		if err := add(s); err != nil {
			panic(err) // Registering static types cannot fail.
		}
	}
	return s
}

// NewManager returns an agent ready to Start.
func NewManager(opts Options) (ctrl.Manager, error) {
	if opts.ClusterName == "" {
		return nil, errors.New("the cluster name is required")
	}
	if opts.Hub == nil || opts.Member == nil {
		return nil, errors.New("both the hub and the member connection are required")
	}
	scheme := NewScheme()
	mopts := opts.Manager
	mopts.Scheme = scheme
	// Watch only the cluster's own namespace on the hub: the agent's identity may
	// read nothing else.
	mopts.Cache = cache.Options{DefaultNamespaces: map[string]cache.Config{names.ClusterNamespace(opts.ClusterName): {}}}
	// Several agents may share a process (tests, simulated members in benchmarks);
	// each has a single controller, so its name needs no process-wide uniqueness.
	mopts.Controller.SkipNameValidation = ptr.To(true)
	mgr, err := ctrl.NewManager(opts.Hub, mopts)
	if err != nil {
		return nil, fmt.Errorf("creating the hub manager: %w", err)
	}
	member, err := client.New(opts.Member, client.Options{Scheme: scheme})
	if err != nil {
		return nil, fmt.Errorf("creating the member client: %w", err)
	}
	if err := (&work.Reconciler{
		Hub:      mgr.GetClient(),
		Member:   member,
		Recorder: mgr.GetEventRecorder(work.FieldManager),
	}).SetupWithManager(mgr); err != nil {
		return nil, fmt.Errorf("setting up the work controller: %w", err)
	}
	return mgr, nil
}
