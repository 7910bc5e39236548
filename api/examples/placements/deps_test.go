package main

import (
	"os/exec"
	"strings"
	"testing"
)

// A program importing only the API module links none of Lodestar's
// controllers, no controller-runtime and no Kubernetes server package: the
// API module's own packages, apimachinery, api and client-go.
func TestDependsOnTheAPIModuleAlone(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", ".").CombinedOutput()
	if err != nil {
		t.Fatalf("go list -deps: %v\n%s", err, out)
	}
	deps := strings.Fields(string(out))
	forbidden := []string{
		"sigs.k8s.io/controller-runtime",
		"k8s.io/apiserver", "k8s.io/apiextensions-apiserver", "k8s.io/kubernetes", "k8s.io/component-helpers",
		"go.etcd.io/",
	}
	var lodestar int
	for _, d := range deps {
		for _, f := range forbidden {
			if strings.HasPrefix(d, f) {
				t.Errorf("the program links %s", d)
			}
		}
		if strings.HasPrefix(d, "github.com/lodestar-dev/lodestar/") {
			if !strings.HasPrefix(d, "github.com/lodestar-dev/lodestar/api/") {
				t.Errorf("the program links Lodestar's %s, outside the API module", d)
			}
			lodestar++
		}
	}
	for _, want := range []string{
		"github.com/lodestar-dev/lodestar/api/placement/v1alpha1",
		"github.com/lodestar-dev/lodestar/api/client/clientset/versioned",
		"github.com/lodestar-dev/lodestar/api/client/informers/externalversions",
		"github.com/lodestar-dev/lodestar/api/client/listers/placement/v1alpha1",
	} {
		found := false
		for _, d := range deps {
			found = found || d == want
		}
		if !found {
			t.Errorf("the program does not link %s (go list -deps is not what it seems)", want)
		}
	}
	t.Logf("%d packages, %d of them the API module's", len(deps), lodestar)
}
