package agent

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"kpbench.dev/kpbench/backends"
)

// DefaultHealthzPort is the port of kube-proxy's proxier health server (/healthz,
// /livez): kube-proxy's healthzBindAddress default 0.0.0.0:10256.
const DefaultHealthzPort = 10256

// ListenFunc opens a TCP listener on address ("0.0.0.0:10256") for one of the agent's
// health servers. In a lab it must open the socket inside the node's network namespace
// (see internal/netns: a socket keeps the namespace it was made in); tests pass a factory of
// loopback listeners.
type ListenFunc func(ctx context.Context, address string) (net.Listener, error)

// ServiceHealth is the JSON body of a service health check, as kube-proxy's service health
// server writes it (pkg/proxy/healthcheck/service_health.go).
type ServiceHealth struct {
	// Service names the Service.
	Service struct {
		Namespace string `json:"namespace"`
		Name      string `json:"name"`
	} `json:"service"`
	// LocalEndpoints is the number of ready endpoints of the Service on this node.
	LocalEndpoints int `json:"localEndpoints"`
	// ServiceProxyHealthy is the proxier's own health (see ProxierHealth).
	ServiceProxyHealthy bool `json:"serviceProxyHealthy"`
}

// ProxierHealth is the JSON body of /healthz and /livez, as kube-proxy's proxier health
// server writes it (pkg/proxy/healthcheck/proxy_health.go).
type ProxierHealth struct {
	// LastUpdated is when the last successful sync ended (zero before one).
	LastUpdated time.Time `json:"lastUpdated"`
	// CurrentTime is the time of the answer.
	CurrentTime time.Time `json:"currentTime"`
	// NodeEligible is always true here (kube-proxy makes it false on a node being
	// deleted, which the lab does not model). Only /healthz carries it.
	NodeEligible *bool `json:"nodeEligible,omitempty"`
}

// healthClock is what the health servers know about the agent's syncs.
type healthClock struct {
	now     func() time.Time
	timeout time.Duration // a change pending longer than this makes the proxier unhealthy

	mu          sync.Mutex
	lastUpdated time.Time // end of the last successful sync
	queuedAt    time.Time // oldest change not yet programmed (zero: none)
}

// queued records that a change arrived (the oldest pending one sets the time).
func (c *healthClock) queued() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.queuedAt.IsZero() {
		c.queuedAt = c.now()
	}
}

// updated records a successful sync that ended at end; pending says whether changes
// observed during the sync remain unprogrammed.
func (c *healthClock) updated(end time.Time, pending bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.lastUpdated = end
	c.queuedAt = time.Time{}
	if pending {
		c.queuedAt = end
	}
}

// healthy is kube-proxy's ProxierHealthServer.isHealthy: healthy while starting up and
// while no change has waited longer than the timeout to be programmed.
func (c *healthClock) healthy() (ok bool, lastUpdated, now time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	now = c.now()
	ok = c.queuedAt.IsZero() || now.Sub(c.queuedAt) < c.timeout
	return ok, c.lastUpdated, now
}

