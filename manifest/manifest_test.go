package manifest

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"kpbench.dev/kpbench/internal/yamlpos"
)

const examples = "../scenarios/examples"

// svc returns a Service whose spec lines start at line 6.
func svc(spec ...string) string {
	return "apiVersion: v1\nkind: Service\nmetadata:\n  name: web\nspec:\n" + strings.Join(spec, "\n") + "\n"
}

// pod returns a Pod whose spec lines start at line 6.
func pod(spec ...string) string {
	return "apiVersion: v1\nkind: Pod\nmetadata:\n  name: p\nspec:\n" + strings.Join(spec, "\n") + "\n"
}

// deploy returns a Deployment whose spec lines start at line 6.
func deploy(spec ...string) string {
	return "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: d\nspec:\n" + strings.Join(spec, "\n") + "\n"
}

// slice returns an EndpointSlice whose body lines start at line 5.
func slice(body ...string) string {
	return "apiVersion: discovery.k8s.io/v1\nkind: EndpointSlice\nmetadata:\n  name: s\n" + strings.Join(body, "\n") + "\n"
}

const goodContainers = "  containers:\n  - name: c\n    image: i"

func TestExamplesParse(t *testing.T) {
	objs, err := ReadFiles("/work/shared/examples/nginx-nodeport.yaml", filepath.Join(examples, "nginx-nodeport.yaml"), filepath.Join(examples, "inference.yaml"))
	require.NoError(t, err)
	require.Len(t, objs, 6)

	d, ok := objs[0].Object.(*appsv1.Deployment)
	require.True(t, ok)
	assert.Equal(t, Key{"Deployment", "default", "nginx-deployment"}, objs[0].Key())
	assert.Equal(t, int32(3), *d.Spec.Replicas)
	assert.Equal(t, corev1.ProtocolTCP, d.Spec.Template.Spec.Containers[0].Ports[0].Protocol)
	assert.Equal(t, Source{File: "/work/shared/examples/nginx-nodeport.yaml", Line: 1}, objs[0].Source)

	s, ok := objs[1].Object.(*corev1.Service)
	require.True(t, ok)
	assert.Equal(t, 23, objs[1].Source.Line)
	assert.Equal(t, corev1.ServiceTypeNodePort, s.Spec.Type)
	assert.Equal(t, corev1.ProtocolTCP, s.Spec.Ports[0].Protocol)
	assert.Equal(t, intstr.FromInt32(80), s.Spec.Ports[0].TargetPort)
	assert.Equal(t, int32(30791), s.Spec.Ports[0].NodePort)
	assert.Equal(t, corev1.ServiceExternalTrafficPolicyCluster, s.Spec.ExternalTrafficPolicy)
	assert.Equal(t, corev1.ServiceAffinityNone, s.Spec.SessionAffinity)

	p, ok := objs[4].Object.(*corev1.Pod)
	require.True(t, ok)
	assert.Equal(t, int32(8500), p.Spec.Containers[0].Ports[0].ContainerPort)
	assert.Equal(t, "/", p.Spec.Volumes[0].NFS.Path, "NFS volume accepted and kept")
	inf := objs[5].Object.(*corev1.Service)
	assert.Equal(t, int32(32000), inf.Spec.Ports[0].NodePort)
	assert.Equal(t, 28, objs[5].Source.Line)
}

func TestSeedWithPlaceholdersFailsCleanly(t *testing.T) {
	_, err := ReadFiles("/work/shared/examples/inference.yaml")
	list := yamlpos.AsErrors(err)
	require.Len(t, list, 3, "%v", err)
	got := []string{}
	for _, e := range list {
		got = append(got, e.Error())
	}
	assert.Equal(t, []string{
		`/work/shared/examples/inference.yaml:12: spec.containers[0].ports[0].containerPort: Invalid value: "xxxx": expected an integer`,
		`/work/shared/examples/inference.yaml:37: spec.ports[0].port: Invalid value: "xxxx": expected an integer`,
		`/work/shared/examples/inference.yaml:39: spec.ports[0].nodePort: Invalid value: "xxxx": expected an integer`,
	}, got)
}

