package render

import (
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// WithServiceExports adds to objs a ServiceExport (multicluster.x-k8s.io
// v1beta1) of the same namespace and name for every Service among them that
// has none: a Placement's spec.services.export All.
func WithServiceExports(objs []*unstructured.Unstructured) []*unstructured.Unstructured {
	serviceExport, service := schema.GroupKind{Group: "multicluster.x-k8s.io", Kind: "ServiceExport"}, schema.GroupKind{Kind: "Service"}
	exported := map[[2]string]bool{}
	for _, o := range objs {
		if o.GroupVersionKind().GroupKind() == serviceExport {
			exported[[2]string{o.GetNamespace(), o.GetName()}] = true
		}
	}
	out := objs
	for _, o := range objs {
		key := [2]string{o.GetNamespace(), o.GetName()}
		if o.GroupVersionKind().GroupKind() != service || exported[key] {
			continue
		}
		exported[key] = true
		se := &unstructured.Unstructured{}
		se.SetAPIVersion("multicluster.x-k8s.io/v1beta1")
		se.SetKind("ServiceExport")
		se.SetNamespace(o.GetNamespace())
		se.SetName(o.GetName())
		out = append(out, se)
	}
	return out
}
