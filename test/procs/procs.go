package procs

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/canopy-dev/canopy/test/poll"
)

// StopTimeout is how long Stop and Kill wait for a process to exit.
const StopTimeout = 30 * time.Second

// TailLines is how many of its last lines of output a process logs when
// the test fails, and Until gives when the process exits.
const TailLines = 200

// Process is a program a test started; its stdout and stderr go to a
// file. Its methods are safe for concurrent use.
type Process struct {
	name string
	cmd  *exec.Cmd
	log  string        // the output file
	done chan struct{} // closed once the process has exited
	err  error         // Wait's result, once done is closed
}

// Start starts cmd, called name in messages, with its stdout and stderr
// going to a file of its own. When the test ends the process is killed if
// it still runs, and the end of its output is logged if the test failed.
// Start fails t when the command cannot start.
func Start(t testing.TB, name string, cmd *exec.Cmd) *Process {
	t.Helper()
	p := &Process{name: name, cmd: cmd, log: filepath.Join(t.TempDir(), "output.log"), done: make(chan struct{})}
	f, err := os.Create(p.log)
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stdout, cmd.Stderr = f, f
	if err := cmd.Start(); err != nil {
		f.Close()
		t.Fatalf("starting %s: %v", name, err)
	}
	go func() { p.err = cmd.Wait(); f.Close(); close(p.done) }()
	t.Cleanup(func() {
		if p.Exited() == nil {
			_ = p.Signal(syscall.SIGKILL)
			<-p.done
		}
		if t.Failed() {
			t.Logf("output of %s (pid %d):\n%s", name, p.Pid(), p.Tail(TailLines))
		}
	})
	return p
}

// Name is the name the process was started with.
func (p *Process) Name() string { return p.name }

// Pid is the process's id.
func (p *Process) Pid() int { return p.cmd.Process.Pid }

// Done is closed once the process has exited.
func (p *Process) Done() <-chan struct{} { return p.done }

// Exited is nil while the process runs, and then an error that names it
// and says how it exited.
func (p *Process) Exited() error {
	select {
	case <-p.done:
		return fmt.Errorf("%s exited: %v", p.name, p.err)
	default:
		return nil
	}
}

// Signal sends sig to the process, or to its process group when it was
// started as the leader of one (SysProcAttr.Setpgid).
func (p *Process) Signal(sig syscall.Signal) error {
	if a := p.cmd.SysProcAttr; a != nil && a.Setpgid {
		return syscall.Kill(-p.cmd.Process.Pid, sig)
	}
	return p.cmd.Process.Signal(sig)
}

// Stop stops the process as a supervisor does, with SIGTERM, and returns
// how it exited (Wait's error: nil for exit status 0). It fails t, with
// the end of the output, when the process still runs StopTimeout later.
func (p *Process) Stop(t testing.TB) error {
	t.Helper()
	return p.signalAndWait(t, syscall.SIGTERM)
}

// Kill kills the process with SIGKILL and returns how it exited (Wait's
// error), failing t if it has not exited StopTimeout later.
func (p *Process) Kill(t testing.TB) error {
	t.Helper()
	return p.signalAndWait(t, syscall.SIGKILL)
}

func (p *Process) signalAndWait(t testing.TB, sig syscall.Signal) error {
	t.Helper()
	serr := p.Signal(sig) // fails once the process has exited: the wait tells
	select {
	case <-p.done:
		return p.err
	case <-time.After(StopTimeout):
		t.Fatalf("%s did not exit within %v of %v (signal: %v):\n%s", p.name, StopTimeout, sig, serr, p.Tail(TailLines))
		return nil
	}
}

// Until is poll.Until for a condition that waits on the process (it
// serves, it has joined): when the process exits first the wait fails at
// once with how it exited and the end of its output.
func (p *Process) Until(t testing.TB, what string, cond func() error, opts ...poll.Option) {
	t.Helper()
	poll.Until(t, what, func() error {
		if err := p.Exited(); err != nil {
			return poll.Stop(fmt.Errorf("%w:\n%s", err, p.Tail(TailLines)))
		}
		return cond()
	}, opts...)
}

// Output is all the process has written so far.
func (p *Process) Output() string {
	b, err := os.ReadFile(p.log)
	if err != nil {
		return fmt.Sprintf("(reading the output of %s: %v)", p.name, err)
	}
	return string(b)
}

// Tail is the last n lines of Output, after a line that counts the lines
// left out.
func (p *Process) Tail(n int) string {
	out := strings.TrimSuffix(p.Output(), "\n")
	lines := strings.Split(out, "\n")
	if len(lines) <= n {
		return out
	}
	return fmt.Sprintf("… %d earlier lines\n%s", len(lines)-n, strings.Join(lines[len(lines)-n:], "\n"))
}
