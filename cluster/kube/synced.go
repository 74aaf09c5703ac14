package kube

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"strings"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"

	"kpbench.dev/kpbench/apistore"
	"kpbench.dev/kpbench/lab/probe"
)

// How WaitSynced waits.
const (
	// pollInterval is how often WaitSynced reads the run's objects again and probes a
	// Service again.
	pollInterval = 250 * time.Millisecond
	// settleTimeout bounds the wait for one node's proxy to show one Service as its
	// endpoints say.
	settleTimeout = 20 * time.Second
	// maxWaitServices bounds the Services WaitSynced probes: beyond it, the first,
	// middle and last Services stand for the others.
	maxWaitServices = 20
)

// refresh reads the namespace's Services, EndpointSlices, Pods and Deployments.
func (c *Cluster) refresh(ctx context.Context) error {
	svcs, err := c.client.CoreV1().Services(c.namespace).List(ctx, metav1.ListOptions{})
	if err != nil {
		return fmt.Errorf("list services: %w", err)
	}
	sls, err := c.client.DiscoveryV1().EndpointSlices(c.namespace).List(ctx, metav1.ListOptions{})
	if err != nil {
		return fmt.Errorf("list endpointslices: %w", err)
	}
	pods, err := c.client.CoreV1().Pods(c.namespace).List(ctx, metav1.ListOptions{})
	if err != nil {
		return fmt.Errorf("list pods: %w", err)
	}
	deps, err := c.client.AppsV1().Deployments(c.namespace).List(ctx, metav1.ListOptions{})
	if err != nil {
		return fmt.Errorf("list deployments: %w", err)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.services, c.slices, c.pods, c.deployments = nil, nil, nil, nil
	for i := range svcs.Items {
		c.services = append(c.services, &svcs.Items[i])
	}
	for i := range sls.Items {
		c.slices = append(c.slices, &sls.Items[i])
	}
	for i := range pods.Items {
		c.pods = append(c.pods, &pods.Items[i])
	}
	for i := range deps.Items {
		c.deployments = append(c.deployments, &deps.Items[i])
	}
	return nil
}

// WaitSynced waits, within ReadyTimeout, until the run has settled, in two stages.
//
// First the objects: every pod of the run is Ready and none is being deleted, every
// Deployment has as many such pods as its replicas, and every selector Service's
// EndpointSlices list exactly its ready pods.
//
// Then the proxies, Service by Service (the first, middle and last beyond
// maxWaitServices), from every node's prober pod, until the Service's ClusterIP answers
// as its endpoints say: from exactly the endpoints that node may reach (refused when
// the Service has none; a single pod under ClientIP affinity; answered at all when the
// answers cannot name a pod of the run: --keep-images, or endpoints that are no pods of
// the run); a Service labelled for another proxy until it is no longer answered. A
// Service whose endpoint does not answer directly is not waited for: neither will the
// Service, synced or not. Each Service × node waits settleTimeout at most, then the wait
// goes on: the steps, or the check, judge what the proxy does.
//
// This is the stricter of the two rules kpbench had for a real cluster (the check's:
// "the ClusterIP answers from every node", and the scenarios': "from exactly the
// endpoints, affinity held"), with the check's count of Deployment pods and its shortcut
// for endpoints that do not answer; every caller (run, conform, check) uses it.
func (c *Cluster) WaitSynced(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, c.opts.ReadyTimeout)
	defer cancel()
	if err := poll(ctx, pollInterval, func() (bool, error) {
		if err := c.refresh(ctx); err != nil {
			return false, err
		}
		if p := c.notReady(); p != "" {
			return false, errors.New(p)
		}
		return true, nil
	}, "the run's pods to be Ready and their endpoints published"); err != nil {
		return err
	}
	c.mu.Lock()
	svcs := append([]*corev1.Service(nil), c.services...)
	c.mu.Unlock()
	if len(svcs) > maxWaitServices {
		svcs = []*corev1.Service{svcs[0], svcs[len(svcs)/2], svcs[len(svcs)-1]}
	}
	for _, svc := range svcs {
		if svc.Spec.ClusterIP == "" || svc.Spec.ClusterIP == corev1.ClusterIPNone || len(svc.Spec.Ports) == 0 {
			continue
		}
		ip, err := netip.ParseAddr(svc.Spec.ClusterIP)
		sp := svc.Spec.Ports[0]
		if err != nil || sp.Protocol == corev1.ProtocolSCTP {
			continue
		}
		dst := destinationOf(netip.AddrPortFrom(ip, uint16(sp.Port)), sp.Protocol)
		first := &dialRequester{c: c, pod: proberName(c.nodes[0].Name), port: proberPort}
		if svc.Labels["service.kubernetes.io/service-proxy-name"] != "" {
			// Not the proxy's: wait until node 0's prober is no longer answered.
			wctx, wcancel := context.WithTimeout(ctx, settleTimeout)
			_ = poll(wctx, pollInterval, func() (bool, error) {
				a, err := first.dial(wctx, dst, probeOptions(), 1)
				return err == nil && len(a.Errors) > 0, nil
			}, "")
			wcancel()
			continue
		}
		if ep, ok := c.endpointOf(svc, sp); ok {
			if res := first.Request(ctx, destinationOf(ep, sp.Protocol), probeOptions()); res.Err != nil {
				c.logf("Service %s: endpoint %s does not answer (%v); not waiting for the proxies", svc.Name, ep, res.Err)
				continue
			}
		}
		affinity := svc.Spec.SessionAffinity == corev1.ServiceAffinityClientIP
		for _, n := range c.nodes {
			r := &dialRequester{c: c, pod: proberName(n.Name), port: proberPort}
			c.waitService(ctx, r, dst, svc, n.Name, affinity)
		}
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("waiting for the proxies: %w", err)
	}
	return c.refresh(ctx)
}

