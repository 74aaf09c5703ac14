package kube

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

// CleanupResult lists what Cleanup removed and what it left.
type CleanupResult struct {
	// Removed are the namespaces deleted.
	Removed []string
	// Kept are namespaces of runs that are still alive on this machine, with their owner.
	Kept []string
}

// Cleanup deletes every namespace labelled RunLabel (what a killed run left), except
// those whose owner is a kpbench process still running on this machine (unless force),
// and waits until each is gone, within timeout per namespace.
func Cleanup(ctx context.Context, client kubernetes.Interface, force bool, timeout time.Duration) (CleanupResult, error) {
	var res CleanupResult
	list, err := client.CoreV1().Namespaces().List(ctx, metav1.ListOptions{LabelSelector: RunLabel})
	if err != nil {
		return res, fmt.Errorf("list namespaces labelled %s: %w", RunLabel, err)
	}
	var errs []error
	for _, ns := range list.Items {
		if !strings.HasPrefix(ns.Name, "kpbench-") {
			continue
		}
		if owner := ns.Annotations[OwnerAnnotation]; !force && ownerAlive(owner) {
			res.Kept = append(res.Kept, ns.Name+" (owner "+owner+" runs)")
			continue
		}
		if err := DeleteNamespace(ctx, client, ns.Name, timeout); err != nil {
			errs = append(errs, err)
			continue
		}
		res.Removed = append(res.Removed, ns.Name)
	}
	return res, errors.Join(errs...)
}

// ownerAlive reports whether owner ("host/pid") is a kpbench process running here.
func ownerAlive(owner string) bool {
	host, pidStr, ok := strings.Cut(owner, "/")
	if !ok {
		return false
	}
	if h, _ := os.Hostname(); h != host {
		return false
	}
	pid, err := strconv.Atoi(pidStr)
	if err != nil || pid <= 0 {
		return false
	}
	exe, err := os.Readlink("/proc/" + pidStr + "/exe")
	if err != nil {
		return false
	}
	return strings.HasPrefix(filepath.Base(exe), "kpbench") || strings.HasSuffix(filepath.Base(exe), ".test")
}
