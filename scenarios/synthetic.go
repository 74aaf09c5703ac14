//go:build linux

package scenarios

import (
	"context"
	"fmt"

	"kpbench.dev/kpbench/lab"
	"kpbench.dev/kpbench/scenarios/synth"
)

// SyntheticPods is how many pods back the generated Services of churn steps and
// measurements (enough for the 10-endpoint distribution Service): a Service generated
// with more endpoints than this cannot be made.
const SyntheticPods = 10

// Indexes of the Services measurements generate for themselves: names that sort after
// every ladder Service.
const (
	throughputIndex   = 999998
	distributionIndex = 999999
)

// synthetic is a session's generated Services (synth.Name(i) in namespace synth.Namespace)
// and the pods behind them.
type synthetic struct {
	pods     []synth.Backend // shared endpoints, spread over the nodes
	count    int             // Services [0, count) exist
	gen      map[int]int     // generation of each Service's slice
	template synth.Template  // of the last churn
	next     int             // the next Service an update churn changes
}

// ensureSynthPods creates (once) the lab pods the generated Services point at.
func (s *Session) ensureSynthPods(ctx context.Context) error {
	if s.synth.pods != nil {
		return nil
	}
	nodes := s.Cluster.Hosts(lab.KindNode)
	if len(nodes) == 0 {
		return fmt.Errorf("generated services: the cluster has no node")
	}
	for i := range SyntheticPods {
		node := nodes[i%len(nodes)]
		h, err := s.Cluster.AddPod(ctx, fmt.Sprintf("synth-%d", i), node.Name)
		if err != nil {
			return err
		}
		s.synth.pods = append(s.synth.pods, synth.Backend{IP: h.IP, Node: node.Name, Pod: h.Name})
	}
	s.synth.gen = map[int]int{}
	return nil
}

// applySynthService creates (or updates) the generated Service of index i over the first
// t.EndpointsPerService pods and waits until it is programmed: a measurement's own
// Service.
func (s *Session) applySynthService(ctx context.Context, i int, t synth.Template) error {
	if err := s.ensureSynthPods(ctx); err != nil {
		return err
	}
	if t.EndpointsPerService > len(s.synth.pods) {
		return fmt.Errorf("at most %d endpoints (the generated Services share %d pods)", len(s.synth.pods), len(s.synth.pods))
	}
	if err := s.Cluster.Apply(ctx, synth.Service(i, t), synth.Slice(i, 0, t, s.synth.pods)); err != nil {
		return err
	}
	return s.Cluster.WaitSynced(ctx)
}
