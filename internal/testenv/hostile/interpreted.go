package hostile

import (
	"context"
	"fmt"
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"
)

// InterpretedGroup is the group of Dial, the custom kind the soak's platform
// admin interprets (InstallInterpreted), so that a tenant attacks a kind
// Lodestar reads by CEL: its replicas at /spec/size, what a replica requests
// from a list the tenant writes. The interpretation's health and requests
// are quadratic in that list: a long one takes them past their cost limit,
// which must fail that Dial at once and slow nobody else.
const InterpretedGroup = "hostile.lodestar.example"

// interpretedObjects are Dial's CRD (on the hub and the members) and its
// ResourceInterpretation (on the hub).
var interpretedObjects = []string{`apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: dials.` + InterpretedGroup + `
spec:
  group: ` + InterpretedGroup + `
  names: {kind: Dial, listKind: DialList, plural: dials, singular: dial}
  scope: Namespaced
  versions:
  - name: v1
    served: true
    storage: true
    subresources: {status: {}}
    schema:
      openAPIV3Schema: {type: object, x-kubernetes-preserve-unknown-fields: true}`, `apiVersion: placement.lodestar.dev/v1alpha1
kind: ResourceInterpretation
metadata:
  name: dials.` + InterpretedGroup + `
spec:
  target: {group: ` + InterpretedGroup + `, kind: Dial}
  health:
    # Quadratic in the tenant's list, on purpose: past the cost limit it
    # fails the Dial at once, on the member.
    expression: |
      cel.bind(distinct, has(self.spec.parts) ? self.spec.parts.filter(p, self.spec.parts.exists(q, q == p)).size() : 0,
        has(self.status) && has(self.status.ready) && self.status.ready ? 'Healthy' : 'Progressing')
  replicas:
    path: /spec/size
    # Quadratic too: on the hub, in the work generator.
    requests: "has(self.spec.parts) ? self.spec.parts.filter(p, self.spec.parts.exists(q, q == p)).map(p, {'cpu': p}) : []"
  dependencies:
    expression: "has(self.spec.needs) ? self.spec.needs.map(n, {'kind': 'ConfigMap', 'name': n}) : []"
  aggregate:
    expression: "{'ready': clusters.all(c, has(c.status.ready) && c.status.ready)}"`}

// InstallInterpreted installs Dial's CRD on the hub and the members, and its
// ResourceInterpretation on the hub, as a platform admin does (once: what is
// there already stays).
func InstallInterpreted(ctx context.Context, hub client.Client, members ...client.Client) error {
	for i, doc := range interpretedObjects {
		obj := &unstructured.Unstructured{}
		if err := yaml.Unmarshal([]byte(doc), &obj.Object); err != nil {
			return err
		}
		targets := []client.Client{hub}
		if i == 0 {
			targets = append(targets, members...)
		}
		for _, c := range targets {
			if err := c.Create(ctx, obj.DeepCopy()); client.IgnoreAlreadyExists(err) != nil {
				return fmt.Errorf("installing %s %s: %w", obj.GetKind(), obj.GetName(), err)
			}
		}
	}
	return nil
}

// interpretedExtremes is a Dial with what a tenant may write at its extreme:
// a size past what a division takes, requests of absurd quantities or of more
// entries than a requests expression may yield, and thousands of dependencies,
// divided evenly or by capacity.
func (t *Tenant) interpretedExtremes(name, clusters string) []string {
	r := t.Rand
	size := []int64{1 << 30, 1<<31 - 1, 1 << 40}[r.IntN(3)]
	parts := make([]string, []int{1, 300, 5000}[r.IntN(3)])
	for i := range parts {
		parts[i] = []string{`"9e18"`, `"1Ei"`, `"250m"`}[r.IntN(3)]
	}
	needs := make([]string, []int{0, 2000}[r.IntN(2)])
	for i := range needs {
		needs[i] = fmt.Sprintf("%q", fmt.Sprintf("cm-%d", i))
	}
	method := []string{"Even", "Capacity"}[r.IntN(2)]
	return []string{fmt.Sprintf(`apiVersion: %s/v1
kind: Dial
metadata:
  name: %s
spec:
  size: %d
  parts: [%s]
  needs: [%s]`, InterpretedGroup, name, size, strings.Join(parts, ", "), strings.Join(needs, ", ")),
		placement(name, clusters, fmt.Sprintf(`
    replicas:
      method: %s`, method), InterpretedGroup, "Dial")}
}

// selfInterpretation is a tenant writing a ResourceInterpretation (a
// platform admin's, cluster-scoped) that would read every ConfigMap as
// healthy, or re-divide Dials at a path of its choosing.
func (t *Tenant) selfInterpretation(name string) []string {
	return []string{fmt.Sprintf(`apiVersion: placement.lodestar.dev/v1alpha1
kind: ResourceInterpretation
metadata:
  name: %s-%s
spec:
  target: {group: %s, kind: Dial}
  replicas: {path: /metadata/labels/size}`, t.Namespace, name, InterpretedGroup)}
}
