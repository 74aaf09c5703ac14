package kubelet

import (
	"context"
	"fmt"
	"math"
	"net/netip"
	"slices"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"kpbench.dev/kpbench/internal/envlist"
)

// defaultPath is the PATH of a container whose env does not set one (the agnhost image's,
// alpine's default).
const defaultPath = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

// envObjects fetches the config maps and secrets a container's env refers to (the
// kubelet's API client; the Node authorizer lets a node read those of its pods).
type envObjects interface {
	configMap(ctx context.Context, namespace, name string) (*corev1.ConfigMap, error)
	secret(ctx context.Context, namespace, name string) (*corev1.Secret, error)
}

// downward is what the downward API of a pod resolves against besides the Pod object.
type downward struct {
	podIP, hostIP netip.Addr
	// allocatable is the node's, the value of a limit the container does not set.
	allocatable corev1.ResourceList
}

// containerEnv returns the environment container c of pod defines, as KEY=VALUE in the
// order a kubelet defines them (envFrom sources, then env, a later definition replacing an
// earlier one in place). Values expand $(VAR) references to variables defined before them ($$ is a literal $, an
// unknown reference stays as written). An error is what a kubelet reports as
// CreateContainerConfigError: a missing config map, secret or key that is not optional,
// or a field path it does not know.
func containerEnv(ctx context.Context, objs envObjects, pod *corev1.Pod, c corev1.Container, d downward) ([]string, error) {
	var env envlist.List
	for _, from := range c.EnvFrom {
		data, err := envFromData(ctx, objs, pod.Namespace, from)
		if err != nil {
			return nil, err
		}
		names := make([]string, 0, len(data))
		for k := range data {
			names = append(names, k)
		}
		sort.Strings(names)
		for _, k := range names {
			env.Set(from.Prefix+k, data[k])
		}
	}
	for _, e := range c.Env {
		if e.ValueFrom == nil {
			env.Set(e.Name, expand(e.Value, env.Lookup))
			continue
		}
		v, ok, err := envValueFrom(ctx, objs, pod, c, e, d)
		if err != nil {
			return nil, fmt.Errorf("env %s: %w", e.Name, err)
		}
		if ok {
			env.Set(e.Name, v)
		}
	}
	return env.Environ(), nil
}

// envFromData returns the keys and values of one envFrom source (nil when an optional one
// is missing).
func envFromData(ctx context.Context, objs envObjects, ns string, from corev1.EnvFromSource) (map[string]string, error) {
	switch {
	case from.ConfigMapRef != nil:
		return refData(ctx, objs, ns, configMapData, "envFrom config map", from.ConfigMapRef.Name, from.ConfigMapRef.Optional)
	case from.SecretRef != nil:
		return refData(ctx, objs, ns, secretData, "envFrom secret", from.SecretRef.Name, from.SecretRef.Optional)
	}
	return nil, nil
}

// objectData reads the data of the config map or secret named name: what env and envFrom
// draw from, a secret's values as strings.
type objectData func(ctx context.Context, objs envObjects, ns, name string) (map[string]string, error)

func configMapData(ctx context.Context, objs envObjects, ns, name string) (map[string]string, error) {
	cm, err := objs.configMap(ctx, ns, name)
	if err != nil {
		return nil, err
	}
	return cm.Data, nil
}

func secretData(ctx context.Context, objs envObjects, ns, name string) (map[string]string, error) {
	s, err := objs.secret(ctx, ns, name)
	if err != nil {
		return nil, err
	}
	out := make(map[string]string, len(s.Data))
	for k, v := range s.Data {
		out[k] = string(v)
	}
	return out, nil
}

// refData reads the object a reference names; a missing one is no data (nil) when the
// reference is optional, and otherwise an error naming it as what ("config map").
func refData(ctx context.Context, objs envObjects, ns string, read objectData, what, name string, optional *bool) (map[string]string, error) {
	data, err := read(ctx, objs, ns, name)
	if err != nil {
		if isOptional(optional) {
			return nil, nil
		}
		return nil, fmt.Errorf("%s %s: %w", what, name, err)
	}
	return data, nil
}