func TestDefaults(t *testing.T) {
	objs, err := Parser{}.Parse("s.yaml", []byte(svc(
		"  type: LoadBalancer",
		"  sessionAffinity: ClientIP",
		"  ports:",
		"  - port: 53",
		"    protocol: UDP",
		"    name: dns",
		"  - port: 80",
		"    name: http",
		"    targetPort: web",
	)))
	require.NoError(t, err)
	s := objs[0].Object.(*corev1.Service)
	assert.Equal(t, "default", s.Namespace)
	assert.Equal(t, intstr.FromInt32(53), s.Spec.Ports[0].TargetPort)
	assert.Equal(t, intstr.FromString("web"), s.Spec.Ports[1].TargetPort)
	assert.Equal(t, corev1.ProtocolTCP, s.Spec.Ports[1].Protocol)
	assert.Equal(t, int32(10800), *s.Spec.SessionAffinityConfig.ClientIP.TimeoutSeconds)
	assert.Equal(t, corev1.ServiceExternalTrafficPolicyCluster, s.Spec.ExternalTrafficPolicy)
	assert.Equal(t, corev1.ServiceInternalTrafficPolicyCluster, *s.Spec.InternalTrafficPolicy)
	assert.True(t, *s.Spec.AllocateLoadBalancerNodePorts)

	objs, err = Parser{}.Parse("d.yaml", []byte(deploy("  selector: {matchLabels: {a: b}}", "  template:", "    metadata: {labels: {a: b}}", "    spec:", "      containers: [{name: c, image: i, ports: [{containerPort: 80}]}]")))
	require.NoError(t, err)
	d := objs[0].Object.(*appsv1.Deployment)
	assert.Equal(t, int32(1), *d.Spec.Replicas)
	assert.Equal(t, corev1.ProtocolTCP, d.Spec.Template.Spec.Containers[0].Ports[0].Protocol)

	objs, err = Parser{}.Parse("e.yaml", []byte(slice("addressType: IPv4", "ports: [{port: 80}]", "endpoints: [{addresses: [10.0.0.1]}]")))
	require.NoError(t, err)
	es := objs[0].Object.(*discoveryv1.EndpointSlice)
	assert.Equal(t, corev1.ProtocolTCP, *es.Ports[0].Protocol)
	assert.Equal(t, "EndpointSlice", objs[0].Kind())

	// ClusterIP: no externalTrafficPolicy, ExternalName: no internalTrafficPolicy.
	objs, err = Parser{}.Parse("c.yaml", []byte(svc("  ports: [{port: 80}]")+"---\n"+svc("  type: ExternalName", "  externalName: example.com")))
	require.NoError(t, err)
	assert.Empty(t, objs[0].Object.(*corev1.Service).Spec.ExternalTrafficPolicy)
	assert.Nil(t, objs[1].Object.(*corev1.Service).Spec.InternalTrafficPolicy)
}

func TestEmptyDocumentsSkipped(t *testing.T) {
	objs, err := Parser{}.Parse("e.yaml", []byte("---\n# nothing\n---\n"+svc("  ports: [{port: 80}]")+"---\n---\n"))
	require.NoError(t, err)
	require.Len(t, objs, 1)
	assert.Equal(t, 4, objs[0].Source.Line)
	objs, err = Parser{}.Parse("empty.yaml", nil)
	require.NoError(t, err)
	assert.Empty(t, objs)
}

func TestNodePortRangeIsAParameter(t *testing.T) {
	src := []byte(svc("  type: NodePort", "  ports:", "  - port: 80", "    nodePort: 20001"))
	_, err := Parser{}.Parse("s.yaml", src)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "must be in range 30000-32767")
	_, err = Parser{NodePortRange: PortRange{Min: 20000, Max: 20010}}.Parse("s.yaml", src)
	require.NoError(t, err)
}

func TestParsePortRange(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want PortRange
		ok   bool
	}{
		{"30000-32767", PortRange{30000, 32767}, true},
		{" 100 - 200 ", PortRange{100, 200}, true},
		{"8080", PortRange{8080, 8080}, true},
		{"200-100", PortRange{}, false},
		{"0-10", PortRange{}, false},
		{"1-65536", PortRange{}, false},
		{"a-b", PortRange{}, false},
		{"", PortRange{}, false},
	} {
		got, err := ParsePortRange(tc.in)
		if !tc.ok {
			assert.Error(t, err, tc.in)
			continue
		}
		require.NoError(t, err, tc.in)
		assert.Equal(t, tc.want, got)
	}
	assert.Equal(t, 2768, DefaultNodePortRange().Size())
}

