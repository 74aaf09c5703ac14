package nftables

import (
	"strings"

	"sigs.k8s.io/knftables"
)

// element is one member of one of the shared sets or verdict maps (cluster-ips,
// service-ips, ...) that a service port contributes.
type element struct {
	// container is the set or map name; isSet tells which.
	container string
	isSet     bool
	// key is the element key with its parts joined by " . " (as nft writes them).
	key string
	// value is the verdict of a map element ("goto service-...", "drop"); "" for sets.
	value string
	// comment is the service port name on no-endpoint elements, like kube-proxy.
	comment string
}

// elemID identifies an element in the kernel: container and key.
type elemID struct{ container, key string }

// elemState is the bookkeeping of one element: what the desired state wants (refs
// service ports contribute it, with value) and what the kernel holds.
type elemState struct {
	elem    element
	refs    int
	applied bool   // present in the kernel after the last successful sync
	kvalue  string // value in the kernel when applied
}

// elementStore tracks the elements of the shared sets and maps across syncs, so that an
// incremental sync writes only the elements that changed. Several service ports may
// contribute one element (the ports of one Service share their ClusterIP in cluster-ips),
// hence the reference counts. When two ports want different values for one key (a
// misconfiguration such as two Services on one externalIP and port), the last one wins.
type elementStore struct {
	m       map[elemID]*elemState
	touched []*elemState
}

func newElementStore() *elementStore { return &elementStore{m: map[elemID]*elemState{}} }

// add records one more reference to e.
func (s *elementStore) add(e element) {
	id := elemID{e.container, e.key}
	st := s.m[id]
	if st == nil {
		st = &elemState{}
		s.m[id] = st
	}
	if st.refs == 0 {
		s.touched = append(s.touched, st)
	} else if st.elem.value != e.value {
		s.touched = append(s.touched, st)
	}
	st.elem = e
	st.refs++
}

// remove drops one reference to e.
func (s *elementStore) remove(e element) {
	st := s.m[elemID{e.container, e.key}]
	if st == nil || st.refs == 0 {
		return
	}
	st.refs--
	if st.refs == 0 {
		s.touched = append(s.touched, st)
	}
}

// knftElement converts e for a transaction; withValue false gives the key-only form
// used to delete.
func knftElement(e element, withValue bool) *knftables.Element {
	ke := &knftables.Element{Key: strings.Split(e.key, " . ")}
	if e.isSet {
		ke.Set = e.container
	} else {
		ke.Map = e.container
	}
	if withValue {
		if e.value != "" {
			ke.Value = []string{e.value}
		}
		if e.comment != "" {
			ke.Comment = knftables.PtrTo(e.comment)
		}
	}
	return ke
}

// write adds to tx the element operations that bring the kernel from its recorded
// contents to the desired ones, for the elements touched since the last commit, and
// returns how many operations it wrote. assumeEmpty is set on full syncs, whose
// transaction has flushed every set and map first.
func (s *elementStore) write(tx *knftables.Transaction, assumeEmpty bool) int {
	n := 0
	seen := make(map[*elemState]bool, len(s.touched))
	for _, st := range s.touched {
		if seen[st] {
			continue
		}
		seen[st] = true
		inKernel := st.applied && !assumeEmpty
		switch {
		case st.refs == 0 && inKernel:
			tx.Delete(knftElement(st.elem, false))
			n++
		case st.refs > 0 && !inKernel:
			tx.Add(knftElement(st.elem, true))
			n++
		case st.refs > 0 && st.kvalue != st.elem.value:
			tx.Delete(knftElement(st.elem, false))
			tx.Add(knftElement(st.elem, true))
			n += 2
		}
	}
	return n
}

// commit records that the last written transaction succeeded.
func (s *elementStore) commit() {
	for _, st := range s.touched {
		if st.refs == 0 {
			delete(s.m, elemID{st.elem.container, st.elem.key})
			continue
		}
		st.applied = true
		st.kvalue = st.elem.value
	}
	s.touched = s.touched[:0]
}
