package kubelet

import (
	"bytes"
	"context"
	"io"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// writeLog writes lines to an instance's log with the given times.
func writeLog(t *testing.T, logs FileLogs, pod PodRef, restart int, stream string, at time.Time, text string) {
	t.Helper()
	w, err := logs.Writer(pod, "c", restart, stream)
	require.NoError(t, err)
	w.(*criWriter).now = func() time.Time { return at }
	_, err = io.WriteString(w, text)
	require.NoError(t, err)
	require.NoError(t, w.Close())
}

// TestFileLogsRead: the options of kubectl logs select and format the lines of a
// container's log; the file reads as a kubelet's (CRI format).
func TestFileLogsRead(t *testing.T) {
	logs := FileLogs{Dir: t.TempDir()}
	pod := PodRef{Namespace: "ns", Name: "p", UID: "u1"}
	t0 := time.Date(2026, 12, 5, 8, 0, 0, 0, time.UTC)
	writeLog(t, logs, pod, 0, StreamStdout, t0, "old\n")
	writeLog(t, logs, pod, 1, StreamStdout, t0, "one\n")
	writeLog(t, logs, pod, 1, StreamStderr, t0.Add(time.Second), "two\n")
	writeLog(t, logs, pod, 1, StreamStdout, t0.Add(2*time.Second), "three\nunfinished")

	raw, err := os.ReadFile(logs.Path(pod, "c", 1))
	require.NoError(t, err)
	assert.Equal(t, "2026-12-05T08:00:00Z stdout F one\n2026-12-05T08:00:01Z stderr F two\n2026-12-05T08:00:02Z stdout F three\n2026-12-05T08:00:02Z stdout F unfinished\n", string(raw))

	n := func(v int64) *int64 { return &v }
	stream := func(s string) *string { return &s }
	since := metav1.NewTime(t0.Add(time.Second))
	cases := []struct {
		name    string
		opts    corev1.PodLogOptions
		want    string
		wantErr string
	}{
		{name: "all", want: "one\ntwo\nthree\nunfinished\n"},
		{name: "tail", opts: corev1.PodLogOptions{TailLines: n(2)}, want: "three\nunfinished\n"},
		{name: "timestamps", opts: corev1.PodLogOptions{TailLines: n(1), Timestamps: true}, want: "2026-12-05T08:00:02Z unfinished\n"},
		{name: "stderr", opts: corev1.PodLogOptions{Stream: stream(corev1.LogStreamStderr)}, want: "two\n"},
		{name: "since", opts: corev1.PodLogOptions{SinceTime: &since}, want: "two\nthree\nunfinished\n"},
		{name: "limit", opts: corev1.PodLogOptions{LimitBytes: n(6)}, want: "one\ntw"},
		{name: "previous", opts: corev1.PodLogOptions{Previous: true}, want: "old\n"},
		{name: "bad stream", opts: corev1.PodLogOptions{Stream: stream("both")}, wantErr: `invalid stream type "both"`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var out bytes.Buffer
			err := logs.Read(context.Background(), pod, "c", &tc.opts, &out)
			if tc.wantErr != "" {
				require.ErrorContains(t, err, tc.wantErr)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tc.want, out.String())
		})
	}

	// No instance at all, and no previous one.
	other := PodRef{Namespace: "ns", Name: "q", UID: "u2"}
	require.ErrorContains(t, logs.Read(context.Background(), other, "c", nil, io.Discard), "has not started")
	writeLog(t, logs, other, 0, StreamStdout, t0, "x\n")
	require.ErrorContains(t, logs.Read(context.Background(), other, "c", &corev1.PodLogOptions{Previous: true}, io.Discard), "previous terminated container")
	require.NoError(t, logs.RemovePod(other))
	require.ErrorContains(t, logs.Read(context.Background(), other, "c", nil, io.Discard), "has not started")
}

// syncBuffer is a buffer that a follower writes while the test reads.
type syncBuffer struct {
	ch chan string
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.ch <- string(p)
	return len(p), nil
}

// TestFileLogsFollow: with follow, lines written later arrive, and a restart of the
// container ends the follow.
func TestFileLogsFollow(t *testing.T) {
	logs := FileLogs{Dir: t.TempDir()}
	pod := PodRef{Namespace: "ns", Name: "p", UID: "u1"}
	w, err := logs.Writer(pod, "c", 0, StreamStdout)
	require.NoError(t, err)
	_, err = io.WriteString(w, "first\n")
	require.NoError(t, err)
	out := &syncBuffer{ch: make(chan string, 16)}
	done := make(chan error, 1)
	go func() { done <- logs.Read(context.Background(), pod, "c", &corev1.PodLogOptions{Follow: true}, out) }()
	assert.Equal(t, "first\n", <-out.ch)
	_, err = io.WriteString(w, "sec")
	require.NoError(t, err)
	_, err = io.WriteString(w, "ond\n")
	require.NoError(t, err)
	assert.Equal(t, "second\n", <-out.ch)
	require.NoError(t, w.Close())
	next, err := logs.Writer(pod, "c", 1, StreamStdout) // the container restarted
	require.NoError(t, err)
	require.NoError(t, next.Close())
	require.NoError(t, <-done)
	assert.Empty(t, strings.Join(drain(out.ch), ""))
}

func drain(ch chan string) []string {
	var out []string
	for {
		select {
		case s := <-ch:
			out = append(out, s)
		default:
			return out
		}
	}
}
