// Command coredns is CoreDNS (github.com/coredns/coredns, the cluster DNS of kubeadm and
// kind) built with only the plugins a lab cluster's DNS uses: kubernetes (cluster.local and
// the reverse zones from the API server), cache, loadbalance, errors, log, bind, health and
// ready. It leaves out the cloud plugins of the default build (route53, azure, clouddns and
// their SDKs) and forward (a lab has no upstream resolver), which keeps a cold build short.
// CoreDNS documents this way of choosing plugins: a main package that imports the plugins
// and sets dnsserver.Directives. Built by `make e2e-build` (hack/build-e2e.sh).
package main

import (
	"github.com/coredns/coredns/core/dnsserver"
	"github.com/coredns/coredns/coremain"

	_ "github.com/coredns/coredns/plugin/bind"
	_ "github.com/coredns/coredns/plugin/cache"
	_ "github.com/coredns/coredns/plugin/errors"
	_ "github.com/coredns/coredns/plugin/health"
	_ "github.com/coredns/coredns/plugin/kubernetes"
	_ "github.com/coredns/coredns/plugin/loadbalance"
	_ "github.com/coredns/coredns/plugin/log"
	_ "github.com/coredns/coredns/plugin/ready"
)

// directives are the imported plugins in the order CoreDNS's plugin.cfg runs them (a
// query passes through them in this order, whatever the order in the Corefile).
var directives = []string{
	"bind",
	"ready",
	"health",
	"errors",
	"log",
	"loadbalance",
	"cache",
	"kubernetes",
}

func main() {
	dnsserver.Directives = directives
	coremain.Run()
}
