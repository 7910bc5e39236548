package main

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"sync"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	debugv1alpha1 "github.com/lodestar-dev/lodestar/api/debug/v1alpha1"
	placementv1alpha1 "github.com/lodestar-dev/lodestar/api/placement/v1alpha1"
)

// fanOut is how many clusters a debug verb reads at once.
const fanOut = 16

// ClusterAnnotation marks, in `-o json|yaml` output, the cluster a member
// object was read from.
const ClusterAnnotation = "debug.lodestar.dev/cluster"

// debugSession is a debug verb's view of one Placement: its clusters and how
// to reach each through the hub's debug API.
type debugSession struct {
	base      *rest.Config
	namespace string
	placement string
	clusters  []string
	// workload, when set (kind/name), narrows the pods to one placed workload.
	workloadKind, workloadName string
}

// debugSession resolves the argument (a Placement, or kind/name of a placed
// workload) and the clusters to reach (--cluster, or all the Placement's).
func (o *options) debugSession(ctx context.Context, arg, only string) (*debugSession, error) {
	cfg, c, err := o.hub()
	if err != nil {
		return nil, err
	}
	ns, err := o.namespace()
	if err != nil {
		return nil, err
	}
	s := &debugSession{base: cfg, namespace: ns, placement: arg}
	if kind, name, ok := strings.Cut(arg, "/"); ok {
		s.workloadKind, s.workloadName = workloadKind(kind), name
		if s.workloadKind == "" {
			return nil, fmt.Errorf("%s: %q is not a kind whose pods Lodestar can find: name a Placement, or a placed workload as "+
				"deploy/<name>, sts/<name>, ds/<name>, job/<name>, cronjob/<name> or pod/<name>", arg, kind)
		}
		objLabels, err := workloadLabels(ctx, c, ns, s.workloadKind, name)
		if err != nil {
			return nil, err
		}
		if s.placement, err = placementOf(ctx, c, ns, s.workloadKind, name, objLabels); err != nil {
			return nil, err
		}
	}
	p := &placementv1alpha1.Placement{}
	if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: s.placement}, p); err != nil {
		return nil, fmt.Errorf("reading Placement %s/%s: %w", ns, s.placement, err)
	}
	decidedClusters, err := decided(ctx, c, p)
	if err != nil {
		return nil, err
	}
	for _, cs := range p.Status.Clusters {
		decidedClusters[cs.Name] = true // Leaving clusters still run the workloads.
	}
	for name := range decidedClusters {
		if only == "" || name == only {
			s.clusters = append(s.clusters, name)
		}
	}
	slices.Sort(s.clusters)
	if len(s.clusters) == 0 {
		if only != "" {
			return nil, fmt.Errorf("placement %s/%s places nothing on cluster %s", ns, s.placement, only)
		}
		return nil, fmt.Errorf("placement %s/%s has no clusters yet", ns, s.placement)
	}
	return s, nil
}

// workloadKinds are the kinds whose pods the debug verbs find, with their
// API groups and versions.
var workloadKinds = map[string]schema.GroupVersion{
	"Deployment": appsv1.SchemeGroupVersion, "StatefulSet": appsv1.SchemeGroupVersion, "DaemonSet": appsv1.SchemeGroupVersion,
	"Job": batchv1.SchemeGroupVersion, "CronJob": batchv1.SchemeGroupVersion, "Pod": corev1.SchemeGroupVersion,
}

// workloadKind is the kind a kubectl short name or resource stands for, ""
// for a kind that has no pods of its own.
func workloadKind(s string) string {
	switch strings.ToLower(s) {
	case "deploy", "deployment", "deployments":
		return "Deployment"
	case "sts", "statefulset", "statefulsets":
		return "StatefulSet"
	case "ds", "daemonset", "daemonsets":
		return "DaemonSet"
	case "job", "jobs":
		return "Job"
	case "cj", "cronjob", "cronjobs":
		return "CronJob"
	case "po", "pod", "pods":
		return "Pod"
	}
	return ""
}

// workloadLabels reads the labels of the hub's workload of the kind and name
// (a pod is the members' only: it is looked for there, and has none here);
// it fails when the hub has no such workload. Labels the user may not read
// are nil: only selectors by name or by kind then find its Placement.
func workloadLabels(ctx context.Context, c client.Client, ns, kind, name string) (map[string]string, error) {
	if kind == "Pod" {
		return nil, nil
	}
	obj := &metav1.PartialObjectMetadata{}
	obj.SetGroupVersionKind(workloadKinds[kind].WithKind(kind))
	err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, obj)
	if apierrors.IsNotFound(err) {
		return nil, fmt.Errorf("%s %s/%s does not exist on the hub", kind, ns, name)
	}
	if err != nil && !apierrors.IsForbidden(err) {
		return nil, fmt.Errorf("reading %s %s/%s: %w", kind, ns, name, err)
	}
	return obj.GetLabels(), nil
}

// placementOf is the Placement of the namespace whose selectors place the
// workload: one naming it, or else the only one selecting it by its kind or
// by its labels (a selector without kind included).
func placementOf(ctx context.Context, c client.Client, ns, kind, name string, labels map[string]string) (string, error) {
	list := &placementv1alpha1.PlacementList{}
	if err := c.List(ctx, list, client.InNamespace(ns)); err != nil {
		return "", fmt.Errorf("listing Placements: %w", err)
	}
	return placementFor(list.Items, ns, kind, name, labels)
}

