//go:build linux

package perrule

import "os/exec"

// execOutput runs a tool on the calling thread (tests call it inside netns.Do).
func execOutput(path string, args ...string) ([]byte, error) {
	return exec.Command(path, args...).Output()
}
