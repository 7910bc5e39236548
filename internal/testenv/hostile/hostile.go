// Package hostile is the hostile-tenant soak (docs/tenancy.md): a Tenant that
// runs every attack of the threat model, at random, as a tenant types it (YAML
// through its own identity), and a Bystander, another tenant whose ConfigMap
// changes every few seconds and must reach its member all the same. `make
// test` runs it briefly (test/integration), `make bench` for ten minutes with
// the figures: how soon the bystander's changes land, the hub manager's
// memory, and whether anything of the bystander's was deleted.
package hostile

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"
)

// The attacks, each named as the threat model names it.
const (
	AttackHugeTotals     = "huge totals"
	AttackAbsurdRequests = "absurd requests"
	AttackRBACRewrite    = "RBAC rewrites"
	AttackUnservedKind   = "unserved kinds"
	AttackDeepOverrides  = "deep overrides"
	AttackServiceSpam    = "MCS spam"
	// AttackSelfGrant: a namespace admin grants its own ServiceAccount every
	// member (a ConsumerAccessGrant is a platform admin's, cluster-scoped).
	AttackSelfGrant = "self-granted member access"
	// AttackInterpretedExtremes: extreme values of the fields an
	// interpretation reads (InstallInterpreted's Dial).
	AttackInterpretedExtremes = "interpreted extremes"
	// AttackSelfInterpretation: a namespace admin writes a
	// ResourceInterpretation (a platform admin's, cluster-scoped).
	AttackSelfInterpretation = "self-written interpretation"
	// AttackForgedWriter: a Placement that follows dependencies, carrying a
	// last writer of the tenant's choosing (to have a Secret it may not read
	// followed), for a workload that references more objects than a
	// Placement may follow, none of them there.
	AttackForgedWriter = "forged writer"
	// AttackSelfQuota: a namespace admin writes itself a FleetQuota (a
	// platform admin's) of every resource, unbounded.
	AttackSelfQuota = "self-written quota"
	// AttackCELBomb: a clusterExpression or an override's valueExpression
	// that builds a huge string (a chain of replace()) or list
	// (lists.range, a list added to itself under cel.bind).
	AttackCELBomb = "CEL bombs"
	// AttackQuantityExponent: requiredCapacity with a quantity of a huge
	// exponent (minutes of CPU to compare).
	AttackQuantityExponent = "quantity exponents"
	// AttackSecretSweep: a Secret and a Placement of every Secret of the
	// namespace, which holds the revisions' data Secrets (the values of the
	// Secrets other revisions hold): none of those may be placed.
	AttackSecretSweep = "Secret sweeps"
)

// Attacks are every attack Tenant runs.
var Attacks = []string{AttackHugeTotals, AttackAbsurdRequests, AttackRBACRewrite, AttackUnservedKind, AttackDeepOverrides, AttackServiceSpam, AttackSelfGrant,
	AttackInterpretedExtremes, AttackSelfInterpretation, AttackForgedWriter, AttackSelfQuota, AttackCELBomb, AttackQuantityExponent, AttackSecretSweep}

// MaxLive bounds the hostile Placements a Tenant keeps at once; past it the
// oldest goes (with its objects), so that a long run stays a steady load.
const MaxLive = 16

// Tenant runs the attacks through Client (on a hub where InstallInterpreted
// ran), a tenant's own identity with a
// namespace admin's rights in Namespace, against Clusters.
type Tenant struct {
	Client    client.Client
	Namespace string
	Clusters  []string
	Rand      *rand.Rand
	// Every is the pace: one attack each.
	Every time.Duration

	mu sync.Mutex
	// Runs counts the attacks run, by name; Refused those the hub's
	// admission refused outright (a Forbidden or Invalid answer).
	runs, refused map[string]int
	live          [][]*unstructured.Unstructured
	n             int
}

// Counts are the attacks run and refused at admission, by name.
func (t *Tenant) Counts() (runs, refused map[string]int) {
	t.mu.Lock()
	defer t.mu.Unlock()
	return clone(t.runs), clone(t.refused)
}

