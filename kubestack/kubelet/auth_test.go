package kubelet

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	authorizationv1 "k8s.io/api/authorization/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
)

// TestRequestAttributes: paths and methods map to what a kubelet asks the authorizer.
func TestRequestAttributes(t *testing.T) {
	cases := []struct {
		method, path string
		want         Attributes
	}{
		{http.MethodPost, "/exec/ns/p/c", Attributes{Verb: "create", Subresource: "proxy", Node: "n"}},
		{http.MethodGet, "/containerLogs/ns/p/c", Attributes{Verb: "get", Subresource: "proxy", Node: "n"}},
		{http.MethodGet, "/stats/summary", Attributes{Verb: "get", Subresource: "stats", Node: "n"}},
		{http.MethodGet, "/metrics", Attributes{Verb: "get", Subresource: "metrics", Node: "n"}},
		{http.MethodGet, "/metricsx", Attributes{Verb: "get", Subresource: "proxy", Node: "n"}},
		{http.MethodGet, "/logs/syslog", Attributes{Verb: "get", Subresource: "log", Node: "n"}},
		{http.MethodDelete, "/spec", Attributes{Verb: "delete", Subresource: "spec", Node: "n"}},
	}
	for _, tc := range cases {
		assert.Equal(t, tc.want, requestAttributes(httptest.NewRequest(tc.method, tc.path, nil), "n"), tc.method+" "+tc.path)
	}
}

// TestReviewAuthorizer: the API server's SubjectAccessReview decides, for the node's
// subresource, and its answers are kept for their TTL.
func TestReviewAuthorizer(t *testing.T) {
	client := fake.NewClientset()
	var asked []authorizationv1.SubjectAccessReviewSpec
	client.PrependReactor("create", "subjectaccessreviews", func(a k8stesting.Action) (bool, runtime.Object, error) {
		sar := a.(k8stesting.CreateAction).GetObject().(*authorizationv1.SubjectAccessReview)
		asked = append(asked, sar.Spec)
		sar.Status.Allowed = sar.Spec.User == apiServerUser
		if !sar.Status.Allowed {
			sar.Status.Reason = "no RBAC policy matched"
		}
		return true, sar, nil
	})
	now := time.Unix(1000, 0)
	ra := newReviewAuthorizer(client)
	ra.now = func() time.Time { return now }
	attrs := Attributes{Verb: "create", Subresource: "proxy", Node: "node-0"}

	ok, _, err := ra.Authorize(context.Background(), User{Name: apiServerUser}, attrs)
	require.NoError(t, err)
	assert.True(t, ok)
	ok, reason, err := ra.Authorize(context.Background(), User{Name: "mallory", Groups: []string{"system:authenticated"}}, attrs)
	require.NoError(t, err)
	assert.False(t, ok)
	assert.Equal(t, "no RBAC policy matched", reason)
	require.Len(t, asked, 2)
	assert.Equal(t, authorizationv1.ResourceAttributes{Verb: "create", Version: "v1", Resource: "nodes", Subresource: "proxy", Name: "node-0"}, *asked[1].ResourceAttributes)
	assert.Equal(t, []string{"system:authenticated"}, asked[1].Groups)

	// Cached: allowed for 5 minutes, denied for 30 seconds.
	now = now.Add(time.Minute)
	_, _, _ = ra.Authorize(context.Background(), User{Name: apiServerUser}, attrs)
	_, _, _ = ra.Authorize(context.Background(), User{Name: "mallory", Groups: []string{"system:authenticated"}}, attrs)
	assert.Len(t, asked, 3, "only the denied answer expired")
}

// apiServerUser stands for the API server's kubelet-client identity.
const apiServerUser = "kube-apiserver-kubelet-client"
