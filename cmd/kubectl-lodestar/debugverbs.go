package main

import (
	"bufio"
	"context"
	"fmt"
	"net/http"
	"os"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"text/tabwriter"
	"time"

	"github.com/moby/term"
	"github.com/spf13/cobra"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/portforward"
	"k8s.io/client-go/tools/remotecommand"
	"k8s.io/client-go/transport/spdy"
	"k8s.io/streaming/pkg/httpstream"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	debugv1alpha1 "github.com/lodestar-dev/lodestar/api/debug/v1alpha1"
	placementv1alpha1 "github.com/lodestar-dev/lodestar/api/placement/v1alpha1"
	"github.com/lodestar-dev/lodestar/internal/message"
)

// newPodsCommand is `kubectl lodestar pods`.
func newPodsCommand(o *options) *cobra.Command {
	var cluster, output string
	cmd := &cobra.Command{
		Use:   "pods <placement | kind/name>",
		Short: "List the pods of a Placement's workloads on every cluster",
		Long: `List the pods of the workloads a Placement placed, on every cluster it
placed them on (or --cluster), through the hub: members need no inbound route.
Needs get on placements/pods in debug.lodestar.dev (the view, edit and admin
roles have it).`,
		Example: `  kubectl lodestar pods web -n shop
  kubectl lodestar pods deploy/web -n shop -o wide`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			s, err := o.debugSession(cmd.Context(), args[0], cluster)
			if err != nil {
				return err
			}
			pods, errs := s.pods(cmd.Context())
			printClusterErrors(o.ErrOut, errs)
			switch output {
			case "json", "yaml":
				list := &corev1.List{TypeMeta: metav1.TypeMeta{Kind: "List", APIVersion: "v1"}}
				for _, p := range pods {
					pod := p.pod
					pod.APIVersion, pod.Kind = "v1", "Pod"
					metav1.SetMetaDataAnnotation(&pod.ObjectMeta, ClusterAnnotation, p.cluster)
					list.Items = append(list.Items, runtime.RawExtension{Object: &pod})
				}
				if output == "json" {
					return printJSON(o.Out, list)
				}
				b, err := yaml.Marshal(list)
				if err != nil {
					return err
				}
				_, err = o.Out.Write(b)
				return err
			case "", "wide":
				printPods(o.Out, pods, output == "wide")
			default:
				return fmt.Errorf("unknown output %q (wide, json or yaml)", output)
			}
			if len(errs) > 0 && len(pods) == 0 {
				return fmt.Errorf("no cluster could be read")
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&cluster, "cluster", "", "Only this cluster.")
	cmd.Flags().StringVarP(&output, "output", "o", "", "Output format: wide, json or yaml.")
	return cmd
}

// printPods prints pods as kubectl get pods does, with their cluster.
func printPods(w interface{ Write([]byte) (int, error) }, pods []clusterPod, wide bool) {
	tw := tabwriter.NewWriter(w, 0, 8, 3, ' ', 0)
	header := "CLUSTER\tNAME\tREADY\tSTATUS\tRESTARTS\tAGE"
	if wide {
		header += "\tIP\tNODE"
	}
	_, _ = fmt.Fprintln(tw, header)
	for _, p := range pods {
		ready, restarts := 0, int32(0)
		for _, cs := range p.pod.Status.ContainerStatuses {
			if cs.Ready {
				ready++
			}
			restarts += cs.RestartCount
		}
		status := string(p.pod.Status.Phase)
		for _, cs := range p.pod.Status.ContainerStatuses {
			if cs.State.Waiting != nil && cs.State.Waiting.Reason != "" {
				status = cs.State.Waiting.Reason
			}
		}
		if p.pod.DeletionTimestamp != nil {
			status = "Terminating"
		}
		row := fmt.Sprintf("%s\t%s\t%d/%d\t%s\t%d\t%s", p.cluster, p.pod.Name, ready, len(p.pod.Spec.Containers), status, restarts, age(p.pod.CreationTimestamp.Time, time.Now()))
		if wide {
			row += fmt.Sprintf("\t%s\t%s", orDefault(p.pod.Status.PodIP, "<none>"), orDefault(p.pod.Spec.NodeName, "<none>"))
		}
		_, _ = fmt.Fprintln(tw, row)
	}
	_ = tw.Flush()
}

// newLogsCommand is `kubectl lodestar logs`.
func newLogsCommand(o *options) *cobra.Command {
	var (
		cluster, container string
		opts               corev1.PodLogOptions
		tail               int64
		since              time.Duration
	)
	cmd := &cobra.Command{
		Use:   "logs <placement | kind/name>",
		Short: "Print the logs of a Placement's pods on every cluster",
		Long: `Print the logs of every pod of the workloads a Placement placed, on every
cluster it placed them on (or --cluster), each line prefixed by
<cluster>/<pod>, like stern across the fleet; through the hub, so members need
no inbound route. A cluster or pod that cannot be read prints one error line
and the others go on. With -f the logs keep streaming until interrupted.
Needs get on placements/log in debug.lodestar.dev (view, edit, admin).`,
		Example: `  kubectl lodestar logs web -n shop --tail 20
  kubectl lodestar logs deploy/web -n shop -f --since 10m
  kubectl lodestar logs web -n shop --cluster edge-12 -c sidecar --previous`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx := cmd.Context()
			s, err := o.debugSession(ctx, args[0], cluster)
			if err != nil {
				return err
			}
			opts.Container = container
			if cmd.Flags().Changed("tail") {
				opts.TailLines = &tail
			}
			if since > 0 {
				secs := int64(since.Seconds())
				opts.SinceSeconds = &secs
			}
			out, errOut := &lineWriter{w: o.Out}, &lineWriter{w: o.ErrOut}
			var wg sync.WaitGroup
			var found, failed, noContainer atomic.Int32
			s.each(func(c string) {
				pods, err := s.clusterPods(ctx, c)
				if err != nil {
					failed.Add(1)
					errOut.line("error:", fmt.Sprintf("%s: %s", c, statusMessage(err)))
					return
				}
				found.Add(int32(len(pods))) //nolint:gosec // a cluster's pods of one namespace
				for _, p := range pods {
					names, err := containersOf(&p, container)
					if err != nil {
						noContainer.Add(1)
						errOut.line("error:", fmt.Sprintf("%s/%s: %v", c, p.Name, err))
						continue
					}
					for _, name := range names {
						prefix := c + "/" + p.Name
						if container == "" && len(p.Spec.Containers) > 1 {
							prefix += "/" + name
						}
						po := opts
						po.Container = name
						wg.Add(1)
						go func() {
							defer wg.Done()
							if err := s.streamLogs(ctx, c, p.Name, &po, prefix, out); err != nil && ctx.Err() == nil {
								errOut.line("error:", fmt.Sprintf("%s: %s", prefix, statusMessage(err)))
							}
						}()
					}
				}
			})
			wg.Wait()
			if found.Load() == 0 && failed.Load() == 0 {
				return fmt.Errorf("%s has no pods on %s", args[0], message.List(s.clusters, 5, ", "))
			}
			if n := noContainer.Load(); n > 0 && n == found.Load() {
				return fmt.Errorf("no pod of %s has a container %s", args[0], container)
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&cluster, "cluster", "", "Only this cluster.")
	cmd.Flags().StringVarP(&container, "container", "c", "", "Only this container (default: every container of each pod).")
	cmd.Flags().BoolVarP(&opts.Follow, "follow", "f", false, "Keep streaming the logs.")
	cmd.Flags().Int64Var(&tail, "tail", -1, "Lines of the end of each log to print (default: all).")
	cmd.Flags().DurationVar(&since, "since", 0, "Only lines newer than this (e.g. 10m).")
	cmd.Flags().BoolVarP(&opts.Previous, "previous", "p", false, "The logs of each container's previous run.")
	cmd.Flags().BoolVar(&opts.Timestamps, "timestamps", false, "Prefix each line with its time.")
	return cmd
}

// containersOf are the containers whose logs to print: only, which the pod
// must have (among its containers, init and ephemeral ones included), or all
// its containers.
func containersOf(p *corev1.Pod, only string) ([]string, error) {
	var all, out []string
	for _, c := range p.Spec.InitContainers {
		all = append(all, c.Name)
	}
	for _, c := range p.Spec.Containers {
		all = append(all, c.Name)
		out = append(out, c.Name)
	}
	for _, c := range p.Spec.EphemeralContainers {
		all = append(all, c.Name)
	}
	if only == "" {
		return out, nil
	}
	if !slices.Contains(all, only) {
		return nil, fmt.Errorf("no container %s (containers: %s)", only, strings.Join(all, ", "))
	}
	return []string{only}, nil
}

// streamLogs prints one container's log, line by line with prefix.
func (s *debugSession) streamLogs(ctx context.Context, cluster, pod string, opts *corev1.PodLogOptions, prefix string, out *lineWriter) error {
	cs, err := s.client(debugv1alpha1.Log, cluster)
	if err != nil {
		return err
	}
	stream, err := cs.CoreV1().Pods(s.namespace).GetLogs(pod, opts).Stream(ctx)
	if err != nil {
		return err
	}
	defer func() { _ = stream.Close() }()
	sc := bufio.NewScanner(stream)
	sc.Buffer(make([]byte, 64*1024), 1024*1024)
	for sc.Scan() {
		out.line(prefix, sc.Text())
	}
	return sc.Err()
}

// newEventsCommand is `kubectl lodestar events`.
func newEventsCommand(o *options) *cobra.Command {
	var (
		cluster string
		watch   bool
	)
	cmd := &cobra.Command{
		Use:   "events <placement | kind/name>",
		Short: "List the events of a Placement's objects and pods on every cluster",
		Long: `List the Normal and Warning events of the objects a Placement placed, of
their ReplicaSets and Jobs, and of their pods, on every cluster (or --cluster),
sorted by time, with the cluster of each. --watch keeps printing new ones.
Needs get on placements/events in debug.lodestar.dev (view, edit, admin).`,
		Example: `  kubectl lodestar events web -n shop
  kubectl lodestar events web -n shop --watch`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx := cmd.Context()
			s, err := o.debugSession(ctx, args[0], cluster)
			if err != nil {
				return err
			}
			seen := map[string]bool{}
			tw := tabwriter.NewWriter(o.Out, 0, 8, 3, ' ', 0)
			_, _ = fmt.Fprintln(tw, "LAST SEEN\tCLUSTER\tTYPE\tREASON\tOBJECT\tMESSAGE")
			for {
				events, errs := s.events(ctx)
				printClusterErrors(o.ErrOut, errs)
				for _, e := range events {
					key := fmt.Sprintf("%s/%s/%d", e.cluster, e.event.UID, e.event.Count)
					if seen[key] {
						continue
					}
					seen[key] = true
					ev := e.event
					_, _ = fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s/%s\t%s\n", age(coreEventTime(&ev), time.Now()), e.cluster, ev.Type, ev.Reason,
						strings.ToLower(ev.InvolvedObject.Kind), ev.InvolvedObject.Name, strings.TrimSpace(ev.Message))
				}
				_ = tw.Flush()
				if !watch {
					return nil
				}
				select {
				case <-ctx.Done():
					return nil
				case <-time.After(2 * time.Second):
				}
			}
		},
	}
	cmd.Flags().StringVar(&cluster, "cluster", "", "Only this cluster.")
	cmd.Flags().BoolVarP(&watch, "watch", "w", false, "Keep printing new events (every 2 s).")
	return cmd
}

