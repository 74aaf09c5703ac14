package apistore

import (
	"errors"
	"fmt"
	"net/netip"
)

// errFull is returned by allocators that have nothing left to hand out.
var errFull = errors.New("range is full")

// bitmap is a fixed-size set of small integers.
type bitmap struct {
	words []uint64
	size  int
	used  int
}

func newBitmap(size int) bitmap { return bitmap{words: make([]uint64, (size+63)/64), size: size} }

func (b *bitmap) has(i int) bool { return b.words[i/64]&(1<<(uint(i)%64)) != 0 }

func (b *bitmap) set(i int) {
	if !b.has(i) {
		b.words[i/64] |= 1 << (uint(i) % 64)
		b.used++
	}
}

func (b *bitmap) clear(i int) {
	if b.has(i) {
		b.words[i/64] &^= 1 << (uint(i) % 64)
		b.used--
	}
}

// nextFree returns the first free index at or after from, wrapping around, skipping the
// indexes reserved refuses; -1 when there is none.
func (b *bitmap) nextFree(from int, reserved func(int) bool) int {
	if b.used >= b.size {
		return -1
	}
	for n := 0; n < b.size; n++ {
		i := (from + n) % b.size
		if b.words[i/64] == ^uint64(0) {
			// Skip a full word quickly.
			n += 63 - i%64
			continue
		}
		if !b.has(i) && !reserved(i) {
			return i
		}
	}
	return -1
}

// ipAllocator hands out IPv4 addresses of a prefix, skipping its network and broadcast
// addresses. Allocation is next-fit from a cursor, so it is deterministic and a released
// address is not handed out again at once (as the API server avoids quick reuse).
type ipAllocator struct {
	prefix netip.Prefix
	base   netip.Addr // the network address
	bits   bitmap     // index i is address base+i
	cursor int
	// reserved is an index only handed out on explicit request by the owner allowed to
	// (-1: none).
	reserved int
}

func newIPAllocator(p netip.Prefix, reserveFirst bool) (*ipAllocator, error) {
	if !p.IsValid() || !p.Addr().Is4() {
		return nil, fmt.Errorf("prefix %v: must be a valid IPv4 prefix", p)
	}
	if p.Bits() < 8 || p.Bits() > 30 {
		return nil, fmt.Errorf("prefix %v: length must be between /8 and /30", p)
	}
	p = p.Masked()
	a := &ipAllocator{prefix: p, base: p.Addr(), bits: newBitmap(1 << (32 - p.Bits())), reserved: -1}
	if reserveFirst {
		a.reserved = 1
	}
	a.cursor = 1
	return a, nil
}

func u32(ip netip.Addr) uint32 {
	b := ip.As4()
	return uint32(b[0])<<24 | uint32(b[1])<<16 | uint32(b[2])<<8 | uint32(b[3])
}

func (a *ipAllocator) index(ip netip.Addr) int { return int(u32(ip) - u32(a.base)) }

func (a *ipAllocator) addr(i int) netip.Addr {
	v := u32(a.base) + uint32(i)
	return netip.AddrFrom4([4]byte{byte(v >> 24), byte(v >> 16), byte(v >> 8), byte(v)})
}

// usable reports whether index i may ever be handed out (not network, not broadcast).
func (a *ipAllocator) usable(i int) bool { return i > 0 && i < a.bits.size-1 }

// allocate takes ip; reservedOK allows the reserved first address.
func (a *ipAllocator) allocate(ip netip.Addr, reservedOK bool) error {
	if !ip.Is4() || !a.prefix.Contains(ip) {
		return fmt.Errorf("%v is not in the range %v", ip, a.prefix)
	}
	i := a.index(ip)
	if !a.usable(i) {
		return fmt.Errorf("%v is the network or broadcast address of %v", ip, a.prefix)
	}
	if i == a.reserved && !reservedOK {
		return fmt.Errorf("%v is reserved for the default/kubernetes service", ip)
	}
	if a.bits.has(i) {
		return fmt.Errorf("%v is already allocated", ip)
	}
	a.bits.set(i)
	return nil
}

// next allocates the next free address.
func (a *ipAllocator) next() (netip.Addr, error) {
	i := a.bits.nextFree(a.cursor, func(i int) bool { return !a.usable(i) || i == a.reserved })
	if i < 0 {
		return netip.Addr{}, fmt.Errorf("no addresses left in %v: %w", a.prefix, errFull)
	}
	a.bits.set(i)
	a.cursor = i + 1
	return a.addr(i), nil
}

func (a *ipAllocator) release(ip netip.Addr) {
	if ip.Is4() && a.prefix.Contains(ip) {
		a.bits.clear(a.index(ip))
	}
}

// portAllocator hands out ports of [min, max], next-fit from a cursor. Like the API server's
// node port allocator it is one range for all protocols: a port used by one Service is
// unavailable to every other Service whatever the protocol (a Service may reuse its own
// node port for another protocol of the same port number).
type portAllocator struct {
	min, max int32
	bits     bitmap
	cursor   int
}

func newPortAllocator(min, max int32) (*portAllocator, error) {
	if min < 1 || max > 65535 || min > max {
		return nil, fmt.Errorf("port range %d-%d is invalid", min, max)
	}
	return &portAllocator{min: min, max: max, bits: newBitmap(int(max - min + 1))}, nil
}

func (a *portAllocator) allocate(p int32) error {
	if p < a.min || p > a.max {
		return fmt.Errorf("port %d is not in the range %d-%d", p, a.min, a.max)
	}
	if a.bits.has(int(p - a.min)) {
		return fmt.Errorf("port %d is already allocated", p)
	}
	a.bits.set(int(p - a.min))
	return nil
}

func (a *portAllocator) next() (int32, error) {
	i := a.bits.nextFree(a.cursor, func(int) bool { return false })
	if i < 0 {
		return 0, fmt.Errorf("no ports left in %d-%d: %w", a.min, a.max, errFull)
	}
	a.bits.set(i)
	a.cursor = i + 1
	return a.min + int32(i), nil
}

func (a *portAllocator) release(p int32) {
	if p >= a.min && p <= a.max {
		a.bits.clear(int(p - a.min))
	}
}
