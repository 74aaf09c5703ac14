//go:build linux

package controlplane

import (
	"context"
	"crypto/tls"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"kpbench.dev/kpbench/internal/upstream"
	"kpbench.dev/kpbench/lab"
)

// Secure ports of the controller manager and the scheduler (their defaults), on 127.0.0.1
// of the control-plane namespace.
const (
	ControllerManagerPort = 10257
	SchedulerPort         = 10259
)

// disabledControllers are the kube-controller-manager controllers that cannot work in a
// lab, or would fight it:
//   - node-ipam-controller: the lab assigns every node its pod block (its routes and
//     bridge address are built on it before any Node exists), and the lab kubelet
//     registers its Node with that block as spec.podCIDR; an allocator would hand out
//     blocks in registration order instead. (It is inert anyway without
//     --allocate-node-cidrs; disabled so that nobody turns it on by accident.)
//   - the persistent-volume controllers: the lab has no storage and the lab kubelet mounts
//     no volumes.
var disabledControllers = []string{
	"node-ipam-controller",
	"persistentvolume-attach-detach-controller",
	"persistentvolume-binder-controller",
	"persistentvolume-expander-controller",
}

// controllerManagerArgs are kube-controller-manager's flags: its own identity (also for
// delegated authentication and authorization of its secure port), the service-account
// key the API server verifies tokens with and the CA it publishes to namespaces, one
// service account per controller (as kubeadm runs it), no leader election (one instance).
func (cp *ControlPlane) controllerManagerArgs(kubeconfig string) []string {
	p := cp.pki
	args := []string{
		"--kubeconfig=" + kubeconfig,
		"--authentication-kubeconfig=" + kubeconfig, "--authorization-kubeconfig=" + kubeconfig,
		"--bind-address=127.0.0.1", "--secure-port=" + strconv.Itoa(ControllerManagerPort),
		"--cert-dir=" + filepath.Join(cp.opts.Dir, "pki", "kube-controller-manager"),
		"--service-account-private-key-file=" + p.saPriv, "--root-ca-file=" + p.caFile,
		"--use-service-account-credentials=true",
		"--controllers=*,-" + strings.Join(disabledControllers, ",-"),
		"--leader-elect=false", "--profiling=false", "--v=1",
	}
	return append(args, cp.opts.ControllerManagerArgs...)
}

// schedulerArgs are kube-scheduler's flags: its identity, no leader election.
func (cp *ControlPlane) schedulerArgs(kubeconfig string) []string {
	args := []string{
		"--kubeconfig=" + kubeconfig,
		"--authentication-kubeconfig=" + kubeconfig, "--authorization-kubeconfig=" + kubeconfig,
		"--bind-address=127.0.0.1", "--secure-port=" + strconv.Itoa(SchedulerPort),
		"--cert-dir=" + filepath.Join(cp.opts.Dir, "pki", "kube-scheduler"),
		"--leader-elect=false", "--profiling=false", "--v=1",
	}
	return append(args, cp.opts.SchedulerArgs...)
}

// startControllers starts kube-controller-manager and kube-scheduler with kubeconfigs of
// their own, and waits until both answer /healthz.
func (cp *ControlPlane) startControllers(ctx context.Context, bins map[string]string) error {
	kcmConf, err := cp.kubeconfig("kubeconfig-controller-manager", cp.pki.controllerManager, ControllerManagerUser)
	if err != nil {
		return err
	}
	schedConf, err := cp.kubeconfig("kubeconfig-scheduler", cp.pki.scheduler, SchedulerUser)
	if err != nil {
		return err
	}
	if cp.kcm, err = startComponent(ctx, cp.worker, upstream.KubeControllerManager, bins[upstream.KubeControllerManager],
		cp.controllerManagerArgs(kcmConf), filepath.Join(cp.opts.Dir, "kube-controller-manager.log")); err != nil {
		return err
	}
	if cp.sched, err = startComponent(ctx, cp.worker, upstream.KubeScheduler, bins[upstream.KubeScheduler],
		cp.schedulerArgs(schedConf), filepath.Join(cp.opts.Dir, "kube-scheduler.log")); err != nil {
		return err
	}
	// Their serving certificates are self-signed at start; /healthz is open to anyone
	// (--authorization-always-allow-paths), and this client only asks it, inside the lab.
	health := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{
		DialContext:     cp.dial,
		TLSClientConfig: &tls.Config{InsecureSkipVerify: true, MinVersion: tls.VersionTLS12}, //nolint:gosec // see above
	}}
	for _, c := range []struct {
		comp *component
		port int
	}{{cp.kcm, ControllerManagerPort}, {cp.sched, SchedulerPort}} {
		url := fmt.Sprintf("https://127.0.0.1:%d/healthz", c.port)
		if err := c.comp.waitReady(ctx, cp.opts.StartTimeout, func(ctx context.Context) error {
			return HTTPOK(ctx, health, url, "ok")
		}); err != nil {
			return err
		}
	}
	return nil
}

// KubeletRESTConfig returns a client-go configuration with the identity of the named
// node's kubelet (user system:node:<node>, group system:nodes: the Node authorizer and
// NodeRestriction limit it to that node's objects). Its Dial is unset: the kubelet dials
// from its node's namespace. The certificate is issued at the first call.
func (cp *ControlPlane) KubeletRESTConfig(node string) (*rest.Config, error) {
	if h, ok := cp.lab.Host(node); !ok || h.Kind != lab.KindNode {
		return nil, fmt.Errorf("kubelet credentials for %s: not a node of lab %s", node, cp.lab.Name())
	}
	cp.mu.Lock()
	kp, ok := cp.kubelets[node]
	if !ok {
		var err error
		kp, err = cp.pki.ca.issue(certSpec{commonName: NodeUserPrefix + node, orgs: []string{NodesGroup}})
		if err != nil {
			cp.mu.Unlock()
			return nil, err
		}
		cp.kubelets[node] = kp
	}
	cp.mu.Unlock()
	key, err := kp.KeyPEM()
	if err != nil {
		return nil, err
	}
	return &rest.Config{
		Host:            cp.Server(),
		TLSClientConfig: rest.TLSClientConfig{CAData: cp.pki.ca.CertPEM(), CertData: kp.CertPEM(), KeyData: key},
	}, nil
}

// WriteAdminKubeconfig writes a kubeconfig with the admin identity (system:masters) of this
// control plane, valid for this lab's CA only, pointing at server (the loopback forward's
// https://127.0.0.1:PORT, which the API server's certificate names). The file is readable
// by its owner only.
func (cp *ControlPlane) WriteAdminKubeconfig(path, server string) error {
	key, err := cp.pki.admin.KeyPEM()
	if err != nil {
		return err
	}
	name := "kpbench-" + cp.lab.Name()
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters[name] = &clientcmdapi.Cluster{Server: server, CertificateAuthorityData: cp.pki.ca.CertPEM()}
	cfg.AuthInfos[name+"-admin"] = &clientcmdapi.AuthInfo{ClientCertificateData: cp.pki.admin.CertPEM(), ClientKeyData: key}
	cfg.Contexts[name] = &clientcmdapi.Context{Cluster: name, AuthInfo: name + "-admin"}
	cfg.CurrentContext = name
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return fmt.Errorf("write kubeconfig %s: %w", path, err)
	}
	if err := clientcmd.WriteToFile(*cfg, path); err != nil {
		return fmt.Errorf("write kubeconfig %s: %w", path, err)
	}
	if err := os.Chmod(path, 0o600); err != nil {
		return fmt.Errorf("write kubeconfig %s: %w", path, err)
	}
	return nil
}
