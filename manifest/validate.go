package manifest

import (
	"fmt"
	"net/netip"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	metav1validation "k8s.io/apimachinery/pkg/apis/meta/v1/validation"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// Limits the API server enforces that matter here.
const (
	maxClientIPTimeoutSeconds = 86400
	maxSliceEndpoints         = 1000
	maxEndpointAddresses      = 100
	maxSlicePorts             = 20000
)

// supportedProtocols lists the L4 protocols a port may have.
func supportedProtocols() []corev1.Protocol {
	return []corev1.Protocol{corev1.ProtocolTCP, corev1.ProtocolUDP, corev1.ProtocolSCTP}
}

// validateMeta checks metadata: name (DNS-1035 label for Services, DNS-1123 subdomain
// otherwise), namespace (DNS-1123 label) and labels.
func validateMeta(m *metav1.ObjectMeta, dns1035 bool) field.ErrorList {
	var errs field.ErrorList
	p := field.NewPath("metadata")
	switch {
	case m.Name == "" && m.GenerateName != "":
		errs = append(errs, field.Required(p.Child("name"), "kpbench needs a fixed name (generateName is not supported)"))
	case m.Name == "":
		errs = append(errs, field.Required(p.Child("name"), "name or generateName is required"))
	case dns1035:
		for _, msg := range validation.IsDNS1035Label(m.Name) {
			errs = append(errs, field.Invalid(p.Child("name"), m.Name, msg))
		}
	default:
		for _, msg := range validation.IsDNS1123Subdomain(m.Name) {
			errs = append(errs, field.Invalid(p.Child("name"), m.Name, msg))
		}
	}
	for _, msg := range validation.IsDNS1123Label(m.Namespace) {
		errs = append(errs, field.Invalid(p.Child("namespace"), m.Namespace, msg))
	}
	errs = append(errs, validateLabelMap(m.Labels, p.Child("labels"))...)
	return errs
}

// validateLabelMap checks label keys and values, naming each key in the path
// (metav1validation.ValidateLabels names only the map).
func validateLabelMap(m map[string]string, p *field.Path) field.ErrorList {
	var errs field.ErrorList
	for k, v := range m {
		errs = append(errs, metav1validation.ValidateLabels(map[string]string{k: v}, p.Key(k))...)
	}
	return errs
}

func validateProtocol(proto corev1.Protocol, p *field.Path) field.ErrorList {
	switch proto {
	case corev1.ProtocolTCP, corev1.ProtocolUDP, corev1.ProtocolSCTP:
		return nil
	case "":
		return field.ErrorList{field.Required(p, "")}
	}
	return field.ErrorList{field.NotSupported(p, proto, supportedProtocols())}
}

func validatePortNum(port int32, p *field.Path) field.ErrorList {
	var errs field.ErrorList
	for _, msg := range validation.IsValidPortNum(int(port)) {
		errs = append(errs, field.Invalid(p, port, msg))
	}
	return errs
}

// validateIPv4 checks a canonical IPv4 address (kpbench's lab is IPv4-only).
func validateIPv4(value string, p *field.Path) field.ErrorList {
	if errs := validation.IsValidIP(p, value); len(errs) > 0 {
		return errs
	}
	if a, err := netip.ParseAddr(value); err != nil || !a.Is4() {
		return field.ErrorList{field.Invalid(p, value, "must be an IPv4 address (kpbench's lab is IPv4-only)")}
	}
	return nil
}

// validateIPv4CIDR checks an IPv4 CIDR such as 10.0.0.0/8.
func validateIPv4CIDR(value string, p *field.Path) field.ErrorList {
	pfx, err := netip.ParsePrefix(value)
	if err != nil {
		return field.ErrorList{field.Invalid(p, value, "must be a CIDR such as 192.168.0.0/16")}
	}
	if !pfx.Addr().Is4() {
		return field.ErrorList{field.Invalid(p, value, "must be an IPv4 CIDR (kpbench's lab is IPv4-only)")}
	}
	return nil
}

func validateService(s *corev1.Service, nodePorts PortRange) field.ErrorList {
	errs := validateMeta(&s.ObjectMeta, true)
	spec := &s.Spec
	sp := field.NewPath("spec")
	isExternalName := spec.Type == corev1.ServiceTypeExternalName
	hasNodePorts := spec.Type == corev1.ServiceTypeNodePort || spec.Type == corev1.ServiceTypeLoadBalancer

	switch spec.Type {
	case corev1.ServiceTypeClusterIP, corev1.ServiceTypeNodePort, corev1.ServiceTypeLoadBalancer:
		if spec.ExternalName != "" {
			errs = append(errs, field.Forbidden(sp.Child("externalName"), "may only be set when `type` is 'ExternalName'"))
		}
	case corev1.ServiceTypeExternalName:
		if spec.ExternalName == "" {
			errs = append(errs, field.Required(sp.Child("externalName"), "required when `type` is 'ExternalName'"))
		}
		for _, msg := range validation.IsDNS1123Subdomain(strings.TrimSuffix(spec.ExternalName, ".")) {
			if spec.ExternalName != "" {
				errs = append(errs, field.Invalid(sp.Child("externalName"), spec.ExternalName, msg))
			}
		}
		if spec.ClusterIP != "" {
			errs = append(errs, field.Forbidden(sp.Child("clusterIP"), "must be empty for ExternalName services"))
		}
		if spec.SessionAffinity != corev1.ServiceAffinityNone {
			errs = append(errs, field.Forbidden(sp.Child("sessionAffinity"), "must be None for ExternalName services"))
		}
	default:
		errs = append(errs, field.NotSupported(sp.Child("type"), spec.Type, []corev1.ServiceType{
			corev1.ServiceTypeClusterIP, corev1.ServiceTypeNodePort, corev1.ServiceTypeLoadBalancer, corev1.ServiceTypeExternalName}))
	}

	// clusterIP / clusterIPs / families.
	switch spec.ClusterIP {
	case "":
	case corev1.ClusterIPNone:
		if hasNodePorts {
			errs = append(errs, field.Invalid(sp.Child("clusterIP"), spec.ClusterIP, "may not be set to 'None' for LoadBalancer or NodePort services"))
		}
	default:
		if !isExternalName {
			errs = append(errs, validateIPv4(spec.ClusterIP, sp.Child("clusterIP"))...)
		}
	}
	if len(spec.ClusterIPs) > 1 {
		errs = append(errs, field.TooMany(sp.Child("clusterIPs"), len(spec.ClusterIPs), 1))
	}
	if len(spec.ClusterIPs) > 0 && spec.ClusterIPs[0] != spec.ClusterIP {
		errs = append(errs, field.Invalid(sp.Child("clusterIPs").Index(0), spec.ClusterIPs[0], "must match `clusterIP`"))
	}
	for i, fam := range spec.IPFamilies {
		if fam != corev1.IPv4Protocol {
			errs = append(errs, field.NotSupported(sp.Child("ipFamilies").Index(i), fam, []corev1.IPFamily{corev1.IPv4Protocol}))
		}
	}
	if pol := spec.IPFamilyPolicy; pol != nil && *pol != corev1.IPFamilyPolicySingleStack && *pol != corev1.IPFamilyPolicyPreferDualStack {
		errs = append(errs, field.NotSupported(sp.Child("ipFamilyPolicy"), *pol, []corev1.IPFamilyPolicy{corev1.IPFamilyPolicySingleStack, corev1.IPFamilyPolicyPreferDualStack}))
	}

	// Ports.
	pp := sp.Child("ports")
	if len(spec.Ports) == 0 && !isExternalName && spec.ClusterIP != corev1.ClusterIPNone {
		errs = append(errs, field.Required(pp, ""))
	}
	names := map[string]bool{}
	type portProto struct {
		port  int32
		proto corev1.Protocol
	}
	ports := map[portProto]bool{}
	nodePortsSeen := map[portProto]bool{}
	for i, port := range spec.Ports {
		ip := pp.Index(i)
		switch {
		case port.Name == "" && len(spec.Ports) > 1:
			errs = append(errs, field.Required(ip.Child("name"), "names are required when a Service has more than one port"))
		case port.Name != "":
			errs = append(errs, validateUniqueName(port.Name, ip.Child("name"), names, validation.IsDNS1123Label)...)
		}
		errs = append(errs, validateProtocol(port.Protocol, ip.Child("protocol"))...)
		errs = append(errs, validatePortNum(port.Port, ip.Child("port"))...)
		if ports[portProto{port.Port, port.Protocol}] {
			errs = append(errs, field.Duplicate(ip, fmt.Sprintf("%d/%s", port.Port, port.Protocol)))
		}
		ports[portProto{port.Port, port.Protocol}] = true
		errs = append(errs, validateTargetPort(port.TargetPort, ip.Child("targetPort"))...)
		if port.NodePort != 0 {
			switch {
			case !hasNodePorts:
				errs = append(errs, field.Forbidden(ip.Child("nodePort"), fmt.Sprintf("may not be used when `type` is '%s'", spec.Type)))
			case !nodePorts.Contains(int(port.NodePort)):
				errs = append(errs, field.Invalid(ip.Child("nodePort"), port.NodePort, "must be in range "+nodePorts.String()))
			case nodePortsSeen[portProto{port.NodePort, port.Protocol}]:
				errs = append(errs, field.Duplicate(ip.Child("nodePort"), port.NodePort))
			}
			nodePortsSeen[portProto{port.NodePort, port.Protocol}] = true
		}
	}

	for i, ip := range spec.ExternalIPs {
		errs = append(errs, validateIPv4(ip, sp.Child("externalIPs").Index(i))...)
	}
	if spec.LoadBalancerIP != "" {
		if spec.Type != corev1.ServiceTypeLoadBalancer {
			errs = append(errs, field.Forbidden(sp.Child("loadBalancerIP"), "may only be used when `type` is 'LoadBalancer'"))
		} else {
			errs = append(errs, validateIPv4(spec.LoadBalancerIP, sp.Child("loadBalancerIP"))...)
		}
	}
	if len(spec.LoadBalancerSourceRanges) > 0 && spec.Type != corev1.ServiceTypeLoadBalancer {
		errs = append(errs, field.Forbidden(sp.Child("loadBalancerSourceRanges"), "may only be used when `type` is 'LoadBalancer'"))
	}
	for i, cidr := range spec.LoadBalancerSourceRanges {
		errs = append(errs, validateIPv4CIDR(strings.TrimSpace(cidr), sp.Child("loadBalancerSourceRanges").Index(i))...)
	}
	for i, ing := range s.Status.LoadBalancer.Ingress {
		if ing.IP != "" {
			errs = append(errs, validateIPv4(ing.IP, field.NewPath("status", "loadBalancer", "ingress").Index(i).Child("ip"))...)
		}
	}

	// Session affinity.
	switch spec.SessionAffinity {
	case corev1.ServiceAffinityNone:
		if spec.SessionAffinityConfig != nil {
			errs = append(errs, field.Forbidden(sp.Child("sessionAffinityConfig"), "must not be set when `sessionAffinity` is None"))
		}
	case corev1.ServiceAffinityClientIP:
		tp := sp.Child("sessionAffinityConfig", "clientIP", "timeoutSeconds")
		if t := *spec.SessionAffinityConfig.ClientIP.TimeoutSeconds; t < 1 || t > maxClientIPTimeoutSeconds {
			errs = append(errs, field.Invalid(tp, t, fmt.Sprintf("must be in range 1-%d", maxClientIPTimeoutSeconds)))
		}
	default:
		errs = append(errs, field.NotSupported(sp.Child("sessionAffinity"), spec.SessionAffinity,
			[]corev1.ServiceAffinity{corev1.ServiceAffinityNone, corev1.ServiceAffinityClientIP}))
	}

	// Traffic policies.
	if spec.ExternalTrafficPolicy != "" {
		switch {
		case !externallyAccessible(s):
			errs = append(errs, field.Forbidden(sp.Child("externalTrafficPolicy"), "may only be set for externally-accessible services (NodePort, LoadBalancer, or with externalIPs)"))
		case spec.ExternalTrafficPolicy != corev1.ServiceExternalTrafficPolicyCluster && spec.ExternalTrafficPolicy != corev1.ServiceExternalTrafficPolicyLocal:
			errs = append(errs, field.NotSupported(sp.Child("externalTrafficPolicy"), spec.ExternalTrafficPolicy,
				[]corev1.ServiceExternalTrafficPolicy{corev1.ServiceExternalTrafficPolicyCluster, corev1.ServiceExternalTrafficPolicyLocal}))
		}
	}
	if itp := spec.InternalTrafficPolicy; itp != nil && *itp != corev1.ServiceInternalTrafficPolicyCluster && *itp != corev1.ServiceInternalTrafficPolicyLocal {
		errs = append(errs, field.NotSupported(sp.Child("internalTrafficPolicy"), *itp,
			[]corev1.ServiceInternalTrafficPolicy{corev1.ServiceInternalTrafficPolicyCluster, corev1.ServiceInternalTrafficPolicyLocal}))
	}
	if spec.HealthCheckNodePort != 0 {
		hp := sp.Child("healthCheckNodePort")
		switch {
		case spec.Type != corev1.ServiceTypeLoadBalancer || spec.ExternalTrafficPolicy != corev1.ServiceExternalTrafficPolicyLocal:
			errs = append(errs, field.Forbidden(hp, "may only be set when `type` is 'LoadBalancer' and `externalTrafficPolicy` is 'Local'"))
		case !nodePorts.Contains(int(spec.HealthCheckNodePort)):
			errs = append(errs, field.Invalid(hp, spec.HealthCheckNodePort, "must be in range "+nodePorts.String()))
		}
	}

	errs = append(errs, validateLabelMap(spec.Selector, sp.Child("selector"))...)
	return errs
}

// validateTargetPort accepts a port number 1-65535 or an IANA_SVC_NAME (a container
// port's name).
func validateTargetPort(tp intstr.IntOrString, p *field.Path) field.ErrorList {
	var errs field.ErrorList
	if tp.Type == intstr.String {
		for _, msg := range validation.IsValidPortName(tp.StrVal) {
			errs = append(errs, field.Invalid(p, tp.StrVal, msg))
		}
		return errs
	}
	return validatePortNum(tp.IntVal, p)
}

// validateNamespace checks a Namespace: a DNS-1123 label, and cluster-scoped.
func validateNamespace(ns *corev1.Namespace) field.ErrorList {
	p := field.NewPath("metadata")
	var errs field.ErrorList
	if ns.Name == "" {
		errs = append(errs, field.Required(p.Child("name"), ""))
	}
	for _, msg := range validation.IsDNS1123Label(ns.Name) {
		if ns.Name != "" {
			errs = append(errs, field.Invalid(p.Child("name"), ns.Name, msg))
		}
	}
	if ns.Namespace != "" {
		errs = append(errs, field.Forbidden(p.Child("namespace"), "a Namespace is not namespaced"))
	}
	return append(errs, validateLabelMap(ns.Labels, p.Child("labels"))...)
}

func validatePod(pod *corev1.Pod) field.ErrorList {
	errs := validateMeta(&pod.ObjectMeta, false)
	errs = append(errs, validatePodSpec(&pod.Spec, field.NewPath("spec"))...)
	if pod.Status.PodIP != "" {
		errs = append(errs, validateIPv4(pod.Status.PodIP, field.NewPath("status", "podIP"))...)
	}
	return errs
}

// validatePodSpec checks what kpbench uses of a pod: containers (names, ports) and the
// node name. Images are required as the API server requires them, though kpbench runs an
// echo server in their place.
func validatePodSpec(spec *corev1.PodSpec, p *field.Path) field.ErrorList {
	var errs field.ErrorList
	if len(spec.Containers) == 0 {
		errs = append(errs, field.Required(p.Child("containers"), "a pod needs at least one container"))
	}
	names := map[string]bool{}
	check := func(cs []corev1.Container, cp *field.Path) {
		for i := range cs {
			c := &cs[i]
			ip := cp.Index(i)
			if c.Name == "" {
				errs = append(errs, field.Required(ip.Child("name"), ""))
			} else {
				for _, msg := range validation.IsDNS1123Label(c.Name) {
					errs = append(errs, field.Invalid(ip.Child("name"), c.Name, msg))
				}
				if names[c.Name] {
					errs = append(errs, field.Duplicate(ip.Child("name"), c.Name))
				}
				names[c.Name] = true
			}
			if strings.TrimSpace(c.Image) == "" {
				errs = append(errs, field.Required(ip.Child("image"), ""))
			}
			portNames := map[string]bool{}
			for j, port := range c.Ports {
				pp := ip.Child("ports").Index(j)
				if port.Name != "" {
					errs = append(errs, validateUniqueName(port.Name, pp.Child("name"), portNames, validation.IsValidPortName)...)
				}
				errs = append(errs, validatePortNum(port.ContainerPort, pp.Child("containerPort"))...)
				if port.HostPort != 0 {
					errs = append(errs, validatePortNum(port.HostPort, pp.Child("hostPort"))...)
				}
				errs = append(errs, validateProtocol(port.Protocol, pp.Child("protocol"))...)
			}
		}
	}
	check(spec.InitContainers, p.Child("initContainers"))
	check(spec.Containers, p.Child("containers"))
	if spec.NodeName != "" {
		for _, msg := range validation.IsDNS1123Subdomain(spec.NodeName) {
			errs = append(errs, field.Invalid(p.Child("nodeName"), spec.NodeName, msg))
		}
	}
	return errs
}

func validateDeployment(d *appsv1.Deployment) field.ErrorList {
	errs := validateMeta(&d.ObjectMeta, false)
	sp := field.NewPath("spec")
	if r := *d.Spec.Replicas; r < 0 {
		errs = append(errs, field.Invalid(sp.Child("replicas"), r, "must be greater than or equal to 0"))
	}
	tp := sp.Child("template")
	switch {
	case d.Spec.Selector == nil:
		errs = append(errs, field.Required(sp.Child("selector"), ""))
	case len(d.Spec.Selector.MatchLabels)+len(d.Spec.Selector.MatchExpressions) == 0:
		errs = append(errs, field.Invalid(sp.Child("selector"), d.Spec.Selector, "empty selector is invalid for deployment"))
	default:
		selErrs := metav1validation.ValidateLabelSelector(d.Spec.Selector, metav1validation.LabelSelectorValidationOptions{}, sp.Child("selector"))
		errs = append(errs, selErrs...)
		if len(selErrs) == 0 {
			sel, err := metav1.LabelSelectorAsSelector(d.Spec.Selector)
			switch {
			case err != nil:
				errs = append(errs, field.Invalid(sp.Child("selector"), d.Spec.Selector, err.Error()))
			case !sel.Matches(labels.Set(d.Spec.Template.Labels)):
				errs = append(errs, field.Invalid(tp.Child("metadata", "labels"), d.Spec.Template.Labels, "`selector` does not match template `labels`"))
			}
		}
	}
	errs = append(errs, validateLabelMap(d.Spec.Template.Labels, tp.Child("metadata", "labels"))...)
	if rp := d.Spec.Template.Spec.RestartPolicy; rp != "" && rp != corev1.RestartPolicyAlways {
		errs = append(errs, field.NotSupported(tp.Child("spec", "restartPolicy"), rp, []corev1.RestartPolicy{corev1.RestartPolicyAlways}))
	}
	errs = append(errs, validatePodSpec(&d.Spec.Template.Spec, tp.Child("spec"))...)
	return errs
}

func validateEndpointSlice(s *discoveryv1.EndpointSlice) field.ErrorList {
	errs := validateMeta(&s.ObjectMeta, false)
	switch s.AddressType {
	case discoveryv1.AddressTypeIPv4:
	case "":
		errs = append(errs, field.Required(field.NewPath("addressType"), "must be IPv4"))
	default:
		errs = append(errs, field.NotSupported(field.NewPath("addressType"), s.AddressType, []discoveryv1.AddressType{discoveryv1.AddressTypeIPv4}))
	}
	ep := field.NewPath("endpoints")
	if len(s.Endpoints) > maxSliceEndpoints {
		errs = append(errs, field.TooMany(ep, len(s.Endpoints), maxSliceEndpoints))
	}
	for i, e := range s.Endpoints {
		ap := ep.Index(i).Child("addresses")
		switch {
		case len(e.Addresses) == 0:
			errs = append(errs, field.Required(ap, "must contain at least 1 address"))
		case len(e.Addresses) > maxEndpointAddresses:
			errs = append(errs, field.TooMany(ap, len(e.Addresses), maxEndpointAddresses))
		}
		for j, a := range e.Addresses {
			errs = append(errs, validateIPv4(a, ap.Index(j))...)
		}
		if e.NodeName != nil {
			for _, msg := range validation.IsDNS1123Subdomain(*e.NodeName) {
				errs = append(errs, field.Invalid(ep.Index(i).Child("nodeName"), *e.NodeName, msg))
			}
		}
	}
	pp := field.NewPath("ports")
	if len(s.Ports) > maxSlicePorts {
		errs = append(errs, field.TooMany(pp, len(s.Ports), maxSlicePorts))
	}
	names := map[string]bool{}
	for i, port := range s.Ports {
		ip := pp.Index(i)
		if port.Name != nil && *port.Name != "" {
			for _, msg := range validation.IsDNS1123Label(*port.Name) {
				errs = append(errs, field.Invalid(ip.Child("name"), *port.Name, msg))
			}
		}
		name := ""
		if port.Name != nil {
			name = *port.Name
		}
		if names[name] {
			errs = append(errs, field.Duplicate(ip.Child("name"), name))
		}
		names[name] = true
		if port.Port != nil {
			errs = append(errs, validatePortNum(*port.Port, ip.Child("port"))...)
		}
		if port.Protocol != nil {
			errs = append(errs, validateProtocol(*port.Protocol, ip.Child("protocol"))...)
		}
	}
	return errs
}

// validateUniqueName checks a port's name with check and against the names seen before it
// (seen then holds it too).
func validateUniqueName(name string, p *field.Path, seen map[string]bool, check func(string) []string) field.ErrorList {
	var errs field.ErrorList
	for _, msg := range check(name) {
		errs = append(errs, field.Invalid(p, name, msg))
	}
	if seen[name] {
		errs = append(errs, field.Duplicate(p, name))
	}
	seen[name] = true
	return errs
}
