package console

import (
	"context"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	debugv1alpha1 "github.com/lodestar-dev/lodestar/api/debug/v1alpha1"
	placementv1alpha1 "github.com/lodestar-dev/lodestar/api/placement/v1alpha1"
)

// fanOut is how many clusters the console reads at once through the debug API.
const fanOut = 16

// Most of what one request returns from the members.
const (
	maxLogBytes       = 1 << 20
	defaultTailLines  = 200
	maxEventsPerPlace = 200
)

// member is a client of one cluster's member through the hub's debug API
// (the path of the Placement's subresource), as the CLI's debug verbs reach it.
func (s *Server) member(ns, placement, subresource, cluster string) (*kubernetes.Clientset, error) {
	cfg := rest.CopyConfig(s.opts.Config)
	cfg.Host = strings.TrimSuffix(cfg.Host, "/") + debugv1alpha1.PlacementPath(ns, placement, subresource, cluster)
	return kubernetes.NewForConfig(cfg)
}

// placedClusters are the clusters a Placement's status lists.
func (s *Server) placedClusters(ctx context.Context, ns, name string) ([]string, error) {
	p := &placementv1alpha1.Placement{}
	if err := s.c.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, p); err != nil {
		return nil, err
	}
	var out []string
	for _, c := range p.Status.Clusters {
		out = append(out, c.Name)
	}
	return out, nil
}

// eachCluster runs read on every cluster, fanOut at a time, and keeps each
// cluster's error by name.
func eachCluster[T any](clusters []string, read func(cluster string) ([]T, error)) ([]T, map[string]string) {
	var (
		mu   sync.Mutex
		wg   sync.WaitGroup
		out  []T
		errs = map[string]string{}
		sem  = make(chan struct{}, fanOut)
	)
	for _, c := range clusters {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer func() { <-sem; wg.Done() }()
			items, err := read(c)
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				errs[c] = err.Error()
				return
			}
			out = append(out, items...)
		}()
	}
	wg.Wait()
	return out, errs
}

// Pod is a pod on a member.
type Pod struct {
	Cluster    string   `json:"cluster"`
	Name       string   `json:"name"`
	Phase      string   `json:"phase"`
	Ready      string   `json:"ready"`
	Restarts   int32    `json:"restarts"`
	Node       string   `json:"node,omitempty"`
	Containers []string `json:"containers"`
}

// Pods are a Placement's pods on its clusters, and the clusters that could
// not be read, with why.
type Pods struct {
	Items  []Pod             `json:"items"`
	Errors map[string]string `json:"errors,omitempty"`
}

func (s *Server) pods(r *http.Request) (any, error) {
	args, err := required(r, "namespace", "placement")
	if err != nil {
		return nil, err
	}
	ns, name := args[0], args[1]
	clusters, err := s.placedClusters(r.Context(), ns, name)
	if err != nil {
		return nil, err
	}
	items, errs := eachCluster(clusters, func(cluster string) ([]Pod, error) {
		cs, err := s.member(ns, name, debugv1alpha1.Pods, cluster)
		if err != nil {
			return nil, err
		}
		list, err := cs.CoreV1().Pods(ns).List(r.Context(), metav1.ListOptions{})
		if err != nil {
			return nil, err
		}
		out := make([]Pod, 0, len(list.Items))
		for i := range list.Items {
			out = append(out, podOf(cluster, &list.Items[i]))
		}
		return out, nil
	})
	slices.SortFunc(items, func(a, b Pod) int { return strings.Compare(a.Cluster+"/"+a.Name, b.Cluster+"/"+b.Name) })
	if items == nil {
		items = []Pod{}
	}
	return Pods{Items: items, Errors: errs}, nil
}

func podOf(cluster string, p *corev1.Pod) Pod {
	out := Pod{Cluster: cluster, Name: p.Name, Phase: string(p.Status.Phase), Node: p.Spec.NodeName}
	ready := 0
	for _, c := range p.Status.ContainerStatuses {
		if c.Ready {
			ready++
		}
		out.Restarts += c.RestartCount
	}
	out.Ready = strconv.Itoa(ready) + "/" + strconv.Itoa(len(p.Spec.Containers))
	for _, c := range p.Spec.Containers {
		out.Containers = append(out.Containers, c.Name)
	}
	return out
}

