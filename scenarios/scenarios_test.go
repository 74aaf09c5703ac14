package scenarios

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"

	"kpbench.dev/kpbench/backends/kubeproxy"
	"kpbench.dev/kpbench/internal/yamlpos"
)

func TestLoadExamples(t *testing.T) {
	s, err := Load("examples/nginx-nodeport.scenario.yaml")
	require.NoError(t, err)
	assert.Equal(t, "nginx-nodeport", s.Name)
	assert.Equal(t, 2, s.Topology.Nodes)
	assert.Equal(t, 1, *s.Topology.Clients)
	assert.Equal(t, DefaultNodeCIDR, s.Topology.NodeCIDR)
	assert.Equal(t, DefaultPodCIDR, s.ProxyConfig.ClusterCIDR)
	require.Len(t, s.Manifests[0].Objects, 2)
	assert.Equal(t, "expect", s.Steps[1].Kind)
	assert.Equal(t, AddressNodePort, action[*ExpectStep](t, s, 1).To.Address)
	assert.Equal(t, 100, action[*ExpectStep](t, s, 3).Count)
	assert.Empty(t, s.Warnings)

	s, err = Load("examples/inference.scenario.yaml")
	require.NoError(t, err)
	assert.Equal(t, string(kubeproxy.ModeIPTables), s.ProxyConfig.Mode)
	assert.Equal(t, "169.169.0.0/16", s.ProxyConfig.ClusterCIDR)
	assert.Equal(t, "node-0", action[*ExpectStep](t, s, 1).To.Node, "defaulted")
	assert.Equal(t, 1, action[*ExpectStep](t, s, 1).Count)
	pod := action[*ApplyStep](t, s, 2).Manifests[0].Objects[0]
	assert.Equal(t, "inference-pod-1", pod.Key().Name)
	assert.Equal(t, "examples/inference.scenario.yaml", pod.Source.File)
	assert.Contains(t, strings.Join(s.Warnings, "\n"), "kubeProxyIPVSConfiguration.scheduler: unknown field, ignored (did you mean ipvs.scheduler?)")
}

func TestSeedProxyConfig(t *testing.T) {
	for _, path := range []string{"/work/shared/examples/proxy.yaml", "examples/seed-proxy.yaml"} {
		c, warnings, err := LoadProxyConfig(path)
		require.NoError(t, err)
		assert.Equal(t, string(kubeproxy.ModeIPTables), c.Mode)
		assert.Equal(t, "169.169.0.0/16", c.ClusterCIDR)
		assert.False(t, c.IPTables.MasqueradeAll)
		assert.Equal(t, time.Second, c.IPTables.MinSyncPeriod.Duration)
		assert.Equal(t, 30*time.Second, c.NFTables.SyncPeriod.Duration)
		assert.Equal(t, "rr", c.IPVS.Scheduler)
		assert.Equal(t, int32(14), *c.IPTables.MasqueradeBit)
		all := strings.Join(warnings, "\n")
		for _, want := range []string{
			path + ":3: clientConnection: accepted but not used by kpbench",
			path + ":12: hostnameOverride: accepted but not used by kpbench",
			path + ":16: kubeProxyIPTablesConfiguration.masqueradeAll: unknown field, ignored (did you mean iptables.masqueradeAll?)",
			path + ":18: kubeProxyIPVSConfiguration.scheduler: unknown field, ignored (did you mean ipvs.scheduler?)",
		} {
			assert.Contains(t, all, want)
		}
	}
}

