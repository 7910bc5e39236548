// Package profile reports the member cluster into its ClusterProfile's status on
// the hub: the About API's ClusterProperty objects as they are, the Kubernetes
// version, and capacity properties.
package profile

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/discovery"
	toolscache "k8s.io/client-go/tools/cache"
	clientcmdv1 "k8s.io/client-go/tools/clientcmd/api/v1"
	aboutv1alpha1 "sigs.k8s.io/about-api/pkg/apis/v1alpha1"
	cpv1alpha1 "sigs.k8s.io/cluster-inventory-api/apis/v1alpha1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	placementv1alpha1 "github.com/lodestar-dev/lodestar/api/placement/v1alpha1"
	"github.com/lodestar-dev/lodestar/internal/capacity"
)

// +kubebuilder:rbac:groups=multicluster.x-k8s.io,resources=clusterprofiles,verbs=get
// +kubebuilder:rbac:groups=multicluster.x-k8s.io,resources=clusterprofiles/status,verbs=get;patch;update

// Well-known About API property names (KEP-2149) the agent sets on the member
// when the member's admin has not.
const (
	// PropertyClusterID is the cluster's ID under its current KEP-2149 name.
	PropertyClusterID = "cluster.clusterset.k8s.io"
	// PropertyClusterIDLegacy is the ID under the name of KEP-2149's first
	// versions, which earlier consumers read; it is kept, with the same value.
	PropertyClusterIDLegacy = "id.k8s.io"
	// PropertyClusterSet names the cluster set the cluster belongs to.
	PropertyClusterSet = "clusterset.k8s.io"
)

// FieldManager is the agent's field manager for the ClusterProfile status.
const FieldManager = "lodestar-agent"

// maxValueLength is the longest property value a ClusterProfile holds.
const maxValueLength = 1024

// DefaultPeriod is how often the properties are observed.
const DefaultPeriod = time.Minute

// refreshEvery is how often unchanged properties are written anyway, to move
// their lastObservedTime.
const refreshEvery = 10 * time.Minute

// Reporter writes the ClusterProfile's status.version and status.properties.
type Reporter struct {
	// Hub is the agent's client of the hub.
	Hub client.Client
	// Member reads the member (uncached); MemberCache brings ClusterProperty
	// changes promptly.
	Member      client.Client
	MemberCache cache.Cache
	Discovery   discovery.ServerVersionInterface
	// ClusterSet and Cluster name the ClusterProfile.
	ClusterSet, Cluster string
	// Period is how often the properties are observed.
	Period time.Duration
	// AccessProviders are published in status.accessProviders: member
	// access's (opted into by the member's admin). The tunnel's
	// (lodestar-tunnel) is the hub's to write (controllers/hub/tunnelprovider).
	AccessProviders []cpv1alpha1.AccessProvider
	// Own are properties the agent reports about itself, such as
	// placementv1alpha1.PropertyConsumerTunnel.
	Own map[string]string

	mu          sync.Mutex
	last        map[string]string
	lastVersion string
	lastWrite   time.Time
}

// Start reports until ctx ends: every Period, and soon after a ClusterProperty
// changes.
func (r *Reporter) Start(ctx context.Context) error {
	if r.Period == 0 {
		r.Period = DefaultPeriod
	}
	log := ctrl.LoggerFrom(ctx).WithName("profile")
	poke := make(chan struct{}, 1)
	if r.MemberCache != nil {
		notify := func(any) {
			select {
			case poke <- struct{}{}:
			default:
			}
		}
		// ClusterProperties and StorageClasses (property storageclasses.lodestar.dev)
		// are reported soon after they change.
		for _, obj := range []client.Object{&aboutv1alpha1.ClusterProperty{}, &storagev1.StorageClass{}} {
			inf, err := r.MemberCache.GetInformer(ctx, obj)
			if err != nil {
				return fmt.Errorf("watching %T: %w", obj, err)
			}
			if _, err := inf.AddEventHandler(eventHandler(notify)); err != nil {
				return err
			}
		}
	}
	for {
		if err := r.Report(ctx); err != nil && ctx.Err() == nil {
			log.Error(err, "Reporting the cluster's properties to its ClusterProfile")
		}
		select {
		case <-ctx.Done():
			return nil
		case <-poke:
		case <-time.After(r.Period):
		}
	}
}

// NeedLeaderElection is false: the agent runs one replica per member.
func (r *Reporter) NeedLeaderElection() bool { return false }

