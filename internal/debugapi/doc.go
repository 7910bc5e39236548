// Package debugapi is the hub manager's debug server: it serves Lodestar's
// debug API (api/debug/v1alpha1, an aggregated API of the hub's API server)
// behind the hub API server's front proxy, checks each request again
// (SubjectAccessReview, the Placement places something on the cluster), and
// sends it through the cluster's agent's tunnel (internal/tunnel); it answers
// the subresources it serves itself (Options.Local), and binds each tunnel to
// the agent ServiceAccount that opened it.
package debugapi
