//go:build linux

package vm

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"
)

// pollInterval is how often Run copies new guest output to Stdout and Stderr.
const pollInterval = 100 * time.Millisecond

// Run boots a VM (building the cache first if needed, see EnsureKernel) and runs argv in it,
// in the host's working directory, with the environment described at guestEnv. The guest
// command's stdout and stderr stream to cfg.Stdout and cfg.Stderr while it runs; its stdin is
// /dev/null. It returns the command's exit status. An error means the VM itself failed: QEMU
// could not start, the guest died without an exit status (the error holds the console's
// tail), cfg.Timeout passed, or ctx was cancelled; QEMU is killed in the last two cases.
func Run(ctx context.Context, cfg Config, argv []string) (exitCode int, err error) {
	cfg, err = cfg.withDefaults(os.Getenv)
	if err != nil {
		return -1, err
	}
	if len(argv) == 0 {
		return -1, errors.New("vm run: no command")
	}
	if os.Getenv(EnvInVM) == "1" {
		return -1, errors.New("vm run: already inside the kpbench VM (nested TCG would be far too slow)")
	}
	tools, err := lookTools([]tool{{qemuBinary, "qemu-system-x86"}})
	if err != nil {
		return -1, err
	}
	if err := checkQboot(); err != nil {
		return -1, err
	}
	if cfg.Accel == AccelKVM {
		f, err := os.OpenFile("/dev/kvm", os.O_RDWR, 0)
		if err != nil {
			return -1, fmt.Errorf("accel kvm: %w (unset %s or use tcg)", err, EnvAccel)
		}
		f.Close()
	}
	img, err := EnsureKernel(ctx, cfg)
	if err != nil {
		return -1, err
	}
	cwd, err := os.Getwd()
	if err != nil {
		return -1, fmt.Errorf("vm run: %w", err)
	}
	writable, err := writableDirs(cfg.Writable, cwd)
	if err != nil {
		return -1, err
	}
	for _, d := range writable {
		if st, err := os.Stat(d); err != nil || !st.IsDir() {
			return -1, fmt.Errorf("writable directory %s: not a directory (create it first)", d)
		}
	}

	share, err := os.MkdirTemp("", "kpbench-vm-")
	if err != nil {
		return -1, fmt.Errorf("vm share: %w", err)
	}
	defer os.RemoveAll(share)
	if strings.ContainsAny(share, " \t\n") {
		return -1, fmt.Errorf("vm share %q: the path goes on the kernel command line and must have no blanks (set TMPDIR)", share)
	}
	files := map[string]string{
		"run.sh":     runScript(cwd, guestEnv(os.Environ(), cfg, cfg.Env), argv),
		"mounts":     mountsFile(writable),
		"stdout.log": "",
		"stderr.log": "",
	}
	for name, content := range files {
		if err := os.WriteFile(filepath.Join(share, name), []byte(content), 0o644); err != nil {
			return -1, fmt.Errorf("vm share: %w", err)
		}
	}
	console, err := os.Create(filepath.Join(share, "console.log"))
	if err != nil {
		return -1, fmt.Errorf("vm share: %w", err)
	}
	defer console.Close()

	runCtx, cancel := context.WithTimeout(ctx, cfg.Timeout)
	defer cancel()
	var qemuErr bytes.Buffer
	c := exec.CommandContext(runCtx, tools[qemuBinary], qemuArgs(cfg, img, share, writable, cfg.Debug)...)
	c.Stdout = io.Writer(console)
	if cfg.Debug {
		c.Stdout = io.MultiWriter(console, cfg.Stderr)
	}
	c.Stderr = &qemuErr
	c.WaitDelay = 5 * time.Second
	tails, err := openTails(share, cfg.Stdout, cfg.Stderr)
	if err != nil {
		return -1, err
	}
	defer tails.close()
	if err := c.Start(); err != nil {
		return -1, fmt.Errorf("start %s: %w", qemuBinary, err)
	}
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		t := time.NewTicker(pollInterval)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-t.C:
				tails.copy()
			}
		}
	}()
	waitErr := c.Wait()
	close(done)
	wg.Wait()
	tails.copy()

	if runCtx.Err() != nil {
		if ctx.Err() != nil {
			return -1, fmt.Errorf("vm run: %w", ctx.Err())
		}
		return -1, fmt.Errorf("vm run: guest killed after the timeout of %s; console:\n%s", cfg.Timeout, consoleTail(share))
	}
	code, rerr := readExitCode(filepath.Join(share, "exit-code"))
	if rerr != nil {
		msg := consoleTail(share)
		if waitErr != nil {
			msg = fmt.Sprintf("%s: %v: %s\n%s", qemuBinary, waitErr, tailLines(qemuErr.String(), 5), msg)
		}
		return -1, fmt.Errorf("vm run: the guest stopped without an exit status (%v); console:\n%s", rerr, msg)
	}
	if code == 255 && strings.Contains(consoleTail(share), "kpbench-vm: FATAL") {
		return -1, fmt.Errorf("vm run: guest init failed; console:\n%s", consoleTail(share))
	}
	if err := tails.err(); err != nil {
		return code, fmt.Errorf("vm run: copy guest output: %w", err)
	}
	return code, nil
}

// readExitCode parses the exit-code file the guest init writes.
func readExitCode(path string) (int, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return -1, err
	}
	code, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil {
		return -1, fmt.Errorf("exit-code %q: %w", b, err)
	}
	return code, nil
}

// consoleTail is the end of the serial console log, for error messages.
func consoleTail(share string) string {
	b, err := os.ReadFile(filepath.Join(share, "console.log"))
	if err != nil {
		return fmt.Sprintf("(no console log: %v)", err)
	}
	if len(bytes.TrimSpace(b)) == 0 {
		return "(empty console log)"
	}
	return tailLines(strings.ReplaceAll(string(b), "\r", ""), 30)
}

// tailSet follows the guest's stdout.log and stderr.log while they grow.
type tailSet struct {
	files   []*os.File
	writers []io.Writer
	mu      sync.Mutex
	first   error
}

// openTails opens the two logs of the share.
func openTails(share string, stdout, stderr io.Writer) (*tailSet, error) {
	t := &tailSet{writers: []io.Writer{stdout, stderr}}
	for _, name := range []string{"stdout.log", "stderr.log"} {
		f, err := os.Open(filepath.Join(share, name))
		if err != nil {
			t.close()
			return nil, fmt.Errorf("vm share: %w", err)
		}
		t.files = append(t.files, f)
	}
	return t, nil
}

// copy writes what was appended to each log since the last call.
func (t *tailSet) copy() {
	t.mu.Lock()
	defer t.mu.Unlock()
	for i, f := range t.files {
		if _, err := io.Copy(t.writers[i], f); err != nil && t.first == nil {
			t.first = err
		}
	}
}

// err is the first copy error.
func (t *tailSet) err() error {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.first
}

// close closes the logs.
func (t *tailSet) close() {
	for _, f := range t.files {
		f.Close()
	}
}