// placementFor is placementOf over the namespace's Placements.
func placementFor(placements []placementv1alpha1.Placement, ns, kind, name string, labels map[string]string) (string, error) {
	group := workloadKinds[kind].Group
	var named, others []string
	for _, p := range placements {
		how := ""
		for _, sel := range p.Spec.ResourceSelectors {
			if sel.Kind != "" && (sel.Kind != kind || sel.Group != group) {
				continue
			}
			switch {
			case sel.Name == name:
				how = "named"
			case sel.Name == "" && selectsLabels(sel.LabelSelector, labels, sel.Kind != "") && how == "":
				how = "other"
			}
		}
		switch how {
		case "named":
			named = append(named, p.Name)
		case "other":
			others = append(others, p.Name)
		}
	}
	switch {
	case len(named) == 1:
		return named[0], nil
	case len(named) == 0 && len(others) == 1:
		return others[0], nil
	case len(named)+len(others) == 0:
		return "", fmt.Errorf("no Placement in %s selects %s %s (by name, kind or labels)", ns, kind, name)
	}
	return "", fmt.Errorf("several Placements in %s may place %s %s (%s): name the Placement instead", ns, kind, name, strings.Join(append(named, others...), ", "))
}

// selectsLabels tells whether a selector's labels select an object with these
// labels: no label selector selects every object of a named kind (byKind),
// and nothing without one.
func selectsLabels(ls *metav1.LabelSelector, objLabels map[string]string, byKind bool) bool {
	if ls == nil {
		return byKind
	}
	sel, err := metav1.LabelSelectorAsSelector(ls)
	return err == nil && sel.Matches(labels.Set(objLabels))
}

// config is the connection to cluster's member for subresource: the hub's,
// with the debug API's path as its prefix, so that client-go's clients,
// streams and dialers work unchanged.
func (s *debugSession) config(subresource, cluster string) *rest.Config {
	cfg := rest.CopyConfig(s.base)
	cfg.Host = strings.TrimSuffix(cfg.Host, "/") + debugv1alpha1.PlacementPath(s.namespace, s.placement, subresource, cluster)
	return cfg
}

// client is a typed client of cluster's member for subresource.
func (s *debugSession) client(subresource, cluster string) (*kubernetes.Clientset, error) {
	return kubernetes.NewForConfig(s.config(subresource, cluster))
}

// clusterPod is a pod read from one cluster.
type clusterPod struct {
	cluster string
	pod     corev1.Pod
}

// pods lists the Placement's pods on every cluster at once; a cluster that
// cannot be read is an error of its own and the others are listed.
func (s *debugSession) pods(ctx context.Context) ([]clusterPod, map[string]error) {
	out, errs := fanIn(s, func(cluster string) ([]clusterPod, error) {
		pods, err := s.clusterPods(ctx, cluster)
		var out []clusterPod
		for _, p := range pods {
			out = append(out, clusterPod{cluster: cluster, pod: p})
		}
		return out, err
	})
	slices.SortFunc(out, func(a, b clusterPod) int {
		return cmp.Or(cmp.Compare(a.cluster, b.cluster), cmp.Compare(a.pod.Name, b.pod.Name))
	})
	return out, errs
}

// fanIn reads every cluster of the session, fanOut at a time, and gathers
// what each returned; a cluster's error is kept by cluster.
func fanIn[T any](s *debugSession, read func(cluster string) ([]T, error)) ([]T, map[string]error) {
	var (
		mu   sync.Mutex
		out  []T
		errs = map[string]error{}
	)
	s.each(func(cluster string) {
		items, err := read(cluster)
		mu.Lock()
		defer mu.Unlock()
		if err != nil {
			errs[cluster] = err
			return
		}
		out = append(out, items...)
	})
	return out, errs
}

// clusterPods lists the Placement's pods on one cluster (of the workload, when
// one is named).
func (s *debugSession) clusterPods(ctx context.Context, cluster string) ([]corev1.Pod, error) {
	cs, err := s.client(debugv1alpha1.Pods, cluster)
	if err != nil {
		return nil, err
	}
	list, err := cs.CoreV1().Pods(s.namespace).List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, err
	}
	var out []corev1.Pod
	for _, p := range list.Items {
		if s.workloadName == "" || ownedBy(&p, s.workloadKind, s.workloadName) {
			out = append(out, p)
		}
	}
	return out, nil
}

// ownedBy says whether the pod belongs to the workload: its controller is it,
// or (Deployment) one of its ReplicaSets, or (CronJob) one of its Jobs.
func ownedBy(pod *corev1.Pod, kind, name string) bool {
	if kind == "Pod" {
		return pod.Name == name
	}
	ref := metav1.GetControllerOf(pod)
	if ref == nil {
		return false
	}
	switch {
	case ref.Kind == kind:
		return ref.Name == name
	case kind == "Deployment" && ref.Kind == "ReplicaSet", kind == "CronJob" && ref.Kind == "Job":
		return namedAfter(ref.Name, name, 0)
	}
	return false
}

// each runs f for every cluster, fanOut at a time.
func (s *debugSession) each(f func(cluster string)) {
	sem := make(chan struct{}, fanOut)
	var wg sync.WaitGroup
	for _, c := range s.clusters {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			f(c)
		}()
	}
	wg.Wait()
}

// printClusterErrors prints one line per cluster that could not be reached.
func printClusterErrors(w io.Writer, errs map[string]error) {
	for _, c := range slices.Sorted(maps.Keys(errs)) {
		_, _ = fmt.Fprintf(w, "error: %s: %v\n", c, errs[c])
	}
}

// lineWriter writes whole lines from several streams without interleaving.
type lineWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (l *lineWriter) line(prefix, text string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	_, _ = fmt.Fprintf(l.w, "%s %s\n", prefix, text)
}

// statusMessage is the message of an API error, or the error.
func statusMessage(err error) string {
	var status interface{ Status() metav1.Status }
	if errors.As(err, &status) && status.Status().Message != "" {
		return status.Status().Message
	}
	return err.Error()
}
