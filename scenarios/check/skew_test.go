//go:build linux

package check

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestCheckCatchesSkew runs the check of a Service of 3 endpoints on iptables@skew
// (endpoint rules at probability 1/n: shares 1/3, 2/9, 4/9) and on iptables: the shares
// fail on the first and pass on the second. Each path sends DistributionProbes (476);
// the 60 it sent before caught this skew in 8% of paths.
func TestCheckCatchesSkew(t *testing.T) {
	const svc = `---
apiVersion: v1
kind: Service
metadata: {name: web}
spec: {selector: {app: web}, ports: [{port: 80, targetPort: 8080}]}
`
	for _, tt := range []struct {
		backend  string
		wantFail bool
	}{{"iptables@skew", true}, {"iptables", false}} {
		t.Run(tt.backend, func(t *testing.T) {
			start := time.Now()
			outs := runCheck(t, tt.backend, deployment+svc)
			require.NotEmpty(t, outs)
			var detail strings.Builder
			skewed := false
			for _, o := range outs {
				require.Equal(t, "default/web", o.Service)
				assert.Equal(t, 3, len(o.Counts), "every endpoint answered: %s", o.Detail)
				skewed = skewed || (o.Verdict == Fail && strings.Contains(o.Detail, "selection is not uniform"))
				detail.WriteString(o.Path + " from " + o.From + ": " + o.Detail + "\n")
			}
			assert.Equal(t, tt.wantFail, skewed, "%s", detail.String())
			t.Logf("%s: %d paths in %s\n%s", tt.backend, len(outs), time.Since(start).Round(time.Millisecond), detail.String())
		})
	}
}
