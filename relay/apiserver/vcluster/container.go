package vcluster

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/cri-streaming/pkg/streaming/remotecommand"
)

// container is one simulated container of a pod, as a stream opened on it
// sees it. It is built from the pod when a stream opens and dropped when
// the stream ends: nothing is kept per pod.
type container struct {
	pod      *corev1.Pod
	spec     *corev1.Container
	interval time.Duration
}

// newContainer finds the container name of pod (the API server checked
// that it is one of the pod's).
func newContainer(pod *corev1.Pod, name string, interval time.Duration) *container {
	for _, list := range [][]corev1.Container{pod.Spec.Containers, pod.Spec.InitContainers} {
		for i := range list {
			if list[i].Name == name {
				return &container{pod: pod, spec: &list[i], interval: interval}
			}
		}
	}
	for i := range pod.Spec.EphemeralContainers {
		if c := &pod.Spec.EphemeralContainers[i]; c.Name == name {
			spec := corev1.Container(c.EphemeralContainerCommon)
			return &container{pod: pod, spec: &spec, interval: interval}
		}
	}
	return &container{pod: pod, spec: &corev1.Container{Name: name}, interval: interval}
}

func (c *container) status() (corev1.ContainerStatus, bool) {
	for _, list := range [][]corev1.ContainerStatus{c.pod.Status.ContainerStatuses, c.pod.Status.InitContainerStatuses, c.pod.Status.EphemeralContainerStatuses} {
		for _, cs := range list {
			if cs.Name == c.spec.Name {
				return cs, true
			}
		}
	}
	return corev1.ContainerStatus{}, false
}

// instance is one run of a container, whose log is a function of when it
// started and, once it ended, how.
type instance struct {
	started, finished time.Time // finished is zero while it runs
	exitCode          int32
}

// waiting is the kubelet's answer about a container that has not started.
func (c *container) waiting(reason string) error {
	return apierrors.NewBadRequest(fmt.Sprintf("container %q in pod %q is waiting to start: %s", c.spec.Name, c.pod.Name, reason))
}

// running returns the running instance of the container, or the
// kubelet's error for one that is not running.
func (c *container) running() (instance, error) {
	cs, ok := c.status()
	switch {
	case !ok:
		return instance{}, c.waiting("ContainerCreating")
	case cs.State.Running != nil:
		return instance{started: cs.State.Running.StartedAt.Time}, nil
	case cs.State.Waiting != nil:
		return instance{}, c.waiting(cs.State.Waiting.Reason)
	}
	return instance{}, apierrors.NewBadRequest(fmt.Sprintf("container %q in pod %q is terminated", c.spec.Name, c.pod.Name))
}

// logInstance picks the instance whose log is asked for, with the
// kubelet's rules and messages (validateContainerLogStatus).
func (c *container) logInstance(previous bool) (instance, error) {
	cs, ok := c.status()
	if !ok {
		return instance{}, c.waiting("ContainerCreating")
	}
	ended := func(t *corev1.ContainerStateTerminated) instance {
		return instance{started: t.StartedAt.Time, finished: t.FinishedAt.Time, exitCode: t.ExitCode}
	}
	last := cs.LastTerminationState.Terminated
	switch {
	case previous:
		if last == nil {
			return instance{}, apierrors.NewBadRequest(fmt.Sprintf("previous terminated container %q in pod %q not found", c.spec.Name, c.pod.Name))
		}
		return ended(last), nil
	case cs.State.Running != nil:
		return instance{started: cs.State.Running.StartedAt.Time}, nil
	case cs.State.Terminated != nil:
		return ended(cs.State.Terminated), nil
	case last != nil:
		return ended(last), nil
	case cs.State.Waiting != nil:
		return instance{}, c.waiting(cs.State.Waiting.Reason)
	}
	return instance{}, apierrors.NewBadRequest(fmt.Sprintf("container %q in pod %q is waiting to start - no logs yet", c.spec.Name, c.pod.Name))
}

// startLines is what a container writes when it starts.
func (c *container) startLines() []string {
	lines := []string{
		fmt.Sprintf("starting container %s of pod %s/%s on node %s", c.spec.Name, c.pod.Namespace, c.pod.Name, c.pod.Spec.NodeName),
		"image " + c.spec.Image,
	}
	for _, p := range c.spec.Ports {
		lines = append(lines, fmt.Sprintf("serving HTTP on port %d", p.ContainerPort))
	}
	return append(lines, "ready")
}

// logLine is a line of a container's log and when it was written.
type logLine struct {
	at   time.Time
	text string
}

// logCount is the number of lines of inst's log written by now (all of
// them for an instance that ended).
func (c *container) logCount(inst instance, start []string, now time.Time) int {
	end := now
	if !inst.finished.IsZero() {
		end = inst.finished
	}
	n := len(start)
	if end.After(inst.started) {
		n += int(end.Sub(inst.started) / c.interval)
	}
	if !inst.finished.IsZero() {
		n++
	}
	return n
}

