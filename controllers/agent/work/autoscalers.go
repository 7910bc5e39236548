package work

import (
	"context"

	autoscalingv2 "k8s.io/api/autoscaling/v2"
	"k8s.io/apimachinery/pkg/runtime/schema"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/lodestar-dev/lodestar/internal/diff"
)

// Member autoscalers: a workload that a HorizontalPodAutoscaler on the member
// scales keeps the member's spec.replicas. The agent writes the manifest's
// replicas when it creates the workload (a divided workload's share is where
// the autoscaler starts) and never sets them back afterwards, whoever placed
// the autoscaler; the hub sums what the members run.

// scalable are the kinds whose replicas the agent leaves to a member autoscaler.
var scalable = map[schema.GroupKind]bool{
	{Group: "apps", Kind: "Deployment"}: true, {Group: "apps", Kind: "StatefulSet"}: true, {Group: "apps", Kind: "ReplicaSet"}: true,
}

var replicasPointer = func() diff.Pointer {
	p, err := diff.ParsePointer("/spec/replicas")
	if err != nil {
		panic(err)
	}
	return p
}()

// autoscaled tells whether an autoscaler on the member targets the object,
// reading each namespace's autoscalers once per apply pass, from the member's
// API server (not through a cache: an informer the agent may not list would
// wait for ever). An agent that may not read them (an older chart) leaves
// replicas as the manifest has them.
func (r *Reconciler) autoscaled(ctx context.Context, pass *applyPass, gk schema.GroupKind, namespace, name string) bool {
	if !scalable[gk] || namespace == "" {
		return false
	}
	targets, ok := pass.autoscaled[namespace]
	if !ok {
		targets = map[string]bool{}
		list := &autoscalingv2.HorizontalPodAutoscalerList{}
		if err := r.Member.List(ctx, list, client.InNamespace(namespace)); err != nil {
			ctrl.LoggerFrom(ctx).V(1).Info("Cannot read the member's HorizontalPodAutoscalers; replicas are applied as placed", "namespace", namespace, "error", err.Error())
		}
		for _, hpa := range list.Items {
			ref := hpa.Spec.ScaleTargetRef
			gv, _ := schema.ParseGroupVersion(ref.APIVersion)
			targets[gv.Group+"/"+ref.Kind+"/"+ref.Name] = true
		}
		if pass.autoscaled == nil {
			pass.autoscaled = map[string]map[string]bool{}
		}
		pass.autoscaled[namespace] = targets
	}
	return targets[gk.Group+"/"+gk.Kind+"/"+name]
}
