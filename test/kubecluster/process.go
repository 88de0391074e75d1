package kubecluster

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
)

// process is one component of a cluster running as a child process, its
// output (stdout and stderr) going to logPath.
type process struct {
	name    string
	logPath string
	cmd     *exec.Cmd
	done    chan struct{} // closed once the process has exited
	err     error         // Wait's result, once done is closed
	killed  atomic.Bool   // kill was called: the exit is expected
}

// startProcess runs bin with args in dir, appending env to the test's
// environment. The first line of the log is the command line.
func startProcess(dir, name, bin string, args, env []string) (*process, error) {
	logPath := filepath.Join(dir, name+".log")
	f, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, err
	}
	fmt.Fprintf(f, "$ %s %s\n", bin, strings.Join(args, " "))
	cmd := exec.Command(bin, args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), env...)
	cmd.Stdout, cmd.Stderr = f, f
	cmd.SysProcAttr = sysProcAttr()
	if err := cmd.Start(); err != nil {
		f.Close()
		return nil, fmt.Errorf("starting %s: %w", name, err)
	}
	p := &process{name: name, logPath: logPath, cmd: cmd, done: make(chan struct{})}
	go func() {
		p.err = cmd.Wait()
		f.Close()
		close(p.done)
	}()
	return p, nil
}

// exited returns an error when the process has exited without being
// killed, nil while it runs.
func (p *process) exited() error {
	select {
	case <-p.done:
		if p.killed.Load() {
			return nil
		}
		return fmt.Errorf("%s exited: %v (output in %s)", p.name, p.err, p.logPath)
	default:
		return nil
	}
}

// kill kills the process and waits for it to be gone. Nothing of a test
// cluster needs a graceful shutdown: its state dies with the test.
func (p *process) kill() {
	p.killed.Store(true)
	_ = p.cmd.Process.Kill()
	<-p.done
}

// tail returns the last n lines of the process's output.
func (p *process) tail(n int) string {
	b, err := os.ReadFile(p.logPath)
	if err != nil {
		return fmt.Sprintf("(reading %s: %v)", p.logPath, err)
	}
	b = bytes.TrimRight(b, "\n")
	lines := bytes.Split(b, []byte("\n"))
	if len(lines) > n {
		lines = append([][]byte{[]byte(fmt.Sprintf("… %d earlier lines", len(lines)-n))}, lines[len(lines)-n:]...)
	}
	return string(bytes.Join(lines, []byte("\n")))
}
