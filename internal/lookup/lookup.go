// Package lookup is how the hub reconcilers find and relate the objects of the
// hub, read from the manager's cache: the cache's field indexes (indexes.go), a
// Placement's Works (works.go) and PlacementRevisions (revisions.go), what its
// PlacementDecisions may send where and the cluster sets and ClusterProfiles
// behind that (decisions.go, clusters.go), the maps from a changed object to
// the Placements it concerns, for watches (mappers.go), and the label of the
// tenants' hub namespaces (tenants.go). It holds no reconciler: reconcilers
// share it instead of importing one another, and it imports none.
package lookup
