// Package manifest reads the Kubernetes objects a kpbench scenario starts from: v1
// Services and Pods, apps/v1 Deployments and discovery.k8s.io/v1 EndpointSlices, from
// ordinary (multi-document) YAML manifests, as `kubectl apply -f` would send them.
//
// Decoding is strict and uses the Kubernetes field names (the `json` tags of
// k8s.io/api), so `targetPort: 80` and `targetPort: http` both work. Every object is then
// defaulted and validated like the API server would, and every error names the file, the
// line and the field:
//
//	svc.yaml:14: spec.ports[0].nodePort: Invalid value: 80: must be in range 30000-32767
//
// A file may also hold v1 Namespaces (accepted and checked; the lab has every namespace,
// so RuntimeObjects leaves them out) and v1 Lists of such objects (`kind: List` with
// `items`), as kubectl accepts them. Other kinds (ConfigMap, Ingress, ...) are rejected
// rather than skipped: a scenario that silently lost an object would measure something
// else than its author meant. Documents that are empty (or hold only comments) are
// skipped. Fields kpbench does
// not use (images, commands, volumes, resources, ...) are accepted and ignored.
package manifest

import (
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"

	"gopkg.in/yaml.v3"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"kpbench.dev/kpbench/internal/yamlpos"
)

// KubeObject is what every object this package returns implements: a typed API object
// with metadata. Its dynamic type is one of *corev1.Service, *corev1.Pod,
// *appsv1.Deployment, *discoveryv1.EndpointSlice or *corev1.Namespace.
type KubeObject interface {
	runtime.Object
	metav1.Object
}

// Source is where an object was read from.
type Source struct {
	// File is the file name as given to Parse or ReadFiles.
	File string
	// Line is the first line of the object's document (1-based).
	Line int
}

// String returns "FILE:LINE".
func (s Source) String() string { return s.File + ":" + strconv.Itoa(s.Line) }

// Object is one decoded, defaulted and validated Kubernetes object.
type Object struct {
	// Source is where the object was written.
	Source Source
	// Object is the typed object (see KubeObject for the possible types).
	Object KubeObject
}

// RuntimeObjects returns the typed objects of objs, in order, as the lab's cluster
// (cluster.Cluster.Apply) takes them. Namespaces are left out: the lab's control plane
// has every namespace.
func RuntimeObjects(objs []Object) []runtime.Object {
	out := make([]runtime.Object, 0, len(objs))
	for _, o := range objs {
		if o.Kind() != KindNamespace {
			out = append(out, o.Object)
		}
	}
	return out
}

// Kind returns the object's kind ("Service", "Pod", "Deployment", "EndpointSlice").
func (o Object) Kind() string { return o.Object.GetObjectKind().GroupVersionKind().Kind }

// Key returns the object's identity.
func (o Object) Key() Key {
	return Key{Kind: o.Kind(), Namespace: o.Object.GetNamespace(), Name: o.Object.GetName()}
}

// Key identifies an object: kind, namespace and name.
type Key struct {
	Kind, Namespace, Name string
}

// String returns "Kind namespace/name".
func (k Key) String() string { return k.Kind + " " + k.Namespace + "/" + k.Name }

// Kinds and API versions this package accepts.
const (
	KindService       = "Service"
	KindPod           = "Pod"
	KindDeployment    = "Deployment"
	KindEndpointSlice = "EndpointSlice"
	KindNamespace     = "Namespace"
	// KindList is a v1 List: its items are objects of the other kinds.
	KindList = "List"
)

// apiVersions maps each supported kind to its only accepted apiVersion.
func apiVersionOf(kind string) (string, bool) {
	switch kind {
	case KindService, KindPod, KindNamespace, KindList:
		return "v1", true
	case KindDeployment:
		return "apps/v1", true
	case KindEndpointSlice:
		return "discovery.k8s.io/v1", true
	}
	return "", false
}

// supportedKinds lists the kinds Parse accepts, for messages.
const supportedKinds = "Service, Pod, Deployment, EndpointSlice, Namespace (and List of them)"

// DefaultNodePortRange returns the API server's default --service-node-port-range,
// 30000-32767.
func DefaultNodePortRange() PortRange { return PortRange{Min: 30000, Max: 32767} }

// PortRange is an inclusive range of ports, like --service-node-port-range.
type PortRange struct {
	Min, Max int
}

// String returns "MIN-MAX".
func (r PortRange) String() string { return fmt.Sprintf("%d-%d", r.Min, r.Max) }

// Contains reports whether port is in the range.
func (r PortRange) Contains(port int) bool { return port >= r.Min && port <= r.Max }

