package main

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"strconv"
	"sync"
	"time"

	jsonpatch "github.com/evanphx/json-patch/v5"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/uuid"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"
)

// memMember is a simulated member cluster's API server, in memory: objects are
// kept as JSON maps with the metadata the agent relies on (UIDs, resource
// versions checked on writes that carry them, generations, finalizers and
// deletion timestamps, the agent's managedFields entry). It has no field
// management: a server-side apply replaces the fields the applied object names
// and keeps the others, which is what an apply with force ownership by the
// object's only writer, the agent, amounts to. Deployments are available as
// soon as they are applied, as if a controller manager, a scheduler and nodes
// ran them.
//
// It stands in for controller-runtime's fake client, whose server-side apply
// (structured-merge-diff on every write) took about a third of the
// benchmark process's CPU, on the same two cores as the hub's API server.
type memMember struct {
	scheme *runtime.Scheme
	mapper meta.RESTMapper

	mu   sync.Mutex
	rv   int64
	objs map[memKey]map[string]any
}

type memKey struct {
	gvk             schema.GroupVersionKind
	namespace, name string
}

var _ client.Client = &memMember{}

func newMemMember(scheme *runtime.Scheme, mapper meta.RESTMapper) *memMember {
	return &memMember{scheme: scheme, mapper: mapper, objs: map[memKey]map[string]any{}}
}

func (m *memMember) Scheme() *runtime.Scheme     { return m.scheme }
func (m *memMember) RESTMapper() meta.RESTMapper { return m.mapper }

func (m *memMember) GroupVersionKindFor(obj runtime.Object) (schema.GroupVersionKind, error) {
	return apiutil.GVKForObject(obj, m.scheme)
}

func (m *memMember) IsObjectNamespaced(obj runtime.Object) (bool, error) {
	return apiutil.IsObjectNamespaced(obj, m.scheme, m.mapper)
}

// key names obj in the store, and the resource for error messages.
func (m *memMember) key(obj runtime.Object, namespace, name string) (memKey, schema.GroupResource, error) {
	gvk, err := apiutil.GVKForObject(obj, m.scheme)
	if err != nil {
		return memKey{}, schema.GroupResource{}, err
	}
	mapping, err := m.mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
	if err != nil {
		return memKey{}, schema.GroupResource{}, err
	}
	if mapping.Scope.Name() != meta.RESTScopeNameNamespace {
		namespace = ""
	}
	return memKey{gvk: gvk, namespace: namespace, name: name}, mapping.Resource.GroupResource(), nil
}

func toMap(obj runtime.Object, gvk schema.GroupVersionKind) (map[string]any, error) {
	var u map[string]any
	if uo, ok := obj.(*unstructured.Unstructured); ok {
		u = runtime.DeepCopyJSON(uo.Object)
	} else {
		var err error
		if u, err = runtime.DefaultUnstructuredConverter.ToUnstructured(obj); err != nil {
			return nil, err
		}
	}
	u["apiVersion"], u["kind"] = gvk.GroupVersion().String(), gvk.Kind
	return u, nil
}

func fromMap(u map[string]any, obj runtime.Object) error {
	u = runtime.DeepCopyJSON(u)
	if uo, ok := obj.(*unstructured.Unstructured); ok {
		uo.Object = u
		return nil
	}
	return runtime.DefaultUnstructuredConverter.FromUnstructured(u, obj)
}

func metadata(u map[string]any) map[string]any {
	md, _ := u["metadata"].(map[string]any)
	if md == nil {
		md = map[string]any{}
		u["metadata"] = md
	}
	return md
}

// next stamps u as written now: a new resource version, and the agent's
// managedFields entry.
func (m *memMember) next(u map[string]any, manager string) {
	m.rv++
	md := metadata(u)
	md["resourceVersion"] = strconv.FormatInt(m.rv, 10)
	if manager != "" {
		md["managedFields"] = []any{map[string]any{"manager": manager, "operation": "Apply", "apiVersion": u["apiVersion"]}}
	}
}

// preconditions checks the resourceVersion and UID that a write carries against
// the stored object.
func preconditions(gr schema.GroupResource, name string, sent, stored map[string]any) error {
	smd, cmd := metadata(sent), metadata(stored)
	if rv, _ := smd["resourceVersion"].(string); rv != "" && rv != cmd["resourceVersion"] {
		return apierrors.NewConflict(gr, name, fmt.Errorf("the object has been modified; please apply your changes to the latest version and try again"))
	}
	if uid, _ := smd["uid"].(string); uid != "" && uid != cmd["uid"] {
		return apierrors.NewConflict(gr, name, fmt.Errorf("precondition failed: UID in precondition: %s, UID in object meta: %v", uid, cmd["uid"]))
	}
	return nil
}

