package kubeproxy

import (
	"bufio"
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"
)

// Metric names kube-proxy serves on /metrics that the backend reads.
const (
	MetricSyncDuration     = "kubeproxy_sync_proxy_rules_duration_seconds"
	MetricSyncFull         = "kubeproxy_sync_full_proxy_rules_duration_seconds"
	MetricSyncPartial      = "kubeproxy_sync_partial_proxy_rules_duration_seconds"
	MetricProgramming      = "kubeproxy_network_programming_duration_seconds"
	MetricLastSync         = "kubeproxy_sync_proxy_rules_last_timestamp_seconds"
	MetricLastQueued       = "kubeproxy_sync_proxy_rules_last_queued_timestamp_seconds"
	MetricEndpointsPending = "kubeproxy_sync_proxy_rules_endpoint_changes_pending"
	MetricServicesPending  = "kubeproxy_sync_proxy_rules_service_changes_pending"
	MetricEndpointsTotal   = "kubeproxy_sync_proxy_rules_endpoint_changes_total"
	MetricServicesTotal    = "kubeproxy_sync_proxy_rules_service_changes_total"
	MetricIPTablesTotal    = "kubeproxy_sync_proxy_rules_iptables_total"
	MetricRestoreFailures  = "kubeproxy_sync_proxy_rules_iptables_restore_failures_total"
)

// Samples are the values of one /metrics scrape: each series name (histograms as
// NAME_sum, NAME_count; buckets are skipped) to the sum of its values over every label
// set, except the series of the IPv6 family (kube-proxy runs a proxier per family and
// labels their series ip_family; summing the two families' timestamps made nonsense). A name absent from the scrape is absent from the map.
type Samples map[string]float64

// Has reports whether name was in the scrape.
func (s Samples) Has(name string) bool { _, ok := s[name]; return ok }

// ParseMetrics reads the Prometheus text exposition format.
func ParseMetrics(r io.Reader) (Samples, error) {
	out := Samples{}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64*1024), 4*1024*1024)
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		name, rest := line, ""
		if i := strings.IndexAny(line, "{ "); i >= 0 {
			name, rest = line[:i], line[i:]
		}
		if strings.HasSuffix(name, "_bucket") {
			continue
		}
		if strings.HasPrefix(rest, "{") {
			j := strings.LastIndexByte(rest, '}')
			if j < 0 {
				return nil, fmt.Errorf("metrics line %d: unterminated labels", n)
			}
			if strings.Contains(rest[:j], `ip_family="IPv6"`) {
				continue // the lab is IPv4: kube-proxy's idle IPv6 proxier would double the sums
			}
			rest = rest[j+1:]
		}
		f := strings.Fields(rest)
		if len(f) == 0 {
			return nil, fmt.Errorf("metrics line %d: no value", n)
		}
		v, err := strconv.ParseFloat(f[0], 64)
		if err != nil {
			return nil, fmt.Errorf("metrics line %d: value %q: %w", n, f[0], err)
		}
		if math.IsNaN(v) {
			continue
		}
		out[name] += v
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("read metrics: %w", err)
	}
	return out, nil
}

// delta returns s[name] - prev[name], or s[name] when the counter went down (kube-proxy
// restarted, its counters started again).
func delta(s, prev Samples, name string) float64 {
	d := s[name] - prev[name]
	if d < 0 {
		return s[name]
	}
	return d
}

// pending is the number of changes kube-proxy received and has not synced yet.
func (s Samples) pending() float64 { return s[MetricEndpointsPending] + s[MetricServicesPending] }

// changes is the number of Service and EndpointSlice changes kube-proxy received.
func (s Samples) changes() float64 { return s[MetricEndpointsTotal] + s[MetricServicesTotal] }