// line is line i of inst's log, of total: the start lines, then one line
// every interval while it runs, then for an instance that ended a last
// line saying how.
func (c *container) line(inst instance, start []string, total, i int) logLine {
	switch {
	case i < len(start):
		return logLine{at: inst.started, text: start[i]}
	case !inst.finished.IsZero() && i == total-1:
		if inst.exitCode != 0 {
			return logLine{at: inst.finished, text: fmt.Sprintf("error: simulated failure, exiting with code %d", inst.exitCode)}
		}
		return logLine{at: inst.finished, text: "done, exiting"}
	}
	k := i - len(start) + 1
	return logLine{at: inst.started.Add(time.Duration(k) * c.interval), text: fmt.Sprintf("%s/%s %s: heartbeat %d", c.pod.Namespace, c.pod.Name, c.spec.Name, k)}
}

// exec runs argv in the container as its runtime would and returns its
// exit status. With tty, output lines end in CRLF and a shell prompts and
// echoes; resize events are followed while it runs (stty size).
func (c *container) exec(ctx context.Context, argv []string, in io.Reader, out, errw io.Writer, tty bool, resize <-chan remotecommand.TerminalSize) int {
	sh := &shell{c: c, out: out, errw: errw, tty: tty}
	if sh.out == nil {
		sh.out = io.Discard
	}
	if sh.errw == nil {
		sh.errw = sh.out
	}
	if tty {
		sh.out, sh.errw = crlf{sh.out}, crlf{sh.errw}
	}
	if resize != nil {
		done := make(chan struct{})
		defer close(done)
		go sh.followResize(resize, done)
	}
	return sh.run(ctx, argv, in)
}

// shell runs the simulated commands of one exec.
type shell struct {
	c         *container
	out, errw io.Writer
	tty       bool
	size      atomic.Uint32 // rows<<16 | cols, from resize events
}

func (sh *shell) followResize(resize <-chan remotecommand.TerminalSize, done <-chan struct{}) {
	for {
		select {
		case s, ok := <-resize:
			if !ok {
				return
			}
			sh.size.Store(uint32(s.Height)<<16 | uint32(s.Width))
		case <-done:
			return
		}
	}
}

// run runs one command line and returns its exit status.
func (sh *shell) run(ctx context.Context, argv []string, in io.Reader) int {
	if len(argv) == 0 {
		return 0
	}
	name, args := argv[0], argv[1:]
	if i := strings.LastIndexByte(name, '/'); i >= 0 && name != "/" {
		name = name[i+1:] // /bin/sh, /usr/bin/env
	}
	switch name {
	case "echo":
		fmt.Fprintln(sh.out, strings.Join(args, " "))
	case "hostname":
		fmt.Fprintln(sh.out, sh.c.pod.Name)
	case "env", "printenv":
		for _, kv := range sh.c.env() {
			fmt.Fprintln(sh.out, kv)
		}
	case "cat":
		return sh.cat(args, in)
	case "date":
		fmt.Fprintln(sh.out, time.Now().UTC().Format(time.UnixDate))
	case "true":
	case "false":
		return 1
	case "sleep":
		return sh.sleep(ctx, args)
	case "stty":
		if len(args) == 1 && args[0] == "size" && sh.tty {
			s := sh.size.Load()
			fmt.Fprintf(sh.out, "%d %d\n", s>>16, s&0xffff)
			return 0
		}
		fmt.Fprintln(sh.errw, "stty: 'standard input': Inappropriate ioctl for device")
		return 1
	case "sh", "bash":
		if len(args) >= 2 && args[0] == "-c" {
			return sh.script(ctx, args[1])
		}
		return sh.interactive(ctx, name, in)
	default:
		fmt.Fprintf(sh.errw, "%s: command not found\n", argv[0])
		return 127
	}
	return 0
}

// env is the container's environment: PATH, HOSTNAME, the literal values
// of its spec's env, HOME.
func (c *container) env() []string {
	out := []string{"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin", "HOSTNAME=" + c.pod.Name}
	for _, e := range c.spec.Env {
		if e.ValueFrom == nil {
			out = append(out, e.Name+"="+e.Value)
		}
	}
	return append(out, "HOME=/root")
}

func (sh *shell) cat(args []string, in io.Reader) int {
	if len(args) == 0 {
		if in != nil {
			_, _ = io.Copy(sh.out, in)
		}
		return 0
	}
	status := 0
	for _, f := range args {
		if f == "/etc/hostname" {
			fmt.Fprintln(sh.out, sh.c.pod.Name)
			continue
		}
		fmt.Fprintf(sh.errw, "cat: %s: No such file or directory\n", f)
		status = 1
	}
	return status
}