// Logs is the end of one container's log.
type Logs struct {
	Text string `json:"text"`
}

func (s *Server) logs(r *http.Request) (any, error) {
	args, err := required(r, "namespace", "placement", "cluster", "pod")
	if err != nil {
		return nil, err
	}
	tail := int64(defaultTailLines)
	if n, err := strconv.ParseInt(r.URL.Query().Get("tail"), 10, 64); err == nil && n > 0 && n <= 10000 {
		tail = n
	}
	cs, err := s.member(args[0], args[1], debugv1alpha1.Log, args[2])
	if err != nil {
		return nil, err
	}
	opts := &corev1.PodLogOptions{Container: r.URL.Query().Get("container"), TailLines: &tail, LimitBytes: ptrTo(int64(maxLogBytes))}
	raw, err := cs.CoreV1().Pods(args[0]).GetLogs(args[3], opts).DoRaw(r.Context())
	if err != nil {
		return nil, err
	}
	return Logs{Text: string(raw)}, nil
}

func ptrTo[T any](v T) *T { return &v }

// Event is an event of the Placement on the hub or of its objects on a member.
type Event struct {
	// Cluster is the member's name, or "hub".
	Cluster string `json:"cluster"`
	Type    string `json:"type"`
	Reason  string `json:"reason"`
	Object  string `json:"object"`
	Message string `json:"message"`
	Time    string `json:"time"`
	Count   int32  `json:"count,omitempty"`
}

// Events are the newest events first.
type Events struct {
	Items  []Event           `json:"items"`
	Errors map[string]string `json:"errors,omitempty"`
}

func (s *Server) eventsOf(r *http.Request) (any, error) {
	args, err := required(r, "namespace", "placement")
	if err != nil {
		return nil, err
	}
	ctx, ns, name := r.Context(), args[0], args[1]
	clusters, err := s.placedClusters(ctx, ns, name)
	if err != nil {
		return nil, err
	}
	out := Events{Errors: map[string]string{}}
	hub := &eventsv1.EventList{}
	sel := fields.SelectorFromSet(fields.Set{"regarding.kind": "Placement", "regarding.name": name})
	if err := s.c.List(ctx, hub, client.InNamespace(ns), client.MatchingFieldsSelector{Selector: sel}); err != nil {
		out.Errors["hub"] = err.Error()
	}
	for _, e := range hub.Items {
		out.Items = append(out.Items, Event{Cluster: "hub", Type: e.Type, Reason: e.Reason, Object: "Placement/" + name,
			Message: e.Note, Time: eventTime(e.EventTime.Time, e.DeprecatedLastTimestamp.Time, e.CreationTimestamp.Time), Count: e.DeprecatedCount})
	}
	members, errs := eachCluster(clusters, func(cluster string) ([]Event, error) {
		cs, err := s.member(ns, name, debugv1alpha1.Events, cluster)
		if err != nil {
			return nil, err
		}
		list, err := cs.CoreV1().Events(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return nil, err
		}
		var evs []Event
		for _, e := range list.Items {
			evs = append(evs, Event{Cluster: cluster, Type: e.Type, Reason: e.Reason, Object: e.InvolvedObject.Kind + "/" + e.InvolvedObject.Name,
				Message: e.Message, Time: eventTime(e.EventTime.Time, e.LastTimestamp.Time, e.CreationTimestamp.Time), Count: e.Count})
		}
		return evs, nil
	})
	out.Items = append(out.Items, members...)
	for c, e := range errs {
		out.Errors[c] = e
	}
	slices.SortFunc(out.Items, func(a, b Event) int { return strings.Compare(b.Time, a.Time) })
	if len(out.Items) > maxEventsPerPlace {
		out.Items = out.Items[:maxEventsPerPlace]
	}
	if out.Items == nil {
		out.Items = []Event{}
	}
	return out, nil
}

// eventTime is the first of the times that is set, in RFC 3339.
func eventTime(times ...time.Time) string {
	for _, t := range times {
		if !t.IsZero() {
			return t.UTC().Format(time.RFC3339)
		}
	}
	return ""
}