// Size returns the number of ports in the range.
func (r PortRange) Size() int { return r.Max - r.Min + 1 }

// ParsePortRange parses "MIN-MAX" (both 1-65535, MIN <= MAX); a single port "P" means P-P.
func ParsePortRange(s string) (PortRange, error) {
	lo, hi, found := strings.Cut(strings.TrimSpace(s), "-")
	if !found {
		hi = lo
	}
	min, err1 := strconv.Atoi(strings.TrimSpace(lo))
	max, err2 := strconv.Atoi(strings.TrimSpace(hi))
	if err1 != nil || err2 != nil {
		return PortRange{}, fmt.Errorf("invalid port range %q: want MIN-MAX, e.g. 30000-32767", s)
	}
	r := PortRange{Min: min, Max: max}
	if min < 1 || max > 65535 || min > max {
		return PortRange{}, fmt.Errorf("invalid port range %q: ports must be 1-65535 and MIN <= MAX", s)
	}
	return r, nil
}

// Parser reads manifests with settings that a cluster would configure. The zero value
// uses the Kubernetes defaults.
type Parser struct {
	// NodePortRange is the cluster's node port range (zero: DefaultNodePortRange()).
	NodePortRange PortRange
	// Shared, when set, is shared by the decodes of ParseDoc and ParseObjects (the
	// objects of one file: one work budget, one cache; see yamlpos.Shared). Parse uses
	// one per file whatever this says.
	Shared *yamlpos.Shared
}

// ReadFiles reads and parses files with the default Parser, in order.
func ReadFiles(paths ...string) ([]Object, error) { return Parser{}.ReadFiles(paths...) }

// ReadFiles reads and parses files, in order. Errors of all files are returned together.
func (p Parser) ReadFiles(paths ...string) ([]Object, error) {
	var objs []Object
	var errs []error
	for _, path := range paths {
		data, err := os.ReadFile(path)
		if err != nil {
			errs = append(errs, fmt.Errorf("read manifest: %w", err))
			continue
		}
		o, err := p.Parse(path, data)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		objs = append(objs, o...)
	}
	if len(errs) > 0 {
		return nil, joinErrors(errs)
	}
	return objs, nil
}

// joinErrors keeps a list of positioned errors a yamlpos.Errors when it is one.
func joinErrors(errs []error) error {
	var all yamlpos.Errors
	for _, err := range errs {
		l := yamlpos.AsErrors(err)
		if l == nil {
			return errors.Join(errs...)
		}
		all = append(all, l...)
	}
	return all
}

// Parse reads the objects of one YAML file: every non-empty document must be one
// supported object. It returns all problems of all documents as yamlpos.Errors.
func (p Parser) Parse(file string, data []byte) ([]Object, error) {
	docs, err := yamlpos.Split(file, data)
	if err != nil {
		return nil, err
	}
	var objs []Object
	var errs yamlpos.Errors
	p.Shared = yamlpos.NewSharedFor(docs...)
	for _, doc := range docs {
		o, err := p.ParseObjects(doc)
		if err != nil {
			errs = append(errs, yamlpos.AsErrors(err)...)
			continue
		}
		objs = append(objs, o...)
	}
	if len(errs) > 0 {
		return nil, errs
	}
	return objs, nil
}

// List is a v1 List as a manifest holds it: its items are decoded one by one.
type List struct {
	APIVersion string          `json:"apiVersion"`
	Kind       string          `json:"kind"`
	Metadata   metav1.ListMeta `json:"metadata"`
	Items      []*yaml.Node    `json:"items"`
}

// ParseObjects decodes, defaults and validates the objects held by doc (a document from
// yamlpos.Split, or an object nested in another file, such as a scenario's inline
// manifest): one object, or the items of a List.
func (p Parser) ParseObjects(doc *yamlpos.Doc) ([]Object, error) {
	kind, err := typeMeta(doc)
	if err != nil {
		return nil, err
	}
	if kind != KindList {
		o, err := p.ParseDoc(doc)
		if err != nil {
			return nil, err
		}
		return []Object{o}, nil
	}
	var l List
	if err := (yamlpos.Decoder{Shared: p.Shared}).Decode(doc, &l); err != nil {
		return nil, err
	}
	var objs []Object
	var errs yamlpos.Errors
	for i, item := range l.Items {
		base := field.NewPath("items").Index(i)
		if doc.Base != nil {
			base = doc.Base.Child("items").Index(i)
		}
		itemDoc := &yamlpos.Doc{File: doc.File, Node: item, Base: base}
		if k, err := typeMeta(itemDoc); err == nil && k == KindList {
			errs = append(errs, itemDoc.Errorf("kind", "Unsupported value: %q: a List's items are objects, not Lists", k))
			continue
		}
		o, err := p.ParseDoc(itemDoc)
		if err != nil {
			errs = append(errs, yamlpos.AsErrors(err)...)
			continue
		}
		objs = append(objs, o)
	}
	if len(errs) > 0 {
		return nil, errs
	}
	return objs, nil
}

