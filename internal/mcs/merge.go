// Package mcs is the Multicluster Services API's merge of exports, as KEP-1645
// says: the properties that cannot merge take the oldest export's value, ports
// are the union (merged first by name, then by protocol and port), and every
// export involved in a conflict is told so, naming the export whose value won.
package mcs

import (
	"cmp"
	"fmt"
	"maps"
	"reflect"
	"slices"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	mcsv1beta1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"

	servicesv1alpha1 "github.com/lodestar-dev/lodestar/api/services/v1alpha1"
)

// Export is one valid export of a namespace/name.
type Export struct {
	// Cluster is the exporting cluster.
	Cluster string
	// Created is the ServiceExport's creation time.
	Created metav1.Time
	// Service are the exported Service's properties.
	Service servicesv1alpha1.ServiceProperties
	// UID is the export's report's UID on the hub.
	UID types.UID
}

// Conflict is an export's part in the conflicts of a merge.
type Conflict struct {
	// Reason is the first of the KEP's reasons that applies (in the order of
	// reasons).
	Reason string
	// Message names every conflict and the export whose value is used.
	Message string
}

// Merged is the import of a namespace/name.
type Merged struct {
	// Service are the merged properties.
	Service servicesv1alpha1.ServiceProperties
	// Oldest is the cluster whose export's values win.
	Oldest string
	// Conflicts are the conflicts of each export involved, by cluster; an export
	// not in it has none.
	Conflicts map[string]Conflict
}

// reasons are the KEP's conflict reasons in the order a Conflict names them.
var reasons = []mcsv1beta1.ServiceExportConditionReason{
	mcsv1beta1.ServiceExportReasonTypeConflict,
	mcsv1beta1.ServiceExportReasonPortConflict,
	mcsv1beta1.ServiceExportReasonSessionAffinityConflict,
	mcsv1beta1.ServiceExportReasonSessionAffinityConfigConflict,
	mcsv1beta1.ServiceExportReasonIPFamilyConflict,
	mcsv1beta1.ServiceExportReasonInternalTrafficPolicyConflict,
	mcsv1beta1.ServiceExportReasonTrafficDistributionConflict,
	mcsv1beta1.ServiceExportReasonLabelsConflict,
	mcsv1beta1.ServiceExportReasonAnnotationsConflict,
}

// Oldest sorts exports oldest first, by creation time and then by cluster name
// (so that exports made in the same second order the same way everywhere).
func Oldest(exports []Export) {
	slices.SortStableFunc(exports, func(a, b Export) int {
		if c := a.Created.Compare(b.Created.Time); c != 0 {
			return c
		}
		return cmp.Compare(a.Cluster, b.Cluster)
	})
}

// Merge merges exports (at least one) into an import.
func Merge(exports []Export) Merged {
	exports = slices.Clone(exports)
	Oldest(exports)
	first := exports[0]
	m := Merged{Service: first.Service, Oldest: first.Cluster}
	m.Service.Ports = nil
	found := map[string]map[mcsv1beta1.ServiceExportConditionReason][]string{}
	conflict := func(cluster string, reason mcsv1beta1.ServiceExportConditionReason, what string) {
		if found[cluster] == nil {
			found[cluster] = map[mcsv1beta1.ServiceExportConditionReason][]string{}
		}
		found[cluster][reason] = append(found[cluster][reason], what)
	}
	for _, e := range exports {
		for _, p := range e.Service.Ports {
			if why := addPort(&m.Service.Ports, p); why != "" {
				conflict(e.Cluster, mcsv1beta1.ServiceExportReasonPortConflict, why)
			}
		}
		if e.Cluster == first.Cluster {
			continue
		}
		for _, d := range differences(first.Service, e.Service) {
			conflict(e.Cluster, d.reason, d.what)
		}
	}
	// The oldest export is involved in every conflict: it is told each one.
	for cluster, rs := range found {
		if cluster == first.Cluster {
			continue
		}
		for r, whats := range rs {
			for _, w := range whats {
				conflict(first.Cluster, r, fmt.Sprintf("%s on %s", w, cluster))
			}
		}
	}
	// Ports that only some clusters export are served by those only: every
	// export is told the union differs from what some export.
	if partial := partialPorts(exports, m.Service.Ports); partial != "" {
		for _, e := range exports {
			conflict(e.Cluster, mcsv1beta1.ServiceExportReasonPortConflict, partial)
		}
	}
	if len(found) == 0 {
		return m
	}
	m.Conflicts = map[string]Conflict{}
	for cluster, rs := range found {
		var c Conflict
		var parts []string
		for _, r := range reasons {
			if len(rs[r]) == 0 {
				continue
			}
			if c.Reason == "" {
				c.Reason = string(r)
			}
			parts = append(parts, fmt.Sprintf("%s: %s", r, strings.Join(rs[r], "; ")))
		}
		c.Message = fmt.Sprintf("%s; the oldest export (%s's) wins", strings.Join(parts, ". "), first.Cluster)
		m.Conflicts[cluster] = c
	}
	return m
}

