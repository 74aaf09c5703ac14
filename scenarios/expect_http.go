//go:build linux

package scenarios

import (
	"context"
	"fmt"
	"io"
	"maps"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"
)

// probeHTTP sends Count HTTP GETs from the step's host (an httpStatus expectation) and
// requires every answer to carry the expected status.
func (e *ExpectStep) probeHTTP(ctx context.Context, s *Session) (string, error) {
	from, note, err := resolveSender(s.Cluster, e.From, e.To.Node)
	if err != nil {
		return "", err
	}
	addr, err := healthDestination(s.Cluster, e.To)
	if err != nil {
		return "", err
	}
	pr, err := s.Cluster.Prober(from.Name)
	if err != nil {
		return "", err
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
	evidence := fmt.Sprintf("%s → GET %s: %d probes: %s%s", from.Name, url, sent, strings.Join(parts, ", "), note)
	if firstBody != "" {
		evidence += "; body " + firstBody
	}
	if firstErr != "" {
		evidence += "; first error: " + firstErr
	}
	if sent < count {
		return evidence, fmt.Errorf("only %d of %d probes sent before the step's timeout", sent, count)
	}
	if got := statuses[strconv.Itoa(e.Status)]; got != count {
		return evidence, unmet(fmt.Errorf("expected every answer to be HTTP %d, got %s", e.Status, strings.Join(parts, ", ")))
	}
	return evidence, nil
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