func (sh *shell) sleep(ctx context.Context, args []string) int {
	if len(args) != 1 {
		fmt.Fprintln(sh.errw, "sleep: missing operand")
		return 1
	}
	secs, err := strconv.ParseFloat(args[0], 64)
	if err != nil || secs < 0 {
		fmt.Fprintf(sh.errw, "sleep: invalid time interval '%s'\n", args[0])
		return 1
	}
	t := time.NewTimer(time.Duration(secs * float64(time.Second)))
	defer t.Stop()
	select {
	case <-t.C:
		return 0
	case <-ctx.Done():
		return 130
	}
}

// script runs sh -c's commands, separated by ';' or new lines, and
// returns the status of the last one (or of exit).
func (sh *shell) script(ctx context.Context, text string) int {
	status := 0
	for _, cmd := range strings.FieldsFunc(text, func(r rune) bool { return r == ';' || r == '\n' }) {
		argv := splitWords(cmd)
		if len(argv) > 0 && argv[0] == "exit" {
			return exitStatus(argv, status)
		}
		status = sh.run(ctx, argv, nil)
	}
	return status
}

// interactive reads command lines from in until exit or its end; with a
// terminal it prompts and echoes what is typed, as a shell on a tty does.
func (sh *shell) interactive(ctx context.Context, name string, in io.Reader) int {
	if in == nil {
		return 0
	}
	prompt := "# "
	if name == "bash" {
		prompt = "root@" + sh.c.pod.Name + ":/# "
	}
	lines := newLineReader(in, sh.tty, sh.out)
	status := 0
	for {
		if sh.tty {
			fmt.Fprint(sh.out, prompt)
		}
		line, err := lines.next()
		if err != nil {
			if sh.tty {
				fmt.Fprintln(sh.out, "exit")
			}
			return status
		}
		argv := splitWords(line)
		if len(argv) > 0 && argv[0] == "exit" {
			return exitStatus(argv, status)
		}
		status = sh.run(ctx, argv, nil)
	}
}

func exitStatus(argv []string, last int) int {
	if len(argv) < 2 {
		return last
	}
	n, err := strconv.Atoi(argv[1])
	if err != nil {
		return 2
	}
	return n & 0xff
}

// splitWords splits a command line into words, honouring single and
// double quotes.
func splitWords(s string) []string {
	var words []string
	var cur strings.Builder
	in, quote := false, rune(0)
	for _, r := range s {
		switch {
		case quote != 0 && r == quote:
			quote = 0
		case quote != 0:
			cur.WriteRune(r)
		case r == '\'' || r == '"':
			quote, in = r, true
		case r == ' ' || r == '\t' || r == '\r':
			if in {
				words = append(words, cur.String())
				cur.Reset()
				in = false
			}
		default:
			cur.WriteRune(r)
			in = true
		}
	}
	if in {
		words = append(words, cur.String())
	}
	return words
}

// lineReader reads command lines. On a terminal (raw mode on the client's
// side) it is the line discipline: it echoes, ends lines at CR or LF,
// erases on DEL or BS, drops the line on ^C and ends on ^D at a line's
// start.
type lineReader struct {
	r    *bufio.Reader
	tty  bool
	echo io.Writer
}

func newLineReader(in io.Reader, tty bool, echo io.Writer) *lineReader {
	return &lineReader{r: bufio.NewReader(in), tty: tty, echo: echo}
}

func (l *lineReader) next() (string, error) {
	if !l.tty {
		line, err := l.r.ReadString('\n')
		if err != nil && line == "" {
			return "", err
		}
		return strings.TrimRight(line, "\r\n"), nil
	}
	var line []byte
	for {
		b, err := l.r.ReadByte()
		if err != nil {
			return "", err
		}
		switch b {
		case '\r', '\n':
			fmt.Fprint(l.echo, "\n")
			return string(line), nil
		case 0x7f, '\b':
			if len(line) > 0 {
				line = line[:len(line)-1]
				fmt.Fprint(l.echo, "\b \b")
			}
		case 0x03: // ^C
			fmt.Fprint(l.echo, "^C\n")
			return "", nil
		case 0x04: // ^D
			if len(line) == 0 {
				return "", io.EOF
			}
		default:
			line = append(line, b)
			_, _ = l.echo.Write([]byte{b})
		}
	}
}

// crlf turns LF into CRLF, as a terminal's output processing does.
type crlf struct{ w io.Writer }

func (c crlf) Write(p []byte) (int, error) {
	if _, err := c.w.Write([]byte(strings.ReplaceAll(string(p), "\n", "\r\n"))); err != nil {
		return 0, err
	}
	return len(p), nil
}