type clusterEvent struct {
	cluster string
	event   corev1.Event
}

// events lists the Placement's events on every cluster, oldest first.
func (s *debugSession) events(ctx context.Context) ([]clusterEvent, map[string]error) {
	out, errs := fanIn(s, func(cluster string) ([]clusterEvent, error) {
		cs, err := s.client(debugv1alpha1.Events, cluster)
		if err != nil {
			return nil, err
		}
		list, err := cs.CoreV1().Events(s.namespace).List(ctx, metav1.ListOptions{})
		if err != nil {
			return nil, fmt.Errorf("%s", statusMessage(err))
		}
		of := s.eventFilter(ctx, cluster)
		var out []clusterEvent
		for _, e := range list.Items {
			if of(e.InvolvedObject) {
				out = append(out, clusterEvent{cluster: cluster, event: e})
			}
		}
		return out, nil
	})
	slices.SortStableFunc(out, func(a, b clusterEvent) int { return coreEventTime(&a.event).Compare(coreEventTime(&b.event)) })
	return out, errs
}

// eventFilter tells which events of a cluster are about the session's
// workload, when it names one: the workload's own, its pods' and their
// controllers' (a Deployment's ReplicaSets, a CronJob's Jobs), also of those
// already gone (named after the workload). Without a workload, every event of
// the Placement's.
func (s *debugSession) eventFilter(ctx context.Context, cluster string) func(corev1.ObjectReference) bool {
	if s.workloadName == "" {
		return func(corev1.ObjectReference) bool { return true }
	}
	names := map[string]bool{}
	if pods, err := s.clusterPods(ctx, cluster); err == nil {
		for _, p := range pods {
			names["Pod/"+p.Name] = true
			if ref := metav1.GetControllerOf(&p); ref != nil {
				names[ref.Kind+"/"+ref.Name] = true
			}
		}
	}
	// Between the workload's name and a pod's random suffix, a Deployment's
	// and a CronJob's pods have their controller's suffix too.
	between := 0
	if s.workloadKind == "Deployment" || s.workloadKind == "CronJob" {
		between = 1
	}
	return func(ref corev1.ObjectReference) bool {
		switch {
		case ref.Kind == s.workloadKind && ref.Name == s.workloadName, names[ref.Kind+"/"+ref.Name]:
			return true
		case s.workloadKind == "Deployment" && ref.Kind == "ReplicaSet", s.workloadKind == "CronJob" && ref.Kind == "Job":
			return namedAfter(ref.Name, s.workloadName, 0)
		case ref.Kind == "Pod" && s.workloadKind != "Pod":
			return namedAfter(ref.Name, s.workloadName, between)
		}
		return false
	}
}

