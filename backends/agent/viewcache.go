package agent

import (
	"slices"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"

	"kpbench.dev/kpbench/backends"
)

// viewCache keeps the node's desired state incrementally, like kube-proxy's service and
// endpoints change trackers: a change to a Service or to one of its EndpointSlices marks
// only that Service dirty, and a sync rebuilds only dirty Services. Building the whole view
// from 20k Services costs ~190 ms here, which would swamp a partial sync of one Service.
// It is not safe for concurrent use (the agent holds its lock).
type viewCache struct {
	node backends.NodeView
	opts backends.ViewOptions

	services    map[string]*corev1.Service                       // by namespace/name
	slicesBySvc map[string]map[string]*discoveryv1.EndpointSlice // service key -> slice key -> slice
	sliceOwner  map[string]string                                // slice key -> service key
	built       map[string][]*backends.ServicePort               // service key -> its ports
	dirty       map[string]bool
}

func newViewCache(node backends.NodeView, opts backends.ViewOptions) *viewCache {
	return &viewCache{
		node: node, opts: opts,
		services:    map[string]*corev1.Service{},
		slicesBySvc: map[string]map[string]*discoveryv1.EndpointSlice{},
		sliceOwner:  map[string]string{},
		built:       map[string][]*backends.ServicePort{},
		dirty:       map[string]bool{},
	}
}

func (v *viewCache) setService(svc *corev1.Service, deleted bool) {
	key := svc.Namespace + "/" + svc.Name
	if deleted {
		delete(v.services, key)
	} else {
		v.services[key] = svc
	}
	v.dirty[key] = true
}

func (v *viewCache) setSlice(sl *discoveryv1.EndpointSlice, deleted bool) {
	key := sl.Namespace + "/" + sl.Name
	if old, ok := v.sliceOwner[key]; ok { // the slice may have changed owner
		delete(v.slicesBySvc[old], key)
		if len(v.slicesBySvc[old]) == 0 {
			delete(v.slicesBySvc, old)
		}
		delete(v.sliceOwner, key)
		v.dirty[old] = true
	}
	if deleted || backends.IgnoredSlice(sl) { // a slice labelled out of view is as gone
		return
	}
	owner := sl.Namespace + "/" + sl.Labels[discoveryv1.LabelServiceName]
	if v.slicesBySvc[owner] == nil {
		v.slicesBySvc[owner] = map[string]*discoveryv1.EndpointSlice{}
	}
	v.slicesBySvc[owner][key] = sl
	v.sliceOwner[key] = owner
	v.dirty[owner] = true
}

// state rebuilds the dirty Services and returns the whole desired state, sorted.
func (v *viewCache) state() *backends.State {
	for key := range v.dirty {
		svc, ok := v.services[key]
		if !ok {
			delete(v.built, key)
			continue
		}
		sls := make([]*discoveryv1.EndpointSlice, 0, len(v.slicesBySvc[key]))
		for _, sl := range v.slicesBySvc[key] {
			sls = append(sls, sl)
		}
		ports := backends.BuildState(v.node, v.opts, []*corev1.Service{svc}, sls).Services
		if len(ports) == 0 {
			delete(v.built, key)
		} else {
			v.built[key] = ports
		}
	}
	clear(v.dirty)
	st := backends.BuildState(v.node, v.opts, nil, nil) // node-level fields
	for _, ports := range v.built {
		st.Services = append(st.Services, ports...)
	}
	st.SortServices()
	st.Services = slices.Clip(st.Services)
	return st
}
