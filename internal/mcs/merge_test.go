package mcs

import (
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	mcsv1beta1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"

	servicesv1alpha1 "github.com/lodestar-dev/lodestar/api/services/v1alpha1"
)

var t0 = time.Date(2026, 11, 26, 12, 0, 0, 0, time.UTC)

func export(cluster string, age time.Duration, ports ...mcsv1beta1.ServicePort) Export {
	return Export{Cluster: cluster, Created: metav1.NewTime(t0.Add(-age)),
		Service: servicesv1alpha1.ServiceProperties{Type: mcsv1beta1.ClusterSetIP, Ports: ports}}
}

func port(name string, p int32) mcsv1beta1.ServicePort {
	return mcsv1beta1.ServicePort{Name: name, Port: p, Protocol: corev1.ProtocolTCP}
}

func TestMergeSame(t *testing.T) {
	g := NewWithT(t)
	m := Merge([]Export{export("b", time.Minute, port("http", 80)), export("a", time.Minute, port("http", 80))})
	g.Expect(m.Oldest).To(Equal("a"), "same age: by name")
	g.Expect(m.Service.Ports).To(Equal([]mcsv1beta1.ServicePort{port("http", 80)}))
	g.Expect(m.Conflicts).To(BeEmpty())
}

// KEP case: the older export's port wins, and both exports are told, naming
// the winner.
func TestMergePortConflict(t *testing.T) {
	g := NewWithT(t)
	m := Merge([]Export{export("member-2", time.Minute, port("http", 8080)), export("member-1", time.Hour, port("http", 80))})
	g.Expect(m.Oldest).To(Equal("member-1"))
	g.Expect(m.Service.Ports).To(Equal([]mcsv1beta1.ServicePort{port("http", 80)}))
	g.Expect(m.Conflicts).To(HaveKeyWithValue("member-1", HaveField("Reason", "PortConflict")))
	g.Expect(m.Conflicts).To(HaveKeyWithValue("member-2", HaveField("Reason", "PortConflict")))
	g.Expect(m.Conflicts["member-2"].Message).To(ContainSubstring("port http is 8080/TCP, not 80/TCP"))
	g.Expect(m.Conflicts["member-2"].Message).To(ContainSubstring("the oldest export (member-1's) wins"))
	g.Expect(m.Conflicts["member-1"].Message).To(ContainSubstring("on member-2"))
}

// Ports are the union; clusters that do not export a port are named.
func TestMergePortUnion(t *testing.T) {
	g := NewWithT(t)
	m := Merge([]Export{export("a", time.Hour, port("http", 80)), export("b", time.Minute, port("http", 80), port("https", 443))})
	g.Expect(m.Service.Ports).To(Equal([]mcsv1beta1.ServicePort{port("http", 80), port("https", 443)}))
	g.Expect(m.Conflicts).To(HaveLen(2))
	g.Expect(m.Conflicts["a"].Message).To(ContainSubstring("a exports http 80/TCP; b exports http 80/TCP, https 443/TCP"))
	// Unnamed ports merge by protocol and port.
	m = Merge([]Export{export("a", time.Hour, port("", 80)), export("b", time.Minute, port("", 80))})
	g.Expect(m.Service.Ports).To(HaveLen(1))
	g.Expect(m.Conflicts).To(BeEmpty())
}

func TestMergeTypeAndAffinity(t *testing.T) {
	g := NewWithT(t)
	a, b := export("a", time.Hour, port("http", 80)), export("b", time.Minute, port("http", 80))
	a.Service.Type = mcsv1beta1.Headless
	b.Service.SessionAffinity = corev1.ServiceAffinityClientIP
	m := Merge([]Export{b, a})
	g.Expect(m.Service.Type).To(Equal(mcsv1beta1.Headless), "the oldest's type")
	g.Expect(m.Service.SessionAffinity).To(BeEmpty())
	g.Expect(m.Conflicts["b"].Reason).To(Equal("TypeConflict"), "type first")
	g.Expect(m.Conflicts["b"].Message).To(ContainSubstring("SessionAffinityConflict: sessionAffinity is ClientIP, not unset"))
	g.Expect(m.Conflicts["a"].Reason).To(Equal("TypeConflict"))
	// With a gone, b's values are the import's.
	m = Merge([]Export{b})
	g.Expect(m.Service.Type).To(Equal(mcsv1beta1.ClusterSetIP))
	g.Expect(m.Conflicts).To(BeEmpty())
}

func TestMergeLabels(t *testing.T) {
	g := NewWithT(t)
	a, b := export("a", time.Hour), export("b", time.Minute)
	a.Service.Labels = map[string]string{"tier": "web"}
	b.Service.Labels = map[string]string{"tier": "api"}
	m := Merge([]Export{a, b})
	g.Expect(m.Service.Labels).To(Equal(map[string]string{"tier": "web"}))
	g.Expect(m.Conflicts["b"].Reason).To(Equal("LabelsConflict"))
}