// namedAfter tells whether name is owner's name, a dash, and a generated
// suffix of dashes+1 parts: web-7d9f8 (0) or web-7d9f8-x2kq1 (1), not
// web-config-x2kq1, another workload's.
func namedAfter(name, owner string, dashes int) bool {
	rest, ok := strings.CutPrefix(name, owner+"-")
	return ok && rest != "" && strings.Count(rest, "-") == dashes
}

// coreEventTime is when a core/v1 event last happened.
func coreEventTime(e *corev1.Event) time.Time {
	switch {
	case !e.LastTimestamp.IsZero():
		return e.LastTimestamp.Time
	case !e.EventTime.IsZero():
		return e.EventTime.Time
	}
	return e.FirstTimestamp.Time
}

// newExecCommand is `kubectl lodestar exec`.
func newExecCommand(o *options) *cobra.Command {
	var (
		cluster, container, placement string
		stdin, tty                    bool
	)
	cmd := &cobra.Command{
		Use:   "exec --cluster <cluster> <pod> -- <command> [args...]",
		Short: "Run a command in a placed pod on a cluster",
		Long: `Run a command in a pod of a Placement's workloads on one cluster, through the
hub: the member needs no inbound route. The pod's Placement is found among the
namespace's (or --placement). Needs create on placements/exec in
debug.lodestar.dev (edit, admin), and the member must allow the hub user's
member identity (lodestar:hub:<user>, group lodestar:tenants:<namespace>) to
exec: the agent's tenant access exec, or the member admin's binding.`,
		Example: `  kubectl lodestar exec -n shop --cluster member-1 web-7c9f-abc -- cat /etc/hostname
  kubectl lodestar exec -n shop --cluster member-1 -it web-7c9f-abc -- sh`,
		Args: cobra.MinimumNArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx := cmd.Context()
			cfg, req, err := o.podRequest(ctx, placement, cluster, args[0], debugv1alpha1.Exec)
			if err != nil {
				return err
			}
			u := req.VersionedParams(&corev1.PodExecOptions{Container: container, Command: args[1:], Stdin: stdin, Stdout: true, Stderr: !tty, TTY: tty}, scheme.ParameterCodec).URL()
			ws, err := remotecommand.NewWebSocketExecutor(cfg, http.MethodGet, u.String())
			if err != nil {
				return err
			}
			sp, err := remotecommand.NewSPDYExecutor(cfg, http.MethodPost, u)
			if err != nil {
				return err
			}
			exec, err := remotecommand.NewFallbackExecutor(ws, sp, func(err error) bool {
				return httpstream.IsUpgradeFailure(err) || httpstream.IsHTTPSProxyError(err)
			})
			if err != nil {
				return err
			}
			streams := remotecommand.StreamOptions{Stdout: o.Out, Tty: tty}
			if stdin {
				streams.Stdin = o.In
			}
			if !tty {
				streams.Stderr = o.ErrOut
			}
			if tty {
				if f, ok := o.In.(*os.File); ok && term.IsTerminal(f.Fd()) {
					state, err := term.MakeRaw(f.Fd())
					if err == nil {
						defer func() { _ = term.RestoreTerminal(f.Fd(), state) }()
					}
				}
			}
			return exec.StreamWithContext(ctx, streams)
		},
	}
	cmd.Flags().StringVar(&cluster, "cluster", "", "The cluster of the pod (required).")
	cmd.Flags().StringVar(&placement, "placement", "", "The pod's Placement (default: found among the namespace's).")
	cmd.Flags().StringVarP(&container, "container", "c", "", "The container (default: the pod's first).")
	cmd.Flags().BoolVarP(&stdin, "stdin", "i", false, "Pass stdin to the command.")
	cmd.Flags().BoolVarP(&tty, "tty", "t", false, "Allocate a terminal.")
	return cmd
}

