package controlplane

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"time"
)

// certValidity is how long the lab's certificates are valid: a lab lives for minutes.
const certValidity = 7 * 24 * time.Hour

// keyPair is a certificate and its private key.
type keyPair struct {
	cert *x509.Certificate
	key  crypto.Signer
	der  []byte
}

// CertPEM returns the certificate, PEM encoded.
func (k *keyPair) CertPEM() []byte {
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: k.der})
}

// KeyPEM returns the private key, PEM encoded (PKCS #8).
func (k *keyPair) KeyPEM() ([]byte, error) {
	der, err := x509.MarshalPKCS8PrivateKey(k.key)
	if err != nil {
		return nil, fmt.Errorf("marshal key of %s: %w", k.cert.Subject.CommonName, err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der}), nil
}

// certSpec says what to issue.
type certSpec struct {
	commonName string
	orgs       []string
	ips        []netip.Addr
	dnsNames   []string
	server     bool // serving certificate (else client)
}

// newCA makes a self-signed CA.
func newCA(name string) (*keyPair, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("CA key: %w", err)
	}
	now := time.Now()
	tpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: name},
		NotBefore:             now.Add(-time.Hour),
		NotAfter:              now.Add(certValidity),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature | x509.KeyUsageCRLSign,
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tpl, tpl, key.Public(), key)
	if err != nil {
		return nil, fmt.Errorf("CA certificate: %w", err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, err
	}
	return &keyPair{cert: cert, key: key, der: der}, nil
}

// issue signs a new certificate for spec with the CA.
func (ca *keyPair) issue(spec certSpec) (*keyPair, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("key for %s: %w", spec.commonName, err)
	}
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 62))
	if err != nil {
		return nil, err
	}
	now := time.Now()
	tpl := &x509.Certificate{
		SerialNumber: serial,
		Subject:      pkix.Name{CommonName: spec.commonName, Organization: spec.orgs},
		NotBefore:    now.Add(-time.Hour),
		NotAfter:     now.Add(certValidity),
		KeyUsage:     x509.KeyUsageDigitalSignature | x509.KeyUsageKeyEncipherment,
		DNSNames:     spec.dnsNames,
	}
	for _, ip := range spec.ips {
		tpl.IPAddresses = append(tpl.IPAddresses, net.IP(ip.AsSlice()))
	}
	if spec.server {
		tpl.ExtKeyUsage = []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}
	} else {
		tpl.ExtKeyUsage = []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}
	}
	der, err := x509.CreateCertificate(rand.Reader, tpl, ca.cert, key.Public(), ca.key)
	if err != nil {
		return nil, fmt.Errorf("certificate for %s: %w", spec.commonName, err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, err
	}
	return &keyPair{cert: cert, key: key, der: der}, nil
}

// Users the lab's certificates name.
const (
	// AdminUser is the publisher's identity (group system:masters: everything).
	AdminUser = "kpbench-admin"
	// KubeProxyUser is kube-proxy's identity; Kubernetes' bootstrap RBAC binds it to the
	// ClusterRole system:node-proxier (read Services, EndpointSlices and Nodes; write events).
	KubeProxyUser = "system:kube-proxy"
	// ControllerManagerUser and SchedulerUser are the identities the bootstrap RBAC binds
	// to the ClusterRoles of the same names.
	ControllerManagerUser = "system:kube-controller-manager"
	SchedulerUser         = "system:kube-scheduler"
	// NodeUserPrefix starts a kubelet's user name (system:node:<node>, group
	// system:nodes), which the Node authorizer and NodeRestriction admission key on.
	NodeUserPrefix = "system:node:"
	// NodesGroup is the group of every kubelet.
	NodesGroup = "system:nodes"
	// KubeletClientUser is the API server's identity towards the kubelets' API (exec, logs,
	// port-forward), kubeadm's name for it; the control plane binds it to the ClusterRole
	// system:kubelet-api-admin, which a kubelet's SubjectAccessReview checks.
	KubeletClientUser = "kube-apiserver-kubelet-client"
)