func TestParseProxyConfig(t *testing.T) {
	const head = "apiVersion: kubeproxy.config.k8s.io/v1alpha1\nkind: KubeProxyConfiguration\n"
	for _, tc := range []struct {
		name, src, field, msg string
		line                  int
	}{
		{"bad mode", head + "mode: userspace\n", "mode", `Unsupported value: "userspace"`, 3},
		{"bad duration", head + "iptables:\n  minSyncPeriod: soon\n", "iptables.minSyncPeriod", "must be a duration", 4},
		{"duration as number", head + "nftables:\n  syncPeriod: 30\n", "nftables.syncPeriod", "duration string", 4},
		{"zero sync", head + "ipvs:\n  syncPeriod: 0s\n", "ipvs.syncPeriod", "greater than 0", 4},
		{"min above sync", head + "iptables:\n  syncPeriod: 1s\n  minSyncPeriod: 2s\n", "iptables.minSyncPeriod", "less than or equal to syncPeriod", 5},
		{"bad CIDR", head + "clusterCIDR: 10.0.0.0/33\n", "clusterCIDR", "IPv4 CIDR", 3},
		{"bad scheduler", head + "ipvs: {scheduler: random}\n", "ipvs.scheduler", "Unsupported value", 3},
		{"masqueradeBit", head + "iptables: {masqueradeBit: 32}\n", "iptables.masqueradeBit", "0-31", 3},
		{"wrong type", head + "iptables: {masqueradeAll: 1}\n", "iptables.masqueradeAll", "expected a boolean", 3},
		{"missing kind", "apiVersion: kubeproxy.config.k8s.io/v1alpha1\nmode: ipvs\n", "kind", "must be \"KubeProxyConfiguration\"", 1},
		{"wrong apiVersion", "apiVersion: v1\nkind: KubeProxyConfiguration\n", "apiVersion", "Unsupported value", 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, _, err := ParseProxyConfig("p.yaml", []byte(tc.src))
			requirePositioned(t, err, "p.yaml", tc.line, tc.field, tc.msg)
		})
	}

	c, warnings, err := ParseProxyConfig("p.yaml", []byte(head+"mode: nftables\nnftables: {minSyncPeriod: 100ms}\nmetrics: 1\nipvs: {strictARP: true, excludeCIDRs: []}\nfoo: {bar: 1}\n"))
	require.NoError(t, err)
	assert.Equal(t, 100*time.Millisecond, c.NFTables.MinSyncPeriod.Duration)
	assert.True(t, c.IPVS.StrictARP)
	assert.Equal(t, []string{
		"p.yaml:5: metrics: unknown field, ignored",
		"p.yaml:6: ipvs.excludeCIDRs: accepted but not used by kpbench",
		"p.yaml:7: foo: unknown field, ignored",
	}, warnings)
}

// requirePositioned asserts that err holds a positioned error at file:line on field whose
// message contains msg.
func requirePositioned(t *testing.T, err error, file string, line int, fld, msg string) {
	t.Helper()
	require.Error(t, err)
	list := yamlpos.AsErrors(err)
	require.NotEmpty(t, list, "error without position: %v", err)
	for _, e := range list {
		if e.File == file && e.Line == line && e.Field == fld && strings.Contains(e.Msg, msg) {
			assert.NotContains(t, e.Error(), "\n")
			return
		}
	}
	t.Fatalf("no error at %s:%d %s containing %q; got:\n%v", file, line, fld, msg, err)
}

// scenario returns a minimal valid scenario (its steps start at line 13) with extra
// lines appended.
func scenario(extra ...string) string {
	return `apiVersion: kpbench.dev/v1alpha1
kind: Scenario
name: t
topology: {nodes: 2, clients: 1}
manifests:
- file: nginx-nodeport.yaml
- inline:
    apiVersion: v1
    kind: Service
    metadata: {name: multi}
    spec: {type: LoadBalancer, externalIPs: [1.2.3.4], selector: {app: nginx}, ports: [{name: a, port: 80}, {name: b, port: 53, protocol: UDP}]}
steps:
` + strings.Join(extra, "\n") + "\n"
}

func TestValidScenario(t *testing.T) {
	s, err := ParseScenario("s.yaml", []byte(scenario(
		"- name: one",
		"  scale: {deployment: nginx-deployment, replicas: 5}",
		"- setPods: {names: [nginx-deployment-4], ready: false}",
		"- setPods: {selector: {app: nginx}, terminating: true}",
		"- churn: {pattern: add, services: 100, endpointsPerService: 10, rate: 50}",
		"- churn: {pattern: update, services: 100, allAtOnce: true, duration: 10s, template: {port: 53, protocol: UDP, type: NodePort}}",
		"- wait: {synced: true}",
		"- expect: {from: node-1, to: {service: multi, port: b, address: externalIP}, protocol: UDP, expectation: reachable}",
		"- expect: {from: pod:default/nginx-deployment-2, to: {service: multi, port: a, address: loadBalancer}, expectation: sameBackend}",
		"- expect: {from: client-0, to: {ipPort: '10.96.0.1:443'}, expectation: refused, timeout: 3s}",
		"- measure: {name: lookup, params: {samples: 10, from: client-0}}",
		"- delete: {kind: Service, name: multi}",
		"- delete: {manifests: [{file: nginx-nodeport.yaml}]}",
	)), "examples")
	require.NoError(t, err)
	assert.Equal(t, "TCP", action[*ChurnStep](t, s, 3).Template.Protocol)
	assert.Equal(t, 100, action[*ExpectStep](t, s, 7).Count)
	assert.Equal(t, "default", action[*DeleteStep](t, s, 10).Namespace)
	lookup := action[*MeasureStep](t, s, 9).Measuring.(*LookupParams)
	assert.Equal(t, LookupParams{Samples: 10, From: "client-0"}, *lookup)
	svc := s.Manifests[1].Objects[0].Object.(*corev1.Service)
	assert.Equal(t, corev1.ServiceExternalTrafficPolicyCluster, svc.Spec.ExternalTrafficPolicy)
}