// podRequest is the connection to a placed pod's cluster for subresource
// (exec or portforward) and the request for the pod's subresource.
func (o *options) podRequest(ctx context.Context, placement, cluster, pod, subresource string) (*rest.Config, *rest.Request, error) {
	if cluster == "" {
		return nil, nil, fmt.Errorf("--cluster is required")
	}
	s, pod, err := o.podSession(ctx, placement, cluster, pod)
	if err != nil {
		return nil, nil, err
	}
	cs, err := s.client(subresource, cluster)
	if err != nil {
		return nil, nil, err
	}
	return s.config(subresource, cluster), cs.CoreV1().RESTClient().Post().Namespace(s.namespace).Resource("pods").Name(pod).SubResource(subresource), nil
}

// podSession is the debug session of the Placement of a pod on cluster: the
// one named, or the namespace's Placement whose pods there include it.
func (o *options) podSession(ctx context.Context, placement, cluster, pod string) (*debugSession, string, error) {
	pod = strings.TrimPrefix(strings.TrimPrefix(pod, "pods/"), "pod/")
	if placement != "" {
		s, err := o.debugSession(ctx, placement, cluster)
		return s, pod, err
	}
	c, ns, err := o.hubIn()
	if err != nil {
		return nil, "", err
	}
	list := &placementv1alpha1.PlacementList{}
	if err := c.List(ctx, list, client.InNamespace(ns)); err != nil {
		return nil, "", fmt.Errorf("listing Placements: %w", err)
	}
	for _, p := range list.Items {
		s, err := o.debugSession(ctx, p.Name, cluster)
		if err != nil {
			continue
		}
		pods, err := s.clusterPods(ctx, cluster)
		if err != nil {
			continue
		}
		for _, p := range pods {
			if p.Name == pod {
				return s, pod, nil
			}
		}
	}
	return nil, "", fmt.Errorf("pod %s on cluster %s belongs to no Placement of namespace %s you may debug (name it with --placement)", pod, cluster, ns)
}

