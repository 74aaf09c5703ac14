package kubelet

import (
	"testing"

	"github.com/stretchr/testify/assert"
	corev1 "k8s.io/api/core/v1"
)

func TestImageName(t *testing.T) {
	for image, want := range map[string]string{
		"registry.k8s.io/e2e-test-images/agnhost:2.66.1":     "agnhost",
		"registry.k8s.io/e2e-test-images/agnhost@sha256:abc": "agnhost",
		"localhost:5000/agnhost:2.53":                        "agnhost",
		"registry.k8s.io/pause:3.10":                         "pause",
		"nginx":                                              "nginx",
	} {
		assert.Equal(t, want, imageName(image), image)
	}
}

func TestRealise(t *testing.T) {
	const agnhost = "registry.k8s.io/e2e-test-images/agnhost:2.66.1"
	const bin = "/cache/bin/agnhost"
	ports := []corev1.ContainerPort{{ContainerPort: 80}}
	tests := []struct {
		name     string
		c        corev1.Container
		agnhost  string
		wantKind containerKind
		wantArgv []string
		wantExit int32
		wantWhat string
	}{
		{name: "netexec from args: the image's entrypoint", c: corev1.Container{Image: agnhost, Args: []string{"netexec", "--http-port=8080"}}, agnhost: bin,
			wantKind: kindProcess, wantArgv: []string{"/agnhost", "netexec", "--http-port=8080"}, wantWhat: "process /agnhost netexec --http-port=8080"},
		{name: "command replaces the entrypoint", c: corev1.Container{Image: agnhost, Command: []string{"/agnhost", "serve-hostname"}, Args: []string{"--udp", "--port", "$(PORT)"}}, agnhost: bin,
			wantKind: kindProcess, wantArgv: []string{"/agnhost", "serve-hostname", "--udp", "--port", "$(PORT)"}},
		{name: "a shell in the agnhost image runs the host's", c: corev1.Container{Image: agnhost, Command: []string{"/bin/sh", "-c", "sleep 1"}},
			wantKind: kindProcess, wantArgv: []string{"/bin/sh", "-c", "sleep 1"}},
		{name: "agnhost pause: nothing runs, exit 2", c: corev1.Container{Image: agnhost, Args: []string{"pause"}}, agnhost: bin,
			wantKind: kindPause, wantExit: agnhostPauseExitCode},
		{name: "the image's default (pause) without ports", c: corev1.Container{Image: agnhost}, agnhost: bin, wantKind: kindPause, wantExit: agnhostPauseExitCode},
		{name: "the image's default with ports stays the echo server (kpbench's manifests)", c: corev1.Container{Image: agnhost, Ports: ports}, agnhost: bin,
			wantKind: kindEcho, wantWhat: "kpbench echo server on 80/TCP (agnhost with the image's default command)"},
		{name: "no binary: netexec's port flags are emulated", c: corev1.Container{Image: agnhost, Args: []string{"netexec", "--http-port", "80", "--udp-port=-1", "--delay-shutdown=5"}},
			wantKind: kindEcho, wantWhat: "kpbench echo server on 80/TCP (agnhost netexec emulated: no agnhost binary)"},
		{name: "no binary: other netexec flags are not", c: corev1.Container{Image: agnhost, Args: []string{"netexec", "--http-override=/hostname"}}, wantKind: kindUnrealisable},
		{name: "no binary: serve-hostname", c: corev1.Container{Image: agnhost, Args: []string{"serve-hostname"}}, wantKind: kindUnrealisable},
		{name: "pause image", c: corev1.Container{Image: "registry.k8s.io/pause:3.10"}, wantKind: kindPause, wantExit: pauseExitCode},
		{name: "pause image with ports keeps the echo server", c: corev1.Container{Image: "registry.k8s.io/pause:3.10", Ports: ports}, wantKind: kindEcho},
		{name: "any other image", c: corev1.Container{Image: "nginx", Command: []string{"nginx"}, Ports: ports}, agnhost: bin, wantKind: kindEcho},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := realise(tt.c, tt.agnhost)
			assert.Equal(t, tt.wantKind, r.kind, r.kind.String())
			assert.Equal(t, tt.wantArgv, r.argv)
			assert.Equal(t, tt.wantExit, r.exitCode)
			if tt.wantWhat != "" {
				assert.Equal(t, tt.wantWhat, r.what)
			}
			if r.kind == kindUnrealisable {
				assert.Equal(t, ReasonNotRealisable, r.reason)
				assert.Contains(t, r.message, "make upstream")
			}
		})
	}
}
