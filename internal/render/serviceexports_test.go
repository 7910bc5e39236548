package render

import (
	"testing"

	. "github.com/onsi/gomega"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

func obj(apiVersion, kind, name string) *unstructured.Unstructured {
	u := &unstructured.Unstructured{}
	u.SetAPIVersion(apiVersion)
	u.SetKind(kind)
	u.SetNamespace("shop")
	u.SetName(name)
	return u
}

func TestWithServiceExports(t *testing.T) {
	g := NewWithT(t)
	in := []*unstructured.Unstructured{obj("v1", "Service", "web"), obj("v1", "Service", "db"), obj("multicluster.x-k8s.io/v1beta1", "ServiceExport", "db"), obj("v1", "ConfigMap", "web")}
	out := WithServiceExports(in)
	g.Expect(out).To(HaveLen(5), "web gets one; db has its own")
	g.Expect(out[4].GetKind()).To(Equal("ServiceExport"))
	g.Expect(out[4].GetName()).To(Equal("web"))
	g.Expect(out[4].GetNamespace()).To(Equal("shop"))
}
