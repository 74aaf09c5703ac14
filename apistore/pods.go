package apistore

import (
	"encoding/json"
	"fmt"
	"hash/fnv"
	"net/netip"
	"slices"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// nameAlphabet is the alphabet of Kubernetes' generated name suffixes (no vowels, no
// confusable digits).
const nameAlphabet = "bcdfghjklmnpqrstvwxz2456789"

// maxGeneratedBase is how long the base of a generated name may be (63 minus the 5
// random characters), as in the API server's name generator.
const maxGeneratedBase = 58

// generatedName returns base + 5 characters derived from seed.
func generatedName(base string, seed string) string {
	if len(base) > maxGeneratedBase {
		base = base[:maxGeneratedBase]
	}
	h := fnv.New64a()
	_, _ = h.Write([]byte(seed))
	v := h.Sum64()
	b := make([]byte, 5)
	for i := range b {
		b[i] = nameAlphabet[v%uint64(len(nameAlphabet))]
		v /= uint64(len(nameAlphabet))
	}
	return base + string(b)
}

// templateHash returns the 10-character pod-template-hash of a pod template: FNV-32a of its
// JSON form, printed as 10 decimal digits mapped onto nameAlphabet like the deployment
// controller's rand.SafeEncodeString.
func templateHash(tpl *corev1.PodTemplateSpec) (string, error) {
	b, err := json.Marshal(tpl)
	if err != nil {
		return "", fmt.Errorf("hash pod template: %w", err)
	}
	h := fnv.New32a()
	_, _ = h.Write(b)
	digits := fmt.Sprintf("%010d", h.Sum32())
	out := make([]byte, len(digits))
	for i := range digits {
		out[i] = nameAlphabet[int(digits[i])%len(nameAlphabet)]
	}
	return string(out), nil
}

// PodReady reports whether the pod's Ready condition is True: what makes its address a
// ready endpoint, and what a cluster's hosts report as ready.
func PodReady(p *corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// schedule picks the node for a pod without spec.nodeName: the one with the fewest pods,
// the lowest index on ties, as the default scheduler's spreading would.
func (c *Store) schedule() string {
	best := -1
	for i, n := range c.nodePods {
		if best < 0 || n < c.nodePods[best] {
			best = i
		}
	}
	if best < 0 {
		return ""
	}
	return c.cfg.Nodes[best].Name
}

// applyPod creates or updates a bare Pod. On create its status is reset to Pending (the
// API server ignores a status on create) and it is scheduled; on update the stored status
// and node stay.
func (t *tx) applyPod(in *corev1.Pod) error {
	p, err := userCopy(in)
	if err != nil {
		return err
	}
	key := objKey{p.Namespace, p.Name}
	if p.Spec.NodeName != "" {
		if _, ok := t.c.nodeIndex[p.Spec.NodeName]; !ok {
			return fmt.Errorf("spec.nodeName: no node %q in the cluster", p.Spec.NodeName)
		}
	}
	if o, ok := t.c.objs[KindPod][key]; ok {
		old := o.(*corev1.Pod)
		if p.Spec.NodeName == "" {
			p.Spec.NodeName = old.Spec.NodeName
		}
		if p.Spec.NodeName != old.Spec.NodeName {
			return fmt.Errorf("spec.nodeName: field is immutable (%q cannot become %q)", old.Spec.NodeName, p.Spec.NodeName)
		}
		p.Status = *old.Status.DeepCopy()
		p.DeletionTimestamp = old.DeletionTimestamp
		p.DeletionGracePeriodSeconds = old.DeletionGracePeriodSeconds
		t.putPod(p, t.c.podInfo[key])
		return nil
	}
	t.createPod(p, "")
	return nil
}

// createPod stores a new pod (owned by the Deployment named owner, or bare), scheduled and
// Pending.
func (t *tx) createPod(p *corev1.Pod, owner string) {
	c := t.c
	if p.Spec.NodeName == "" {
		p.Spec.NodeName = c.schedule()
	}
	p.Status = corev1.PodStatus{Phase: corev1.PodPending}
	if p.Spec.NodeName != "" {
		p.Status.Conditions = []corev1.PodCondition{{
			Type: corev1.PodScheduled, Status: corev1.ConditionTrue, LastTransitionTime: t.now,
		}}
	}
	p.DeletionTimestamp = nil
	p.DeletionGracePeriodSeconds = nil
	c.cnt.podSeq++
	t.putPod(p, podInfo{seq: c.cnt.podSeq, owner: owner})
}

// putPod stores a pod with its bookkeeping and marks the Services selecting it (before or
// after) dirty.
func (t *tx) putPod(p *corev1.Pod, info podInfo) {
	c := t.c
	key := objKey{p.Namespace, p.Name}
	var oldLabels map[string]string
	if o, ok := c.objs[KindPod][key]; ok {
		oldLabels = o.GetLabels()
	}
	t.setPodInfo(key, &info)
	t.put(KindPod, p)
	t.markServicesOf(key.ns, oldLabels, p.Labels)
}

func (t *tx) setPodInfo(key objKey, info *podInfo) {
	c := t.c
	old, had := c.podInfo[key]
	if info == nil {
		delete(c.podInfo, key)
	} else {
		c.podInfo[key] = *info
	}
	t.onUndo(func() {
		if had {
			c.podInfo[key] = old
		} else {
			delete(c.podInfo, key)
		}
	})
}

// deletePod removes a pod (no replacement: the caller reconciles its Deployment).
func (t *tx) deletePod(key objKey) {
	c := t.c
	old := c.objs[KindPod][key]
	t.setPodInfo(key, nil)
	t.remove(KindPod, key)
	t.markServicesOf(key.ns, old.GetLabels(), nil)
}

// markServicesOf marks dirty every Service in ns whose selector matches either label set.
func (t *tx) markServicesOf(ns string, a, b map[string]string) {
	for _, labels := range []map[string]string{a, b} {
		for k, v := range labels {
			for name := range t.c.svcIdx[ns][pair(k, v)] {
				key := objKey{ns, name}
				if t.dirty[key] {
					continue
				}
				sel := t.c.objs[KindService][key].(*corev1.Service).Spec.Selector
				if matches(sel, a) || matches(sel, b) {
					t.dirty[key] = true
				}
			}
		}
	}
}

// setPodStatus applies what the kubelet reports.
func (t *tx) setPodStatus(old *corev1.Pod, st PodStatus) {
	p := old.DeepCopy()
	key := objKey{p.Namespace, p.Name}
	if st.IP.IsValid() {
		p.Status.PodIP = st.IP.String()
		p.Status.PodIPs = []corev1.PodIP{{IP: st.IP.String()}}
		p.Status.Phase = corev1.PodRunning
	} else {
		p.Status.PodIP = ""
		p.Status.PodIPs = nil
	}
	cond := corev1.ConditionFalse
	if st.Ready {
		cond = corev1.ConditionTrue
	}
	for _, typ := range []corev1.PodConditionType{corev1.ContainersReady, corev1.PodReady} {
		i := slices.IndexFunc(p.Status.Conditions, func(c corev1.PodCondition) bool { return c.Type == typ })
		switch {
		case i < 0:
			p.Status.Conditions = append(p.Status.Conditions, corev1.PodCondition{
				Type: typ, Status: cond, LastTransitionTime: t.now})
		case p.Status.Conditions[i].Status != cond:
			p.Status.Conditions[i].Status = cond
			p.Status.Conditions[i].LastTransitionTime = t.now
		}
	}
	becameTerminating := st.Terminating && p.DeletionTimestamp == nil
	if becameTerminating {
		grace := int64(30)
		if p.Spec.TerminationGracePeriodSeconds != nil {
			grace = *p.Spec.TerminationGracePeriodSeconds
		}
		ts := t.now
		p.DeletionTimestamp = &ts
		p.DeletionGracePeriodSeconds = &grace
	}
	info := t.c.podInfo[key]
	t.putPod(p, info)
	if becameTerminating && info.owner != "" {
		t.reconcileDeployment(objKey{key.ns, info.owner})
	}
}

// applyDeployment creates or updates a Deployment and reconciles its pods.
func (t *tx) applyDeployment(in *appsv1.Deployment) error {
	d, err := userCopy(in)
	if err != nil {
		return err
	}
	if d.Spec.Replicas == nil {
		one := int32(1)
		d.Spec.Replicas = &one
	}
	if *d.Spec.Replicas < 0 {
		return fmt.Errorf("spec.replicas: %d is negative", *d.Spec.Replicas)
	}
	if d.Spec.Selector == nil || len(d.Spec.Selector.MatchExpressions) > 0 {
		if d.Spec.Selector == nil {
			return fmt.Errorf("spec.selector is required")
		}
		return fmt.Errorf("spec.selector: matchExpressions are not supported")
	}
	if !matches(d.Spec.Selector.MatchLabels, d.Spec.Template.Labels) {
		return fmt.Errorf("spec.template.metadata.labels: do not match spec.selector")
	}
	if nn := d.Spec.Template.Spec.NodeName; nn != "" {
		if _, ok := t.c.nodeIndex[nn]; !ok {
			return fmt.Errorf("spec.template.spec.nodeName: no node %q in the cluster", nn)
		}
	}
	if _, err := templateHash(&d.Spec.Template); err != nil {
		return err
	}
	d.Status = appsv1.DeploymentStatus{Replicas: *d.Spec.Replicas}
	t.put(KindDeployment, d)
	t.reconcileDeployment(objKey{d.Namespace, d.Name})
	return nil
}

// deleteDeployment removes a Deployment and all its pods.
func (t *tx) deleteDeployment(key objKey) {
	for _, pk := range t.ownedPods(key) {
		t.deletePod(pk)
	}
	t.remove(KindDeployment, key)
}

// ownedPods returns the pods of a Deployment, oldest first.
func (t *tx) ownedPods(key objKey) []objKey {
	var out []objKey
	for pk, info := range t.c.podInfo {
		if pk.ns == key.ns && info.owner == key.name {
			out = append(out, pk)
		}
	}
	slices.SortFunc(out, func(a, b objKey) int {
		return int(t.c.podInfo[a].seq) - int(t.c.podInfo[b].seq)
	})
	return out
}

// reconcileDeployment does what the Deployment and ReplicaSet controllers would, with the
// Recreate strategy: pods of an older template are removed, then pods of the current
// template are created or removed (newest first) until exactly spec.replicas are active.
// Terminating pods are not active and are left alone until removed. Pod names are
// <deployment>-<template hash>-<5 characters> derived from the name and a per-Deployment
// counter, so the same calls always give the same names.
func (t *tx) reconcileDeployment(key objKey) {
	o, ok := t.c.objs[KindDeployment][key]
	if !ok {
		return
	}
	d := o.(*appsv1.Deployment)
	hash, _ := templateHash(&d.Spec.Template) // checked in applyDeployment
	var active []objKey
	for _, pk := range t.ownedPods(key) {
		p := t.c.objs[KindPod][pk].(*corev1.Pod)
		switch {
		case p.Labels[appsv1.DefaultDeploymentUniqueLabelKey] != hash:
			t.deletePod(pk)
		case p.DeletionTimestamp == nil:
			active = append(active, pk)
		}
	}
	want := int(*d.Spec.Replicas)
	for i := len(active) - 1; i >= want; i-- {
		t.deletePod(active[i])
	}
	for n := len(active); n < want; n++ {
		t.createPod(t.newPod(d, hash), key.name)
	}
}

// newPod returns a new pod from d's template with a fresh generated name.
func (t *tx) newPod(d *appsv1.Deployment, hash string) *corev1.Pod {
	c := t.c
	base := d.Name + "-" + hash + "-"
	key := objKey{d.Namespace, d.Name}
	idx, had := c.podIndex[key]
	t.onUndo(func() {
		if had {
			c.podIndex[key] = idx
		} else {
			delete(c.podIndex, key)
		}
	})
	var name string
	for n := idx; ; n++ {
		name = generatedName(base, fmt.Sprintf("%s/%s/%d", d.Namespace, d.Name, n))
		if _, taken := c.objs[KindPod][objKey{d.Namespace, name}]; !taken {
			c.podIndex[key] = n + 1
			break
		}
	}
	tpl := d.Spec.Template.DeepCopy()
	labels := make(map[string]string, len(tpl.Labels)+1)
	for k, v := range tpl.Labels {
		labels[k] = v
	}
	labels[appsv1.DefaultDeploymentUniqueLabelKey] = hash
	ctrl := true
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Name: name, Namespace: d.Namespace, Labels: labels, Annotations: tpl.Annotations,
			OwnerReferences: []metav1.OwnerReference{{
				APIVersion: "apps/v1", Kind: "ReplicaSet", Name: d.Name + "-" + hash,
				UID: d.UID, Controller: &ctrl,
			}},
		},
		Spec: tpl.Spec,
	}
}

// podIP returns a pod's IPv4 address, if it has one.
func podIP(p *corev1.Pod) (netip.Addr, bool) {
	ip, err := netip.ParseAddr(p.Status.PodIP)
	return ip, err == nil && ip.Is4()
}