func TestScenarioErrors(t *testing.T) {
	for _, tc := range []struct {
		name, src, file, field, msg string
		line                        int
	}{
		{"wrong apiVersion", strings.Replace(scenario(), "kpbench.dev/v1alpha1", "v1", 1), "", "apiVersion", "Unsupported value", 1},
		{"wrong kind", strings.Replace(scenario(), "kind: Scenario", "kind: Test", 1), "", "kind", "Unsupported value", 2},
		{"name invalid", strings.Replace(scenario(), "name: t\n", "name: My Test\n", 1), "", "name", "Invalid value", 3},
		{"unknown top-level field", scenario() + "stpes: []\n", "", "stpes", "unknown field", 14},
		{"unknown step field", scenario("- wiat: {synced: true}"), "", "steps[0].wiat", "unknown field", 13},
		{"no action", scenario("- name: x"), "", "steps[0]", "one action", 13},
		{"two actions", scenario("- wait: {synced: true}", "  measure: {name: m}"), "", "steps[0]", "exactly one action, found wait, measure", 13},
		{"duplicate step names", scenario("- {name: a, wait: {synced: true}}", "- {name: a, wait: {synced: true}}"), "", "steps[1].name", "Duplicate value", 14},
		{"nodes zero after default is fine but negative not", strings.Replace(scenario(), "nodes: 2", "nodes: -1", 1), "", "topology.nodes", "must be in range 1-64", 4},
		{"too many nodes", strings.Replace(scenario(), "nodes: 2", "nodes: 65", 1), "", "topology.nodes", "1-64", 4},
		{"too many clients", strings.Replace(scenario(), "clients: 1", "clients: 33", 1), "", "topology.clients", "0-32", 4},
		{"too many pods per node", strings.Replace(scenario(), "clients: 1}", "clients: 1, podsPerNode: 3990}", 1), "", "topology.podsPerNode", "1-3989", 4},
		{"too many pods", strings.Replace(scenario(), "nodes: 2, clients: 1}", "nodes: 8, clients: 1, podsPerNode: 3000}", 1), "", "topology.podsPerNode", "limit of 20000 pods", 4},
		{"pod blocks past a /24 need room", strings.Replace(scenario(), "clients: 1}", "clients: 1, podsPerNode: 500, podCIDR: 10.244.0.0/23}", 1), "", "topology.podCIDR", "too small for 2 nodes with /22 blocks (511 pods per node)", 4},
		{"bad nodeCIDR", strings.Replace(scenario(), "clients: 1}", "clients: 1, nodeCIDR: 172.18.0.1/24}", 1), "", "topology.nodeCIDR", "did you mean 172.18.0.0/24", 4},
		{"small nodeCIDR", strings.Replace(scenario(), "clients: 1}", "clients: 1, nodeCIDR: 172.18.0.0/25}", 1), "", "topology.nodeCIDR", "prefix must be /24 or shorter", 4},
		{"overlapping CIDRs", strings.Replace(scenario(), "clients: 1}", "clients: 1, serviceCIDR: 10.244.0.0/20}", 1), "", "topology.serviceCIDR", "overlaps podCIDR", 4},
		{"podCIDR too small", strings.Replace(scenario(), "clients: 1}", "clients: 1, podCIDR: 10.244.0.0/24}", 1), "", "topology.podCIDR", "too small for 2 nodes with /24 blocks", 4},
		{"bad nodePortRange", strings.Replace(scenario(), "clients: 1}", "clients: 1, nodePortRange: 32767-30000}", 1), "", "topology.nodePortRange", "MIN-MAX", 4},
		{"nodePort outside custom range", strings.Replace(scenario(), "clients: 1}", "clients: 1, nodePortRange: 31000-32000}", 1), "examples/nginx-nodeport.yaml", "spec.ports[0].nodePort", "must be in range 31000-32000", 33},
		{"missing manifest file", strings.Replace(scenario(), "file: nginx-nodeport.yaml", "file: nope.yaml", 1), "", "manifests[0].file", "cannot read manifest", 6},
		{"inline manifest error", strings.Replace(scenario(), "port: 53,", "port: 0,", 1), "", "manifests[1].inline.spec.ports[1].port", "between 1 and 65535", 11},
		{"inline unsupported kind", strings.Replace(scenario(), "kind: Service", "kind: ConfigMap", 1), "", "manifests[1].inline.kind", "Unsupported value", 9},
		{"manifest both", strings.Replace(scenario(), "- inline:", "- file: nginx-nodeport.yaml\n  inline:", 1), "", "manifests[1]", "not both", 7},
		{"duplicate objects", strings.Replace(scenario(), "- inline:", "- file: nginx-nodeport.yaml\n- inline:", 1), "", "manifests[1]", "Duplicate value", 7},
		{"proxy file and inline", scenario() + "proxy: {proxyConfigFile: seed-proxy.yaml, mode: ipvs}\n", "", "proxy", "not both", 14},
		{"proxy inline strict", scenario() + "proxy: {scheduler: rr}\n", "", "proxy.scheduler", "unknown field", 14},
		{"backendOptions strict", scenario() + "backendOptions:\n  iptables: {wholeTablecache: true}\n", "", "backendOptions.iptables.wholeTablecache", "unknown field", 15},
		{"backendOptions wrong type", scenario() + "backendOptions:\n  iptables: {wholeTableCache: yes please}\n", "", "backendOptions.iptables.wholeTableCache", "", 15},
		{"proxy inline bad mode", scenario() + "proxy:\n  mode: userspace\n", "", "proxy.mode", "Unsupported value", 15},
		{"proxy file missing", scenario() + "proxy: {proxyConfigFile: nope.yaml}\n", "", "proxy.proxyConfigFile", "no such file", 14},
		{"scale unknown deployment", scenario("- scale: {deployment: web, replicas: 1}"), "", "steps[0].scale.deployment", "no Deployment default/web", 13},
		{"scale negative", scenario("- scale: {deployment: nginx-deployment, replicas: -1}"), "", "steps[0].scale.replicas", "0-10000", 13},
		{"scale missing replicas", scenario("- scale: {deployment: nginx-deployment}"), "", "steps[0].scale.replicas", "Required value", 13},
		{"scale beyond capacity", scenario("- scale: {deployment: nginx-deployment, replicas: 300}"), "", "steps[0].scale.replicas", "capacity of 220", 13},
		{"scale after delete", scenario("- delete: {kind: Deployment, name: nginx-deployment}", "- scale: {deployment: nginx-deployment, replicas: 1}"), "", "steps[1].scale.deployment", "no Deployment", 14},
		{"delete unknown", scenario("- delete: {kind: Pod, name: x}"), "", "steps[0].delete.name", "no such object", 13},
		{"delete bad kind", scenario("- delete: {kind: ConfigMap, name: x}"), "", "steps[0].delete.kind", "Unsupported value", 13},
		{"delete nothing", scenario("- delete: {}"), "", "steps[0].delete", "Required value", 13},
		{"apply nothing", scenario("- apply: {manifests: []}"), "", "steps[0].apply.manifests", "Required value", 13},
		{"setPods both", scenario("- setPods: {names: [a], selector: {a: b}, ready: true}"), "", "steps[0].setPods", "not both", 13},
		{"setPods no condition", scenario("- setPods: {names: [nginx-deployment-0]}"), "", "steps[0].setPods", "ready and/or terminating", 13},
		{"setPods unknown pod", scenario("- setPods: {names: [nginx-deployment-3], ready: false}"), "", "steps[0].setPods.names[0]", "no such pod", 13},
		{"setPods selector matches nothing", scenario("- setPods: {selector: {app: redis}, ready: false}"), "", "steps[0].setPods.selector", "matches no pod", 13},
		{"setPods ready not bool", scenario("- setPods: {names: [nginx-deployment-0], ready: 'no'}"), "", "steps[0].setPods.ready", "expected a boolean", 13},
		{"churn bad pattern", scenario("- churn: {pattern: flap, services: 1, rate: 1}"), "", "steps[0].churn.pattern", "Unsupported value", 13},
		{"churn too many services", scenario("- churn: {pattern: add, services: 50001, rate: 1}"), "", "steps[0].churn.services", "1-50000", 13},
		{"churn too many endpoints", scenario("- churn: {pattern: add, services: 1, endpointsPerService: 11, rate: 1}"), "", "steps[0].churn.endpointsPerService", "0-10", 13},
		{"churn no rate", scenario("- churn: {pattern: add, services: 1}"), "", "steps[0].churn.rate", "Required value", 13},
		{"churn rate and allAtOnce", scenario("- churn: {pattern: add, services: 1, rate: 1, allAtOnce: true}"), "", "steps[0].churn.rate", "not both", 13},
		{"churn negative rate", scenario("- churn: {pattern: add, services: 1, rate: -5}"), "", "steps[0].churn.rate", "must be in range", 13},
		{"churn update without duration", scenario("- churn: {pattern: update, services: 1, rate: 1}"), "", "steps[0].churn.duration", "Required value", 13},
		{"churn update with nothing to update", scenario("- churn: {pattern: update, services: 1, rate: 1, duration: 1s}"), "", "steps[0].churn.pattern", "no generated Services exist", 13},
		{"churn add with duration", scenario("- churn: {pattern: add, services: 1, rate: 1, duration: 1s}"), "", "steps[0].churn.duration", "only the update and mixed patterns", 13},
		{"churn negative duration", scenario("- churn: {pattern: add, services: 1, rate: 1}", "- churn: {pattern: update, services: 1, rate: 1, duration: -1s}"), "", "steps[1].churn.duration", "positive duration", 14},
		{"churn template type", scenario("- churn: {pattern: add, services: 1, rate: 1, template: {type: ExternalName}}"), "", "steps[0].churn.template.type", "Unsupported value", 13},
		{"churn template port", scenario("- churn:", "    pattern: add", "    services: 1", "    rate: 1", "    template: {port: 70000}"), "", "steps[0].churn.template.port", "1-65535", 17},
		{"wait not synced", scenario("- wait: {synced: false}"), "", "steps[0].wait.synced", "must be true", 13},
		{"wait bad timeout", scenario("- wait: {synced: true, timeout: 0s}"), "", "steps[0].wait.timeout", "positive duration", 13},
		{"wait timeout unparsable", scenario("- wait: {synced: true, timeout: forever}"), "", "steps[0].wait.timeout", "must be a duration", 13},
		{"expect bad from", scenario("- expect: {from: laptop, to: {service: multi, port: a}, expectation: reachable}"), "", "steps[0].expect.from", "client-N, node-N, probe-node-N or pod:NAME", 13},
		{"expect client out of range", scenario("- expect: {from: client-1, to: {service: multi, port: a}, expectation: reachable}"), "", "steps[0].expect.from", "1 clients", 13},
		{"expect node out of range", scenario("- expect: {from: node-2, to: {service: multi, port: a}, expectation: reachable}"), "", "steps[0].expect.from", "node-0 to node-1", 13},
		{"expect unknown pod", scenario("- expect: {from: 'pod:web-0', to: {service: multi, port: a}, expectation: reachable}"), "", "steps[0].expect.from", "no such pod", 13},
		{"expect unknown service", scenario("- expect: {from: client-0, to: {service: kube-system/dns}, expectation: reachable}"), "", "steps[0].expect.to.service", "no Service kube-system/dns", 13},
		{"expect port required", scenario("- expect: {from: client-0, to: {service: multi}, expectation: reachable}"), "", "steps[0].expect.to.port", "one of a, b", 13},
		{"expect port unknown", scenario("- expect: {from: client-0, to: {service: multi, port: c}, expectation: reachable}"), "", "steps[0].expect.to.port", "Unsupported value", 13},
		{"expect nodePort on ClusterIP", scenario("- apply: {manifests: [{inline: {apiVersion: v1, kind: Service, metadata: {name: c}, spec: {ports: [{port: 1}]}}}]}", "- expect: {from: client-0, to: {service: c, address: nodePort}, expectation: reachable}"), "", "steps[1].expect.to.address", "has no node port", 14},
		{"expect loadBalancer on NodePort", scenario("- expect: {from: client-0, to: {service: nginx-service, address: loadBalancer}, expectation: reachable}"), "", "steps[0].expect.to.address", "not LoadBalancer", 13},
		{"expect externalIP missing", scenario("- expect: {from: client-0, to: {service: nginx-service, address: externalIP}, expectation: reachable}"), "", "steps[0].expect.to.address", "no externalIPs", 13},
		{"expect bad address kind", scenario("- expect: {from: client-0, to: {service: nginx-service, address: podIP}, expectation: reachable}"), "", "steps[0].expect.to.address", "Unsupported value", 13},
		{"expect node with clusterIP", scenario("- expect: {from: client-0, to: {service: nginx-service, node: node-1}, expectation: reachable}"), "", "steps[0].expect.to.node", "only a nodePort or healthCheckNodePort target", 13},
		{"expect bad node", scenario("- expect: {from: client-0, to: {service: nginx-service, address: nodePort, node: node-9}, expectation: reachable}"), "", "steps[0].expect.to.node", "2 nodes", 13},
		{"expect protocol mismatch", scenario("- expect: {from: client-0, to: {service: multi, port: b}, protocol: TCP, expectation: reachable}"), "", "steps[0].expect.protocol", "the service port is UDP", 13},
		{"expect bad protocol", scenario("- expect: {from: client-0, to: {ipPort: '1.2.3.4:80'}, protocol: ICMP, expectation: reachable}"), "", "steps[0].expect.protocol", "Unsupported value", 13},
		{"expect bad ipPort", scenario("- expect: {from: client-0, to: {ipPort: '1.2.3.4'}, expectation: reachable}"), "", "steps[0].expect.to.ipPort", "IPv4:port", 13},
		{"expect both targets", scenario("- expect: {from: client-0, to: {ipPort: '1.2.3.4:80', service: multi}, expectation: reachable}"), "", "steps[0].expect.to", "not both", 13},
		{"expect no target", scenario("- expect: {from: client-0, expectation: reachable}"), "", "steps[0].expect.to", "Required value", 13},
		{"expect bad expectation", scenario("- expect: {from: client-0, to: {ipPort: '1.2.3.4:80'}, expectation: works}"), "", "steps[0].expect.expectation", "Unsupported value", 13},
		{"expect count too big", scenario("- expect: {from: client-0, to: {ipPort: '1.2.3.4:80'}, expectation: reachable, count: 100001}"), "", "steps[0].expect.count", "1-100000", 13},
		{"expect count negative", scenario("- expect: {from: client-0, to: {ipPort: '1.2.3.4:80'}, expectation: reachable, count: -1}"), "", "steps[0].expect.count", "1-100000", 13},
		{"expect headless", scenario("- apply: {manifests: [{inline: {apiVersion: v1, kind: Service, metadata: {name: h}, spec: {clusterIP: None}}}]}", "- expect: {from: client-0, to: {service: h}, expectation: reachable}"), "", "steps[1].expect.to.service", "headless", 14},
		{"measure bad name", scenario("- measure: {name: '9 lives'}"), "", "steps[0].measure.name", "measurement name", 13},
		{"measure no name", scenario("- measure: {params: {a: 1}}"), "", "steps[0].measure.name", "measurement name", 13},
		{"measure unknown name", scenario("- measure: {name: ruleCount}"), "", "steps[0].measure.name", `unknown measurement "ruleCount"`, 13},
		{"measure name typo", scenario("- measure: {name: lokup}"), "", "steps[0].measure.name", `did you mean "lookup"?`, 13},
		{"measure unknown param", scenario("- churn: {pattern: add, services: 10, allAtOnce: true}", "- measure: {name: sync, params: {kind: full, repeat: 3}}"), "", "steps[1].measure.params.repeat", `unknown field (did you mean "repeats"?)`, 14},
		{"measure param type", scenario("- churn: {pattern: add, services: 10, allAtOnce: true}", "- measure: {name: lookup, params: {samples: many}}"), "", "steps[1].measure.params.samples", "expected an integer", 14},
		{"measure param range", scenario("- measure: {name: sync, params: {repeats: 1001}}"), "", "steps[0].measure.params.repeats", "1-1000", 13},
		{"partial sync without generated Services", scenario("- measure: {name: sync, params: {kind: partial}}"), "", "steps[0].measure.params.kind", "none exists at this step", 13},
		{"lookup without generated Services", scenario("- measure: {name: lookup}"), "", "steps[0].measure.name", "none exists at this step", 13},
		{"distribution over one endpoint", scenario("- measure: {name: distribution, params: {endpoints: 1}}"), "", "steps[0].measure.params.endpoints", "2-10", 13},
		{"distribution with too few connections", scenario("- measure: {name: distribution, params: {endpoints: 10, connections: 20}}"), "", "steps[0].measure.params.connections", "at least 5", 13},
		{"distribution weights count", scenario("- measure: {name: distribution, params: {endpoints: 3, weights: '1,2'}}"), "", "steps[0].measure.params.weights", "2 weights for 3 endpoints", 13},
		{"programming latency without a trigger", "apiVersion: kpbench.dev/v1alpha1\nkind: Scenario\nname: t\nsteps:\n- churn: {pattern: add, services: 10, allAtOnce: true}\n- measure: {name: programming-latency}\n", "", "steps[1].measure.name", "no step before this one makes such a change", 6},
		{"programming latency, unknown mode", scenario("- measure: {name: programming-latency, params: {mode: probe}}"), "", "steps[0].measure.params.mode", "Unsupported value", 13},
		{"programming latency, probed, too many samples", scenario("- measure: {name: programming-latency, params: {mode: probed, samples: 100001}}"), "", "steps[0].measure.params.samples", "1-100000", 13},
		{"churn measurement without a probed churn", scenario("- measure: {name: churn}"), "", "steps[0].measure.name", "no step before this one runs one", 13},
		{"limit on an undeclared figure", scenario("- measure: {name: rules, limits: {churn-misroutes: 0}}"), "", "steps[0].measure.limits[churn-misroutes]", "Unsupported value", 13},
		{"scenario-wide known failures", scenario("- wait: {synced: true}") + "knownFailures: {userspace: lost}\n", "", "knownFailures", "on the step that fails", 14},
		{"known failure without reason", scenario("- wait: {synced: true}", "  knownFailure: {backends: [ipvs]}"), "", "steps[0].knownFailure.reason", "Required value", 14},
		{"known failure of an unknown backend", scenario("- wait: {synced: true}", "  knownFailure: {reason: r, backends: [ipvz]}"), "", "steps[0].knownFailure.backends[0]", "Unsupported value", 14},
		{"two documents", scenario() + "---\nkind: Scenario\n", "", "", "one document", 15},
		{"churn bound out of range", scenario("- churn: {pattern: add, services: 10, allAtOnce: true}", "- churn: {pattern: mixed, services: 10, rate: 5, duration: 1s, probe: {}}", "- measure: {name: churn, params: {maxFailedShare: 2}}"), "", "steps[2].measure.params.maxFailedShare", "0-1", 15},
		{"empty file", "# nothing\n", "", "", "empty file", 1},
		{"zero bytes", "", "", "", "empty file", 1},
		{"only a document marker", "---\n", "", "", "empty file", 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := ParseScenario("s.yaml", []byte(tc.src), "examples")
			file := "s.yaml"
			if tc.file != "" {
				file = tc.file
			}
			requirePositioned(t, err, file, tc.line, tc.field, tc.msg)
		})
	}
}

