package kubelet

import (
	"context"
	"errors"
	"net/netip"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// fakeObjects serves config maps and secrets from maps keyed by name.
type fakeObjects struct {
	cms     map[string]*corev1.ConfigMap
	secrets map[string]*corev1.Secret
}

func (f fakeObjects) configMap(_ context.Context, _, name string) (*corev1.ConfigMap, error) {
	if cm, ok := f.cms[name]; ok {
		return cm, nil
	}
	return nil, errors.New("configmap " + name + " not found")
}

func (f fakeObjects) secret(_ context.Context, _, name string) (*corev1.Secret, error) {
	if s, ok := f.secrets[name]; ok {
		return s, nil
	}
	return nil, errors.New("secret " + name + " not found")
}

func TestContainerEnv(t *testing.T) {
	yes := true
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "web-0", Namespace: "ns1", UID: "u-1", Labels: map[string]string{"app": "web", "tier": "a"}},
		Spec:       corev1.PodSpec{NodeName: "node-1", ServiceAccountName: "sa"},
	}
	d := downward{podIP: netip.MustParseAddr("10.244.1.5"), hostIP: netip.MustParseAddr("172.18.0.11"),
		allocatable: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("2"), corev1.ResourceMemory: resource.MustParse("4Gi")}}
	objs := fakeObjects{
		cms:     map[string]*corev1.ConfigMap{"cfg": {Data: map[string]string{"B": "from-cm", "A": "a"}}},
		secrets: map[string]*corev1.Secret{"sec": {Data: map[string][]byte{"token": []byte("s3cr3t")}}},
	}
	field := func(name, path string) corev1.EnvVar {
		return corev1.EnvVar{Name: name, ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: path}}}
	}
	tests := []struct {
		name    string
		c       corev1.Container
		want    []string
		wantErr string
	}{
		{name: "downward API fields", c: corev1.Container{Env: []corev1.EnvVar{
			field("POD_NAME", "metadata.name"), field("POD_NAMESPACE", "metadata.namespace"), field("POD_IP", "status.podIP"),
			field("NODE_NAME", "spec.nodeName"), field("HOST_IP", "status.hostIP"), field("UID", "metadata.uid"),
			field("APP", "metadata.labels['app']"), field("SA", "spec.serviceAccountName"), field("IPS", "status.podIPs"),
		}}, want: []string{"POD_NAME=web-0", "POD_NAMESPACE=ns1", "POD_IP=10.244.1.5", "NODE_NAME=node-1", "HOST_IP=172.18.0.11",
			"UID=u-1", "APP=web", "SA=sa", "IPS=10.244.1.5"}},
		{name: "all labels", c: corev1.Container{Env: []corev1.EnvVar{field("L", "metadata.labels")}}, want: []string{"L=app=\"web\"\ntier=\"a\""}},
		{name: "expansion of earlier variables, $$ and unknown references", c: corev1.Container{Env: []corev1.EnvVar{
			{Name: "A", Value: "x"}, {Name: "B", Value: "$(A)-$(C)-$$(A)-$(A"}, {Name: "C", Value: "late"},
		}}, want: []string{"A=x", "B=x-$(C)-$(A)-$(A", "C=late"}},
		{name: "envFrom in key order with a prefix, env overrides in place", c: corev1.Container{
			EnvFrom: []corev1.EnvFromSource{{Prefix: "P_", ConfigMapRef: &corev1.ConfigMapEnvSource{LocalObjectReference: corev1.LocalObjectReference{Name: "cfg"}}}},
			Env:     []corev1.EnvVar{{Name: "P_A", Value: "over"}},
		}, want: []string{"P_A=over", "P_B=from-cm"}},
		{name: "config map and secret keys", c: corev1.Container{Env: []corev1.EnvVar{
			{Name: "CM", ValueFrom: &corev1.EnvVarSource{ConfigMapKeyRef: &corev1.ConfigMapKeySelector{LocalObjectReference: corev1.LocalObjectReference{Name: "cfg"}, Key: "B"}}},
			{Name: "TOKEN", ValueFrom: &corev1.EnvVarSource{SecretKeyRef: &corev1.SecretKeySelector{LocalObjectReference: corev1.LocalObjectReference{Name: "sec"}, Key: "token"}}},
			{Name: "OPT", ValueFrom: &corev1.EnvVarSource{ConfigMapKeyRef: &corev1.ConfigMapKeySelector{LocalObjectReference: corev1.LocalObjectReference{Name: "gone"}, Key: "x", Optional: &yes}}},
		}}, want: []string{"CM=from-cm", "TOKEN=s3cr3t"}},
		{name: "resources: an unset limit is the node's, divisors round up", c: corev1.Container{
			Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("250m"), corev1.ResourceMemory: resource.MustParse("1Mi")}},
			Env: []corev1.EnvVar{
				{Name: "CPU_LIMIT", ValueFrom: &corev1.EnvVarSource{ResourceFieldRef: &corev1.ResourceFieldSelector{Resource: "limits.cpu"}}},
				{Name: "CPU_REQ_M", ValueFrom: &corev1.EnvVarSource{ResourceFieldRef: &corev1.ResourceFieldSelector{Resource: "requests.cpu", Divisor: resource.MustParse("1m")}}},
				{Name: "CPU_REQ", ValueFrom: &corev1.EnvVarSource{ResourceFieldRef: &corev1.ResourceFieldSelector{Resource: "requests.cpu"}}},
				{Name: "MEM_KI", ValueFrom: &corev1.EnvVarSource{ResourceFieldRef: &corev1.ResourceFieldSelector{Resource: "requests.memory", Divisor: resource.MustParse("1Ki")}}},
				{Name: "MEM_LIMIT", ValueFrom: &corev1.EnvVarSource{ResourceFieldRef: &corev1.ResourceFieldSelector{Resource: "limits.memory", Divisor: resource.MustParse("1Mi")}}},
			}}, want: []string{"CPU_LIMIT=2", "CPU_REQ_M=250", "CPU_REQ=1", "MEM_KI=1024", "MEM_LIMIT=4096"}},
		{name: "a missing config map is an error", c: corev1.Container{Env: []corev1.EnvVar{
			{Name: "X", ValueFrom: &corev1.EnvVarSource{ConfigMapKeyRef: &corev1.ConfigMapKeySelector{LocalObjectReference: corev1.LocalObjectReference{Name: "gone"}, Key: "x"}}},
		}}, wantErr: "env X: config map gone: configmap gone not found"},
		{name: "a missing key is an error", c: corev1.Container{Env: []corev1.EnvVar{
			{Name: "X", ValueFrom: &corev1.EnvVarSource{SecretKeyRef: &corev1.SecretKeySelector{LocalObjectReference: corev1.LocalObjectReference{Name: "sec"}, Key: "nope"}}},
		}}, wantErr: `secret sec has no key "nope"`},
		{name: "an unknown field path is an error", c: corev1.Container{Env: []corev1.EnvVar{field("X", "spec.nope")}}, wantErr: `unsupported fieldRef "spec.nope"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := containerEnv(context.Background(), objs, pod, tt.c, d)
			if tt.wantErr != "" {
				assert.ErrorContains(t, err, tt.wantErr)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tt.want, got)
		})
	}
}

func TestRuntimeEnvAndArgv(t *testing.T) {
	env := []string{"PORT=9376", "PATH=/opt/bin"}
	assert.Equal(t, []string{"HOSTNAME=web-0", "PORT=9376", "PATH=/opt/bin"}, runtimeEnv(env, "web-0"))
	assert.Equal(t, []string{"PATH=" + defaultPath, "HOSTNAME=web-0"}, runtimeEnv(nil, "web-0"))
	assert.Equal(t, []string{"/agnhost", "serve-hostname", "--port", "9376", "$(NOPE)", "$PORT"},
		expandArgv([]string{"/agnhost", "serve-hostname", "--port", "$(PORT)", "$(NOPE)", "$PORT"}, env))
}

func TestExpand(t *testing.T) {
	vars := map[string]string{"A": "1", "EMPTY": ""}
	lookup := func(k string) (string, bool) { v, ok := vars[k]; return v, ok }
	for in, want := range map[string]string{
		"$(A)":        "1",
		"x$(A)y$(A)":  "x1y1",
		"$$(A)":       "$(A)",
		"$$$(A)":      "$1",
		"$(B)":        "$(B)",
		"$(EMPTY)z":   "z",
		"$(A":         "$(A",
		"$A":          "$A",
		"trailing $":  "trailing $",
		"$()":         "$()",
		"no refs":     "no refs",
		"$(A)$(A)$$$": "11$$",
	} {
		assert.Equal(t, want, expand(in, lookup), in)
	}
}