// ParseDoc decodes, defaults and validates the one object held by doc (not a List: see
// ParseObjects).
func (p Parser) ParseDoc(doc *yamlpos.Doc) (Object, error) {
	kind, err := typeMeta(doc)
	if err != nil {
		return Object{}, err
	}
	if kind == KindList {
		return Object{}, yamlpos.Errors{doc.Errorf("kind", "Unsupported value: %q: one object is expected here", kind)}
	}
	obj := newObject(kind)
	if err := (yamlpos.Decoder{Shared: p.Shared}).Decode(doc, obj); err != nil {
		return Object{}, err
	}
	SetDefaults(obj)
	if errs := p.Validate(obj); len(errs) > 0 {
		return Object{}, doc.FromFieldList(errs)
	}
	return Object{Source: Source{File: doc.File, Line: doc.Line()}, Object: obj}, nil
}

// typeMeta checks apiVersion and kind before anything else, so that an unsupported kind
// gets one clear error instead of a list of unknown fields.
func typeMeta(doc *yamlpos.Doc) (string, error) {
	n := doc.Node
	if n.Kind == yaml.AliasNode && n.Alias != nil {
		n = n.Alias
	}
	if n.Kind != yaml.MappingNode {
		return "", yamlpos.Errors{doc.Errorf("", "a manifest must be a mapping with apiVersion and kind, not %s", nodeKind(n))}
	}
	var apiVersion, kind *yaml.Node
	for i := 0; i+1 < len(n.Content); i += 2 {
		switch n.Content[i].Value {
		case "apiVersion":
			apiVersion = n.Content[i+1]
		case "kind":
			kind = n.Content[i+1]
		}
	}
	var errs yamlpos.Errors
	str := func(v *yaml.Node) (string, bool) {
		if v == nil || v.Kind != yaml.ScalarNode || v.ShortTag() == "!!null" || v.Value == "" {
			return "", false
		}
		return v.Value, true
	}
	k, okKind := str(kind)
	av, okAV := str(apiVersion)
	if !okKind {
		errs = append(errs, doc.Errorf("kind", "Required value: every manifest needs a kind (supported: %s)", supportedKinds))
	}
	if !okAV {
		errs = append(errs, doc.Errorf("apiVersion", "Required value: every manifest needs an apiVersion"))
	}
	if len(errs) > 0 {
		return "", errs
	}
	want, ok := apiVersionOf(k)
	if !ok {
		return "", yamlpos.Errors{doc.Errorf("kind", "Unsupported value: %q: kpbench reads only %s objects", k, supportedKinds)}
	}
	if av != want {
		return "", yamlpos.Errors{doc.Errorf("apiVersion", "Unsupported value: %q: %s must be %q", av, k, want)}
	}
	return k, nil
}

func nodeKind(n *yaml.Node) string {
	switch n.Kind {
	case yaml.SequenceNode:
		return "a list"
	case yaml.ScalarNode: // not echoed: the file may not be ours (a passwd file is one long string)
		if n.ShortTag() == "!!str" {
			return "a string"
		}
		return "a scalar"
	default:
		return "this value"
	}
}

// newObject returns an empty object of a supported kind.
func newObject(kind string) KubeObject {
	switch kind {
	case KindService:
		return &corev1.Service{}
	case KindPod:
		return &corev1.Pod{}
	case KindDeployment:
		return &appsv1.Deployment{}
	case KindNamespace:
		return &corev1.Namespace{}
	default:
		return &discoveryv1.EndpointSlice{}
	}
}

// Validate checks an object (already defaulted, see SetDefaults) like the API server
// would, with p's settings. Paths in the errors are relative to the object.
func (p Parser) Validate(obj KubeObject) field.ErrorList {
	r := p.NodePortRange
	if r == (PortRange{}) {
		r = DefaultNodePortRange()
	}
	switch o := obj.(type) {
	case *corev1.Service:
		return validateService(o, r)
	case *corev1.Pod:
		return validatePod(o)
	case *appsv1.Deployment:
		return validateDeployment(o)
	case *discoveryv1.EndpointSlice:
		return validateEndpointSlice(o)
	case *corev1.Namespace:
		return validateNamespace(o)
	default:
		return field.ErrorList{field.InternalError(nil, fmt.Errorf("unsupported object type %T", obj))}
	}
}