func TestDefaults(t *testing.T) {
	s := &Scenario{Steps: []Step{
		{Kind: "wait", Action: &WaitStep{Synced: true}},
		{Kind: "expect", Action: &ExpectStep{Expectation: ExpectDistribution, To: Destination{Service: "x", Address: AddressNodePort}}},
		{Kind: "expect", Action: &ExpectStep{Expectation: ExpectRefused, To: Destination{IPPort: "1.2.3.4:5"}}},
		{Kind: "churn", Action: &ChurnStep{}},
		{Kind: "setPods", Action: &SetPodsStep{}},
	}}
	s.Default()
	assert.Equal(t, 1, s.Topology.Nodes)
	assert.Equal(t, 110, s.Topology.PodsPerNode)
	assert.Equal(t, 1, *s.Topology.Clients)
	assert.Equal(t, Topology{Nodes: 1, PodsPerNode: 110, Clients: s.Topology.Clients, NodeCIDR: "172.18.0.0/24", PodCIDR: "10.244.0.0/16",
		ServiceCIDR: "10.96.0.0/12", LoadBalancerPool: "172.18.1.0/24", NodePortRange: "30000-32767"}, s.Topology)
	assert.Equal(t, "10.244.0.0/16", s.ProxyConfig.ClusterCIDR)
	assert.Equal(t, time.Second, s.ProxyConfig.IPVS.MinSyncPeriod.Duration)
	assert.Nil(t, action[*WaitStep](t, s, 0).Timeout, "the runner applies the wait default (RunOptions.WaitTimeout)")
	assert.Equal(t, 100, action[*ExpectStep](t, s, 1).Count)
	assert.Equal(t, "node-0", action[*ExpectStep](t, s, 1).To.Node)
	assert.Equal(t, 1, action[*ExpectStep](t, s, 2).Count)
	assert.Empty(t, action[*ExpectStep](t, s, 2).To.Address, "literal targets have no address kind")
	assert.Equal(t, ChurnTemplate{Port: 80, Protocol: "TCP", Type: "ClusterIP"}, action[*ChurnStep](t, s, 3).Template)
	assert.Equal(t, "default", action[*SetPodsStep](t, s, 4).Namespace)

	zero := 0
	s = &Scenario{Topology: Topology{Clients: &zero}}
	s.Default()
	assert.Equal(t, 0, *s.Topology.Clients, "an explicit 0 clients stays")
}

