package charts

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"

	placementv1alpha1 "github.com/lodestar-dev/lodestar/api/placement/v1alpha1"
	"github.com/lodestar-dev/lodestar/internal/fleet"
	"github.com/lodestar-dev/lodestar/internal/testenv"
)

// rss is a process's resident memory in bytes, from /proc.
func rss(p *os.Process) (int64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", p.Pid))
	if err != nil {
		return 0, err
	}
	for _, line := range strings.Split(string(b), "\n") {
		if rest, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			kib, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
			return kib << 10, err
		}
	}
	return 0, fmt.Errorf("no VmRSS in /proc/%d/status", p.Pid)
}

// peakRSS samples p's resident memory until stop is called, which returns the
// largest sample and the first error.
func peakRSS(p *os.Process) (stop func() (int64, error)) {
	var peak int64
	var first error
	done, finished := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(finished)
		for {
			n, err := rss(p)
			peak = max(peak, n)
			if first == nil {
				first = err
			}
			select {
			case <-done:
				return
			case <-time.After(20 * time.Millisecond):
			}
		}
	}()
	return func() (int64, error) {
		close(done)
		<-finished
		return peak, first
	}
}

// tenantWith creates a tenant namespace bound to the default cluster set with a
// ConfigMap of about 1 KiB.
func tenantWith(t *testing.T, c client.Client, ns string) {
	g := NewWithT(t)
	g.Expect(c.Create(t.Context(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})).To(Succeed())
	g.Expect(fleet.BindClusterSet(t.Context(), c, ns, placementv1alpha1.DefaultClusterSet)).To(Succeed())
	g.Expect(c.Create(t.Context(), &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "settings"},
		Data: map[string]string{"a": strings.Repeat("x", 1000)}})).To(Succeed())
}

func settingsPlacement(ns, name string, overrides ...placementv1alpha1.Override) *placementv1alpha1.Placement {
	return &placementv1alpha1.Placement{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: placementv1alpha1.PlacementSpec{
			ResourceSelectors: []placementv1alpha1.ResourceSelector{{Version: "v1", Kind: "ConfigMap", Name: "settings"}},
			Scheduling:        placementv1alpha1.Scheduling{ClusterSelector: &metav1.LabelSelector{}},
			Overrides:         overrides,
		},
	}
}