// ServeHealth opens the agent's health servers with listen: kube-proxy's proxier health
// server (/healthz, /livez) on port now (DefaultHealthzPort when 0), and, after every
// successful sync, a service health server on the health-check node port of every Service
// that has one (LoadBalancer, externalTrafficPolicy Local), answering 200 while the node
// has ready endpoints of it and 503 otherwise; a Service's server closes when it goes.
// The proxier counts as unhealthy once a change has waited 2 x SyncPeriod to be
// programmed. Call it before Run, once; CloseHealth closes everything.
func (a *Agent) ServeHealth(ctx context.Context, listen ListenFunc, port int32) error {
	if port == 0 {
		port = DefaultHealthzPort
	}
	clock := &healthClock{now: a.cfg.Now, timeout: 2 * a.cfg.SyncPeriod}
	hs := newHealthServers(a.cfg.Node.Name, listen, clock)
	if err := hs.startProxier(ctx, port); err != nil {
		return err
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.health != nil {
		return errors.Join(fmt.Errorf("node %s: health servers already running", a.cfg.Node.Name), hs.close())
	}
	if a.synced { // started late: serve the programmed state at once
		clock.updated(a.metrics.LastSync, a.objGen != a.syncedGen)
		if err := hs.sync(ctx, a.lastState); err != nil {
			return errors.Join(err, hs.close())
		}
	}
	a.health = hs
	return nil
}

// CloseHealth closes the health servers opened by ServeHealth (nothing when none).
func (a *Agent) CloseHealth() error {
	a.mu.Lock()
	hs := a.health
	a.health = nil
	a.mu.Unlock()
	if hs == nil {
		return nil
	}
	return hs.close()
}

// HealthCheckPorts returns the health-check node ports served now, sorted.
func (a *Agent) HealthCheckPorts() []int32 {
	a.mu.Lock()
	hs := a.health
	a.mu.Unlock()
	if hs == nil {
		return nil
	}
	return hs.ports()
}

// HealthErr returns the error of the last update of the service health servers (a port
// that could not be opened), nil when every server is up.
func (a *Agent) HealthErr() error {
	a.mu.Lock()
	hs := a.health
	a.mu.Unlock()
	if hs == nil {
		return nil
	}
	hs.mu.Lock()
	defer hs.mu.Unlock()
	return hs.err
}

// queued records a change the agent observed (nil-safe: no health servers).
func (hs *healthServers) queued() {
	if hs != nil {
		hs.clock.queued()
	}
}

// programmed records a successful sync of st ending at end (pending: changes arrived
// during it) and updates the service health servers. Nil-safe.
func (hs *healthServers) programmed(ctx context.Context, st *backends.State, end time.Time, pending bool) {
	if hs == nil {
		return
	}
	hs.clock.updated(end, pending)
	err := hs.sync(ctx, st)
	hs.mu.Lock()
	hs.err = err
	hs.mu.Unlock()
}

// healthServers are one node's health servers: the proxier's (/healthz, /livez) and one
// per Service with a health-check node port, opened and closed as syncs change the state.
type healthServers struct {
	node   string
	listen ListenFunc
	clock  *healthClock

	mu       sync.Mutex
	proxier  *server
	services map[string]*serviceServer // key: namespace/name
	err      error                     // of the last sync
	wg       sync.WaitGroup
}

// server is one listener and the HTTP server on it.
type server struct {
	ln  net.Listener
	srv *http.Server
}

// serviceServer answers one Service's health checks on its health-check node port.
type serviceServer struct {
	namespace, name string
	port            int32
	local           atomic.Int64
	*server
}

func newHealthServers(node string, listen ListenFunc, clock *healthClock) *healthServers {
	return &healthServers{node: node, listen: listen, clock: clock, services: map[string]*serviceServer{}}
}

// start opens a listener on port (all addresses of the node) and serves h on it.
func (hs *healthServers) start(ctx context.Context, port int32, h http.Handler) (*server, error) {
	addr := net.JoinHostPort("0.0.0.0", strconv.Itoa(int(port)))
	ln, err := hs.listen(ctx, addr)
	if err != nil {
		return nil, fmt.Errorf("node %s: health server on %s: %w", hs.node, addr, err)
	}
	s := &server{ln: ln, srv: &http.Server{Handler: h, ReadHeaderTimeout: 5 * time.Second}}
	hs.wg.Add(1)
	go func() {
		defer hs.wg.Done()
		_ = s.srv.Serve(ln) // returns when closed
	}()
	return s, nil
}

// startProxier opens the proxier health server on port.
func (hs *healthServers) startProxier(ctx context.Context, port int32) error {
	mux := http.NewServeMux()
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, _ *http.Request) { hs.serveProxier(w, true) })
	mux.HandleFunc("/livez", func(w http.ResponseWriter, _ *http.Request) { hs.serveProxier(w, false) })
	s, err := hs.start(ctx, port, mux)
	if err != nil {
		return err
	}
	hs.mu.Lock()
	hs.proxier = s
	hs.mu.Unlock()
	return nil
}

func (hs *healthServers) serveProxier(w http.ResponseWriter, eligible bool) {
	ok, last, now := hs.clock.healthy()
	body := ProxierHealth{LastUpdated: last, CurrentTime: now}
	if eligible {
		yes := true
		body.NodeEligible = &yes
	}
	writeJSON(w, ok, body)
}

func writeJSON(w http.ResponseWriter, ok bool, body any) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	if ok {
		w.WriteHeader(http.StatusOK)
	} else {
		w.WriteHeader(http.StatusServiceUnavailable)
	}
	_ = json.NewEncoder(w).Encode(body)
}

