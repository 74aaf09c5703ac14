// Package envlist builds a process environment, KEY=VALUE entries in which a later
// definition of a key replaces the earlier one in place: the order of first definition is
// kept. The lab kubelet defines a container's variables so (envFrom, then env), and the
// microVM its guest command's (the host's, its labels, then the caller's).
package envlist

// List is an environment being defined. The zero List is empty and ready to use.
type List struct {
	keys []string
	vals map[string]string
}

// Set defines k as v: in place when k is defined already, else after the others.
func (l *List) Set(k, v string) {
	if l.vals == nil {
		l.vals = map[string]string{}
	}
	if _, ok := l.vals[k]; !ok {
		l.keys = append(l.keys, k)
	}
	l.vals[k] = v
}

// Lookup returns k's value, and whether k is defined.
func (l *List) Lookup(k string) (string, bool) {
	v, ok := l.vals[k]
	return v, ok
}

// Environ returns the entries as KEY=VALUE, in the order their keys were first defined
// (never nil).
func (l *List) Environ() []string {
	out := make([]string, len(l.keys))
	for i, k := range l.keys {
		out[i] = k + "=" + l.vals[k]
	}
	return out
}
