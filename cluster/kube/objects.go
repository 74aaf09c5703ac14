package kube

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	autoscalingv1 "k8s.io/api/autoscaling/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"kpbench.dev/kpbench/cluster"
)

// scenarioNamespace is the namespace an object is shown in when its manifest gave none:
// the run's namespace is the cluster's business, the manifests name their objects as
// they wrote them.
const scenarioNamespace = "default"

// idlePort is where netexec listens in a scenario's pod that declares no port (its
// client pods), so that it can send probes.
const idlePort = 8080

// scenarioNS is the namespace the manifests gave an object (default "default").
func (c *Cluster) scenarioNS(kind, name string) string {
	c.nsMu.Lock()
	defer c.nsMu.Unlock()
	if ns, ok := c.ns[kind+"/"+name]; ok {
		return ns
	}
	return scenarioNamespace
}

// realNode maps a scenario's node name (node-N) to the cluster's.
func (c *Cluster) realNode(name string) string {
	if rest, ok := strings.CutPrefix(name, "node-"); ok {
		if i, err := strconv.Atoi(rest); err == nil && i >= 0 && i < len(c.nodes) {
			return c.nodes[i].Name
		}
	}
	return name
}

// labNode maps a cluster node name to the scenario's (node-N).
func (c *Cluster) labNode(name string) string {
	for i, n := range c.nodes {
		if n.Name == name {
			return "node-" + strconv.Itoa(i)
		}
	}
	return name
}

// changed counts a change of the objects and reads them again.
func (c *Cluster) changed(ctx context.Context) error {
	c.rv.Add(1)
	return c.refresh(ctx)
}