func (m *memMember) Get(_ context.Context, key client.ObjectKey, obj client.Object, _ ...client.GetOption) error {
	k, gr, err := m.key(obj, key.Namespace, key.Name)
	if err != nil {
		return err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	u, ok := m.objs[k]
	if !ok {
		return apierrors.NewNotFound(gr, key.Name)
	}
	return fromMap(u, obj)
}

func (m *memMember) List(_ context.Context, list client.ObjectList, opts ...client.ListOption) error {
	o := (&client.ListOptions{}).ApplyOptions(opts)
	gvk, err := apiutil.GVKForObject(list, m.scheme)
	if err != nil {
		return err
	}
	gvk.Kind = gvk.Kind[:len(gvk.Kind)-len("List")]
	m.mu.Lock()
	var items []runtime.Object
	for k, u := range m.objs {
		if k.gvk != gvk || (o.Namespace != "" && k.namespace != o.Namespace) {
			continue
		}
		if o.LabelSelector != nil {
			uo := &unstructured.Unstructured{Object: u}
			if !o.LabelSelector.Matches(labels.Set(uo.GetLabels())) {
				continue
			}
		}
		item, err := m.scheme.New(gvk)
		if err != nil {
			item = &unstructured.Unstructured{}
		}
		if err := fromMap(u, item); err != nil {
			m.mu.Unlock()
			return err
		}
		items = append(items, item)
	}
	m.mu.Unlock()
	return meta.SetList(list, items)
}

// sent is obj as a JSON map, with its key and resource.
func (m *memMember) sent(obj client.Object) (map[string]any, memKey, schema.GroupResource, error) {
	k, gr, err := m.key(obj, obj.GetNamespace(), obj.GetName())
	if err != nil {
		return nil, k, gr, err
	}
	u, err := toMap(obj, k.gvk)
	return u, k, gr, err
}

// born gives a new object its identity: a UID, generation 1 and its creation time.
func born(u map[string]any) {
	md := metadata(u)
	md["uid"] = string(uuid.NewUUID())
	md["generation"] = int64(1)
	md["creationTimestamp"] = time.Now().UTC().Format(time.RFC3339)
}

func (m *memMember) Create(_ context.Context, obj client.Object, _ ...client.CreateOption) error {
	u, k, gr, err := m.sent(obj)
	if err != nil {
		return err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if _, ok := m.objs[k]; ok {
		return apierrors.NewAlreadyExists(gr, k.name)
	}
	born(u)
	m.next(u, "")
	m.objs[k] = u
	return fromMap(u, obj)
}

func (m *memMember) Update(_ context.Context, obj client.Object, _ ...client.UpdateOption) error {
	return m.write(obj, func(stored, sent map[string]any) (map[string]any, error) {
		out := runtime.DeepCopyJSON(sent)
		out["status"] = stored["status"]
		return out, nil
	})
}

func (m *memMember) Patch(_ context.Context, obj client.Object, patch client.Patch, _ ...client.PatchOption) error {
	return m.patch(obj, patch, false)
}

func (m *memMember) patch(obj client.Object, patch client.Patch, status bool) error {
	if patch.Type() != types.MergePatchType {
		return fmt.Errorf("the simulated member takes only merge patches, not %s", patch.Type())
	}
	data, err := patch.Data(obj)
	if err != nil {
		return err
	}
	var sent map[string]any
	if err := json.Unmarshal(data, &sent); err != nil {
		return err
	}
	return m.write(obj, func(stored, _ map[string]any) (map[string]any, error) {
		if err := preconditions(schema.GroupResource{}, obj.GetName(), sent, stored); err != nil {
			return nil, err
		}
		before, err := json.Marshal(stored)
		if err != nil {
			return nil, err
		}
		after, err := jsonpatch.MergePatch(before, data)
		if err != nil {
			return nil, err
		}
		var out map[string]any
		if err := json.Unmarshal(after, &out); err != nil {
			return nil, err
		}
		// A write to the object leaves its status alone, and a write to its status
		// changes nothing else.
		if status {
			s := out["status"]
			out = runtime.DeepCopyJSON(stored)
			out["status"] = s
		} else {
			out["status"] = stored["status"]
		}
		return out, nil
	})
}

// write replaces the stored object with what change makes of it, keeping its
// identity and bumping its generation when its spec changed; an object whose
// deletion waited only for finalizers that are now gone goes.
func (m *memMember) write(obj client.Object, change func(stored, sent map[string]any) (map[string]any, error)) error {
	sent, k, gr, err := m.sent(obj)
	if err != nil {
		return err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	stored, ok := m.objs[k]
	if !ok {
		return apierrors.NewNotFound(gr, k.name)
	}
	out, err := change(stored, sent)
	if err != nil {
		return err
	}
	m.keepIdentity(out, stored)
	if out["status"] == nil {
		delete(out, "status")
	}
	m.next(out, "")
	md := metadata(out)
	if f, _ := md["finalizers"].([]any); md["deletionTimestamp"] != nil && len(f) == 0 {
		delete(m.objs, k)
	} else {
		m.objs[k] = out
	}
	return fromMap(out, obj)
}

// keepIdentity gives out the stored object's identity and server-set metadata,
// and a new generation when its spec changed.
func (m *memMember) keepIdentity(out, stored map[string]any) {
	md, smd := metadata(out), metadata(stored)
	for _, f := range []string{"uid", "creationTimestamp", "deletionTimestamp", "generation", "managedFields"} {
		if v, ok := smd[f]; ok {
			md[f] = v
		} else {
			delete(md, f)
		}
	}
	if md["finalizers"] == nil {
		md["finalizers"] = []any{}
	}
	if !equalJSON(out["spec"], stored["spec"]) {
		md["generation"] = asInt64(smd["generation"]) + 1
	}
}

// asInt64 reads a number of a JSON map, decoded or converted.
func asInt64(v any) int64 {
	switch n := v.(type) {
	case int64:
		return n
	case float64:
		return int64(n)
	}
	return 0
}

func equalJSON(a, b any) bool {
	ja, errA := json.Marshal(a)
	jb, errB := json.Marshal(b)
	return errA == nil && errB == nil && string(ja) == string(jb)
}

// Apply writes the applied object's fields over the stored object, or creates it.
func (m *memMember) Apply(_ context.Context, obj runtime.ApplyConfiguration, opts ...client.ApplyOption) error {
	o := (&client.ApplyOptions{}).ApplyOptions(opts)
	data, err := json.Marshal(obj)
	if err != nil {
		return err
	}
	sent := map[string]any{}
	if err := json.Unmarshal(data, &sent); err != nil {
		return err
	}
	u := &unstructured.Unstructured{Object: sent}
	gvk := u.GroupVersionKind()
	mapping, err := m.mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
	if err != nil {
		return err
	}
	gr := mapping.Resource.GroupResource()
	k := memKey{gvk: gvk, namespace: u.GetNamespace(), name: u.GetName()}
	if mapping.Scope.Name() != meta.RESTScopeNameNamespace {
		k.namespace = ""
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	stored, ok := m.objs[k]
	var out map[string]any
	if !ok {
		if md := metadata(sent); md["resourceVersion"] != nil || md["uid"] != nil {
			return apierrors.NewConflict(gr, k.name, fmt.Errorf("the object to update no longer exists"))
		}
		out = runtime.DeepCopyJSON(sent)
		born(out)
		delete(out, "status")
	} else {
		if err := preconditions(gr, k.name, sent, stored); err != nil {
			return err
		}
		out = runtime.DeepCopyJSON(stored)
		for f, v := range sent {
			if f != "metadata" && f != "status" {
				out[f] = runtime.DeepCopyJSONValue(v)
			}
		}
		md := metadata(out)
		for f, v := range metadata(sent) {
			switch f {
			case "labels", "annotations":
				merged, _ := md[f].(map[string]any)
				merged = maps.Clone(merged)
				if merged == nil {
					merged = map[string]any{}
				}
				maps.Copy(merged, runtime.DeepCopyJSONValue(v).(map[string]any))
				md[f] = merged
			case "ownerReferences", "finalizers":
				md[f] = runtime.DeepCopyJSONValue(v)
			}
		}
		if !equalJSON(out["spec"], stored["spec"]) {
			md["generation"] = asInt64(metadata(stored)["generation"]) + 1
		}
	}
	if gvk.Kind == "Deployment" {
		available(out)
	}
	switch {
	case len(o.DryRun) > 0 && ok:
		metadata(out)["resourceVersion"] = metadata(stored)["resourceVersion"]
	case len(o.DryRun) > 0:
		delete(metadata(out), "resourceVersion")
	case ok && equalJSON(out, stored):
		// Nothing changed: the API server writes nothing either.
	default:
		m.next(out, o.FieldManager)
		m.objs[k] = out
	}
	b, err := json.Marshal(out)
	if err != nil {
		return err
	}
	// Answer with the member's object, status included, as the API server does.
	return json.Unmarshal(b, obj)
}

// available gives a Deployment the status of one whose replicas are all
// available.
func available(u map[string]any) {
	replicas := int64(1)
	if spec, ok := u["spec"].(map[string]any); ok && spec["replicas"] != nil {
		replicas = asInt64(spec["replicas"])
	}
	g := metadata(u)["generation"]
	u["status"] = map[string]any{
		"observedGeneration": g, "replicas": replicas, "updatedReplicas": replicas,
		"readyReplicas": replicas, "availableReplicas": replicas,
	}
}

func (m *memMember) Delete(_ context.Context, obj client.Object, opts ...client.DeleteOption) error {
	o := (&client.DeleteOptions{}).ApplyOptions(opts)
	k, gr, err := m.key(obj, obj.GetNamespace(), obj.GetName())
	if err != nil {
		return err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	stored, ok := m.objs[k]
	if !ok {
		return apierrors.NewNotFound(gr, k.name)
	}
	md := metadata(stored)
	if o.Preconditions != nil && o.Preconditions.UID != nil && string(*o.Preconditions.UID) != md["uid"] {
		return apierrors.NewConflict(gr, k.name, fmt.Errorf("precondition failed: UID in precondition: %s, UID in object meta: %v", *o.Preconditions.UID, md["uid"]))
	}
	if f, _ := md["finalizers"].([]any); len(f) > 0 {
		if md["deletionTimestamp"] == nil {
			out := runtime.DeepCopyJSON(stored)
			metadata(out)["deletionTimestamp"] = time.Now().UTC().Format(time.RFC3339)
			m.next(out, "")
			m.objs[k] = out
		}
		return nil
	}
	delete(m.objs, k)
	return nil
}

func (m *memMember) DeleteAllOf(context.Context, client.Object, ...client.DeleteAllOfOption) error {
	return fmt.Errorf("the simulated member does not delete collections")
}

func (m *memMember) Status() client.SubResourceWriter { return memStatus{m} }

// SubResource serves status only.
func (m *memMember) SubResource(subResource string) client.SubResourceClient {
	return memSubResource{memStatus: memStatus{m}, name: subResource}
}

// memStatus writes objects' status.
type memStatus struct{ m *memMember }

func (s memStatus) Create(context.Context, client.Object, client.Object, ...client.SubResourceCreateOption) error {
	return fmt.Errorf("the simulated member does not create status")
}

func (s memStatus) Update(_ context.Context, obj client.Object, _ ...client.SubResourceUpdateOption) error {
	return s.m.write(obj, func(stored, sent map[string]any) (map[string]any, error) {
		out := runtime.DeepCopyJSON(stored)
		out["status"] = runtime.DeepCopyJSONValue(sent["status"])
		return out, nil
	})
}

func (s memStatus) Patch(_ context.Context, obj client.Object, patch client.Patch, _ ...client.SubResourcePatchOption) error {
	return s.m.patch(obj, patch, true)
}

func (s memStatus) Apply(context.Context, runtime.ApplyConfiguration, ...client.SubResourceApplyOption) error {
	return fmt.Errorf("the simulated member does not apply status")
}

// memSubResource writes status and reads nothing.
type memSubResource struct {
	memStatus
	name string
}

func (s memSubResource) Get(context.Context, client.Object, client.Object, ...client.SubResourceGetOption) error {
	return fmt.Errorf("the simulated member does not serve %s", s.name)
}

func (s memSubResource) Update(ctx context.Context, obj client.Object, opts ...client.SubResourceUpdateOption) error {
	if s.name != "status" {
		return fmt.Errorf("the simulated member does not serve %s", s.name)
	}
	return s.memStatus.Update(ctx, obj, opts...)
}

func (s memSubResource) Patch(ctx context.Context, obj client.Object, patch client.Patch, opts ...client.SubResourcePatchOption) error {
	if s.name != "status" {
		return fmt.Errorf("the simulated member does not serve %s", s.name)
	}
	return s.memStatus.Patch(ctx, obj, patch, opts...)
}
