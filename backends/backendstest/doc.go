// Package backendstest holds what every backend's tests share: builders of desired states
// (service ports, endpoints, whole states; Services and EndpointSlices for the view), an
// in-memory conntrack table, and helpers that dial a service from inside a namespace.
// Only tests import it.
package backendstest