// newPortForwardCommand is `kubectl lodestar port-forward`.
func newPortForwardCommand(o *options) *cobra.Command {
	var cluster, placement, address string
	cmd := &cobra.Command{
		Use:   "port-forward --cluster <cluster> <pod> <local:remote>...",
		Short: "Forward local ports to a placed pod on a cluster",
		Long: `Forward local ports to a pod of a Placement's workloads on one cluster, through
the hub. Needs create on placements/portforward in debug.lodestar.dev (edit,
admin) and the member's consent as for exec.`,
		Example: `  kubectl lodestar port-forward -n shop --cluster member-1 web-7c9f-abc 8080:80`,
		Args:    cobra.MinimumNArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx := cmd.Context()
			cfg, req, err := o.podRequest(ctx, placement, cluster, args[0], debugv1alpha1.PortForward)
			if err != nil {
				return err
			}
			u := req.URL()
			transport, upgrader, err := spdy.RoundTripperFor(cfg)
			if err != nil {
				return err
			}
			dialer := spdy.NewDialer(upgrader, &http.Client{Transport: transport}, http.MethodPost, u)
			stop, ready := make(chan struct{}), make(chan struct{})
			go func() {
				<-ctx.Done()
				close(stop)
			}()
			fw, err := portforward.NewOnAddresses(dialer, strings.Split(address, ","), args[1:], stop, ready, o.Out, o.ErrOut)
			if err != nil {
				return err
			}
			return fw.ForwardPorts()
		},
	}
	cmd.Flags().StringVar(&cluster, "cluster", "", "The cluster of the pod (required).")
	cmd.Flags().StringVar(&placement, "placement", "", "The pod's Placement (default: found among the namespace's).")
	cmd.Flags().StringVar(&address, "address", "127.0.0.1", "Comma-separated local addresses to listen on.")
	return cmd
}