// addPort adds p to ports unless a port of the same name, or else of the same
// protocol and port, is there: then p is dropped, and a difference is a
// conflict, described.
func addPort(ports *[]mcsv1beta1.ServicePort, p mcsv1beta1.ServicePort) string {
	p.Protocol = cmp.Or(p.Protocol, "TCP")
	for _, q := range *ports {
		switch {
		case p.Name != "" && q.Name == p.Name:
			if q.Port != p.Port || q.Protocol != p.Protocol || !reflect.DeepEqual(q.AppProtocol, p.AppProtocol) {
				return fmt.Sprintf("port %s is %s, not %s", p.Name, portString(p), portString(q))
			}
			return ""
		case q.Port == p.Port && q.Protocol == p.Protocol:
			if q.Name != p.Name || !reflect.DeepEqual(q.AppProtocol, p.AppProtocol) {
				return fmt.Sprintf("port %s is named %q, not %q", portString(p), p.Name, q.Name)
			}
			return ""
		}
	}
	*ports = append(*ports, p)
	return ""
}

// partialPorts describes which clusters export which ports when some export
// fewer than the union, or is "".
func partialPorts(exports []Export, union []mcsv1beta1.ServicePort) string {
	var parts []string
	partial := false
	for _, e := range exports {
		var mine []string
		for _, p := range union {
			if slices.ContainsFunc(e.Service.Ports, func(q mcsv1beta1.ServicePort) bool {
				return q.Port == p.Port && cmp.Or(q.Protocol, "TCP") == p.Protocol && q.Name == p.Name
			}) {
				mine = append(mine, portName(p))
			}
		}
		partial = partial || len(mine) < len(union)
		parts = append(parts, fmt.Sprintf("%s exports %s", e.Cluster, cmp.Or(strings.Join(mine, ", "), "none of them")))
	}
	if !partial {
		return ""
	}
	return fmt.Sprintf("the import's ports are the union, and not every cluster exports each (%s)", strings.Join(parts, "; "))
}

func portName(p mcsv1beta1.ServicePort) string {
	if p.Name == "" {
		return portString(p)
	}
	return p.Name + " " + portString(p)
}

func portString(p mcsv1beta1.ServicePort) string {
	return fmt.Sprintf("%d/%s", p.Port, p.Protocol)
}

type difference struct {
	reason mcsv1beta1.ServiceExportConditionReason
	what   string
}

// differences are the properties of b that cannot merge with a's.
func differences(a, b servicesv1alpha1.ServiceProperties) []difference {
	var out []difference
	add := func(r mcsv1beta1.ServiceExportConditionReason, same bool, what string, av, bv any) {
		if !same {
			out = append(out, difference{r, fmt.Sprintf("%s is %v, not %v", what, show(bv), show(av))})
		}
	}
	add(mcsv1beta1.ServiceExportReasonTypeConflict, a.Type == b.Type, "type", a.Type, b.Type)
	add(mcsv1beta1.ServiceExportReasonSessionAffinityConflict, cmp.Or(a.SessionAffinity, "None") == cmp.Or(b.SessionAffinity, "None"), "sessionAffinity", a.SessionAffinity, b.SessionAffinity)
	add(mcsv1beta1.ServiceExportReasonSessionAffinityConfigConflict, reflect.DeepEqual(a.SessionAffinityConfig, b.SessionAffinityConfig), "sessionAffinityConfig", a.SessionAffinityConfig, b.SessionAffinityConfig)
	add(mcsv1beta1.ServiceExportReasonIPFamilyConflict, slices.Equal(a.IPFamilies, b.IPFamilies), "ipFamilies", a.IPFamilies, b.IPFamilies)
	add(mcsv1beta1.ServiceExportReasonInternalTrafficPolicyConflict, reflect.DeepEqual(a.InternalTrafficPolicy, b.InternalTrafficPolicy), "internalTrafficPolicy", a.InternalTrafficPolicy, b.InternalTrafficPolicy)
	add(mcsv1beta1.ServiceExportReasonTrafficDistributionConflict, reflect.DeepEqual(a.TrafficDistribution, b.TrafficDistribution), "trafficDistribution", a.TrafficDistribution, b.TrafficDistribution)
	add(mcsv1beta1.ServiceExportReasonLabelsConflict, maps.Equal(a.Labels, b.Labels), "exportedLabels", a.Labels, b.Labels)
	add(mcsv1beta1.ServiceExportReasonAnnotationsConflict, maps.Equal(a.Annotations, b.Annotations), "exportedAnnotations", a.Annotations, b.Annotations)
	return out
}

// show prints a property's value, dereferenced, "unset" for nothing.
func show(v any) string {
	rv := reflect.ValueOf(v)
	if !rv.IsValid() || (rv.Kind() == reflect.Pointer || rv.Kind() == reflect.Map || rv.Kind() == reflect.Slice) && rv.IsNil() {
		return "unset"
	}
	if rv.Kind() == reflect.Pointer {
		return fmt.Sprint(rv.Elem().Interface())
	}
	if s := fmt.Sprint(v); s != "" {
		return s
	}
	return "unset"
}

// Endpoints counts the endpoints of exported slices.
func Endpoints(slices []servicesv1alpha1.Slice) int {
	n := 0
	for _, s := range slices {
		n += len(s.Endpoints)
	}
	return n
}
