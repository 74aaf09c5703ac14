package kubelet

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
)

// Log streams of a container: what it writes on its standard output and error.
const (
	StreamStdout = "stdout"
	StreamStderr = "stderr"
)

// PodRef names one pod: its namespace, name and UID (a new pod of the same name has
// another UID, and other logs).
type PodRef struct {
	Namespace, Name string
	UID             types.UID
}

// ContainerLogs keeps what the containers of a node print, for `kubectl logs` (the kubelet
// API's /containerLogs). Whoever runs a container's process writes its output through
// Writer; the kubelet API reads it back with Read. FileLogs is the implementation: a file
// per container instance, as a kubelet keeps them under /var/log/pods.
type ContainerLogs interface {
	// Writer returns where the stream (StreamStdout or StreamStderr) of instance restart
	// (0 for the first start, then the container's restartCount) of a container goes.
	// Every line written is kept with the time it was written; a line is complete at its
	// newline, or at Close. Writers of both streams may be open at once. Close it when the
	// process ends.
	Writer(pod PodRef, container string, restart int, stream string) (io.WriteCloser, error)
	// Read writes the log of a container's latest instance (its previous one with
	// opts.Previous) to w, as opts asks: timestamps, sinceSeconds or sinceTime, tailLines,
	// limitBytes, stream, and follow (then it returns when ctx ends or a newer instance
	// starts). A container that never wrote has an empty log; one that never started
	// (no instance) is an error, as is Previous without a previous instance.
	Read(ctx context.Context, pod PodRef, container string, opts *corev1.PodLogOptions, w io.Writer) error
	// RemovePod deletes every log of a pod (the kubelet calls it once the pod is gone).
	RemovePod(pod PodRef) error
}

// FileLogs is a ContainerLogs in a directory, laid out as a kubelet's /var/log/pods:
// <Dir>/<namespace>_<pod>_<uid>/<container>/<restart>.log, each line in the CRI logging
// format ("<RFC 3339 time> <stream> F <text>"), so that the files read as a kubelet's.
type FileLogs struct {
	// Dir is the root of the logs.
	Dir string
}

// followPoll is how often Read with follow looks for new lines.
const followPoll = 200 * time.Millisecond

// PodDir returns the directory of a pod's logs.
func (f FileLogs) PodDir(pod PodRef) string {
	return filepath.Join(f.Dir, fmt.Sprintf("%s_%s_%s", pod.Namespace, pod.Name, pod.UID))
}

// Path returns the file of one container instance's log.
func (f FileLogs) Path(pod PodRef, container string, restart int) string {
	return filepath.Join(f.PodDir(pod), container, strconv.Itoa(restart)+".log")
}

// Writer implements ContainerLogs: it appends to the instance's file.
func (f FileLogs) Writer(pod PodRef, container string, restart int, stream string) (io.WriteCloser, error) {
	if stream != StreamStdout && stream != StreamStderr {
		return nil, fmt.Errorf("log of %s/%s %s: unknown stream %q", pod.Namespace, pod.Name, container, stream)
	}
	p := f.Path(pod, container, restart)
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		return nil, fmt.Errorf("log of %s/%s %s: %w", pod.Namespace, pod.Name, container, err)
	}
	// O_APPEND: each line goes out in one write, which the kernel keeps whole beside the
	// other stream's.
	file, err := os.OpenFile(p, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o644)
	if err != nil {
		return nil, fmt.Errorf("log of %s/%s %s: %w", pod.Namespace, pod.Name, container, err)
	}
	return &criWriter{file: file, stream: stream, now: time.Now}, nil
}

// criWriter turns what a process writes into CRI log lines.
type criWriter struct {
	mu      sync.Mutex
	file    *os.File
	stream  string
	partial []byte
	now     func() time.Time
}

func (w *criWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.partial = append(w.partial, p...)
	for {
		i := bytes.IndexByte(w.partial, '\n')
		if i < 0 {
			return len(p), nil
		}
		if err := w.emit(w.partial[:i]); err != nil {
			return 0, err
		}
		w.partial = w.partial[i+1:]
	}
}

func (w *criWriter) emit(line []byte) error {
	rec := make([]byte, 0, len(line)+48)
	rec = w.now().UTC().AppendFormat(rec, time.RFC3339Nano)
	rec = append(rec, ' ')
	rec = append(rec, w.stream...)
	rec = append(rec, " F "...)
	rec = append(rec, line...)
	rec = append(rec, '\n')
	_, err := w.file.Write(rec)
	return err
}

// Close writes an unfinished last line and closes the file.
func (w *criWriter) Close() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	var err error
	if len(w.partial) > 0 {
		err = w.emit(w.partial)
		w.partial = nil
	}
	return errors.Join(err, w.file.Close())
}

// instances returns the restart numbers that have a log file, in order.
func (f FileLogs) instances(pod PodRef, container string) ([]int, error) {
	entries, err := os.ReadDir(filepath.Join(f.PodDir(pod), container))
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return nil, err
	}
	var out []int
	for _, e := range entries {
		if n, err := strconv.Atoi(strings.TrimSuffix(e.Name(), ".log")); err == nil && strings.HasSuffix(e.Name(), ".log") {
			out = append(out, n)
		}
	}
	slices.Sort(out)
	return out, nil
}

