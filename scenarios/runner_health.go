//go:build linux

package scenarios

import (
	"context"
	"fmt"
	"io"
	"maps"
	"net/http"
	"net/netip"
	"slices"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"

	"kpbench.dev/kpbench/lab"
	"kpbench.dev/kpbench/lab/cluster"
)

// healthTarget returns the address of an httpStatus target: a node's address with the
// Service's health-check node port, or a literal ip:port.
func (r *backendRun) healthTarget(t Target) (netip.AddrPort, error) {
	if t.IPPort != "" {
		return netip.ParseAddrPort(t.IPPort)
	}
	ns, name := splitName(t.Service)
	o, err := r.tb.Cluster.Get(cluster.KindService, ns, name)
	if err != nil {
		return netip.AddrPort{}, err
	}
	svc, ok := o.(*corev1.Service)
	if !ok || svc.Spec.HealthCheckNodePort == 0 {
		return netip.AddrPort{}, fmt.Errorf("service %s/%s has no health-check node port", ns, name)
	}
	node := t.Node
	if node == "" {
		node = lab.NodeName(0)
	}
	h, ok := r.tb.Lab.Host(node)
	if !ok {
		return netip.AddrPort{}, fmt.Errorf("no node %q", node)
	}
	return netip.AddrPortFrom(h.IP, uint16(svc.Spec.HealthCheckNodePort)), nil
}

// expectHTTPStatus sends Count HTTP GETs from the step's host and requires every answer to
// carry the expected status; it records a case either way.
func (r *backendRun) expectHTTPStatus(ctx context.Context, e *ExpectStep, name string) error {
	ctx, cancel, record := r.expectCase(ctx, e, name)
	defer cancel()
	from, err := r.resolveHost(e.From)
	if err != nil {
		return record(err, "")
	}
	addr, err := r.healthTarget(e.To)
	if err != nil {
		return record(err, "")
	}
	pr, err := r.tb.Lab.Prober(from.Name)
	if err != nil {
		return record(err, "")
	}
	path := e.Path
	if path == "" {
		path = "/"
	}
	url := "http://" + addr.String() + path
	client := http.Client{Timeout: 2 * time.Second, Transport: &http.Transport{DialContext: pr.DialContext, DisableKeepAlives: true}}
	count := max(e.Count, 1)
	statuses := map[string]int{} // status (or error class) → probes
	var firstBody, firstErr string
	sent := 0
	for i := range count {
		if i > 0 && e.Interval != nil {
			if err := pause(ctx, e.Interval.Duration); err != nil {
				break
			}
		}
		if ctx.Err() != nil {
			break
		}
		sent++
		status, body, err := httpGet(ctx, &client, url)
		switch {
		case err != nil:
			statuses["error"]++
			if firstErr == "" {
				firstErr = err.Error()
			}
		default:
			statuses[strconv.Itoa(status)]++
			if firstBody == "" {
				firstBody = strings.TrimSpace(body)
			}
		}
	}
	var parts []string
	for _, k := range slices.Sorted(maps.Keys(statuses)) {
		parts = append(parts, fmt.Sprintf("%s: %d", k, statuses[k]))
	}
	evidence := fmt.Sprintf("%s → GET %s: %d probes: %s", from.Name, url, sent, strings.Join(parts, ", "))
	if firstBody != "" {
		evidence += "; body " + firstBody
	}
	if firstErr != "" {
		evidence += "; first error: " + firstErr
	}
	if sent < count {
		return record(fmt.Errorf("only %d of %d probes sent before the step's timeout", sent, count), evidence)
	}
	if got := statuses[strconv.Itoa(e.Status)]; got != count {
		return record(fmt.Errorf("expected every answer to be HTTP %d, got %s", e.Status, strings.Join(parts, ", ")), evidence)
	}
	return record(nil, evidence)
}

// httpGet does one GET and returns the status and (the start of) the body.
func httpGet(ctx context.Context, c *http.Client, url string) (int, string, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return 0, "", err
	}
	resp, err := c.Do(req)
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 4096))
	return resp.StatusCode, string(b), err
}
