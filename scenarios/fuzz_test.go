package scenarios

import (
	"os"
	"testing"

	"github.com/stretchr/testify/require"
)

// FuzzLoad checks that ParseScenario never panics and that what it accepts stays valid
// when defaulted and validated again. References resolve against examples/.
func FuzzLoad(f *testing.F) {
	for _, p := range []string{"examples/nginx-nodeport.scenario.yaml", "examples/inference.scenario.yaml", "examples/seed-proxy.yaml"} {
		data, err := os.ReadFile(p)
		require.NoError(f, err)
		f.Add(data)
	}
	f.Add([]byte(scenario(
		"- scale: {deployment: nginx-deployment, replicas: 5}",
		"- setPods: {selector: {app: nginx}, terminating: true}",
		"- churn: {pattern: update, services: 100, allAtOnce: true, duration: 10s}",
		"- expect: {from: node-1, to: {service: multi, port: b, address: externalIP}, expectation: reachable}",
		"- delete: {kind: Service, name: multi}",
	)))
	f.Add([]byte("apiVersion: kpbench.dev/v1alpha1\nkind: Scenario\nname: p\nproxy: {mode: ipvs, ipvs: {scheduler: sh, syncPeriod: 1m}}\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		s, err := ParseScenario("fuzz.yaml", data, "examples")
		if err != nil {
			require.NotEmpty(t, err.Error())
			return
		}
		require.NoError(t, s.Validate(), "accepted scenario does not re-validate")
		s.Default()
		require.NoError(t, s.Validate(), "defaulting an accepted scenario again made it invalid")
	})
}