func clone(m map[string]int) map[string]int {
	out := make(map[string]int, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}

// Run attacks until ctx ends. An error is an unexpected answer of the hub (not
// a refusal).
func (t *Tenant) Run(ctx context.Context) error {
	t.mu.Lock()
	t.runs, t.refused = map[string]int{}, map[string]int{}
	t.mu.Unlock()
	tick := time.NewTicker(t.Every)
	defer tick.Stop()
	// Every attack once, in a random order, then at random.
	first := t.Rand.Perm(len(Attacks))
	for i := 0; ; i++ {
		attack := Attacks[t.Rand.IntN(len(Attacks))]
		if i < len(first) {
			attack = Attacks[first[i]]
		}
		if err := t.attack(ctx, attack); err != nil {
			if ending(ctx, err) {
				return nil
			}
			return fmt.Errorf("%s: %w", attack, err)
		}
		select {
		case <-ctx.Done():
			return nil
		case <-tick.C:
		}
	}
}

// ending tells whether err comes of ctx ending (a client's rate limiter
// refuses a wait past ctx's deadline before the deadline).
func ending(ctx context.Context, err error) bool {
	return ctx.Err() != nil || errors.Is(err, context.DeadlineExceeded) || strings.Contains(err.Error(), "would exceed context deadline")
}

// attack creates one attack's objects (the oldest attack's go past MaxLive).
func (t *Tenant) attack(ctx context.Context, attack string) error {
	t.n++
	name := fmt.Sprintf("h%d", t.n)
	docs := t.documents(attack, name)
	var objs []*unstructured.Unstructured
	refused := false
	for _, doc := range docs {
		obj := &unstructured.Unstructured{}
		if err := yaml.Unmarshal([]byte(doc), &obj.Object); err != nil {
			return fmt.Errorf("the attack's own YAML: %w", err)
		}
		obj.SetNamespace(t.Namespace)
		err := t.Client.Create(ctx, obj)
		switch {
		case apierrors.IsForbidden(err) || apierrors.IsInvalid(err) || apierrors.IsBadRequest(err):
			refused = true
			continue
		case err != nil:
			return err
		}
		objs = append(objs, obj)
	}
	t.mu.Lock()
	t.runs[attack]++
	if refused {
		t.refused[attack]++
	}
	t.live = append(t.live, objs)
	var oldest []*unstructured.Unstructured
	if len(t.live) > MaxLive {
		oldest, t.live = t.live[0], t.live[1:]
	}
	t.mu.Unlock()
	for _, obj := range oldest {
		if err := t.Client.Delete(ctx, obj); client.IgnoreNotFound(err) != nil {
			return err
		}
	}
	return nil
}

// documents are the YAML documents of one attack, named after name.
func (t *Tenant) documents(attack, name string) []string {
	clusters := "[" + strings.Join(t.Clusters, ", ") + "]"
	r := t.Rand
	switch attack {
	case AttackHugeTotals:
		// Totals at and past the cap, divided evenly or by weight.
		replicas := []int64{1 << 30, 1<<30 + 1 + r.Int64N(1<<30-2), 1<<31 - 1}[r.IntN(3)]
		method := []string{"Even", "Weighted"}[r.IntN(2)]
		return []string{deployment(name, replicas, ""), placement(name, clusters, fmt.Sprintf(`
    replicas:
      method: %s
      weights:
        - weight: %d
          min: %d`, method, 1+r.IntN(1000), r.IntN(3)), "apps", "Deployment")}
	case AttackAbsurdRequests:
		cpu := []string{"1e16", "9e18", "1Ei", "100000000000000000000m"}[r.IntN(4)]
		return []string{deployment(name, 1+r.Int64N(1000), cpu), placement(name, clusters, `
    replicas:
      method: Capacity`, "apps", "Deployment")}
	case AttackRBACRewrite:
		rule := []string{
			`{apiGroups: [discovery.k8s.io], resources: [endpointslices], verbs: [create, update]}`,
			`{apiGroups: [""], resources: [endpoints], verbs: [create]}`,
			`{apiGroups: ["*"], resources: ["*"], verbs: ["*"]}`,
			`{apiGroups: [""], resources: [pods/exec], verbs: [create]}`,
		}[r.IntN(4)]
		return []string{fmt.Sprintf(`apiVersion: rbac.authorization.k8s.io/v1
kind: Role
metadata:
  name: %s
rules:
  - apiGroups: [""]
    resources: [configmaps]
    verbs: [get]`, name), placement(name, clusters, "", "rbac.authorization.k8s.io", "Role") + fmt.Sprintf(`
  overrides:
    - name: more
      jsonPatch:
        - op: replace
          path: /rules
          value: [%s]`, rule)}
	case AttackUnservedKind:
		group, kind := []string{"apps", "", fmt.Sprintf("x%d.example.com", r.IntN(1<<20))}[r.IntN(3)], []string{"deployment", "configmap", "Thing", "DEPLOYMENT"}[r.IntN(4)]
		return []string{placement(name, clusters, "", group, kind)}
	case AttackDeepOverrides:
		var ops strings.Builder
		for i := range 32 {
			fmt.Fprintf(&ops, `
        - op: add
          path: /metadata/annotations/a%d
          value: %q`, i, strings.Repeat("x", 1<<r.IntN(12)))
		}
		return []string{fmt.Sprintf(`apiVersion: v1
kind: ConfigMap
metadata:
  name: %s
  annotations: {seed: "x"}
data: {k: v}`, name), placement(name, clusters, "", "", "ConfigMap") + `
  overrides:
    - name: deep
      jsonPatch:` + ops.String() + `
    - name: copies
      jsonPatch:
        - op: copy
          from: /metadata/annotations
          path: /data/copied`}
	case AttackInterpretedExtremes:
		return t.interpretedExtremes(name, clusters)
	case AttackSelfInterpretation:
		return t.selfInterpretation(name)
	case AttackForgedWriter:
		return forgedWriter(name, clusters)
	case AttackCELBomb:
		bomb := celBombs[r.IntN(len(celBombs))]
		if r.IntN(2) == 0 {
			return []string{configMap(name), placement(name, clusters, fmt.Sprintf(`
    clusterExpression: %q`, bomb+".size() > 0"), "", "ConfigMap")}
		}
		return []string{configMap(name), placement(name, clusters, "", "", "ConfigMap") + fmt.Sprintf(`
  overrides:
    - name: bomb
      jsonPatch:
        - op: add
          path: /data/bomb
          valueExpression: %q`, "string("+bomb+".size())")}
	case AttackQuantityExponent:
		q := []string{"1e999999999", "1e20000000", "123456789012345678901234567890"}[r.IntN(3)]
		return []string{configMap(name), placement(name, clusters, fmt.Sprintf(`
    requiredCapacity: {cpu: %q}`, q), "", "ConfigMap")}
	case AttackSecretSweep:
		return []string{fmt.Sprintf(`apiVersion: v1
kind: Secret
metadata:
  name: %s
stringData: {token: %s}`, name, name), fmt.Sprintf(`apiVersion: placement.lodestar.dev/v1alpha1
kind: Placement
metadata:
  name: %s
spec:
  resourceSelectors:
    - {version: v1, kind: Secret}
  scheduling:
    clusterNames: %s`, name, clusters)}
	case AttackSelfQuota:
		return []string{fmt.Sprintf(`apiVersion: placement.lodestar.dev/v1alpha1
kind: FleetQuota
metadata:
  name: %s
spec:
  hard: {requests.cpu: 1e18, pods: 9e18, clusters: "100000"}`, name)}
	case AttackSelfGrant:
		return []string{fmt.Sprintf(`apiVersion: v1
kind: ServiceAccount
metadata:
  name: %s`, name), fmt.Sprintf(`apiVersion: placement.lodestar.dev/v1alpha1
kind: ConsumerAccessGrant
metadata:
  name: %s-%s
spec:
  consumers:
    - {namespace: %s, name: %s}
  clusterSet: lodestar-fleet
  rules:
    - {apiGroups: ["*"], resources: ["*"], verbs: ["*"]}`, t.Namespace, name, t.Namespace, name)}
	default: // AttackServiceSpam
		docs := []string{}
		for i := range 5 {
			docs = append(docs, fmt.Sprintf(`apiVersion: v1
kind: Service
metadata:
  name: %s-%d
  labels: {spam: %q}
spec:
  ports: [{port: %d}]`, name, i, name, 1+r.IntN(65000)))
		}
		return append(docs, placement(name, clusters, "", "", "Service")+`
  services:
    export: All`)
	}
}

func deployment(name string, replicas int64, cpu string) string {
	if cpu == "" {
		return deploymentWith(name, replicas, "")
	}
	return deploymentWith(name, replicas, fmt.Sprintf(`
          resources:
            requests: {cpu: %q}`, cpu))
}

// deploymentWith is a paused Deployment of replicas whose container has the
// fields of container (indented under it).
func deploymentWith(name string, replicas int64, container string) string {
	return fmt.Sprintf(`apiVersion: apps/v1
kind: Deployment
metadata:
  name: %s
spec:
  paused: true
  replicas: %d
  selector:
    matchLabels: {app: %s}
  template:
    metadata:
      labels: {app: %s}
    spec:
      containers:
        - name: app
          image: nginx:1.27%s`, name, replicas, name, name, container)
}

// celBombs are CEL expressions that build a huge string or list at a few
// cost units each (before what CEL builds was bounded).
var celBombs = func() []string {
	x := "'ab'.replace('', 'abcdefghijklmnopqrstuvwxyz0123456789')"
	y := x + ".replace('', " + x + ")"
	return []string{
		"'aaaaaaaaaa'" + strings.Repeat(".replace('a', 'aaaaaaaaaa')", 9),
		y + ".replace('', " + y + ")",
		"[1, 2, 3, 4].map(i, 'x').join('').replace('x', '" + strings.Repeat("y", 64) + "').replace('y', '" + strings.Repeat("z", 64) + "').replace('z', '" + strings.Repeat("w", 64) + "')",
		"'x'.replace('', '" + strings.Repeat("y", 100) + "').replace('y', '" + strings.Repeat("z", 100) + "').replace('z', '" + strings.Repeat("w", 100) + "').split('')",
	}
}()

// configMap is the attack's ConfigMap.
func configMap(name string) string {
	return fmt.Sprintf(`apiVersion: v1
kind: ConfigMap
metadata:
  name: %s
data: {k: v}`, name)
}

// placement selects the attack's objects of group and kind (by name, or by its
// label for Services).
func placement(name, clusters, scheduling, group, kind string) string {
	selector := fmt.Sprintf(`
    - group: %q
      version: v1
      kind: %s
      name: %s`, group, kind, name)
	if kind == "Service" {
		selector = fmt.Sprintf(`
    - version: v1
      kind: Service
      labelSelector:
        matchLabels: {spam: %q}`, name)
	}
	return fmt.Sprintf(`apiVersion: placement.lodestar.dev/v1alpha1
kind: Placement
metadata:
  name: %s
spec:
  resourceSelectors:%s
  scheduling:
    clusterNames: %s%s`, name, selector, clusters, scheduling)
}

// Bystander is another tenant: its ConfigMap Name in Namespace on the hub,
// placed on a member, changed every Every; each change's value must reach
// the member.
type Bystander struct {
	Hub, Member     client.Client
	Namespace, Name string
	Every           time.Duration
	// Within is how long a change may take before it counts as missed.
	Within time.Duration

	mu        sync.Mutex
	latencies []time.Duration
	missed    []string
	// uid is the member copy's UID when first seen; deleted counts the times
	// it was seen gone or made anew since.
	uid     string
	deleted int
}

// Run changes the ConfigMap until ctx ends, each change once the last one
// landed (or was missed).
func (b *Bystander) Run(ctx context.Context) error {
	tick := time.NewTicker(b.Every)
	defer tick.Stop()
	for i := 0; ; i++ {
		if err := b.change(ctx, fmt.Sprintf("v%d-%d", i, time.Now().UnixNano())); err != nil {
			if ending(ctx, err) {
				return nil
			}
			return err
		}
		select {
		case <-ctx.Done():
			return nil
		case <-tick.C:
		}
	}
}

func (b *Bystander) change(ctx context.Context, value string) error {
	key := client.ObjectKey{Namespace: b.Namespace, Name: b.Name}
	patch := []byte(fmt.Sprintf(`{"data":{"k":%q}}`, value))
	cm := &unstructured.Unstructured{}
	cm.SetAPIVersion("v1")
	cm.SetKind("ConfigMap")
	cm.SetNamespace(b.Namespace)
	cm.SetName(b.Name)
	start := time.Now()
	if err := b.Hub.Patch(ctx, cm, client.RawPatch("application/merge-patch+json", patch)); err != nil {
		return err
	}
	deadline := start.Add(b.Within)
	poll := time.NewTicker(20 * time.Millisecond)
	defer poll.Stop()
	for {
		got := &unstructured.Unstructured{}
		got.SetAPIVersion("v1")
		got.SetKind("ConfigMap")
		err := b.Member.Get(ctx, key, got)
		if client.IgnoreNotFound(err) != nil && ctx.Err() == nil {
			return err
		}
		b.seen(err, string(got.GetUID()))
		if v, _, _ := unstructured.NestedString(got.Object, "data", "k"); v == value {
			b.mu.Lock()
			b.latencies = append(b.latencies, time.Since(start))
			b.mu.Unlock()
			return nil
		}
		if time.Now().After(deadline) {
			b.mu.Lock()
			b.missed = append(b.missed, fmt.Sprintf("%s (changed at %s)", value, start.Format("15:04:05.000")))
			b.mu.Unlock()
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-poll.C:
		}
	}
}

// Settle makes one change and waits for it to land (within Within), then
// forgets it: a start for the figures once the bystander is placed.
func (b *Bystander) Settle(ctx context.Context) error {
	if err := b.change(ctx, fmt.Sprintf("settle-%d", time.Now().UnixNano())); err != nil {
		return err
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	missed := b.missed
	b.latencies, b.missed = nil, nil
	if len(missed) > 0 {
		return fmt.Errorf("the bystander's first change did not reach its member within %s", b.Within)
	}
	return nil
}

// seen records what one read of the member's copy found (its UID, or an
// error): a copy gone, or made anew, once it was there counts as deleted.
func (b *Bystander) seen(err error, uid string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	switch {
	case apierrors.IsNotFound(err) && b.uid != "":
		b.deleted++
		b.uid = ""
	case err == nil && b.uid == "":
		b.uid = uid
	case err == nil && uid != b.uid:
		b.deleted++
		b.uid = uid
	}
}

// Deleted is how often the member's copy was found deleted (or made anew)
// after it was first there: nothing of the bystander's may be.
func (b *Bystander) Deleted() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.deleted
}

// Results are how long the changes took to land, sorted, and those that did
// not land within Within.
func (b *Bystander) Results() (latencies []time.Duration, missed []string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	out := slices.Clone(b.latencies)
	slices.Sort(out)
	return out, slices.Clone(b.missed)
}

// Quantile is the q-quantile (0 to 1) of sorted durations; 0 for none.
func Quantile(sorted []time.Duration, q float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	return sorted[min(int(q*float64(len(sorted))), len(sorted)-1)]
}

// forgedWriter is a Deployment whose pod references more Secrets than a
// Placement may follow (selection.MaxFollowed), and its Placement, which
// follows them claiming a cluster admin as its last writer.
func forgedWriter(name, clusters string) []string {
	var refs strings.Builder
	for i := range 1100 {
		fmt.Fprintf(&refs, `
            - secretRef: {name: %s-%d}`, name, i)
	}
	return []string{deploymentWith(name, 1, "\n          envFrom:"+refs.String()),
		strings.Replace(placement(name, clusters, "", "apps", "Deployment"), "metadata:\n", `metadata:
  annotations:
    placement.lodestar.dev/last-writer: kubernetes-admin
    placement.lodestar.dev/last-writer-groups: system:masters
`, 1) + `
  dependencies: Follow`}
}