// waitService waits, within settleTimeout, until the Service answers from node's prober
// as its endpoints say (WaitSynced).
func (c *Cluster) waitService(ctx context.Context, r *dialRequester, dst probe.Destination, svc *corev1.Service, node string, affinity bool) {
	want := c.endpointPods(svc, node)
	hasEndpoints := c.hasEndpoints(svc)
	if len(want) == 0 && hasEndpoints && svc.Spec.InternalTrafficPolicy != nil && *svc.Spec.InternalTrafficPolicy == corev1.ServiceInternalTrafficPolicyLocal {
		return // no endpoint on this node: its traffic is dropped, which a probe cannot tell from not synced yet
	}
	ctx, cancel := context.WithTimeout(ctx, settleTimeout)
	defer cancel()
	tries := min(50, max(1, 4*len(want)))
	err := poll(ctx, pollInterval, func() (bool, error) {
		a, err := r.dial(ctx, dst, probeOptions(), tries)
		if err != nil {
			return false, err
		}
		switch {
		case !hasEndpoints:
			return len(a.Responses) == 0 && len(a.Errors) > 0 && classify(a.Errors[0]) == probe.Refused, nil
		case len(want) == 0 || c.opts.KeepImages:
			// The answers name no pod of the run: answered is all that can be seen.
			return len(a.Errors) == 0 && len(a.Responses) > 0, nil
		case len(a.Errors) > 0:
			return false, nil
		}
		seen := map[string]bool{}
		for _, resp := range a.Responses {
			pod := strings.TrimSpace(resp)
			if !want[pod] {
				return false, nil
			}
			seen[pod] = true
		}
		if affinity {
			// ClientIP affinity in effect: every try from this prober (one client IP)
			// lands on one pod. Without it, tries = 4 per endpoint spread over them (all
			// on one pod by chance: (1/n)^(tries-1), 2e-6 for 3 endpoints). Answers from
			// any endpoint alone would end the wait before a switch to ClientIP is
			// programmed, and the sticky step after it would judge the old rules
			// (session-affinity-switch failed so on the cluster path).
			return len(seen) == 1, nil
		}
		return len(seen) == len(want), nil
	}, "")
	if err != nil && ctx.Err() != nil {
		c.logf("Service %s: node %s's proxy did not show its %d endpoints within %s; going on", svc.Name, node, len(want), settleTimeout)
	}
}

// notReady says what is not ready yet ("" when everything is): a pod not Ready or being
// deleted, a Deployment short of its replicas, a selector Service whose ready endpoints
// are not exactly its ready pods.
func (c *Cluster) notReady() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, p := range c.pods {
		if p.DeletionTimestamp != nil {
			return "pod " + p.Name + " is being deleted"
		}
		if !apistore.PodReady(p) {
			return "pod " + p.Name + " not ready (" + podWaitReason(p) + ")"
		}
	}
	for _, d := range c.deployments {
		if why := deploymentShort(d, c.pods); why != "" {
			return why
		}
	}
	for _, svc := range c.services {
		if len(svc.Spec.Selector) == 0 {
			continue
		}
		sel := labels.SelectorFromSet(svc.Spec.Selector)
		pods := map[string]bool{}
		for _, p := range c.pods {
			if sel.Matches(labels.Set(p.Labels)) && p.Status.PodIP != "" {
				pods[p.Status.PodIP] = true
			}
		}
		eps := map[string]bool{}
		for _, sl := range c.slices {
			if sl.Labels[discoveryv1.LabelServiceName] != svc.Name {
				continue
			}
			for _, ep := range sl.Endpoints {
				if ep.Conditions.Ready == nil || *ep.Conditions.Ready {
					for _, a := range ep.Addresses {
						eps[a] = true
					}
				}
			}
		}
		if len(eps) != len(pods) {
			return fmt.Sprintf("Service %s: %d ready endpoints, %d ready pods", svc.Name, len(eps), len(pods))
		}
		for a := range eps {
			if !pods[a] {
				return fmt.Sprintf("Service %s: endpoint %s is no ready pod", svc.Name, a)
			}
		}
	}
	return ""
}

