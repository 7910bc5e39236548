// Package approver is an example of Lodestar's External rollout strategy: a
// controller, run by a platform team, that lets a Placement's new revision
// reach its clusters in waves, each only while a health metric is good. It
// writes RolloutApprovals (the strategy's only input) and reads nothing but
// the Placement's status: which clusters wait for the target revision
// (Pending) and which are still on their way to it (Updating, Soaking).
// See docs/extending.md.
package approver

import (
	"cmp"
	"context"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	placementv1alpha1 "github.com/lodestar-dev/lodestar/api/placement/v1alpha1"
)

// Metric is the health the waves are gated on, for a Placement (an error
// rate, say): lower is better.
type Metric func(ctx context.Context, placement *placementv1alpha1.Placement) (float64, error)

// Approver approves a Placement's clusters in waves.
type Approver struct {
	Client client.Client
	Metric Metric
	// Threshold: a wave starts only while the metric is below it.
	Threshold float64
	// WaveSize is how many clusters a wave approves (default 1).
	WaveSize int
	// Recheck is how often a held wave reads the metric again (default 10s).
	Recheck time.Duration
}

// Reconcile approves the next wave of one Placement with the External strategy.
func (a *Approver) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	p := &placementv1alpha1.Placement{}
	if err := a.Client.Get(ctx, req.NamespacedName, p); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	rollout := p.Status.Rollout
	if p.Spec.Strategy.Type != placementv1alpha1.RolloutExternal || rollout == nil || rollout.TargetRevision == "" {
		return ctrl.Result{}, nil
	}
	next, busy := wave(rollout, max(a.WaveSize, 1))
	if busy || len(next) == 0 {
		return ctrl.Result{}, nil // The wave under way is watched through the Placement's status.
	}
	value, err := a.Metric(ctx, p)
	if err != nil {
		return ctrl.Result{}, fmt.Errorf("reading the metric of %s: %w", req, err)
	}
	log := ctrl.LoggerFrom(ctx).WithValues("revision", rollout.TargetRevision, "clusters", next, "metric", value)
	if value >= a.Threshold {
		log.Info("Holding the next wave: the metric is not below the threshold", "threshold", a.Threshold)
		return ctrl.Result{RequeueAfter: cmp.Or(a.Recheck, 10*time.Second)}, nil
	}
	approval := &placementv1alpha1.RolloutApproval{
		ObjectMeta: metav1.ObjectMeta{Namespace: p.Namespace, Name: fmt.Sprintf("%s-%s", rollout.TargetRevision, next[0])},
		Spec:       placementv1alpha1.RolloutApprovalSpec{Placement: p.Name, Revision: rollout.TargetRevision, Clusters: next},
	}
	if err := a.Client.Create(ctx, approval); err != nil && !apierrors.IsAlreadyExists(err) {
		return ctrl.Result{}, err
	}
	log.Info("Approved a wave")
	return ctrl.Result{}, nil
}

// wave is the next wave: up to size of the clusters waiting for the target
// revision, by name; busy when a wave is still on its way (a cluster Updating
// or Soaking at the target).
func wave(r *placementv1alpha1.RolloutStatus, size int) (next []string, busy bool) {
	for _, c := range r.Clusters {
		switch c.State {
		case placementv1alpha1.ClusterUpdating, placementv1alpha1.ClusterSoaking:
			return nil, true
		case placementv1alpha1.ClusterPending:
			next = append(next, c.Name)
		}
	}
	slices.Sort(next)
	return next[:min(size, len(next))], false
}

// SetupWithManager reconciles Placements.
func (a *Approver) SetupWithManager(mgr ctrl.Manager) error {
	return ctrl.NewControllerManagedBy(mgr).Named("wave-approver").For(&placementv1alpha1.Placement{}).Complete(a)
}

// HTTPMetric reads the metric from url, whose body is a number (a
// recording rule's value behind a small exporter, say), with the
// Placement's namespace and name in the query.
func HTTPMetric(url string) Metric {
	c := &http.Client{Timeout: 10 * time.Second}
	return func(ctx context.Context, p *placementv1alpha1.Placement) (float64, error) {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		if err != nil {
			return 0, err
		}
		q := req.URL.Query()
		q.Set("namespace", p.Namespace)
		q.Set("placement", p.Name)
		req.URL.RawQuery = q.Encode()
		resp, err := c.Do(req)
		if err != nil {
			return 0, err
		}
		defer func() { _ = resp.Body.Close() }()
		body, err := io.ReadAll(io.LimitReader(resp.Body, 64))
		if err != nil {
			return 0, err
		}
		if resp.StatusCode != http.StatusOK {
			return 0, fmt.Errorf("%s answered %s", url, resp.Status)
		}
		return strconv.ParseFloat(strings.TrimSpace(string(body)), 64)
	}
}