// One tenant's Placements with override bombs (copies that double the object 48
// times, a value expression of len(L)³ values within the cost limit, copies of a
// field into itself) are refused, each naming its rule and the bound; the hub
// manager (a process, as the chart runs it) stays within 50 MiB of its memory
// before them; and another tenant's changes keep rolling out.
func TestOneTenantCannotExhaustTheHub(t *testing.T) {
	g := NewWithT(t)
	ctx := t.Context()
	f := runFleet(t, testenv.StartEmptyHub)
	tenantWith(t, f.hub.Client, "calm")
	tenantWith(t, f.hub.Client, "hostile")
	calm := settingsPlacement("calm", "settings")
	g.Expect(f.hub.Client.Create(ctx, calm)).To(Succeed())
	condition := func(g Gomega, ns, name, ct string) metav1.Condition {
		p := &placementv1alpha1.Placement{}
		g.Expect(f.hub.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, p)).To(Succeed())
		c := meta.FindStatusCondition(p.Status.Conditions, ct)
		g.Expect(c).NotTo(BeNil(), "%s on %s/%s", ct, ns, name)
		return *c
	}
	g.Eventually(func(g Gomega) {
		c := condition(g, "calm", "settings", placementv1alpha1.AvailableCondition)
		g.Expect(c.Status).To(Equal(metav1.ConditionTrue), c.Message)
	}).WithTimeout(2 * testenv.EventuallyTimeout).Should(Succeed())
	before, err := rss(f.hubProcess)
	g.Expect(err).NotTo(HaveOccurred())
	peak := peakRSS(f.hubProcess)

	// 24 rules of two copies each (a rule has at most 32 operations, a Placement
	// 32 rules), each doubling the object.
	doubling := []placementv1alpha1.Override{{Name: "seed", JSONPatch: []placementv1alpha1.JSONPatchOperation{
		{Op: "add", Path: "/metadata/annotations/seed", Value: jsonValue(`"x"`)}}}}
	for i := range 24 {
		doubling = append(doubling, placementv1alpha1.Override{Name: fmt.Sprintf("doubling-%d", i), JSONPatch: []placementv1alpha1.JSONPatchOperation{
			{Op: "copy", From: "/data", Path: placementv1alpha1.OverridePath(fmt.Sprintf("/metadata/annotations/c%d", i))},
			{Op: "copy", From: "/metadata/annotations", Path: placementv1alpha1.OverridePath(fmt.Sprintf("/data/c%d", i))}}})
	}
	l := "[" + strings.Repeat("1,", 39) + "1]"
	into := make([]placementv1alpha1.JSONPatchOperation, 18)
	for i := range into {
		into[i] = placementv1alpha1.JSONPatchOperation{Op: "copy", From: "/data", Path: placementv1alpha1.OverridePath(fmt.Sprintf("/data/x%d", i))}
	}
	for _, p := range []*placementv1alpha1.Placement{
		settingsPlacement("hostile", "doubling", doubling...),
		settingsPlacement("hostile", "cel", placementv1alpha1.Override{Name: "cel", JSONPatch: []placementv1alpha1.JSONPatchOperation{{
			Op: "add", Path: "/data/bomb", ValueExpression: l + ".map(a, " + l + ".map(b, " + l + "))"}}}),
		settingsPlacement("hostile", "into", placementv1alpha1.Override{Name: "into", JSONPatch: into}),
	} {
		g.Expect(f.hub.Client.Create(ctx, p)).To(Succeed())
	}
	g.Eventually(func(g Gomega) {
		c := condition(g, "hostile", "doubling", placementv1alpha1.WorkSynchronizedCondition)
		g.Expect(c.Reason).To(Equal(placementv1alpha1.ReasonOverrideFailed), c.Message)
		g.Expect(c.Message).To(And(MatchRegexp(`rule doubling-\d+, jsonPatch\[[01]\] copy`), ContainSubstring("past the 768 KiB a Work carries")))
		c = condition(g, "hostile", "cel", placementv1alpha1.WorkSynchronizedCondition)
		g.Expect(c.Reason).To(Equal(placementv1alpha1.ReasonOverrideFailed), c.Message)
		g.Expect(c.Message).To(And(ContainSubstring("rule cel, jsonPatch[0] add /data/bomb valueExpression"), ContainSubstring("larger than 64 KiB")))
		c = condition(g, "hostile", "into", placementv1alpha1.RenderedCondition)
		g.Expect(c.Reason).To(Equal(placementv1alpha1.ReasonInvalidOverride), c.Message)
		g.Expect(c.Message).To(ContainSubstring("a field cannot be copied or moved into itself"))
	}).WithTimeout(2 * testenv.EventuallyTimeout).Should(Succeed())

	// The other tenant's change reaches the member.
	g.Expect(retry.RetryOnConflict(retry.DefaultRetry, func() error {
		cm := &corev1.ConfigMap{}
		if err := f.hub.Client.Get(ctx, client.ObjectKey{Namespace: "calm", Name: "settings"}, cm); err != nil {
			return err
		}
		cm.Data["a"] = "changed"
		return f.hub.Client.Update(ctx, cm)
	})).To(Succeed())
	g.Eventually(func(g Gomega) {
		cm := &corev1.ConfigMap{}
		g.Expect(f.member.Client.Get(ctx, client.ObjectKey{Namespace: "calm", Name: "settings"}, cm)).To(Succeed())
		g.Expect(cm.Data).To(HaveKeyWithValue("a", "changed"))
	}).WithTimeout(2 * testenv.EventuallyTimeout).Should(Succeed())

	most, err := peak()
	g.Expect(err).NotTo(HaveOccurred())
	grew := most - before
	t.Logf("hub manager RSS: %d MiB before, grew by at most %d MiB", before>>20, grew>>20)
	g.Expect(grew).To(BeNumerically("<", 50<<20), "the hub manager's memory")
}

func jsonValue(s string) *placementv1alpha1.JSON { return &placementv1alpha1.JSON{Raw: []byte(s)} }
