// Package scheme holds the runtime schemes of Lodestar's processes: the hub
// manager's (and the kubectl plugin's, which reads the same objects) and the
// agent's.
package scheme

import (
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	aboutv1alpha1 "sigs.k8s.io/about-api/pkg/apis/v1alpha1"
	cpv1alpha1 "sigs.k8s.io/cluster-inventory-api/apis/v1alpha1"
	mcsv1beta1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"
	workv1alpha1 "sigs.k8s.io/work-api/pkg/apis/v1alpha1"

	placementv1alpha1 "github.com/lodestar-dev/lodestar/api/placement/v1alpha1"
	servicesv1alpha1 "github.com/lodestar-dev/lodestar/api/services/v1alpha1"
	lodestarworkv1alpha1 "github.com/lodestar-dev/lodestar/api/work/v1alpha1"
)

// Hub returns a scheme with every type the hub controllers use.
func Hub() *runtime.Scheme {
	return build(clientgoscheme.AddToScheme, placementv1alpha1.AddToScheme, cpv1alpha1.AddToScheme, workv1alpha1.AddToScheme,
		servicesv1alpha1.AddToScheme, mcsv1beta1.Install)
}

// Agent returns a scheme with every type the agent uses.
func Agent() *runtime.Scheme {
	return build(clientgoscheme.AddToScheme, workv1alpha1.AddToScheme, lodestarworkv1alpha1.AddToScheme, aboutv1alpha1.AddToScheme, cpv1alpha1.AddToScheme,
		servicesv1alpha1.AddToScheme, mcsv1beta1.Install)
}

func build(adds ...func(*runtime.Scheme) error) *runtime.Scheme {
	s := runtime.NewScheme()
	for _, add := range adds {
		if err := add(s); err != nil {
			panic(err) // Registering static types cannot fail.
		}
	}
	return s
}