// Read implements ContainerLogs.
func (f FileLogs) Read(ctx context.Context, pod PodRef, container string, opts *corev1.PodLogOptions, w io.Writer) error {
	if opts == nil {
		opts = &corev1.PodLogOptions{}
	}
	inst, err := f.instances(pod, container)
	if err != nil {
		return fmt.Errorf("log of %s/%s %s: %w", pod.Namespace, pod.Name, container, err)
	}
	which := len(inst) - 1
	if opts.Previous {
		which--
	}
	if which < 0 {
		if opts.Previous {
			return fmt.Errorf("previous terminated container %q in pod %q not found", container, pod.Name)
		}
		return fmt.Errorf("container %q in pod %q has not started yet", container, pod.Name)
	}
	file, err := os.Open(f.Path(pod, container, inst[which]))
	if err != nil {
		return fmt.Errorf("log of %s/%s %s: %w", pod.Namespace, pod.Name, container, err)
	}
	defer file.Close()
	filter, err := newLogFilter(opts, time.Now())
	if err != nil {
		return err
	}
	out := &limitedWriter{w: w, left: -1}
	if opts.LimitBytes != nil {
		out.left = *opts.LimitBytes
	}
	rd := bufio.NewReader(file)
	var tail [][]byte
	for {
		line, err := rd.ReadBytes('\n')
		if len(line) > 0 && line[len(line)-1] == '\n' {
			if text, ok := filter.keep(line[:len(line)-1]); ok {
				if opts.TailLines != nil {
					tail = append(tail, text)
					if int64(len(tail)) > *opts.TailLines {
						tail = tail[1:]
					}
				} else if werr := out.Write(text); werr != nil {
					return nil // the limit, or the reader went away
				}
			}
			continue
		}
		if err != nil && !errors.Is(err, io.EOF) {
			return fmt.Errorf("log of %s/%s %s: %w", pod.Namespace, pod.Name, container, err)
		}
		// At the end: a part of a line stays for the next read.
		for _, t := range tail {
			if out.Write(t) != nil {
				return nil
			}
		}
		tail, opts = nil, withoutTail(opts)
		if !opts.Follow || opts.Previous {
			return nil
		}
		if newer, _ := f.instances(pod, container); len(newer) > 0 && newer[len(newer)-1] != inst[which] {
			return nil // the container restarted: this instance's log is complete
		}
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(followPoll):
		}
		if len(line) > 0 { // read the unfinished line again, whole
			if _, err := file.Seek(-int64(len(line)), io.SeekCurrent); err != nil {
				return fmt.Errorf("log of %s/%s %s: %w", pod.Namespace, pod.Name, container, err)
			}
		}
		rd.Reset(file)
	}
}

// withoutTail is opts without tailLines: once the tail is out, following prints every line.
func withoutTail(opts *corev1.PodLogOptions) *corev1.PodLogOptions {
	if opts.TailLines == nil {
		return opts
	}
	o := *opts
	o.TailLines = nil
	return &o
}

// logFilter keeps the lines of a CRI log that PodLogOptions select, and formats them.
type logFilter struct {
	since      time.Time
	stream     string // "" for both
	timestamps bool
}

func newLogFilter(opts *corev1.PodLogOptions, now time.Time) (logFilter, error) {
	f := logFilter{timestamps: opts.Timestamps}
	switch {
	case opts.SinceTime != nil:
		f.since = opts.SinceTime.Time
	case opts.SinceSeconds != nil:
		f.since = now.Add(-time.Duration(*opts.SinceSeconds) * time.Second)
	}
	if opts.Stream != nil {
		switch *opts.Stream {
		case corev1.LogStreamStdout:
			f.stream = StreamStdout
		case corev1.LogStreamStderr:
			f.stream = StreamStderr
		case corev1.LogStreamAll:
		default:
			return f, fmt.Errorf("invalid stream type %q", *opts.Stream)
		}
	}
	return f, nil
}

// keep parses one CRI log line ("<time> <stream> <tag> <text>") and returns what to print
// of it (with its newline), or false when the options leave it out. A line that does not
// parse is printed as it is.
func (f logFilter) keep(line []byte) ([]byte, bool) {
	parts := bytes.SplitN(line, []byte{' '}, 4)
	if len(parts) < 3 {
		return append(slices.Clone(line), '\n'), true
	}
	ts, err := time.Parse(time.RFC3339Nano, string(parts[0]))
	if err != nil {
		return append(slices.Clone(line), '\n'), true
	}
	if !f.since.IsZero() && ts.Before(f.since) {
		return nil, false
	}
	if f.stream != "" && string(parts[1]) != f.stream {
		return nil, false
	}
	var text []byte
	if len(parts) == 4 {
		text = parts[3]
	}
	var out []byte
	if f.timestamps {
		out = append(append(out, parts[0]...), ' ')
	}
	out = append(append(out, text...), '\n')
	return out, true
}

// limitedWriter writes up to left bytes (-1: no limit), then fails.
type limitedWriter struct {
	w    io.Writer
	left int64
}

var errLimit = errors.New("limitBytes reached")

func (l *limitedWriter) Write(p []byte) error {
	if l.left == 0 {
		return errLimit
	}
	if l.left > 0 && int64(len(p)) > l.left {
		p = p[:l.left]
	}
	n, err := l.w.Write(p)
	if l.left > 0 {
		l.left -= int64(n)
	}
	if f, ok := l.w.(interface{ Flush() }); ok {
		f.Flush()
	}
	return err
}

// RemovePod implements ContainerLogs.
func (f FileLogs) RemovePod(pod PodRef) error {
	if err := os.RemoveAll(f.PodDir(pod)); err != nil {
		return fmt.Errorf("remove logs of %s/%s: %w", pod.Namespace, pod.Name, err)
	}
	return nil
}
