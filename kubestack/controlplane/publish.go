//go:build linux

package controlplane

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"kpbench.dev/kpbench/apistore"
	"kpbench.dev/kpbench/internal/chans"
	"kpbench.dev/kpbench/lab"
)

// FieldManager is the server-side-apply field manager of everything the publisher writes.
const FieldManager = "kpbench"

// publishWorkers bounds the API requests a publisher has in flight.
const publishWorkers = 16

// publishBatch bounds the store events one round of publishing coalesces.
const publishBatch = 4096

// Publisher mirrors a lab's object store into the control plane's API server: Nodes (from
// the lab), Namespaces, Services (with the store's ClusterIPs, node ports and load-balancer
// status) and EndpointSlices, written with server-side apply so that the store stays the
// source of truth (the API server runs no controllers: its slices are ours). Pods and
// Deployments are not published: kube-proxy reads neither, and the lab's kubelet and
// controllers are the store's.
type Publisher struct {
	client kubernetes.Interface
	cancel context.CancelFunc
	done   chan struct{}

	mu         sync.Mutex
	published  uint64        // every store change up to this version is in the API server
	err        error         // the first failure; publishing stops there
	changed    chan struct{} // closed (and replaced) whenever published or err changes
	namespaces map[string]bool
}

// Publish creates the lab's Nodes in the API server, then mirrors the store: its current
// objects first, then every change, until Stop.
func Publish(ctx context.Context, cp *ControlPlane, c *apistore.Store) (*Publisher, error) {
	cfg, err := cp.RESTConfig()
	if err != nil {
		return nil, fmt.Errorf("publish to %s: %w", cp.Server(), err)
	}
	cfg.QPS = -1 // no client-side rate limit: the store's changes are the load
	// The API server's deprecation warnings (spec.externalIPs) are about the scenario's
	// objects, which the store accepted: not for the run's output.
	cfg.WarningHandler = rest.NoWarnings{}
	client, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("publish to %s: %w", cp.Server(), err)
	}
	p := &Publisher{client: client, done: make(chan struct{}), changed: make(chan struct{}),
		namespaces: map[string]bool{"default": true, "kube-system": true}}
	for _, h := range cp.lab.Hosts(lab.KindNode) {
		if err := p.applyNode(ctx, h); err != nil {
			return nil, err
		}
	}
	runCtx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	events, err := c.Watch(runCtx)
	if err != nil {
		cancel()
		return nil, fmt.Errorf("publish: %w", err)
	}
	p.cancel = cancel
	go p.run(runCtx, events)
	return p, nil
}

// WaitPublished returns once every store change up to resource version rv is in the API
// server, or with the publisher's failure, or ctx's.
func (p *Publisher) WaitPublished(ctx context.Context, rv uint64) error {
	for {
		p.mu.Lock()
		published, err, changed := p.published, p.err, p.changed
		p.mu.Unlock()
		switch {
		case err != nil:
			return err
		case published >= rv:
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("wait for version %d in the API server (published %d): %w", rv, published, ctx.Err())
		case <-changed:
		case <-p.done:
			return errors.New("publisher stopped")
		}
	}
}

// Stop ends the mirroring and waits for requests in flight.
func (p *Publisher) Stop() {
	p.cancel()
	<-p.done
}

func (p *Publisher) advance(rv uint64, err error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if err != nil && p.err == nil {
		p.err = err
	}
	if err == nil && rv > p.published {
		p.published = rv
	}
	close(p.changed)
	p.changed = make(chan struct{})
}

// objectKey identifies a stored object.
type objectKey struct {
	kind            apistore.Kind
	namespace, name string
}

// run publishes events in rounds: whatever has queued (up to publishBatch) is coalesced
// per object, the last event winning, and applied with publishWorkers requests in flight;
// the round's highest resource version is then published.
func (p *Publisher) run(ctx context.Context, events <-chan apistore.Event) {
	defer close(p.done)
	for ev := range chans.Each(ctx, events) {
		batch := []apistore.Event{ev}
	drain:
		for len(batch) < publishBatch {
			select {
			case ev, ok := <-events:
				if !ok {
					break drain
				}
				batch = append(batch, ev)
			default:
				break drain
			}
		}
		var rv uint64
		last := map[objectKey]apistore.Event{}
		var order []objectKey
		for _, ev := range batch {
			rv = max(rv, ev.ResourceVersion)
			if ev.Type == apistore.Synced || (ev.Kind != apistore.KindService && ev.Kind != apistore.KindEndpointSlice) {
				continue
			}
			k := objectKey{ev.Kind, ev.Namespace, ev.Name}
			if _, ok := last[k]; !ok {
				order = append(order, k)
			}
			last[k] = ev
		}
		err := p.applyRound(ctx, order, last)
		if ctx.Err() != nil {
			return
		}
		p.advance(rv, err)
		if err != nil {
			return // the store and the API server now differ: stop, WaitPublished reports it
		}
	}
}

// applyRound writes one round's objects: Namespaces first, then everything in parallel.
func (p *Publisher) applyRound(ctx context.Context, order []objectKey, last map[objectKey]apistore.Event) error {
	for _, k := range order {
		if ev := last[k]; ev.Type != apistore.Deleted && !p.namespaces[k.namespace] {
			if err := p.applyNamespace(ctx, k.namespace); err != nil {
				return err
			}
			p.namespaces[k.namespace] = true
		}
	}
	work := make(chan apistore.Event)
	errs := make(chan error, publishWorkers)
	var wg sync.WaitGroup
	for range min(publishWorkers, len(order)) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var first error
			for ev := range work {
				if first == nil {
					first = p.apply(ctx, ev)
				}
			}
			errs <- first
		}()
	}
	for _, k := range order {
		work <- last[k]
	}
	close(work)
	wg.Wait()
	close(errs)
	var all []error
	for err := range errs {
		all = append(all, err)
	}
	return errors.Join(all...)
}

