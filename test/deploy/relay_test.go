package deploy

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/canopy-dev/canopy/test/kubecluster"
	"github.com/canopy-dev/canopy/test/poll"
	"github.com/canopy-dev/canopy/test/relaybin"
)

func TestMain(m *testing.M) { relaybin.Main(m) }

// freeAddr is a free 127.0.0.1 port (TCP, and UDP for links).
func freeAddr(t testing.TB) string {
	t.Helper()
	for {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		addr := ln.Addr().String()
		ln.Close()
		pc, err := net.ListenPacket("udp", addr)
		if err != nil {
			continue // the UDP port is taken: another one
		}
		pc.Close()
		return addr
	}
}

// process is a relay process; it is killed when the test ends and its
// output logged if the test failed.
type process struct {
	name string
	cmd  *exec.Cmd
	log  string // stdout and stderr
	done chan struct{}
	err  error
}

func startProcess(t testing.TB, name string, cmd *exec.Cmd) *process {
	t.Helper()
	p := &process{name: name, cmd: cmd, log: filepath.Join(t.TempDir(), name+".log"), done: make(chan struct{})}
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
		select {
		case <-p.done:
		default:
			_ = cmd.Process.Kill()
			<-p.done
		}
		if t.Failed() {
			t.Logf("output of %s:\n%s", name, p.output())
		}
	})
	return p
}

// output is what the process has written so far.
func (p *process) output() string {
	b, err := os.ReadFile(p.log)
	if err != nil {
		return err.Error()
	}
	return string(b)
}

// stop stops the process as a supervisor does, with SIGTERM, and waits
// for it to exit.
func (p *process) stop(t testing.TB) {
	t.Helper()
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(30 * time.Second):
		t.Fatalf("%s did not stop within 30 s of SIGTERM", p.name)
	}
}

// exited is an error once the process has exited.
func (p *process) exited() error {
	select {
	case <-p.done:
		return fmt.Errorf("%s exited: %v", p.name, p.err)
	default:
		return nil
	}
}

// rootRelay is a root relay process on loopback.
type rootRelay struct {
	*process
	dir, link string
	home      string // HOME of kubectl, so that it writes no cache elsewhere
}

// startRoot starts a root relay and waits until it answers /readyz.
func startRoot(t testing.TB) *rootRelay {
	t.Helper()
	dir, link := filepath.Join(t.TempDir(), "root"), freeAddr(t)
	return startRootArgs(t, "root", dir, link, "--role=root", "--name=root", "--data-dir="+dir, "--api-addr="+freeAddr(t), "--link-addr="+link)
}

// startRootArgs starts a root relay (or a replica) with args, whose data
// directory is dir and link address link, and waits until it answers
// /readyz.
func startRootArgs(t testing.TB, name, dir, link string, args ...string) *rootRelay {
	t.Helper()
	r := &rootRelay{dir: dir, link: link, home: t.TempDir()}
	r.process = startProcess(t, name, exec.Command(relaybin.For(t), args...))
	poll.Until(t, name+" ready", func() error {
		if err := r.exited(); err != nil {
			t.Fatalf("%v:\n%s", err, r.output())
		}
		_, err := r.kubectl(t, "", "get", "--raw=/readyz")
		return err
	}, poll.For(60*time.Second))
	return r
}

// token creates a join token at the root.
func (r *rootRelay) token(t testing.TB) string {
	t.Helper()
	out, err := exec.Command(relaybin.For(t), "token", "create", "--data-dir="+r.dir).Output()
	if err != nil {
		t.Fatalf("relay token create: %v", err)
	}
	return strings.TrimSpace(string(out))
}

// kubectl runs kubectl against the root with its admin kubeconfig.
func (r *rootRelay) kubectl(t testing.TB, stdin string, args ...string) (string, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, kubecluster.Kubectl(t), append([]string{"--kubeconfig=" + filepath.Join(r.dir, "admin.kubeconfig")}, args...)...)
	cmd.Env = append(os.Environ(), "HOME="+r.home)
	if stdin != "" {
		cmd.Stdin = strings.NewReader(stdin)
	}
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Run(); err != nil {
		return out.String(), fmt.Errorf("kubectl %s: %v: %s", strings.Join(args, " "), err, strings.TrimSpace(errb.String()))
	}
	return out.String(), nil
}
