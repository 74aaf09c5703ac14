//go:build linux

package microvm

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

// Outcome is what one VM run left behind.
type Outcome struct {
	// ExitCode is the guest command's exit status, -1 when the VM failed.
	ExitCode int
	// KernelLog sums up the guest kernel's log while the command ran (empty when the guest
	// died before writing it).
	KernelLog KernelLog
	// ConsoleLog is the path of the kept serial console log ("" when none was kept: the run
	// succeeded and Config.LogDir was empty).
	ConsoleLog string
	// KernelLogPath is the path of the kept kernel log ("" when none was kept).
	KernelLogPath string
	// BootTime is the guest's uptime when the command started (0 if unknown).
	BootTime time.Duration
}

// RunOutcome boots a VM (building the cache first if needed, see EnsureKernel) and runs argv
// in it, in the host's working directory, with the environment described at guestEnv. The
// guest command's stdout and stderr stream to cfg.Stdout and cfg.Stderr while it runs; its
// stdin is /dev/null. The outcome holds the command's exit status and the notable events of
// the guest kernel's log while it ran (warnings, soft lockups: also written to cfg.Stderr).
//
// An error means the VM itself failed: QEMU could not start, the guest died without an exit
// status, cfg.Timeout passed, or ctx was cancelled (QEMU is killed in the last two cases).
// The whole serial console is then kept in a file (in cfg.LogDir, else under os.TempDir())
// that the error names beside the console's tail.
func RunOutcome(ctx context.Context, cfg Config, argv []string) (Outcome, error) {
	failed := Outcome{ExitCode: -1}
	cfg, err := cfg.withDefaults(os.Getenv)
	if err != nil {
		return failed, err
	}
	if len(argv) == 0 {
		return failed, errors.New("vm run: no command")
	}
	if os.Getenv(EnvInVM) == "1" {
		return failed, errors.New("vm run: already inside the kpbench VM (nested TCG would be far too slow)")
	}
	tools, err := lookTools([]tool{{qemuBinary, "qemu-system-x86"}})
	if err != nil {
		return failed, err
	}
	if err := checkQboot(); err != nil {
		return failed, err
	}
	if cfg.Accel == AccelKVM {
		f, err := os.OpenFile("/dev/kvm", os.O_RDWR, 0)
		if err != nil {
			return failed, fmt.Errorf("accel kvm: %w (unset %s or use tcg)", err, EnvAccel)
		}
		f.Close()
	}
	img, err := EnsureKernel(ctx, cfg)
	if err != nil {
		return failed, err
	}
	cwd, err := os.Getwd()
	if err != nil {
		return failed, fmt.Errorf("vm run: %w", err)
	}
	writable, err := writableDirs(cfg.Writable, cwd)
	if err != nil {
		return failed, err
	}
	for _, d := range writable {
		if st, err := os.Stat(d); err != nil || !st.IsDir() {
			return failed, fmt.Errorf("writable directory %s: not a directory (create it first)", d)
		}
	}
	if cfg.LogDir != "" {
		if err := os.MkdirAll(cfg.LogDir, 0o755); err != nil {
			return failed, fmt.Errorf("vm log directory: %w", err)
		}
	}

	share, err := os.MkdirTemp("", "kpbench-vm-")
	if err != nil {
		return failed, fmt.Errorf("vm share: %w", err)
	}
	defer os.RemoveAll(share)
	if strings.ContainsAny(share, " \t\n") {
		return failed, fmt.Errorf("vm share %q: the path goes on the kernel command line and must have no blanks (set TMPDIR)", share)
	}
	files := map[string]string{
		"run.sh":     runScript(cwd, guestEnv(os.Environ(), cfg, cfg.Env), argv),
		"mounts":     mountsFile(writable),
		"stdout.log": "",
		"stderr.log": "",
	}
	for name, content := range files {
		if err := os.WriteFile(filepath.Join(share, name), []byte(content), 0o644); err != nil {
			return failed, fmt.Errorf("vm share: %w", err)
		}
	}
	console, err := os.Create(filepath.Join(share, "console.log"))
	if err != nil {
		return failed, fmt.Errorf("vm share: %w", err)
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
		return failed, err
	}
	defer tails.close()
	if err := c.Start(); err != nil {
		return failed, fmt.Errorf("start %s: %w", qemuBinary, err)
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
	console.Close()

	out := Outcome{ExitCode: -1, BootTime: readUptime(filepath.Join(share, "uptime"))}
	code, rerr := readExitCode(filepath.Join(share, "exit-code"))
	var vmErr error
	switch {
	case runCtx.Err() != nil && ctx.Err() != nil:
		vmErr = fmt.Errorf("vm run: %w", ctx.Err())
	case runCtx.Err() != nil:
		vmErr = fmt.Errorf("vm run: guest killed after the timeout of %s", cfg.Timeout)
	case rerr != nil:
		vmErr = fmt.Errorf("vm run: the guest stopped without an exit status (%v)", rerr)
		if waitErr != nil {
			vmErr = fmt.Errorf("%w; %s: %v: %s", vmErr, qemuBinary, waitErr, tailLines(qemuErr.String(), 5))
		}
	case code == 255 && strings.Contains(consoleTail(share), "kpbench-vm: FATAL"):
		vmErr = errors.New("vm run: guest init failed")
	}
	if vmErr == nil {
		out.ExitCode = code
	}
	klog, kerr := scanKernelLogFile(filepath.Join(share, "kernel.log"))
	if kerr == nil {
		out.KernelLog = klog
	} else if vmErr == nil {
		// No kernel log from init (e.g. an old initramfs): the console still shows what the
		// kernel printed at the console's level.
		out.KernelLog, _ = scanKernelLogFile(filepath.Join(share, "console.log"))
	}
	keepErr := keepLogs(cfg, share, vmErr != nil || len(out.KernelLog.Events) > 0, &out)
	if len(out.KernelLog.Events) > 0 {
		reportKernelLog(cfg.Stderr, cfg.Kernel, out)
	}
	if vmErr != nil {
		where := "(not kept: " + fmt.Sprint(keepErr) + ")"
		if out.ConsoleLog != "" {
			where = out.ConsoleLog
		}
		hint := ""
		if !cfg.Debug {
			hint = " (the kernel booted quiet: --debug, or " + EnvAppend + "=loglevel=7, logs every boot message)"
		}
		return out, fmt.Errorf("%w; whole console log%s: %s; its tail:\n%s", vmErr, hint, where, consoleTail(share))
	}
	if keepErr != nil {
		return out, fmt.Errorf("vm run: keep logs: %w", keepErr)
	}
	if err := tails.err(); err != nil {
		return out, fmt.Errorf("vm run: copy guest output: %w", err)
	}
	return out, nil
}

// keepLogs copies the console and kernel logs out of the share: into cfg.LogDir when set,
// else (only when keep is true) into new files under os.TempDir(). It records the paths in
// out.
func keepLogs(cfg Config, share string, keep bool, out *Outcome) error {
	logs := []struct {
		src, name string
		dst       *string
	}{
		{filepath.Join(share, "console.log"), ConsoleLogFile, &out.ConsoleLog},
		{filepath.Join(share, "kernel.log"), KernelLogFile, &out.KernelLogPath},
	}
	var first error
	for _, l := range logs {
		if !exists(l.src) {
			continue
		}
		var dst string
		switch {
		case cfg.LogDir != "":
			dst = filepath.Join(cfg.LogDir, l.name)
		case keep:
			f, err := os.CreateTemp("", "kpbench-vm-"+cfg.Kernel+"-*-"+l.name)
			if err != nil {
				first = cmpErr(first, err)
				continue
			}
			f.Close()
			dst = f.Name()
		default:
			continue
		}
		if err := copyFile(l.src, dst, 0o644); err != nil {
			first = cmpErr(first, err)
			continue
		}
		*l.dst = dst
	}
	return first
}

// cmpErr returns first, or err when first is nil.
func cmpErr(first, err error) error {
	if first != nil {
		return first
	}
	return err
}

// reportKernelLog tells w about the notable kernel events of a run (at most 10 lines of
// them) and where the whole log is.
func reportKernelLog(w io.Writer, kernel string, o Outcome) {
	scope := "while the command ran"
	if !o.KernelLog.Marked {
		scope = "(boot included: no start marker)"
	}
	fmt.Fprintf(w, "kpbench vm: kernel %s logged %s %s", kernel, o.KernelLog.Summary(), scope)
	if o.KernelLogPath != "" {
		fmt.Fprintf(w, "; log: %s", o.KernelLogPath)
	}
	fmt.Fprintln(w)
	for i, e := range o.KernelLog.Events {
		if i == 10 {
			fmt.Fprintf(w, "  ... %d more\n", len(o.KernelLog.Events)-i)
			break
		}
		fmt.Fprintf(w, "  %s\n", strings.TrimSpace(e.Line))
	}
}

// scanKernelLogFile runs ScanKernelLog on a file.
func scanKernelLogFile(path string) (KernelLog, error) {
	f, err := os.Open(path)
	if err != nil {
		return KernelLog{}, err
	}
	defer f.Close()
	return ScanKernelLog(f)
}

// readUptime reads the guest uptime init wrote when the command started ("12.34").
func readUptime(path string) time.Duration {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0
	}
	sec, frac, _ := strings.Cut(strings.TrimSpace(string(b)), ".")
	if _, err := strconv.Atoi(sec); err != nil {
		return 0
	}
	return parseUptime(sec, frac)
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