// apply writes (or deletes) one object in the API server.
func (p *Publisher) apply(ctx context.Context, ev apistore.Event) error {
	var err error
	switch ev.Kind {
	case apistore.KindService:
		svcs := p.client.CoreV1().Services(ev.Namespace)
		if ev.Type == apistore.Deleted {
			err = svcs.Delete(ctx, ev.Name, metav1.DeleteOptions{})
			break
		}
		svc := ev.Object.(*corev1.Service)
		if err = patchApply(ctx, "v1", "Service", svc, func(data []byte) error {
			_, err := svcs.Patch(ctx, ev.Name, types.ApplyPatchType, data, applyOptions())
			return err
		}); err == nil && len(svc.Status.LoadBalancer.Ingress) > 0 {
			// The load-balancer IPs kube-proxy programs are status, a subresource of its
			// own: the API server ignores status in the main resource's apply.
			err = patchApply(ctx, "v1", "Service", &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: svc.Name, Namespace: svc.Namespace}, Status: svc.Status},
				func(data []byte) error {
					_, err := svcs.Patch(ctx, ev.Name, types.ApplyPatchType, data, applyOptions(), "status")
					return err
				})
		}
	case apistore.KindEndpointSlice:
		slices := p.client.DiscoveryV1().EndpointSlices(ev.Namespace)
		if ev.Type == apistore.Deleted {
			err = slices.Delete(ctx, ev.Name, metav1.DeleteOptions{})
			break
		}
		err = patchApply(ctx, "discovery.k8s.io/v1", "EndpointSlice", ev.Object.(*discoveryv1.EndpointSlice), func(data []byte) error {
			_, err := slices.Patch(ctx, ev.Name, types.ApplyPatchType, data, applyOptions())
			return err
		})
	}
	if apierrors.IsNotFound(err) && ev.Type == apistore.Deleted {
		return nil
	}
	if err != nil {
		return fmt.Errorf("publish %s %s/%s (version %d): %w", ev.Kind, ev.Namespace, ev.Name, ev.ResourceVersion, err)
	}
	return nil
}

// applyNamespace creates a namespace the store's objects live in.
func (p *Publisher) applyNamespace(ctx context.Context, name string) error {
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}
	err := patchApply(ctx, "v1", "Namespace", ns, func(data []byte) error {
		_, err := p.client.CoreV1().Namespaces().Patch(ctx, name, types.ApplyPatchType, data, applyOptions())
		return err
	})
	if err != nil {
		return fmt.Errorf("publish Namespace %s: %w", name, err)
	}
	return nil
}

// applyNode writes a lab node as kube-proxy expects to find it: named like the lab host,
// with its fabric address as InternalIP, its pod block as podCIDR, its zone label, Ready.
func (p *Publisher) applyNode(ctx context.Context, h lab.Host) error {
	labels := map[string]string{corev1.LabelHostname: h.Name}
	if h.Zone != "" {
		labels[corev1.LabelTopologyZone] = h.Zone
	}
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: h.Name, Labels: labels}}
	if h.PodCIDR.IsValid() {
		node.Spec = corev1.NodeSpec{PodCIDR: h.PodCIDR.String(), PodCIDRs: []string{h.PodCIDR.String()}}
	}
	nodes := p.client.CoreV1().Nodes()
	err := patchApply(ctx, "v1", "Node", node, func(data []byte) error {
		_, err := nodes.Patch(ctx, h.Name, types.ApplyPatchType, data, applyOptions())
		return err
	})
	if err == nil {
		status := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: h.Name}, Status: corev1.NodeStatus{
			Addresses:  []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: h.IP.String()}, {Type: corev1.NodeHostName, Address: h.Name}},
			Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue, Reason: "KpbenchLab", LastHeartbeatTime: metav1.Now(), LastTransitionTime: metav1.Now()}},
		}}
		err = patchApply(ctx, "v1", "Node", status, func(data []byte) error {
			_, err := nodes.Patch(ctx, h.Name, types.ApplyPatchType, data, applyOptions(), "status")
			return err
		})
	}
	if err != nil {
		return fmt.Errorf("publish Node %s: %w", h.Name, err)
	}
	return nil
}

func applyOptions() metav1.PatchOptions {
	force := true
	return metav1.PatchOptions{FieldManager: FieldManager, Force: &force}
}

// patchApply encodes o as a server-side-apply body, apiVersion and kind set and the
// store's own bookkeeping cleared (resource version, uid, creation time, generation,
// managed fields), and hands it to patch. It modifies o: the publisher's objects are its
// own copies (apistore.Event) or built for the call.
func patchApply(ctx context.Context, apiVersion, kind string, o runtime.Object, patch func(data []byte) error) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	m, err := meta.Accessor(o)
	if err != nil {
		return err
	}
	m.SetResourceVersion("")
	m.SetUID("")
	m.SetCreationTimestamp(metav1.Time{})
	m.SetGeneration(0)
	m.SetManagedFields(nil)
	o.GetObjectKind().SetGroupVersionKind(schema.FromAPIVersionAndKind(apiVersion, kind))
	data, err := json.Marshal(o)
	if err != nil {
		return err
	}
	return patch(data)
}
