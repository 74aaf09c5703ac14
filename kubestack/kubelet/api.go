//go:build linux

package kubelet

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"path/filepath"
	"slices"

	"kpbench.dev/kpbench/internal/netns"
)

// DefaultServiceCIDR is the Service range of `kpbench cluster up` (the control plane's
// default), whose tenth address is the default ClusterDNS.
var defaultServiceCIDR = netip.MustParsePrefix("10.96.0.0/12")

// apiDefaults fills in the defaults of what the kubelet API and the pods' files need.
func (o *Options) apiDefaults() error {
	if o.ClusterDomain == "" {
		o.ClusterDomain = DefaultClusterDomain
	}
	if !o.ClusterDNS.IsValid() {
		o.ClusterDNS = DefaultClusterDNS(defaultServiceCIDR)
	}
	if o.Logs == nil {
		o.Logs = FileLogs{Dir: filepath.Join(o.StateDir, "logs")}
	}
	if o.Agnhost == "" {
		o.Agnhost = AgnhostPath()
	}
	if len(o.ExecHelper) == 0 {
		// The running binary itself, even when its file was replaced (make build) while
		// the cluster runs.
		o.ExecHelper = []string{"/proc/self/exe", PodExecCommand}
	}
	o.ExecHelper = slices.Clone(o.ExecHelper)
	if o.API == nil {
		return nil
	}
	api := *o.API
	o.API = &api
	if api.Port == 0 {
		api.Port = DefaultAPIPort
	}
	if api.Port < 1 || api.Port > 65535 {
		return fmt.Errorf("kubelet API port %d: not in 1-65535", api.Port)
	}
	if len(api.Certificate.Certificate) == 0 || api.ClientCAs == nil {
		return errors.New("the kubelet API needs a serving certificate and the client CAs")
	}
	return nil
}

// apiPort is the port of the kubelet API the Node announces (0: none).
func (k *Kubelet) apiPort() int {
	if k.opts.API == nil {
		return 0
	}
	return k.opts.API.Port
}

// startAPI serves the kubelet API on the node's InternalIP (Options.API), with a listener
// made inside the node's namespace.
func (k *Kubelet) startAPI(ctx context.Context) error {
	o := k.opts.API
	if o == nil {
		return nil
	}
	authz := o.Authorizer
	if authz == nil {
		authz = newReviewAuthorizer(k.client)
	}
	addr := netip.AddrPortFrom(k.opts.Node.IP, uint16(o.Port))
	listen := func() (net.Listener, error) {
		var l net.Listener
		err := k.apiDial.Run(ctx, func() error {
			if err := netns.Guard(); err != nil {
				return err
			}
			var err error
			l, err = net.Listen("tcp", addr.String())
			return err
		})
		return l, err
	}
	var err error
	k.api, err = serveAPI(listen, newAPIHandler(k.opts.Node.Name, k, authz, k.log), o, k.log)
	return err
}

// containerLogs implements podHost.
func (k *Kubelet) containerLogs() ContainerLogs { return k.logs }