func TestMalformed(t *testing.T) {
	for _, tc := range []struct {
		name  string
		src   string
		line  int
		field string
		msg   string
	}{
		// Documents and type metadata.
		{"syntax error", "apiVersion: v1\nkind: [Service\n", 2, "", "invalid YAML: did not find expected ',' or ']'"},
		{"bad indentation", "apiVersion: v1\nkind: Service\n  metadata: {}\n", 3, "", "mapping values are not allowed"},
		{"block sequence broken", "apiVersion: v1\nkind: Service\nspec:\n  - 1\n  b: 2\n", 4, "", "did not find expected '-' indicator"},
		{"tab indentation", "apiVersion: v1\n\tkind: Service\n", 2, "", "invalid YAML"},
		{"not a mapping", "- a\n- b\n", 1, "", "must be a mapping"},
		{"missing kind", "apiVersion: v1\nmetadata: {name: a}\n", 1, "kind", "Required value"},
		{"missing apiVersion", "kind: Service\nmetadata: {name: a}\n", 1, "apiVersion", "Required value"},
		{"unsupported kind", "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: a}\n", 2, "kind", `Unsupported value: "ConfigMap"`},
		{"namespace without a name", "---\napiVersion: v1\nkind: Namespace\n", 2, "metadata.name", "Required value"},
		{"namespace with a namespace", "apiVersion: v1\nkind: Namespace\nmetadata: {name: a, namespace: b}\n", 3, "metadata.namespace", "not namespaced"},
		{"namespace bad name", "apiVersion: v1\nkind: Namespace\nmetadata: {name: A_b}\n", 3, "metadata.name", "Invalid value"},
		{"namespace unknown field", "apiVersion: v1\nkind: Namespace\nmetadata: {name: a}\nspce: {}\n", 4, "spce", "unknown field"},
		{"list item error", "apiVersion: v1\nkind: List\nitems:\n- apiVersion: v1\n  kind: Service\n  metadata: {name: a}\n  spec: {ports: [{port: 0}]}\n", 7, "items[0].spec.ports[0].port", "between 1 and 65535"},
		{"list item unsupported kind", "apiVersion: v1\nkind: List\nitems:\n- {apiVersion: v1, kind: ConfigMap}\n", 4, "items[0].kind", `Unsupported value: "ConfigMap"`},
		{"list in a list", "apiVersion: v1\nkind: List\nitems:\n- {apiVersion: v1, kind: List, items: []}\n", 4, "items[0].kind", "not Lists"},
		{"list unknown field", "apiVersion: v1\nkind: List\nitem: []\n", 3, "item", `did you mean "items"?`},
		{"list wrong apiVersion", "apiVersion: apps/v1\nkind: List\nitems: []\n", 1, "apiVersion", `must be "v1"`},
		{"wrong apiVersion", "apiVersion: apps/v1beta1\nkind: Deployment\n", 1, "apiVersion", `must be "apps/v1"`},
		{"unknown field", svc("  ports: [{port: 80}]", "  prots: []"), 7, "spec.prots", "unknown field"},
		{"unknown nested field", svc("  ports:", "  - port: 80", "    targetport: 80"), 8, "spec.ports[0].targetport", `did you mean "targetPort"?`},
		{"duplicate key", svc("  ports: [{port: 80}]", "  ports: [{port: 81}]"), 7, "spec.ports", "already set at line 6"},
		{"second document line", svc("  ports: [{port: 80}]") + "---\n" + svc("  ports: [{port: 0}]"), 13, "spec.ports[0].port", "between 1 and 65535"},

		// Service metadata.
		{"service name not DNS-1035", "apiVersion: v1\nkind: Service\nmetadata:\n  name: 1web\nspec: {ports: [{port: 80}]}\n", 4, "metadata.name", "DNS-1035"},
		{"service name upper case", "apiVersion: v1\nkind: Service\nmetadata:\n  name: Web\nspec: {ports: [{port: 80}]}\n", 4, "metadata.name", "Invalid value"},
		{"name missing", "apiVersion: v1\nkind: Service\nmetadata:\n  labels: {a: b}\nspec: {ports: [{port: 80}]}\n", 3, "metadata.name", "Required value"},
		{"generateName", "apiVersion: v1\nkind: Service\nmetadata:\n  generateName: web-\nspec: {ports: [{port: 80}]}\n", 3, "metadata.name", "generateName is not supported"},
		{"bad namespace", "apiVersion: v1\nkind: Service\nmetadata:\n  name: web\n  namespace: My_NS\nspec: {ports: [{port: 80}]}\n", 5, "metadata.namespace", "Invalid value"},
		{"bad label key", "apiVersion: v1\nkind: Service\nmetadata:\n  name: web\n  labels:\n    'a b': x\nspec: {ports: [{port: 80}]}\n", 6, "metadata.labels[a b]", "Invalid value"},
		{"bad label value", "apiVersion: v1\nkind: Service\nmetadata:\n  name: web\n  labels:\n    app: 'not ok!'\nspec: {ports: [{port: 80}]}\n", 6, "metadata.labels[app]", "Invalid value"},

		// Service ports.
		{"no ports", svc("  type: ClusterIP"), 5, "spec.ports", "Required value"},
		{"port zero", svc("  ports:", "  - port: 0"), 7, "spec.ports[0].port", "between 1 and 65535"},
		{"port too big", svc("  ports:", "  - port: 65536"), 7, "spec.ports[0].port", "between 1 and 65535"},
		{"port placeholder", svc("  ports:", "  - port: xxxx"), 7, "spec.ports[0].port", `Invalid value: "xxxx": expected an integer`},
		{"port negative", svc("  ports:", "  - port: -1"), 7, "spec.ports[0].port", "between 1 and 65535"},
		{"bad protocol", svc("  ports:", "  - port: 80", "    protocol: ICMP"), 8, "spec.ports[0].protocol", `Unsupported value: "ICMP"`},
		{"lower-case protocol", svc("  ports:", "  - port: 80", "    protocol: tcp"), 8, "spec.ports[0].protocol", "Unsupported value"},
		{"names required", svc("  ports:", "  - port: 80", "    name: a", "  - port: 81"), 9, "spec.ports[1].name", "more than one port"},
		{"duplicate name", svc("  ports:", "  - {name: a, port: 80}", "  - {name: a, port: 81}"), 8, "spec.ports[1].name", "Duplicate value"},
		{"duplicate port protocol", svc("  ports:", "  - {name: a, port: 80}", "  - {name: b, port: 80}"), 8, "spec.ports[1]", "Duplicate value"},
		{"bad port name", svc("  ports:", "  - {name: A_B, port: 80}"), 7, "spec.ports[0].name", "Invalid value"},
		{"targetPort zero-padded name", svc("  ports:", "  - port: 80", "    targetPort: -http"), 8, "spec.ports[0].targetPort", "Invalid value"},
		{"targetPort too big", svc("  ports:", "  - port: 80", "    targetPort: 70000"), 8, "spec.ports[0].targetPort", "between 1 and 65535"},
		{"targetPort float", svc("  ports:", "  - port: 80", "    targetPort: 8.5"), 8, "spec.ports[0].targetPort", "Invalid value"},
		{"targetPort name too long", svc("  ports:", "  - port: 80", "    targetPort: abcdefghijklmnop"), 8, "spec.ports[0].targetPort", "no more than 15 characters"},
		{"nodePort on ClusterIP", svc("  ports:", "  - port: 80", "    nodePort: 30080"), 8, "spec.ports[0].nodePort", "may not be used when `type` is 'ClusterIP'"},
		{"nodePort out of range", svc("  type: NodePort", "  ports:", "  - port: 80", "    nodePort: 80"), 9, "spec.ports[0].nodePort", "Invalid value: 80: must be in range 30000-32767"},
		{"nodePort duplicate", svc("  type: NodePort", "  ports:", "  - {name: a, port: 80, nodePort: 30001}", "  - {name: b, port: 81, nodePort: 30001}"), 9, "spec.ports[1].nodePort", "Duplicate value"},

		// Service type rules.
		{"bad type", svc("  type: Headless", "  ports: [{port: 80}]"), 6, "spec.type", `Unsupported value: "Headless"`},
		{"externalName without type", svc("  externalName: example.com", "  ports: [{port: 80}]"), 6, "spec.externalName", "may only be set when `type` is 'ExternalName'"},
		{"externalName missing", svc("  type: ExternalName"), 5, "spec.externalName", "Required value"},
		{"externalName invalid", svc("  type: ExternalName", "  externalName: -bad-"), 7, "spec.externalName", "Invalid value"},
		{"externalName with clusterIP", svc("  type: ExternalName", "  externalName: example.com", "  clusterIP: 10.96.0.10"), 8, "spec.clusterIP", "must be empty"},
		{"clusterIP garbage", svc("  clusterIP: 10.96.0.300", "  ports: [{port: 80}]"), 6, "spec.clusterIP", "Invalid value"},
		{"clusterIP IPv6", svc("  clusterIP: 'fd00::10'", "  ports: [{port: 80}]"), 6, "spec.clusterIP", "IPv4"},
		{"clusterIP not canonical", svc("  clusterIP: 10.096.0.1", "  ports: [{port: 80}]"), 6, "spec.clusterIP", "Invalid value"},
		{"headless NodePort", svc("  type: NodePort", "  clusterIP: None", "  ports: [{port: 80}]"), 7, "spec.clusterIP", "may not be set to 'None'"},
		{"clusterIPs mismatch", svc("  clusterIP: 10.96.0.10", "  clusterIPs: [10.96.0.11]", "  ports: [{port: 80}]"), 7, "spec.clusterIPs[0]", "must match"},
		{"ipFamilies IPv6", svc("  ipFamilies: [IPv6]", "  ports: [{port: 80}]"), 6, "spec.ipFamilies[0]", "Unsupported value"},
		{"externalIP invalid", svc("  externalIPs: [1.2.3.4, nope]", "  ports: [{port: 80}]"), 6, "spec.externalIPs[1]", "Invalid value"},
		{"sourceRanges on NodePort", svc("  type: NodePort", "  loadBalancerSourceRanges: [10.0.0.0/8]", "  ports: [{port: 80}]"), 7, "spec.loadBalancerSourceRanges", "may only be used when `type` is 'LoadBalancer'"},
		{"sourceRange not a CIDR", svc("  type: LoadBalancer", "  loadBalancerSourceRanges:", "  - 10.0.0.0/8", "  - 10.0.0.0", "  ports: [{port: 80}]"), 9, "spec.loadBalancerSourceRanges[1]", "must be a CIDR"},
		{"loadBalancerIP on ClusterIP", svc("  loadBalancerIP: 1.2.3.4", "  ports: [{port: 80}]"), 6, "spec.loadBalancerIP", "Forbidden"},
		{"status ingress IP", svc("  type: LoadBalancer", "  ports: [{port: 80}]", "status:", "  loadBalancer:", "    ingress:", "    - ip: x"), 11, "status.loadBalancer.ingress[0].ip", "Invalid value"},

		// Affinity and policies.
		{"bad affinity", svc("  sessionAffinity: Cookie", "  ports: [{port: 80}]"), 6, "spec.sessionAffinity", `Unsupported value: "Cookie"`},
		{"affinity timeout zero", svc("  sessionAffinity: ClientIP", "  sessionAffinityConfig:", "    clientIP:", "      timeoutSeconds: 0", "  ports: [{port: 80}]"), 9, "spec.sessionAffinityConfig.clientIP.timeoutSeconds", "must be in range 1-86400"},
		{"affinity timeout too long", svc("  sessionAffinity: ClientIP", "  sessionAffinityConfig: {clientIP: {timeoutSeconds: 86401}}", "  ports: [{port: 80}]"), 7, "spec.sessionAffinityConfig.clientIP.timeoutSeconds", "1-86400"},
		{"affinity config without ClientIP", svc("  sessionAffinityConfig: {clientIP: {timeoutSeconds: 60}}", "  ports: [{port: 80}]"), 6, "spec.sessionAffinityConfig", "Forbidden"},
		{"ETP on ClusterIP", svc("  externalTrafficPolicy: Local", "  ports: [{port: 80}]"), 6, "spec.externalTrafficPolicy", "externally-accessible"},
		{"bad ETP", svc("  type: NodePort", "  externalTrafficPolicy: Remote", "  ports: [{port: 80}]"), 7, "spec.externalTrafficPolicy", "Unsupported value"},
		{"bad ITP", svc("  internalTrafficPolicy: Nearby", "  ports: [{port: 80}]"), 6, "spec.internalTrafficPolicy", "Unsupported value"},
		{"healthCheckNodePort on NodePort", svc("  type: NodePort", "  healthCheckNodePort: 30000", "  ports: [{port: 80}]"), 7, "spec.healthCheckNodePort", "Forbidden"},
		{"selector bad value", svc("  selector:", "    app: 'a b'", "  ports: [{port: 80}]"), 7, "spec.selector[app]", "Invalid value"},
		{"selector not a map", svc("  selector: app", "  ports: [{port: 80}]"), 6, "spec.selector", "expected a mapping"},
		{"ports not a list", svc("  ports: 80"), 6, "spec.ports", "expected a list"},
		{"nodePort quoted", svc("  type: NodePort", "  ports:", "  - port: 80", "    nodePort: \"30080\""), 9, "spec.ports[0].nodePort", "expected an integer"},

		// Pods.
		{"pod no containers", pod("  containers: []"), 6, "spec.containers", "Required value"},
		{"pod container no name", pod("  containers:", "  - image: i"), 7, "spec.containers[0].name", "Required value"},
		{"pod container no image", pod("  containers:", "  - name: c"), 7, "spec.containers[0].image", "Required value"},
		{"pod duplicate containers", pod("  containers:", "  - {name: c, image: i}", "  - {name: c, image: i}"), 8, "spec.containers[1].name", "Duplicate value"},
		{"pod containerPort zero", pod(goodContainers, "    ports:", "    - containerPort: 0"), 10, "spec.containers[0].ports[0].containerPort", "between 1 and 65535"},
		{"pod containerPort missing", pod(goodContainers, "    ports:", "    - name: http"), 10, "spec.containers[0].ports[0].containerPort", "between 1 and 65535"},
		{"pod port protocol", pod(goodContainers, "    ports:", "    - containerPort: 80", "      protocol: HTTP"), 11, "spec.containers[0].ports[0].protocol", "Unsupported value"},
		{"pod port name", pod(goodContainers, "    ports:", "    - containerPort: 80", "      name: http_1"), 11, "spec.containers[0].ports[0].name", "Invalid value"},
		{"pod name invalid", "apiVersion: v1\nkind: Pod\nmetadata:\n  name: Pod_1\nspec:\n" + goodContainers + "\n", 4, "metadata.name", "RFC 1123"},
		{"pod unknown spec field", pod(goodContainers, "  restartPolicyy: Always"), 9, "spec.restartPolicyy", "unknown field"},
		{"pod podIP", pod(goodContainers, "status:", "  podIP: 10.0.0.256"), 10, "status.podIP", "Invalid value"},

		// Deployments.
		{"deployment negative replicas", deploy("  replicas: -1", "  selector: {matchLabels: {a: b}}", "  template: {metadata: {labels: {a: b}}, spec: {containers: [{name: c, image: i}]}}"), 6, "spec.replicas", "greater than or equal to 0"},
		{"deployment no selector", deploy("  template: {metadata: {labels: {a: b}}, spec: {containers: [{name: c, image: i}]}}"), 5, "spec.selector", "Required value"},
		{"deployment empty selector", deploy("  selector: {}", "  template: {metadata: {labels: {a: b}}, spec: {containers: [{name: c, image: i}]}}"), 6, "spec.selector", "empty selector"},
		{"deployment selector mismatch", deploy("  selector: {matchLabels: {a: b}}", "  template:", "    metadata:", "      labels: {a: c}", "    spec: {containers: [{name: c, image: i}]}"), 9, "spec.template.metadata.labels", "does not match"},
		{"deployment bad operator", deploy("  selector:", "    matchExpressions:", "    - {key: a, operator: Like, values: [b]}", "  template: {metadata: {labels: {a: b}}, spec: {containers: [{name: c, image: i}]}}"), 8, "spec.selector.matchExpressions[0].operator", "not a valid selector operator"},
		{"deployment container port", deploy("  selector: {matchLabels: {a: b}}", "  template:", "    metadata: {labels: {a: b}}", "    spec:", "      containers:", "      - name: c", "        image: i", "        ports: [{containerPort: 99999}]"), 13, "spec.template.spec.containers[0].ports[0].containerPort", "between 1 and 65535"},
		{"deployment restartPolicy", deploy("  selector: {matchLabels: {a: b}}", "  template:", "    metadata: {labels: {a: b}}", "    spec:", "      restartPolicy: Never", "      containers: [{name: c, image: i}]"), 10, "spec.template.spec.restartPolicy", "Unsupported value"},
		{"deployment replicas string", deploy("  replicas: three"), 6, "spec.replicas", "expected an integer"},

		// EndpointSlices.
		{"slice IPv6", slice("addressType: IPv6"), 5, "addressType", "Unsupported value"},
		{"slice FQDN", slice("addressType: FQDN"), 5, "addressType", "Unsupported value"},
		{"slice no addressType", slice("endpoints: []"), 1, "addressType", "Required value"},
		{"slice no addresses", slice("addressType: IPv4", "endpoints:", "- addresses: []"), 7, "endpoints[0].addresses", "at least 1 address"},
		{"slice bad address", slice("addressType: IPv4", "endpoints:", "- addresses:", "  - 10.0.0.1", "  - 10.0.0"), 9, "endpoints[0].addresses[1]", "Invalid value"},
		{"slice IPv6 address", slice("addressType: IPv4", "endpoints:", "- addresses: ['fd00::1']"), 7, "endpoints[0].addresses[0]", "IPv4"},
		{"slice port range", slice("addressType: IPv4", "ports:", "- port: 70000"), 7, "ports[0].port", "between 1 and 65535"},
		{"slice port protocol", slice("addressType: IPv4", "ports:", "- port: 80", "  protocol: tcp"), 8, "ports[0].protocol", "Unsupported value"},
		{"slice duplicate port names", slice("addressType: IPv4", "ports:", "- {name: a, port: 80}", "- {name: a, port: 81}"), 8, "ports[1].name", "Duplicate value"},
		{"slice ready not bool", slice("addressType: IPv4", "endpoints:", "- addresses: [10.0.0.1]", "  conditions: {ready: 'yes'}"), 8, "endpoints[0].conditions.ready", "expected a boolean"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			objs, err := Parser{}.Parse("m.yaml", []byte(tc.src))
			require.Error(t, err, "parsed: %+v", objs)
			assert.Nil(t, objs)
			list := yamlpos.AsErrors(err)
			require.NotEmpty(t, list, "error without position: %v", err)
			for _, e := range list {
				assert.Equal(t, "m.yaml", e.File)
				if e.Field == tc.field && e.Line == tc.line && strings.Contains(e.Msg, tc.msg) {
					assert.NotContains(t, e.Error(), "\n", "one line")
					return
				}
			}
			t.Errorf("no error at m.yaml:%d %s containing %q; got:\n%v", tc.line, tc.field, tc.msg, err)
		})
	}
}

