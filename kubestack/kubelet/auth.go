package kubelet

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	authorizationv1 "k8s.io/api/authorization/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

// User is who sent a request to the kubelet API: the subject of a verified client
// certificate (common name, organizations), as a kubelet's x509 authenticator reads it.
type User struct {
	Name   string
	Groups []string
}

// Attributes are what a kubelet API request asks, in the terms of the API server's
// authorizer: a verb on the node's subresource (resource nodes, name the node).
type Attributes struct {
	// Verb is the API verb of the HTTP method (GET get, POST create, ...).
	Verb string
	// Subresource is proxy (exec, attach, port-forward, container logs and anything
	// else), or stats, metrics, log or spec for those paths, as a kubelet maps them.
	Subresource string
	// Node is the node's name.
	Node string
}

// Authorizer decides whether an authenticated user may do what a request asks.
type Authorizer interface {
	// Authorize returns whether u may do a, and why not.
	Authorize(ctx context.Context, u User, a Attributes) (allowed bool, reason string, err error)
}

// requestAttributes maps a request to authorizer attributes as a kubelet does
// (pkg/kubelet/server/auth.go): the HTTP method gives the verb, the path's first element
// the subresource.
func requestAttributes(r *http.Request, node string) Attributes {
	a := Attributes{Subresource: "proxy", Node: node}
	switch r.Method {
	case http.MethodPost:
		a.Verb = "create"
	case http.MethodGet, http.MethodHead:
		a.Verb = "get"
	case http.MethodPut:
		a.Verb = "update"
	case http.MethodPatch:
		a.Verb = "patch"
	case http.MethodDelete:
		a.Verb = "delete"
	}
	for _, m := range []struct{ prefix, sub string }{{"/stats", "stats"}, {"/metrics", "metrics"}, {"/logs", "log"}, {"/spec", "spec"}} {
		if r.URL.Path == m.prefix || strings.HasPrefix(r.URL.Path, m.prefix+"/") {
			a.Subresource = m.sub
		}
	}
	return a
}

// Cache lifetimes of the API server's answers, a kubelet's defaults
// (--authorization-webhook-cache-authorized-ttl and -unauthorized-ttl).
const (
	allowedTTL = 5 * time.Minute
	deniedTTL  = 30 * time.Second
)

// reviewAuthorizer asks the API server with a SubjectAccessReview, as a kubelet does with
// --authorization-mode=Webhook, and keeps the answers for a while.
type reviewAuthorizer struct {
	client kubernetes.Interface
	now    func() time.Time

	mu    sync.Mutex
	cache map[string]review
}

type review struct {
	allowed bool
	reason  string
	until   time.Time
}

// newReviewAuthorizer returns an Authorizer that asks the API server through client (the
// node's identity, which the Node authorizer lets create SubjectAccessReviews).
func newReviewAuthorizer(client kubernetes.Interface) *reviewAuthorizer {
	return &reviewAuthorizer{client: client, now: time.Now, cache: map[string]review{}}
}

// Authorize implements Authorizer.
func (ra *reviewAuthorizer) Authorize(ctx context.Context, u User, a Attributes) (bool, string, error) {
	groups := slices.Clone(u.Groups)
	slices.Sort(groups)
	key := strings.Join([]string{u.Name, strings.Join(groups, ","), a.Verb, a.Subresource, a.Node}, "\x00")
	now := ra.now()
	ra.mu.Lock()
	if r, ok := ra.cache[key]; ok && now.Before(r.until) {
		ra.mu.Unlock()
		return r.allowed, r.reason, nil
	}
	ra.mu.Unlock()
	sar := &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{
		User: u.Name, Groups: u.Groups,
		ResourceAttributes: &authorizationv1.ResourceAttributes{
			Verb: a.Verb, Version: "v1", Resource: "nodes", Subresource: a.Subresource, Name: a.Node,
		},
	}}
	res, err := ra.client.AuthorizationV1().SubjectAccessReviews().Create(ctx, sar, metav1.CreateOptions{})
	if err != nil {
		return false, "", fmt.Errorf("SubjectAccessReview for %s: %w", u.Name, err)
	}
	r := review{allowed: res.Status.Allowed, reason: res.Status.Reason, until: now.Add(deniedTTL)}
	if r.allowed {
		r.until = now.Add(allowedTTL)
	}
	ra.mu.Lock()
	ra.cache[key] = r
	ra.mu.Unlock()
	return r.allowed, r.reason, nil
}

// authenticate returns the user of a request's verified client certificate.
func authenticate(r *http.Request) (User, bool) {
	if r.TLS == nil || len(r.TLS.VerifiedChains) == 0 || len(r.TLS.VerifiedChains[0]) == 0 {
		return User{}, false
	}
	c := r.TLS.VerifiedChains[0][0]
	if c.Subject.CommonName == "" {
		return User{}, false
	}
	groups := append(slices.Clone(c.Subject.Organization), "system:authenticated")
	return User{Name: c.Subject.CommonName, Groups: groups}, true
}