// Report observes the member once and writes what changed.
func (r *Reporter) Report(ctx context.Context) error {
	props, err := r.observe(ctx)
	if err != nil {
		return err
	}
	version, err := r.Discovery.ServerVersion()
	if err != nil {
		return fmt.Errorf("reading the member's version: %w", err)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if maps.Equal(props, r.last) && version.GitVersion == r.lastVersion && time.Since(r.lastWrite) < refreshEvery {
		return nil
	}
	now := metav1.Now()
	list := make([]any, 0, len(props))
	for _, name := range slices.Sorted(maps.Keys(props)) {
		list = append(list, map[string]any{"name": name, "value": props[name], "lastObservedTime": now.UTC().Format(time.RFC3339)})
	}
	obj := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": cpv1alpha1.GroupVersion.String(),
		"kind":       "ClusterProfile",
		"metadata":   map[string]any{"name": r.Cluster, "namespace": r.ClusterSet},
		"status": map[string]any{
			"version":    map[string]any{"kubernetes": version.GitVersion},
			"properties": list,
		},
	}}
	if len(r.AccessProviders) > 0 {
		aps := make([]any, 0, len(r.AccessProviders))
		for i := range r.AccessProviders {
			ap, err := runtime.DefaultUnstructuredConverter.ToUnstructured(&r.AccessProviders[i])
			if err != nil {
				return fmt.Errorf("encoding access provider %s: %w", r.AccessProviders[i].Name, err)
			}
			aps = append(aps, ap)
		}
		obj.Object["status"].(map[string]any)["accessProviders"] = aps
	}
	if err := r.Hub.Status().Apply(ctx, client.ApplyConfigurationFromUnstructured(obj), client.FieldOwner(FieldManager), client.ForceOwnership); err != nil {
		return fmt.Errorf("writing ClusterProfile %s/%s status: %w", r.ClusterSet, r.Cluster, err)
	}
	r.last, r.lastVersion, r.lastWrite = props, version.GitVersion, time.Now()
	return nil
}

// observe returns the properties to report: the member's ClusterProperties (after
// setting the cluster ID and cluster set properties when absent), the capacity
// properties and the storage classes, those a ClusterProfile can hold.
func (r *Reporter) observe(ctx context.Context) (map[string]string, error) {
	props, err := r.properties(ctx)
	if err != nil {
		return nil, err
	}
	created, err := r.ensureWellKnown(ctx, props)
	if err != nil {
		return nil, err
	}
	if created {
		// Read again: another writer may have created one first, and its value stays.
		if props, err = r.properties(ctx); err != nil {
			return nil, err
		}
	}
	capacity, err := r.capacity(ctx)
	if err != nil {
		return nil, err
	}
	maps.Copy(props, capacity)
	maps.Copy(props, r.Own)
	classes, err := r.storageClasses(ctx)
	if err != nil {
		return nil, err
	}
	props[placementv1alpha1.PropertyStorageClasses] = classes
	// What a ClusterProfile property may hold: a value of 1 to maxValueLength
	// characters. A member without storage classes reports none.
	out := map[string]string{}
	for name, value := range props {
		switch {
		case value == "":
		case len(value) > maxValueLength:
			ctrl.LoggerFrom(ctx).Info("Not reporting a property longer than a ClusterProfile property may be", "property", name, "length", len(value), "max", maxValueLength)
		default:
			out[name] = value
		}
	}
	return out, nil
}

// properties returns the member's ClusterProperties by name.
func (r *Reporter) properties(ctx context.Context) (map[string]string, error) {
	list := &aboutv1alpha1.ClusterPropertyList{}
	if err := r.Member.List(ctx, list); err != nil {
		return nil, fmt.Errorf("listing ClusterProperties: %w", err)
	}
	out := make(map[string]string, len(list.Items))
	for _, p := range list.Items {
		out[p.Name] = p.Spec.Value
	}
	return out, nil
}