// deploymentShort says how a Deployment falls short of its replicas among pods (""
// when it has as many pods matching its selector as it asks for).
func deploymentShort(d *appsv1.Deployment, pods []*corev1.Pod) string {
	if d.Spec.Replicas == nil || d.Spec.Selector == nil {
		return ""
	}
	sel, err := metav1.LabelSelectorAsSelector(d.Spec.Selector)
	if err != nil {
		return ""
	}
	n := 0
	for _, p := range pods {
		if sel.Matches(labels.Set(p.Labels)) {
			n++
		}
	}
	if n != int(*d.Spec.Replicas) {
		return fmt.Sprintf("Deployment %s: %d/%d pods", d.Name, n, *d.Spec.Replicas)
	}
	return ""
}

// hasEndpoints reports whether the Service's EndpointSlices that a proxy reads (not
// labelled headless) list a ready endpoint (an unset Ready condition counts as ready, as
// for the proxies).
func (c *Cluster) hasEndpoints(svc *corev1.Service) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, sl := range c.slices {
		if _, headless := sl.Labels[corev1.IsHeadlessService]; headless || sl.Labels[discoveryv1.LabelServiceName] != svc.Name {
			continue
		}
		for _, ep := range sl.Endpoints {
			if ep.Conditions.Ready == nil || *ep.Conditions.Ready {
				return true
			}
		}
	}
	return false
}

// endpointPods names the pods of the Service's ready endpoints that traffic from node
// may reach (its own node's only, for internalTrafficPolicy Local).
func (c *Cluster) endpointPods(svc *corev1.Service, node string) map[string]bool {
	local := svc.Spec.InternalTrafficPolicy != nil && *svc.Spec.InternalTrafficPolicy == corev1.ServiceInternalTrafficPolicyLocal
	c.mu.Lock()
	defer c.mu.Unlock()
	out := map[string]bool{}
	for _, s := range c.slices {
		if s.Labels[discoveryv1.LabelServiceName] != svc.Name {
			continue
		}
		for _, ep := range s.Endpoints {
			if ep.Conditions.Ready == nil || !*ep.Conditions.Ready || ep.TargetRef == nil || ep.TargetRef.Kind != "Pod" {
				continue
			}
			if local && (ep.NodeName == nil || *ep.NodeName != node) {
				continue
			}
			out[ep.TargetRef.Name] = true
		}
	}
	return out
}

// endpointOf returns a ready endpoint of the Service's port sp (address and port).
func (c *Cluster) endpointOf(svc *corev1.Service, sp corev1.ServicePort) (netip.AddrPort, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, s := range c.slices {
		if s.Labels[discoveryv1.LabelServiceName] != svc.Name {
			continue
		}
		var port int32
		for _, p := range s.Ports {
			if p.Port != nil && (p.Name == nil && sp.Name == "" || p.Name != nil && *p.Name == sp.Name) {
				port = *p.Port
			}
		}
		if port == 0 {
			continue
		}
		for _, ep := range s.Endpoints {
			if ep.Conditions.Ready == nil || !*ep.Conditions.Ready || len(ep.Addresses) == 0 {
				continue
			}
			if ip, err := netip.ParseAddr(ep.Addresses[0]); err == nil {
				return netip.AddrPortFrom(ip, uint16(port)), true
			}
		}
	}
	return netip.AddrPort{}, false
}

// podWaitReason says why a pod is not ready: its phase, and a container's waiting reason
// or message.
func podWaitReason(p *corev1.Pod) string {
	r := string(p.Status.Phase)
	for _, cs := range p.Status.ContainerStatuses {
		if w := cs.State.Waiting; w != nil {
			return r + ", " + cs.Name + ": " + strings.TrimSpace(w.Reason+" "+w.Message)
		}
	}
	if p.Status.Message != "" && p.Status.Phase != corev1.PodRunning {
		r += ": " + p.Status.Message
	}
	return r
}