// action returns step i's action as a T.
func action[T Action](t *testing.T, s *Scenario, i int) T {
	t.Helper()
	a, ok := s.Steps[i].Action.(T)
	require.True(t, ok, "step %d is a %s (%T)", i, s.Steps[i].Kind, s.Steps[i].Action)
	return a
}

// TestTopologyWithinTheLabsLimits: the scenario's bounds are the lab's, and a node with
// more pods than a /24 holds gets a larger block.
func TestTopologyWithinTheLabsLimits(t *testing.T) {
	s, err := ParseScenario("s.yaml", []byte(strings.Replace(scenario(), "nodes: 2, clients: 1}", "nodes: 2, clients: 32, podsPerNode: 1000}", 1)), "examples")
	require.NoError(t, err)
	o, err := s.TestbedOptions("iptables", "lab1")
	require.NoError(t, err)
	assert.Equal(t, 1011, o.Lab.PodCapacity, "podsPerNode, the probe pod and the generated Services' pods")
	bits, err := o.Lab.NodeBlockBits()
	require.NoError(t, err)
	assert.Equal(t, 22, bits, "1011 pods need a /22 per node")
}

func TestLoadResolvesRelativeToScenario(t *testing.T) {
	dir := t.TempDir()
	sub := filepath.Join(dir, "m")
	require.NoError(t, os.Mkdir(sub, 0o755))
	nginx, err := os.ReadFile("examples/nginx-nodeport.yaml")
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(filepath.Join(sub, "app.yaml"), nginx, 0o644))
	path := filepath.Join(dir, "s.yaml")
	require.NoError(t, os.WriteFile(path, []byte("apiVersion: kpbench.dev/v1alpha1\nkind: Scenario\nname: rel\nmanifests: [{file: m/app.yaml}]\n"), 0o644))
	s, err := Load(path)
	require.NoError(t, err)
	assert.Equal(t, filepath.Join(sub, "app.yaml"), s.Manifests[0].Objects[0].Source.File)
	assert.Equal(t, dir, s.BaseDir)

	_, err = Load(filepath.Join(dir, "missing.yaml"))
	require.Error(t, err)
}