// refKey resolves a configMapKeyRef or secretKeyRef: key in the object's data; ok is false
// when the reference is optional and the object or the key is missing.
func refKey(ctx context.Context, objs envObjects, ns string, read objectData, what, name, key string, optional *bool) (v string, ok bool, err error) {
	data, err := refData(ctx, objs, ns, read, what, name, optional)
	if err != nil {
		return "", false, err
	}
	if v, found := data[key]; found {
		return v, true, nil
	}
	if isOptional(optional) {
		return "", false, nil
	}
	return "", false, fmt.Errorf("%s %s has no key %q", what, name, key)
}

func isOptional(p *bool) bool { return p != nil && *p }

// envValueFrom resolves an env var's valueFrom; ok is false for an optional reference to
// something missing (the variable is not set).
func envValueFrom(ctx context.Context, objs envObjects, pod *corev1.Pod, c corev1.Container, e corev1.EnvVar, d downward) (v string, ok bool, err error) {
	src := e.ValueFrom
	switch {
	case src.FieldRef != nil:
		v, err := podField(pod, src.FieldRef.FieldPath, d)
		return v, err == nil, err
	case src.ResourceFieldRef != nil:
		v, err := resourceField(pod, c, *src.ResourceFieldRef, d.allocatable)
		return v, err == nil, err
	case src.ConfigMapKeyRef != nil:
		ref := src.ConfigMapKeyRef
		return refKey(ctx, objs, pod.Namespace, configMapData, "config map", ref.Name, ref.Key, ref.Optional)
	case src.SecretKeyRef != nil:
		ref := src.SecretKeyRef
		return refKey(ctx, objs, pod.Namespace, secretData, "secret", ref.Name, ref.Key, ref.Optional)
	case src.FileKeyRef != nil:
		return "", false, fmt.Errorf("fileKeyRef is not supported (no volumes in lab pods)")
	}
	return "", false, fmt.Errorf("valueFrom names no source")
}

// podField returns the value of a downward API field path of pod (the paths an env var's
// fieldRef may name).
func podField(pod *corev1.Pod, fieldPath string, d downward) (string, error) {
	if k, ok := subscript(fieldPath, "metadata.labels"); ok {
		return pod.Labels[k], nil
	}
	if k, ok := subscript(fieldPath, "metadata.annotations"); ok {
		return pod.Annotations[k], nil
	}
	addr := func(a netip.Addr) string {
		if a.IsValid() {
			return a.String()
		}
		return ""
	}
	switch fieldPath {
	case "metadata.name":
		return pod.Name, nil
	case "metadata.namespace":
		return pod.Namespace, nil
	case "metadata.uid":
		return string(pod.UID), nil
	case "metadata.labels":
		return formatMap(pod.Labels), nil
	case "metadata.annotations":
		return formatMap(pod.Annotations), nil
	case "spec.nodeName":
		return pod.Spec.NodeName, nil
	case "spec.serviceAccountName":
		return pod.Spec.ServiceAccountName, nil
	case "status.hostIP", "status.hostIPs":
		return addr(d.hostIP), nil
	case "status.podIP", "status.podIPs":
		return addr(d.podIP), nil
	}
	return "", fmt.Errorf("unsupported fieldRef %q", fieldPath)
}

// subscript parses `prefix['key']` and returns key.
func subscript(fieldPath, prefix string) (string, bool) {
	rest, ok := strings.CutPrefix(fieldPath, prefix+"['")
	if !ok {
		return "", false
	}
	return strings.CutSuffix(rest, "']")
}

// formatMap renders labels or annotations as the downward API does: key="value" lines,
// sorted by key.
func formatMap(m map[string]string) string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	lines := make([]string, len(keys))
	for i, k := range keys {
		lines[i] = fmt.Sprintf("%s=%q", k, m[k])
	}
	return strings.Join(lines, "\n")
}

