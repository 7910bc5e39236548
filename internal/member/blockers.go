package member

import (
	"context"
	"fmt"
	"sort"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/lodestar-dev/lodestar/internal/message"
	"github.com/lodestar-dev/lodestar/internal/workapply"
)

// podOwners are the kinds whose readiness is their pods': when one is not
// available, the agent names what holds its pods back.
var podOwners = map[schema.GroupKind]bool{
	{Group: "apps", Kind: "Deployment"}:  true,
	{Group: "apps", Kind: "StatefulSet"}: true,
	{Group: "apps", Kind: "DaemonSet"}:   true,
	{Group: "apps", Kind: "ReplicaSet"}:  true,
	{Group: "batch", Kind: "Job"}:        true,
}

const (
	// maxPodsRead bounds the pods read to name a workload's blocker: one page of
	// a direct list (the agent keeps no pod cache).
	maxPodsRead = 50
	// maxBlocker bounds the text naming a blocker.
	maxBlocker = 300
)

// NamePodBlockers sets the blocker of every result whose object owns pods, is not
// available, and has a pod that says why. Pods are listed from the member's API
// server directly, and only for such objects.
func (m *Member) NamePodBlockers(ctx context.Context, results []workapply.Result) {
	for i := range results {
		res := &results[i]
		if res.Live == nil || !podOwners[res.Live.GroupVersionKind().GroupKind()] {
			continue
		}
		if m.Readiness.Evaluate(res.Live).Available {
			continue
		}
		blocker, err := podBlocker(ctx, m.Client, res.Live)
		if err != nil {
			ctrl.LoggerFrom(ctx).V(1).Info("Cannot read the pods of a placed object", "object", workapply.DescribeObject(res.Live), "error", err.Error())
			continue
		}
		res.Blocker = blocker
	}
}

// podBlocker returns what keeps the pods of obj (selected by its spec.selector)
// from being ready: the first pod by name with a problem, or "".
func podBlocker(ctx context.Context, c client.Reader, obj *unstructured.Unstructured) (string, error) {
	raw, found, err := unstructured.NestedMap(obj.Object, "spec", "selector")
	if err != nil || !found {
		return "", err
	}
	ls := &metav1.LabelSelector{}
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(raw, ls); err != nil {
		return "", err
	}
	sel, err := metav1.LabelSelectorAsSelector(ls)
	if err != nil || sel.Empty() {
		return "", err
	}
	pods := &corev1.PodList{}
	if err := c.List(ctx, pods, client.InNamespace(obj.GetNamespace()), client.MatchingLabelsSelector{Selector: sel}, client.Limit(maxPodsRead)); err != nil {
		return "", err
	}
	sort.Slice(pods.Items, func(i, j int) bool { return pods.Items[i].Name < pods.Items[j].Name })
	for i := range pods.Items {
		if why := workapply.PodProblem(&pods.Items[i]); why != "" {
			return message.Truncate(fmt.Sprintf("pod %s: %s", pods.Items[i].Name, why), maxBlocker), nil
		}
	}
	return "", nil
}
