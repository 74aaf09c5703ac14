//go:build linux

package all

import (
	"errors"

	"kpbench.dev/kpbench/backends/ipvs"
)

// Machine is what a machine offers the backends that need more than netfilter: IPVS in
// the kernel and the upstream binaries. A nil field means it is there; an error says why
// it is not and how that was found, for the line that tells a user why a backend was left
// out. ThisMachine asks the running machine; tests build one to decide either way without
// root or IPVS.
type Machine struct {
	// IPVS is nil when the kernel has IPVS (the backends whose Caps.NeedsIPVS can run).
	IPVS error
	// Upstream is nil when `make upstream` has built kube-proxy and the control plane (the
	// backends whose Caps.NeedsAPIServer can run).
	Upstream error
}

// ThisMachine asks the running machine: the kernel's generic netlink for the IPVS family,
// in the process's own namespace, and the upstream build directory for its binaries. Both
// are reads: nothing is written, and no root is needed.
func ThisMachine() Machine {
	return Machine{IPVS: probeIPVS(), Upstream: upstreamMissing()}
}

// probeIPVS is ipvs.Probe on the process's own namespace, its absence told with how it
// was found and where IPVS runs instead.
func probeIPVS() error {
	err := ipvs.Probe("/proc/self/ns/net")
	if errors.Is(err, ipvs.ErrNoIPVS) {
		return noIPVS{}
	}
	return err
}

// noIPVS is ipvs.ErrNoIPVS as ThisMachine found it: the kernel's generic netlink has no
// IPVS family, the one query that does not need root or a module load to answer.
type noIPVS struct{}

// Error says what is missing, how it was found and where IPVS runs instead.
func (noIPVS) Error() string {
	return "this kernel has no IPVS (its generic netlink has no \"IPVS\" family, as `genl ctrl get name IPVS` shows); " +
		"run it in the microVM: kpbench vm run, or make vm-ladder"
}

// Is makes it an ipvs.ErrNoIPVS for callers that turn the absence into a skip.
func (noIPVS) Is(target error) bool { return target == ipvs.ErrNoIPVS }

// CannotRun returns why the backend ref names (NAME or NAME@VARIANT) cannot run on m, nil
// when it can: the missing thing's own error (the caller names the backend). It decides by
// the backend's facts (Caps.NeedsIPVS, Caps.NeedsAPIServer), never by its name; an invalid
// reference is Validate's error.
func (m Machine) CannotRun(ref string) error {
	if err := Validate(ref); err != nil {
		return err
	}
	f, _ := Lookup(ref)
	if f.Caps.NeedsIPVS && m.IPVS != nil {
		return m.IPVS
	}
	if f.Caps.NeedsAPIServer && m.Upstream != nil {
		return m.Upstream
	}
	return nil
}

// Available returns the backends that `--backend all` means on m: every backend m can
// run, sorted, except those that run only when named (Caps.ExplicitOnly).
func (m Machine) Available() []string {
	var out []string
	for _, f := range Registered() {
		if !f.Caps.ExplicitOnly && m.CannotRun(f.Name) == nil {
			out = append(out, f.Name)
		}
	}
	return out
}