// resourceField returns a resourceFieldRef's value: the container's request or limit
// (an unset limit is the node's allocatable), divided by the divisor (default 1) and
// rounded up, as the downward API does.
func resourceField(pod *corev1.Pod, c corev1.Container, ref corev1.ResourceFieldSelector, allocatable corev1.ResourceList) (string, error) {
	if ref.ContainerName != "" && ref.ContainerName != c.Name {
		i := slices.IndexFunc(append(slices.Clone(pod.Spec.InitContainers), pod.Spec.Containers...), func(o corev1.Container) bool { return o.Name == ref.ContainerName })
		if i < 0 {
			return "", fmt.Errorf("resourceFieldRef: no container %q", ref.ContainerName)
		}
		c = append(slices.Clone(pod.Spec.InitContainers), pod.Spec.Containers...)[i]
	}
	kind, name, ok := strings.Cut(ref.Resource, ".")
	if !ok || (kind != "limits" && kind != "requests") {
		return "", fmt.Errorf("unsupported resourceFieldRef %q", ref.Resource)
	}
	res := corev1.ResourceName(name)
	if res != corev1.ResourceCPU && res != corev1.ResourceMemory && res != corev1.ResourceEphemeralStorage {
		return "", fmt.Errorf("unsupported resourceFieldRef %q", ref.Resource)
	}
	var q resource.Quantity
	if kind == "limits" {
		v, set := c.Resources.Limits[res]
		if !set {
			v = allocatable[res]
		}
		q = v
	} else {
		q = c.Resources.Requests[res]
	}
	divisor := ref.Divisor
	if divisor.IsZero() {
		divisor = resource.MustParse("1")
	}
	if res == corev1.ResourceCPU {
		return fmt.Sprint(int64(math.Ceil(float64(q.MilliValue()) / float64(divisor.MilliValue())))), nil
	}
	return fmt.Sprint(int64(math.Ceil(float64(q.Value()) / float64(divisor.Value())))), nil
}

// expand replaces $(VAR) references in s with lookup's values, as Kubernetes expands a
// container's env, command and args: $$ is a literal $, a reference lookup does not know
// and an unterminated "$(" stay as written, a $ before anything else is kept.
func expand(s string, lookup func(string) (string, bool)) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] != '$' || i+1 == len(s) {
			b.WriteByte(s[i])
			continue
		}
		switch s[i+1] {
		case '$':
			b.WriteByte('$')
			i++
		case '(':
			end := strings.IndexByte(s[i+2:], ')')
			if end < 0 {
				b.WriteString("$(")
				i++
				continue
			}
			name := s[i+2 : i+2+end]
			if v, ok := lookup(name); ok {
				b.WriteString(v)
			} else {
				b.WriteString("$(" + name + ")")
			}
			i += 2 + end
		default:
			b.WriteByte('$')
		}
	}
	return b.String()
}

// runtimeEnv is the environment of a container's process: PATH (the image's) and
// HOSTNAME (the runtime's) unless env sets them, then env.
func runtimeEnv(env []string, hostname string) []string {
	out := make([]string, 0, len(env)+2)
	for _, kv := range []string{"PATH=" + defaultPath, "HOSTNAME=" + hostname} {
		k, _, _ := strings.Cut(kv, "=")
		if !slices.ContainsFunc(env, func(e string) bool { return strings.HasPrefix(e, k+"=") }) {
			out = append(out, kv)
		}
	}
	return append(out, env...)
}

// expandArgv expands $(VAR) references in a command line with the container's env.
func expandArgv(argv, env []string) []string {
	vals := make(map[string]string, len(env))
	for _, kv := range env {
		k, v, _ := strings.Cut(kv, "=")
		vals[k] = v
	}
	lookup := func(name string) (string, bool) { v, ok := vals[name]; return v, ok }
	out := make([]string, len(argv))
	for i, a := range argv {
		out[i] = expand(a, lookup)
	}
	return out
}