// ensureWellKnown creates the cluster ID properties (cluster.clusterset.k8s.io
// and id.k8s.io, the kube-system namespace UID) and clusterset.k8s.io (the cluster
// set) on the member when props, the member's properties, lack them; it tells
// whether it tried to create any. The member's admin may set any of them, and
// then the agent leaves them; an ID the admin set under one name is also used
// for the other, so both always name the same cluster.
func (r *Reporter) ensureWellKnown(ctx context.Context, props map[string]string) (bool, error) {
	_, hasID := props[PropertyClusterID]
	_, hasLegacy := props[PropertyClusterIDLegacy]
	_, hasSet := props[PropertyClusterSet]
	if hasID && hasLegacy && hasSet {
		return false, nil
	}
	id, err := r.clusterID(ctx, props)
	if err != nil {
		return false, err
	}
	for _, p := range []struct{ name, value string }{
		{PropertyClusterID, id}, {PropertyClusterIDLegacy, id}, {PropertyClusterSet, r.ClusterSet},
	} {
		if _, ok := props[p.name]; ok {
			continue
		}
		prop := &aboutv1alpha1.ClusterProperty{ObjectMeta: metav1.ObjectMeta{Name: p.name}, Spec: aboutv1alpha1.ClusterPropertySpec{Value: p.value}}
		if err := r.Member.Create(ctx, prop); err != nil && !apierrors.IsAlreadyExists(err) {
			return true, fmt.Errorf("creating ClusterProperty %s: %w", p.name, err)
		}
	}
	return true, nil
}

// clusterID is the ID the member already has under either name, or else the UID
// of its kube-system namespace.
func (r *Reporter) clusterID(ctx context.Context, props map[string]string) (string, error) {
	for _, name := range []string{PropertyClusterID, PropertyClusterIDLegacy} {
		if v := props[name]; v != "" {
			return v, nil
		}
	}
	ks := &corev1.Namespace{}
	if err := r.Member.Get(ctx, client.ObjectKey{Name: "kube-system"}, ks); err != nil {
		return "", fmt.Errorf("reading the kube-system namespace for the cluster ID: %w", err)
	}
	return string(ks.UID), nil
}

// storageClasses are the names of the member's StorageClasses, sorted and
// comma-separated.
func (r *Reporter) storageClasses(ctx context.Context) (string, error) {
	list := &storagev1.StorageClassList{}
	if err := r.Member.List(ctx, list); err != nil {
		return "", fmt.Errorf("listing storage classes: %w", err)
	}
	names := make([]string, 0, len(list.Items))
	for _, sc := range list.Items {
		names = append(names, sc.Name)
	}
	slices.Sort(names)
	return strings.Join(names, ","), nil
}

// capacity returns the node count and the allocatable and free CPU, memory and
// extended resources of the member's ready, schedulable nodes
// (internal/capacity).
func (r *Reporter) capacity(ctx context.Context) (map[string]string, error) {
	nodes := &corev1.NodeList{}
	if err := r.Member.List(ctx, nodes); err != nil {
		return nil, fmt.Errorf("listing nodes: %w", err)
	}
	tally := capacity.NewTally(nodes.Items)
	pods := &corev1.PodList{}
	for {
		if err := r.Member.List(ctx, pods, client.Limit(500), client.Continue(pods.Continue)); err != nil {
			return nil, fmt.Errorf("listing pods: %w", err)
		}
		for i := range pods.Items {
			tally.AddPod(&pods.Items[i])
		}
		if pods.Continue == "" {
			break
		}
	}
	return tally.Properties(), nil
}

func eventHandler(notify func(any)) toolscache.ResourceEventHandler {
	return toolscache.ResourceEventHandlerFuncs{
		AddFunc:    notify,
		UpdateFunc: func(_, obj any) { notify(obj) },
		DeleteFunc: notify,
	}
}

// SecretReaderProvider is the access provider the agent publishes for member
// access: the member's server and CA, and the cluster's name in the exec
// extension, which the upstream secretreader credential plugin reads to find
// the Secret <consumer namespace>/<cluster>.
func SecretReaderProvider(cluster, server string, caData []byte) cpv1alpha1.AccessProvider {
	return provider(placementv1alpha1.SecretReaderProvider, cluster, server, caData)
}

// provider is an access provider of server and CA, with the cluster's name in
// the exec extension.
func provider(name, cluster, server string, caData []byte) cpv1alpha1.AccessProvider {
	ext, _ := json.Marshal(map[string]string{"clusterName": cluster})
	return cpv1alpha1.AccessProvider{
		Name: name,
		Cluster: clientcmdv1.Cluster{
			Server: server, CertificateAuthorityData: caData,
			Extensions: []clientcmdv1.NamedExtension{{Name: "client.authentication.k8s.io/exec", Extension: runtime.RawExtension{Raw: ext}}},
		},
	}
}
