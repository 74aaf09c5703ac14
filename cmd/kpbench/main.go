// Command kpbench is a test bench for Kubernetes Service proxying: it builds a fake cluster
// out of network namespaces, programs real kernel rules the way kube-proxy does, and
// measures and checks them with real traffic.
package main

import (
	"os"
)

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}