// TestManifestNamespaceAndList: a scenario's manifests may hold Namespaces and Lists, as
// kubectl accepts; the List's objects exist for the steps that follow.
func TestManifestNamespaceAndList(t *testing.T) {
	src := `apiVersion: kpbench.dev/v1alpha1
kind: Scenario
name: lists
manifests:
- inline: {apiVersion: v1, kind: Namespace, metadata: {name: shop}}
- inline:
    apiVersion: v1
    kind: List
    items:
    - {apiVersion: v1, kind: Service, metadata: {name: web, namespace: shop}, spec: {selector: {app: web}, ports: [{port: 80}]}}
    - {apiVersion: v1, kind: Pod, metadata: {name: web-0, namespace: shop, labels: {app: web}}, spec: {containers: [{name: c, image: i}]}}
steps:
- expect: {from: client-0, to: {service: shop/web}, expectation: reachable}
`
	s, err := ParseScenario("s.yaml", []byte(src), "examples")
	require.NoError(t, err)
	require.Len(t, s.Manifests[1].Objects, 2)
	_, err = ParseScenario("s.yaml", []byte(strings.Replace(src, "kind: List", "kind: Lists", 1)), "examples")
	requirePositioned(t, err, "s.yaml", 8, "manifests[1].inline.kind", `Unsupported value: "Lists"`)
}
