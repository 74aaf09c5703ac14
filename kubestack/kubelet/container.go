package kubelet

import (
	"fmt"
	"path"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"

	"kpbench.dev/kpbench/lab/echo"
)

// containerKind is how the lab kubelet realises a container (see realise).
type containerKind int

// The ways a container is realised.
const (
	// kindEcho: kpbench's in-process echo server on the container's declared ports (and
	// netexec's), whatever the image: the default, and what a lab of thousands of pods costs
	// nothing to run.
	kindEcho containerKind = iota
	// kindPause: nothing runs (a pause container); it ends as soon as it is told to stop.
	kindPause
	// kindProcess: a child process in the pod's namespaces (process.go): the real agnhost,
	// or the host's program the container's command names.
	kindProcess
	// kindUnrealisable: what the image says cannot be run here; the container waits with
	// ReasonNotRealisable and an event says why. It is never reported Running.
	kindUnrealisable
)

func (k containerKind) String() string {
	switch k {
	case kindEcho:
		return "echo"
	case kindPause:
		return "pause"
	case kindProcess:
		return "process"
	default:
		return "unrealisable"
	}
}

// agnhostEntrypoint is the ENTRYPOINT of the agnhost image, and agnhostDefaultArgs its
// CMD (test/images/agnhost/Dockerfile).
const agnhostEntrypoint = "/agnhost"

var agnhostDefaultArgs = []string{"pause"}

// Exit codes of the pause containers at SIGTERM: registry.k8s.io/pause exits 0, agnhost
// pause exits 2 (test/images/agnhost/pause).
const (
	pauseExitCode        = 0
	agnhostPauseExitCode = 2
)

// realisation is what the lab kubelet makes of one container.
type realisation struct {
	kind containerKind
	// argv is a process's command line as a container runtime makes it from the image's
	// entrypoint and the container's command and args, before $(VAR) expansion; argv[0]
	// as written (/agnhost is the agnhost binary).
	argv []string
	// exitCode is a pause container's exit code when it is stopped.
	exitCode int32
	// what says in a few words what runs, for the pod's status message and events.
	what string
	// reason and message say why an unrealisable container waits.
	reason, message string
}

// imageName returns the last component of an image reference's repository, without
// registry, tag or digest: "agnhost" for registry.k8s.io/e2e-test-images/agnhost:2.66.
func imageName(image string) string {
	image, _, _ = strings.Cut(image, "@")
	name := path.Base(image)
	name, _, _ = strings.Cut(name, ":")
	return name
}

// isAgnhostImage reports whether image is the e2e agnhost image (any registry or tag).
func isAgnhostImage(image string) bool { return imageName(image) == "agnhost" }

// isPauseImage reports whether image is a pause image (registry.k8s.io/pause).
func isPauseImage(image string) bool { return imageName(image) == "pause" }

// agnhostArgv joins the agnhost image's entrypoint and default args with the container's
// command and args, as a container runtime does: command replaces the entrypoint (and
// drops the image's args), args replace the image's args.
func agnhostArgv(c corev1.Container) []string {
	args := c.Args
	if len(c.Command) == 0 && len(args) == 0 {
		args = agnhostDefaultArgs
	}
	entry := []string{agnhostEntrypoint}
	if len(c.Command) > 0 {
		entry = c.Command
	}
	return append(slices.Clone(entry), args...)
}

// isAgnhostPath reports whether a program name is the agnhost binary of the image (the
// image also has the agnhost-2 link of the entrypoint tests).
func isAgnhostPath(p string) bool {
	switch p {
	case "/agnhost", "agnhost", "/agnhost-2", "agnhost-2":
		return true
	}
	return false
}

// agnhostSubcommand returns the agnhost subcommand of argv ("netexec"), or "" when argv
// does not run agnhost.
func agnhostSubcommand(argv []string) string {
	if len(argv) < 2 || !isAgnhostPath(argv[0]) {
		return ""
	}
	return argv[1]
}

// emulatedNetexecFlags are the netexec flags the echo server honours well enough to stand
// in for netexec when the agnhost binary is absent: its ports, and a shutdown delay (the
// echo server serves for the whole grace period, which covers it).
var emulatedNetexecFlags = []string{"http-port", "udp-port", "delay-shutdown"}

// netexecEmulable reports whether the echo server can stand in for `agnhost netexec
// FLAGS`: every flag is one of emulatedNetexecFlags.
func netexecEmulable(flags []string) bool {
	for i := 0; i < len(flags); i++ {
		f := flags[i]
		if !strings.HasPrefix(f, "-") {
			return false
		}
		name, _, hasValue := strings.Cut(strings.TrimLeft(f, "-"), "=")
		if !slices.Contains(emulatedNetexecFlags, name) {
			return false
		}
		if !hasValue {
			i++ // the value follows
		}
	}
	return true
}

// realise decides how the lab kubelet runs container c; agnhost is the path of the agnhost
// binary, "" when it is absent.
//
//   - An agnhost container runs the agnhost binary (kindProcess) with the image's
//     entrypoint and the container's command and args, except: agnhost pause is a pause
//     container (nothing runs; it exits 2 when stopped, as agnhost pause does); an agnhost
//     container with neither command nor args (the image's default, pause) that declares
//     ports stays kpbench's echo server on them, which kpbench's own manifests rely on.
//     Without the binary, netexec with only its port flags is emulated by the echo server
//     (lab/echo speaks netexec's HTTP API); any other agnhost container is unrealisable.
//   - A pause image without ports is a pause container (exit 0 when stopped).
//   - Every other container is the echo server on its declared ports, as before.
func realise(c corev1.Container, agnhost string) realisation {
	ports := containerPorts(c)
	echoWhat := "kpbench echo server on " + portList(ports)
	switch {
	case isAgnhostImage(c.Image):
		if len(c.Command) == 0 && len(c.Args) == 0 && len(c.Ports) > 0 {
			return realisation{kind: kindEcho, what: echoWhat + " (agnhost with the image's default command)"}
		}
		argv := agnhostArgv(c)
		sub := agnhostSubcommand(argv)
		if sub == "pause" && len(argv) == 2 {
			return realisation{kind: kindPause, exitCode: agnhostPauseExitCode, what: "agnhost pause (no process)"}
		}
		if agnhost != "" || (sub == "" && !isAgnhostPath(argv[0])) {
			return realisation{kind: kindProcess, argv: argv, what: "process " + strings.Join(argv, " ")}
		}
		if sub == "netexec" && netexecEmulable(argv[2:]) {
			return realisation{kind: kindEcho, what: echoWhat + " (agnhost netexec emulated: no agnhost binary)"}
		}
		return realisation{kind: kindUnrealisable, reason: ReasonNotRealisable,
			message: fmt.Sprintf("%s needs the agnhost binary, absent here: run `make upstream`", strings.Join(argv, " "))}
	case isPauseImage(c.Image) && len(c.Ports) == 0:
		return realisation{kind: kindPause, exitCode: pauseExitCode, what: "pause (no process)"}
	}
	return realisation{kind: kindEcho, what: echoWhat}
}

// portList renders ports for messages ("80/TCP, 53/UDP", or "no ports").
func portList(ports []echo.Port) string {
	if len(ports) == 0 {
		return "no ports"
	}
	s := make([]string, len(ports))
	for i, p := range ports {
		s[i] = p.String()
	}
	return strings.Join(s, ", ")
}
