// Package interpretation says whether the hub's ResourceInterpretations are in
// use: each one's Ready condition (its expressions compile, and it is the one
// used for its kind), and the Interpreted condition of each Placement that
// places an interpreted kind, naming an invalid interpretation and its
// expression. The work generator, the status aggregator and the agents use
// the interpretations (internal/interpretation); this controller only reports.
package interpretation

import (
	"context"
	"errors"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/events"
	"k8s.io/klog/v2"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"

	placementv1alpha1 "github.com/lodestar-dev/lodestar/api/placement/v1alpha1"
	"github.com/lodestar-dev/lodestar/internal/conditions"
	"github.com/lodestar-dev/lodestar/internal/handlers"
	"github.com/lodestar-dev/lodestar/internal/interpretation"
	"github.com/lodestar-dev/lodestar/internal/lookup"
	"github.com/lodestar-dev/lodestar/internal/message"
	"github.com/lodestar-dev/lodestar/internal/patch"
)

// Name is the controller's field owner and event source.
const Name = "lodestar-interpretation"

// Reconciler writes the status of ResourceInterpretations.
type Reconciler struct {
	Client   client.Client
	Recorder events.EventRecorder
	// Interpretations compiles them, shared with the other hub controllers.
	Interpretations *interpretation.Cache
}

// +kubebuilder:rbac:groups=placement.lodestar.dev,resources=resourceinterpretations,verbs=get;list;watch
// +kubebuilder:rbac:groups=placement.lodestar.dev,resources=resourceinterpretations/status,verbs=get;patch;update
// +kubebuilder:rbac:groups=events.k8s.io,resources=events,verbs=create;patch

// Reconcile writes one interpretation's Ready condition when it changes.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	ri := &placementv1alpha1.ResourceInterpretation{}
	if err := r.Client.Get(ctx, req.NamespacedName, ri); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	ctx = ctrl.LoggerInto(ctx, ctrl.LoggerFrom(ctx).WithValues("resourceInterpretation", klog.KObj(ri)))
	set, err := lookup.Interpretations(ctx, r.Client, r.Interpretations)
	if err != nil {
		return ctrl.Result{}, err
	}
	ready := readyCondition(ri, r.Interpretations.Compile(ri), set)
	if ri.Status.ObservedGeneration == ri.Generation && conditions.Same(ri.Status.Conditions, ready) {
		return ctrl.Result{}, nil
	}
	if ready.Status == metav1.ConditionFalse && !conditions.Same(ri.Status.Conditions, ready) {
		r.Recorder.Eventf(ri, nil, corev1.EventTypeWarning, ready.Reason, "Interpret", "%s", ready.Message)
	}
	out := &placementv1alpha1.ResourceInterpretation{ObjectMeta: metav1.ObjectMeta{Name: ri.Name}}
	out.Status.ObservedGeneration = ri.Generation
	out.Status.Conditions = []metav1.Condition{conditions.Merge(ri.Status.Conditions, ready)}
	return ctrl.Result{}, patch.ApplyStatus(ctx, r.Client, out, Name)
}

// readyCondition is ri's Ready condition, compiled as in, among set.
func readyCondition(ri *placementv1alpha1.ResourceInterpretation, in *interpretation.Interpretation, set *interpretation.Set) metav1.Condition {
	c := metav1.Condition{Type: placementv1alpha1.ReadyCondition, Status: metav1.ConditionTrue, Reason: placementv1alpha1.ReasonInterpretationValid,
		ObservedGeneration: ri.Generation}
	kind := kindName(ri.Spec.Target)
	switch {
	case in.Err != nil:
		c.Status, c.Reason = metav1.ConditionFalse, placementv1alpha1.ReasonInvalidExpression
		c.Message = fmt.Sprintf("objects of %s fail until it is fixed: %v", kind, expressionErrors(in.Err))
	case set.Conflict(ri.Name) != "":
		c.Status, c.Reason = metav1.ConditionFalse, placementv1alpha1.ReasonInterpretationConflict
		c.Message = fmt.Sprintf("ResourceInterpretation %s, older, interprets %s: this one is not used", set.Conflict(ri.Name), kind)
	default:
		c.Message = fmt.Sprintf("every expression compiles; %s is read by it", kind)
	}
	c.Message = message.Truncate(c.Message, 4096)
	return c
}

// expressionErrors lists the fields and errors of err's ExpressionErrors.
func expressionErrors(err error) string {
	var out []string
	for _, e := range unjoin(err) {
		var ee *interpretation.ExpressionError
		if errors.As(e, &ee) {
			out = append(out, fmt.Sprintf("%s: %v", ee.Field, ee.Err))
			continue
		}
		out = append(out, e.Error())
	}
	return message.List(out, 4, "; ")
}

func unjoin(err error) []error {
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		return j.Unwrap()
	}
	return []error{err}
}

// kindName is the kind as `kubectl get` names it: Widget.example.com.
func kindName(t placementv1alpha1.InterpretedKind) string {
	if t.Group == "" {
		return t.Kind
	}
	return t.Kind + "." + t.Group
}

// SetupWithManager registers the controller: a change of any interpretation
// may change another's conflict, so each enqueues them all.
func (r *Reconciler) SetupWithManager(mgr ctrl.Manager) error {
	all := handlers.All(mgr.GetClient(), func() client.ObjectList { return &placementv1alpha1.ResourceInterpretationList{} })
	return ctrl.NewControllerManagedBy(mgr).
		Named("interpretation").
		For(&placementv1alpha1.ResourceInterpretation{}, builder.WithPredicates(predicate.GenerationChangedPredicate{})).
		Watches(&placementv1alpha1.ResourceInterpretation{}, handler.EnqueueRequestsFromMapFunc(all),
			builder.WithPredicates(predicate.Funcs{UpdateFunc: func(event.UpdateEvent) bool { return false }})).
		Complete(r)
}
