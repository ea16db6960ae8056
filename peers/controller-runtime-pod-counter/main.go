// controller-runtime-pod-counter: pod-counter written natively in Go with
// controller-runtime, with exactly the plugin's semantics (plugins/pod-counter), so
// `make bench` can put the host next to the native controller an engineer would write
// instead: every Pod and Node create, delete and label change (metadata-only watches,
// controller-runtime's LabelChangedPredicate) wakes one fixed key; a recount writes the
// count as the label `pod-counter.example.com/count` on the control-plane Nodes, then
// records a `Counted` Event (events.k8s.io/v1, written before the mark, as the plugin
// does: an asynchronous recorder could lose one the mark already claims) and sets the
// label `pod-counter.example.com/counted=true` on at most 50 uncounted Pods, and runs
// again at once while more remain.
//
// Not part of the product: built by `make bench` only.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"strconv"
	"time"

	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	"sigs.k8s.io/controller-runtime/pkg/metrics/server"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
)

const (
	countLabel   = "pod-counter.example.com/count"
	countedLabel = "pod-counter.example.com/counted"
	// batch is the Pods marked per recount, as the plugin's BATCH.
	batch = 50
	key   = "pod-count"
)

var controlPlaneRoles = []string{"node-role.kubernetes.io/control-plane", "node-role.kubernetes.io/master"}

type counter struct {
	client.Client
	instance string
}

func main() {
	qps := flag.Float64("qps", 20, "client requests per second (controller-runtime's default)")
	burst := flag.Int("burst", 30, "client burst")
	flag.Parse()
	ctrl.SetLogger(zap.New())
	if err := run(float32(*qps), *burst); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}

func run(qps float32, burst int) error {
	config := ctrl.GetConfigOrDie()
	config.QPS, config.Burst = qps, burst
	mgr, err := manager.New(config, manager.Options{
		Metrics:                server.Options{BindAddress: "0"},
		HealthProbeBindAddress: "0",
	})
	if err != nil {
		return err
	}
	host, _ := os.Hostname()
	fixed := handler.EnqueueRequestsFromMapFunc(func(context.Context, client.Object) []reconcile.Request {
		return []reconcile.Request{{NamespacedName: types.NamespacedName{Name: key}}}
	})
	labels := builder.WithPredicates(predicate.LabelChangedPredicate{})
	err = ctrl.NewControllerManagedBy(mgr).
		Named("pod-counter").
		WatchesMetadata(&corev1.Pod{}, fixed, labels).
		WatchesMetadata(&corev1.Node{}, fixed, labels).
		WithOptions(controller.Options{MaxConcurrentReconciles: 1}).
		Complete(&counter{Client: mgr.GetClient(), instance: host})
	if err != nil {
		return err
	}
	return mgr.Start(ctrl.SetupSignalHandler())
}

// Reconcile is one recount.
func (c *counter) Reconcile(ctx context.Context, _ reconcile.Request) (reconcile.Result, error) {
	pods := metadataList("PodList")
	if err := c.List(ctx, pods); err != nil {
		return reconcile.Result{}, err
	}
	nodes := metadataList("NodeList")
	if err := c.List(ctx, nodes); err != nil {
		return reconcile.Result{}, err
	}
	count := strconv.Itoa(len(pods.Items))
	for _, node := range controlPlane(nodes.Items) {
		if node.Labels[countLabel] != count {
			if err := c.label(ctx, &node, countLabel, count); err != nil {
				return reconcile.Result{}, err
			}
		}
	}
	var uncounted []metav1.PartialObjectMetadata
	for _, pod := range pods.Items {
		if _, done := pod.Labels[countedLabel]; !done {
			uncounted = append(uncounted, pod)
		}
	}
	for i := 0; i < len(uncounted) && i < batch; i++ {
		if err := c.mark(ctx, &uncounted[i], len(pods.Items)); err != nil {
			return reconcile.Result{}, err
		}
	}
	if len(uncounted) > batch {
		return reconcile.Result{RequeueAfter: time.Nanosecond}, nil
	}
	return reconcile.Result{}, nil
}

// mark records the Pod's Counted Event, then labels it counted.
func (c *counter) mark(ctx context.Context, pod *metav1.PartialObjectMetadata, total int) error {
	event := &eventsv1.Event{
		// Named as client-go's recorders name Events: the object and a timestamp.
		ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("%s.%x", pod.Name, time.Now().UnixNano()), Namespace: pod.Namespace},
		EventTime:  metav1.NowMicro(),
		Regarding: corev1.ObjectReference{APIVersion: "v1", Kind: "Pod", Name: pod.Name,
			Namespace: pod.Namespace, UID: pod.UID},
		Reason: "Counted", Action: "Count", Type: corev1.EventTypeNormal,
		Note:                fmt.Sprintf("counted; the cluster has %d Pods", total),
		ReportingController: "controller-runtime-pod-counter",
		ReportingInstance:   c.instance,
	}
	if err := c.Create(ctx, event); apierrors.IsForbidden(err) {
		return nil // its namespace is going: tried on a later count
	} else if err != nil {
		return err
	}
	pod.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("Pod"))
	return client.IgnoreNotFound(c.label(ctx, pod, countedLabel, "true"))
}

// label merge-patches one label of obj.
func (c *counter) label(ctx context.Context, obj *metav1.PartialObjectMetadata, key, value string) error {
	patch := fmt.Sprintf(`{"metadata":{"labels":{%q:%q}}}`, key, value)
	return c.Patch(ctx, obj, client.RawPatch(types.MergePatchType, []byte(patch)))
}

func metadataList(kind string) *metav1.PartialObjectMetadataList {
	list := &metav1.PartialObjectMetadataList{}
	list.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind(kind))
	return list
}

// controlPlane is the Nodes with the first control-plane role label any Node carries.
func controlPlane(nodes []metav1.PartialObjectMetadata) []metav1.PartialObjectMetadata {
	for _, role := range controlPlaneRoles {
		var found []metav1.PartialObjectMetadata
		for _, n := range nodes {
			if _, ok := n.Labels[role]; ok {
				n.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("Node"))
				found = append(found, n)
			}
		}
		if len(found) > 0 {
			return found
		}
	}
	return nil
}
