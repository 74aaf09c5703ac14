//go:build linux

package controlplane

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"net/netip"

	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"kpbench.dev/kpbench/lab"
)

// KubeletAPIRole is the bootstrap ClusterRole the API server's kubelet-client identity is
// bound to: every subresource of nodes a kubelet's API authorizes (proxy, log, stats,
// metrics, spec).
const KubeletAPIRole = "system:kubelet-api-admin"

// kubeletClientBinding names the ClusterRoleBinding of KubeletClientUser (kubeadm's name).
const kubeletClientBinding = "kubeadm:kube-apiserver-kubelet-client"

// KubeletServing returns the serving certificate of the named node's kubelet API (for the
// node's fabric address and its name, signed by the cluster's CA, which the API server
// checks it with) and the pool of that CA, which verifies the API server's client
// certificate. Each call issues a new certificate.
func (cp *ControlPlane) KubeletServing(node string) (tls.Certificate, *x509.CertPool, error) {
	h, ok := cp.lab.Host(node)
	if !ok || h.Kind != lab.KindNode {
		return tls.Certificate{}, nil, fmt.Errorf("kubelet serving certificate for %s: not a node of lab %s", node, cp.lab.Name())
	}
	kp, err := cp.pki.ca.issue(certSpec{commonName: node, server: true, ips: []netip.Addr{h.IP}, dnsNames: []string{node}})
	if err != nil {
		return tls.Certificate{}, nil, err
	}
	key, err := kp.KeyPEM()
	if err != nil {
		return tls.Certificate{}, nil, err
	}
	cert, err := tls.X509KeyPair(kp.CertPEM(), key)
	if err != nil {
		return tls.Certificate{}, nil, fmt.Errorf("kubelet serving certificate for %s: %w", node, err)
	}
	pool := x509.NewCertPool()
	pool.AddCert(cp.pki.ca.cert)
	return cert, pool, nil
}

// bindKubeletClient lets the API server's kubelet-client identity use the kubelets' API:
// a ClusterRoleBinding of KubeletClientUser to KubeletAPIRole, as kubeadm makes it.
//
// Equivalent to: `kubectl create clusterrolebinding kubeadm:kube-apiserver-kubelet-client
// --clusterrole=system:kubelet-api-admin --user=kube-apiserver-kubelet-client`.
func (cp *ControlPlane) bindKubeletClient(ctx context.Context) error {
	client, err := cp.Client()
	if err != nil {
		return err
	}
	b := &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: kubeletClientBinding},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: KubeletAPIRole},
		Subjects:   []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: rbacv1.UserKind, Name: KubeletClientUser}},
	}
	if _, err := client.RbacV1().ClusterRoleBindings().Create(ctx, b, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("bind %s to %s: %w", KubeletClientUser, KubeletAPIRole, err)
	}
	return nil
}