// serve answers a service health check: 200 while the node has ready local endpoints and
// the proxier is healthy, 503 otherwise.
func (s *serviceServer) serve(hs *healthServers) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		n := int(s.local.Load())
		healthy, _, _ := hs.clock.healthy()
		var body ServiceHealth
		body.Service.Namespace, body.Service.Name = s.namespace, s.name
		body.LocalEndpoints, body.ServiceProxyHealthy = n, healthy
		w.Header().Set("X-Load-Balancing-Endpoints", strconv.Itoa(n))
		writeJSON(w, n > 0 && healthy, body)
	})
}

// healthCheckTarget is one Service's entry in the desired state.
type healthCheckTarget struct {
	namespace, name string
	port            int32
	local           int
}

// healthCheckTargets lists the Services of st that have a health-check node port, with
// their number of ready local endpoints (distinct addresses over all ports), as
// kube-proxy's LocalReadyEndpoints counts them.
func healthCheckTargets(st *backends.State) map[string]healthCheckTarget {
	out := map[string]healthCheckTarget{}
	locals := map[string][]netip.Addr{}
	for _, sp := range st.Services {
		if sp.HealthCheckNodePort == 0 {
			continue
		}
		key := sp.Name.Namespace + "/" + sp.Name.Name
		out[key] = healthCheckTarget{namespace: sp.Name.Namespace, name: sp.Name.Name, port: sp.HealthCheckNodePort}
		for _, ep := range sp.Endpoints {
			if ep.IsLocal && ep.Ready {
				locals[key] = append(locals[key], ep.IP)
			}
		}
	}
	for key, ips := range locals {
		slices.SortFunc(ips, netip.Addr.Compare)
		t := out[key]
		t.local = len(slices.Compact(ips))
		out[key] = t
	}
	return out
}

// sync makes the service health servers match st: a server per Service with a
// health-check node port, answering from its current local endpoint count; servers of
// Services that went (or changed port) are closed. A port that cannot be opened is an
// error, retried at the next sync.
func (hs *healthServers) sync(ctx context.Context, st *backends.State) error {
	want := healthCheckTargets(st)
	hs.mu.Lock()
	var stale []*server
	for key, s := range hs.services {
		if t, ok := want[key]; !ok || t.port != s.port {
			stale = append(stale, s.server)
			delete(hs.services, key)
		}
	}
	var missing []healthCheckTarget
	for key, t := range want {
		if s, ok := hs.services[key]; ok {
			s.local.Store(int64(t.local))
		} else {
			missing = append(missing, t)
		}
	}
	hs.mu.Unlock()

	var errs []error
	for _, s := range stale {
		errs = append(errs, closeServer(s))
	}
	slices.SortFunc(missing, func(a, b healthCheckTarget) int { return int(a.port) - int(b.port) })
	for _, t := range missing {
		s := &serviceServer{namespace: t.namespace, name: t.name, port: t.port}
		s.local.Store(int64(t.local))
		srv, err := hs.start(ctx, t.port, s.serve(hs))
		if err != nil {
			errs = append(errs, fmt.Errorf("service %s/%s: %w", t.namespace, t.name, err))
			continue
		}
		s.server = srv
		hs.mu.Lock()
		hs.services[t.namespace+"/"+t.name] = s
		hs.mu.Unlock()
	}
	return errors.Join(errs...)
}

// ports returns the health-check node ports served now, sorted.
func (hs *healthServers) ports() []int32 {
	hs.mu.Lock()
	defer hs.mu.Unlock()
	var out []int32
	for _, s := range hs.services {
		out = append(out, s.port)
	}
	slices.Sort(out)
	return out
}

// close closes every server and waits for their goroutines.
func (hs *healthServers) close() error {
	hs.mu.Lock()
	var all []*server
	if hs.proxier != nil {
		all = append(all, hs.proxier)
		hs.proxier = nil
	}
	for key, s := range hs.services {
		all = append(all, s.server)
		delete(hs.services, key)
	}
	hs.mu.Unlock()
	var errs []error
	for _, s := range all {
		errs = append(errs, closeServer(s))
	}
	hs.wg.Wait()
	return errors.Join(errs...)
}

func closeServer(s *server) error {
	if err := s.srv.Close(); err != nil && !errors.Is(err, net.ErrClosed) {
		return err
	}
	return nil
}