// pki is everything the control plane needs, written to files under dir.
type pki struct {
	ca, apiserver, admin, kubeProxy *keyPair
	controllerManager, scheduler    *keyPair
	kubeletClient                   *keyPair // the API server's, towards kubelets
	saKey                           *ecdsa.PrivateKey

	// File paths.
	caFile, apiserverCert, apiserverKey, saPub, saPriv string
	kubeletClientCert, kubeletClientKey                string
}

// newPKI generates the lab's CA, the API server's serving certificate (for the control
// plane's fabric address, the first service IP and the usual kubernetes.default names),
// client certificates for the publisher, kube-proxy, the controllers and the API server
// towards kubelets, and the service-account signing key, and writes the files the API
// server reads into dir.
func newPKI(dir, labName string, serverIP, serviceIP netip.Addr) (*pki, error) {
	var p pki
	var err error
	if p.ca, err = newCA("kpbench-" + labName + "-ca"); err != nil {
		return nil, err
	}
	ips := []netip.Addr{serverIP, netip.MustParseAddr("127.0.0.1")}
	if serviceIP.IsValid() {
		ips = append(ips, serviceIP)
	}
	if p.apiserver, err = p.ca.issue(certSpec{
		commonName: "kube-apiserver", server: true, ips: ips,
		dnsNames: []string{"localhost", "kubernetes", "kubernetes.default", "kubernetes.default.svc", "kubernetes.default.svc.cluster.local"},
	}); err != nil {
		return nil, err
	}
	if p.admin, err = p.ca.issue(certSpec{commonName: AdminUser, orgs: []string{"system:masters"}}); err != nil {
		return nil, err
	}
	if p.kubeProxy, err = p.ca.issue(certSpec{commonName: KubeProxyUser, orgs: []string{"system:node-proxier"}}); err != nil {
		return nil, err
	}
	if p.controllerManager, err = p.ca.issue(certSpec{commonName: ControllerManagerUser}); err != nil {
		return nil, err
	}
	if p.scheduler, err = p.ca.issue(certSpec{commonName: SchedulerUser}); err != nil {
		return nil, err
	}
	if p.kubeletClient, err = p.ca.issue(certSpec{commonName: KubeletClientUser}); err != nil {
		return nil, err
	}
	if p.saKey, err = ecdsa.GenerateKey(elliptic.P256(), rand.Reader); err != nil {
		return nil, fmt.Errorf("service-account key: %w", err)
	}

	pkiDir := filepath.Join(dir, "pki")
	if err := os.MkdirAll(pkiDir, 0o700); err != nil {
		return nil, err
	}
	p.caFile = filepath.Join(pkiDir, "ca.crt")
	p.apiserverCert = filepath.Join(pkiDir, "apiserver.crt")
	p.apiserverKey = filepath.Join(pkiDir, "apiserver.key")
	p.saPub = filepath.Join(pkiDir, "sa.pub")
	p.saPriv = filepath.Join(pkiDir, "sa.key")
	p.kubeletClientCert = filepath.Join(pkiDir, "apiserver-kubelet-client.crt")
	p.kubeletClientKey = filepath.Join(pkiDir, "apiserver-kubelet-client.key")
	apiKey, err := p.apiserver.KeyPEM()
	if err != nil {
		return nil, err
	}
	kubeletClientKey, err := p.kubeletClient.KeyPEM()
	if err != nil {
		return nil, err
	}
	saDER, err := x509.MarshalPKCS8PrivateKey(p.saKey)
	if err != nil {
		return nil, fmt.Errorf("service-account key: %w", err)
	}
	saPubDER, err := x509.MarshalPKIXPublicKey(p.saKey.Public())
	if err != nil {
		return nil, fmt.Errorf("service-account key: %w", err)
	}
	files := []struct {
		path string
		data []byte
	}{
		{p.caFile, p.ca.CertPEM()},
		{p.apiserverCert, p.apiserver.CertPEM()},
		{p.apiserverKey, apiKey},
		{p.saPriv, pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: saDER})},
		{p.saPub, pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: saPubDER})},
		{p.kubeletClientCert, p.kubeletClient.CertPEM()},
		{p.kubeletClientKey, kubeletClientKey},
	}
	for _, f := range files {
		if err := os.WriteFile(f.path, f.data, 0o600); err != nil {
			return nil, fmt.Errorf("write %s: %w", f.path, err)
		}
	}
	return &p, nil
}