// Apply creates the objects in the run's namespace, or updates the ones that exist, as
// Workload changes them (agnhost netexec in every container unless KeepImages), with the
// scenario's node names (node-N) mapped to the cluster's.
func (c *Cluster) Apply(ctx context.Context, objs ...runtime.Object) error {
	c.nsMu.Lock()
	if c.ns == nil {
		c.ns = map[string]string{}
	}
	for _, o := range objs {
		if m, ok := o.(metav1.Object); ok && m.GetNamespace() != "" {
			c.ns[kindOf(o)+"/"+m.GetName()] = m.GetNamespace()
		}
	}
	c.nsMu.Unlock()
	out, _, err := Workload(objs, c.workloadOptions())
	if err != nil {
		return fmt.Errorf("%w: %v", ErrBadConfig, err)
	}
	var errs []error
	for _, o := range out {
		switch v := o.(type) {
		case *corev1.Pod:
			v.Spec.NodeName = c.realNode(v.Spec.NodeName)
		case *appsv1.Deployment:
			v.Spec.Template.Spec.NodeName = c.realNode(v.Spec.Template.Spec.NodeName)
		case *discoveryv1.EndpointSlice:
			for i := range v.Endpoints {
				if n := v.Endpoints[i].NodeName; n != nil {
					r := c.realNode(*n)
					v.Endpoints[i].NodeName = &r
				}
			}
		}
		if err := c.createOrUpdate(ctx, o); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(append(errs, c.changed(ctx))...)
}

// createOrUpdate creates o, or updates it when it exists (a Service keeps its
// ClusterIP; pods are not updated in place).
func (c *Cluster) createOrUpdate(ctx context.Context, o runtime.Object) error {
	err := c.create(ctx, o)
	if err == nil || !apierrors.IsAlreadyExists(errors.Unwrap(err)) {
		return err
	}
	ns, name := c.namespace, o.(metav1.Object).GetName()
	switch v := o.(type) {
	case *corev1.Service:
		err = replace(ctx, c.client.CoreV1().Services(ns), v, func(cur *corev1.Service) {
			v.Spec.ClusterIP, v.Spec.ClusterIPs = cur.Spec.ClusterIP, cur.Spec.ClusterIPs
		})
	case *discoveryv1.EndpointSlice:
		err = replace(ctx, c.client.DiscoveryV1().EndpointSlices(ns), v, nil)
	case *appsv1.Deployment:
		err = replace(ctx, c.client.AppsV1().Deployments(ns), v, nil)
	default:
		return err // pods are not updated in place
	}
	if err != nil {
		return fmt.Errorf("update %s %s/%s: %w", kindOf(o), ns, name, err)
	}
	return nil
}

// getUpdater is the part of a typed client (Services(ns), ...) that replace uses.
type getUpdater[T any] interface {
	Get(ctx context.Context, name string, opts metav1.GetOptions) (T, error)
	Update(ctx context.Context, obj T, opts metav1.UpdateOptions) (T, error)
}

// replace updates v over the object of its name: it takes the current one's resource
// version, and keep (nil: nothing) copies what else of the current one v must keep.
func replace[T metav1.Object](ctx context.Context, client getUpdater[T], v T, keep func(cur T)) error {
	cur, err := client.Get(ctx, v.GetName(), metav1.GetOptions{})
	if err != nil {
		return err
	}
	v.SetResourceVersion(cur.GetResourceVersion())
	if keep != nil {
		keep(cur)
	}
	_, err = client.Update(ctx, v, metav1.UpdateOptions{})
	return err
}

// Delete removes one object of the run (pods without grace); its namespace is the
// run's, whatever the scenario calls it.
func (c *Cluster) Delete(ctx context.Context, kind, _, name string) error {
	ns := c.namespace
	var err error
	switch kind {
	case "Service":
		err = c.client.CoreV1().Services(ns).Delete(ctx, name, metav1.DeleteOptions{})
	case "EndpointSlice":
		err = c.client.DiscoveryV1().EndpointSlices(ns).Delete(ctx, name, metav1.DeleteOptions{})
	case "Pod":
		zero := int64(0)
		err = c.client.CoreV1().Pods(ns).Delete(ctx, name, metav1.DeleteOptions{GracePeriodSeconds: &zero})
	case "Deployment":
		err = c.client.AppsV1().Deployments(ns).Delete(ctx, name, metav1.DeleteOptions{})
	default:
		return fmt.Errorf("delete %s %s: kind not supported on a cluster", kind, name)
	}
	if err != nil {
		return fmt.Errorf("delete %s %s/%s: %w", kind, ns, name, err)
	}
	return c.changed(ctx)
}

// Get returns one object of the run as last read.
func (c *Cluster) Get(kind, _, name string) (runtime.Object, error) {
	var found runtime.Object
	switch kind {
	case "Service":
		for _, v := range c.Services() {
			if v.Name == name {
				found = v
			}
		}
	case "EndpointSlice":
		for _, v := range c.EndpointSlices() {
			if v.Name == name {
				found = v
			}
		}
	case "Pod":
		for _, v := range c.Pods() {
			if v.Name == name {
				found = v
			}
		}
	}
	if found == nil {
		return nil, fmt.Errorf("no %s %s in the run", kind, name)
	}
	return found, nil
}

// Services are the run's Services as last read, shown in the namespace the manifests
// gave them.
func (c *Cluster) Services() []*corev1.Service {
	return shown(c, "Service", &c.services, nil)
}

// EndpointSlices are the run's EndpointSlices as last read, shown in the namespace the
// manifests gave them (their Service's), with the scenario's node names.
func (c *Cluster) EndpointSlices() []*discoveryv1.EndpointSlice {
	return shown(c, "EndpointSlice", &c.slices, func(cp *discoveryv1.EndpointSlice) {
		for i := range cp.Endpoints {
			if n := cp.Endpoints[i].NodeName; n != nil {
				l := c.labNode(*n)
				cp.Endpoints[i].NodeName = &l
			}
		}
	})
}

// Pods are the run's pods as last read (probers included), shown in the namespace the
// manifests gave them, with the scenario's node names.
func (c *Cluster) Pods() []*corev1.Pod {
	return shown(c, "Pod", &c.pods, func(cp *corev1.Pod) { cp.Spec.NodeName = c.labNode(cp.Spec.NodeName) })
}

// shown returns copies of *objs (a list c.mu guards, read under it) as the scenario sees
// them: in the namespace the manifests gave them, then adjusted by fix (nil: nothing more).
func shown[T interface {
	metav1.Object
	DeepCopy() T
}](c *Cluster, kind string, objs *[]T, fix func(T)) []T {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make([]T, 0, len(*objs))
	for _, v := range *objs {
		cp := v.DeepCopy()
		cp.SetNamespace(c.scenarioNS(kind, cp.GetName()))
		if fix != nil {
			fix(cp)
		}
		out = append(out, cp)
	}
	return out
}

// ScaleDeployment sets a Deployment's replicas through its scale subresource.
func (c *Cluster) ScaleDeployment(ctx context.Context, _, name string, replicas int32) error {
	sc := &autoscalingv1.Scale{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: c.namespace}, Spec: autoscalingv1.ScaleSpec{Replicas: replicas}}
	if _, err := c.client.AppsV1().Deployments(c.namespace).UpdateScale(ctx, name, sc, metav1.UpdateOptions{}); err != nil {
		return fmt.Errorf("scale Deployment %s: %w", name, err)
	}
	return c.changed(ctx)
}

// SetPodConditions is not available: on a cluster only the kubelet sets them.
func (c *Cluster) SetPodConditions(context.Context, string, string, *bool, *bool) error {
	return fmt.Errorf("set pod conditions: %w (only the kubelet sets them on a real cluster)", cluster.ErrNotAvailable)
}

// ResourceVersion grows with every change the scenario made.
func (c *Cluster) ResourceVersion() uint64 { return c.rv.Load() }