func TestReadFilesErrors(t *testing.T) {
	dir := t.TempDir()
	bad := filepath.Join(dir, "bad.yaml")
	require.NoError(t, os.WriteFile(bad, []byte(svc("  ports: [{port: 0}]")), 0o644))
	_, err := ReadFiles(bad, filepath.Join(dir, "missing.yaml"))
	require.Error(t, err)
	assert.Contains(t, err.Error(), bad+":6: spec.ports[0].port")
	assert.Contains(t, err.Error(), "missing.yaml")
}

// TestParseNamespaceAndList: a file may hold Namespaces and Lists of objects, as
// kubectl accepts; the Namespaces are checked and left out of what is applied.
func TestParseNamespaceAndList(t *testing.T) {
	src := `apiVersion: v1
kind: Namespace
metadata: {name: shop, labels: {team: a}}
---
apiVersion: v1
kind: List
items:
- apiVersion: v1
  kind: Namespace
  metadata: {name: other}
- apiVersion: v1
  kind: Service
  metadata: {name: web, namespace: shop}
  spec: {selector: {app: web}, ports: [{port: 80}]}
- apiVersion: v1
  kind: Pod
  metadata: {name: web-0, namespace: shop, labels: {app: web}}
  spec: {containers: [{name: c, image: i}]}
`
	objs, err := Parser{}.Parse("l.yaml", []byte(src))
	require.NoError(t, err)
	require.Len(t, objs, 4)
	assert.Equal(t, Key{Kind: KindNamespace, Name: "shop"}, objs[0].Key())
	assert.Equal(t, Key{Kind: KindNamespace, Name: "other"}, objs[1].Key())
	assert.Equal(t, Key{Kind: KindService, Namespace: "shop", Name: "web"}, objs[2].Key())
	assert.Equal(t, Source{File: "l.yaml", Line: 11}, objs[2].Source, "an item's source is its own line")
	applied := RuntimeObjects(objs)
	require.Len(t, applied, 2, "namespaces are not applied: the lab has every namespace")
	assert.IsType(t, &corev1.Service{}, applied[0])
}
