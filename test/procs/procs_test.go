package procs

import (
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/signal"
	"runtime"
	"strings"
	"syscall"
	"testing"
)

// childEnv makes the test binary a child for these tests: "serve" writes
// a line and runs until SIGTERM, after which it writes another and exits
// 0; "fail" writes a line and exits 3.
const childEnv = "PROCS_TEST_CHILD"

func TestMain(m *testing.M) {
	switch os.Getenv(childEnv) {
	case "serve":
		term := make(chan os.Signal, 1)
		signal.Notify(term, syscall.SIGTERM)
		fmt.Println("serving")
		<-term
		fmt.Println("stopping on SIGTERM")
		os.Exit(0)
	case "fail":
		fmt.Println("no configuration")
		os.Exit(3)
	}
	os.Exit(m.Run())
}

func child(mode string) *exec.Cmd {
	cmd := exec.Command(os.Args[0])
	cmd.Env = append(os.Environ(), childEnv+"="+mode)
	return cmd
}

// failure is a testing.TB whose Fatalf keeps the message and ends only
// the goroutine that called it, as testing's ends the test.
type failure struct {
	testing.TB
	msg string
}

func (f *failure) Helper() {}
func (f *failure) Fatalf(format string, args ...any) {
	f.msg = fmt.Sprintf(format, args...)
	runtime.Goexit()
}

// startServer starts a "serve" child and waits until it serves (and
// handles SIGTERM).
func startServer(t *testing.T) *Process {
	p := Start(t, "server", child("serve"))
	p.Until(t, "serving", func() error {
		if !strings.Contains(p.Output(), "serving\n") {
			return fmt.Errorf("output %q", p.Output())
		}
		return nil
	})
	return p
}

func TestStopIsSIGTERM(t *testing.T) {
	p := startServer(t)
	if err := p.Exited(); err != nil {
		t.Fatalf("Exited while serving: %v", err)
	}
	if err := p.Stop(t); err != nil {
		t.Fatalf("Stop: %v, want a clean exit", err)
	}
	if got, want := p.Output(), "serving\nstopping on SIGTERM\n"; got != want {
		t.Errorf("output %q, want %q", got, want)
	}
	if err := p.Exited(); err == nil || !strings.Contains(err.Error(), "server exited") {
		t.Errorf("Exited after Stop = %v, want server exited", err)
	}
}

func TestKillIsSIGKILL(t *testing.T) {
	for _, group := range []bool{false, true} {
		t.Run(fmt.Sprintf("own process group %v", group), func(t *testing.T) {
			cmd := child("serve")
			cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: group}
			p := Start(t, "server", cmd)
			if err := p.Kill(t); err == nil || !strings.Contains(err.Error(), "signal: killed") {
				t.Fatalf("Kill = %v, want signal: killed", err)
			}
		})
	}
}

func TestUntilEndsWhenTheProcessExits(t *testing.T) {
	p := Start(t, "broken", child("fail"))
	f := &failure{TB: t}
	done := make(chan struct{})
	go func() {
		defer close(done)
		p.Until(f, "the broken one serving", func() error { return fmt.Errorf("not yet") })
	}()
	<-done
	for _, want := range []string{"the broken one serving: broken exited: exit status 3", "no configuration"} {
		if !strings.Contains(f.msg, want) {
			t.Errorf("Until failed with %q; want it to say %q", f.msg, want)
		}
	}
}

func TestTheProcessDiesWithTheTest(t *testing.T) {
	var p *Process
	t.Run("start", func(t *testing.T) { p = Start(t, "server", child("serve")) })
	select {
	case <-p.Done():
	default:
		t.Fatal("the process runs after its test ended")
	}
}

func TestTail(t *testing.T) {
	p := startServer(t)
	if err := p.Stop(t); err != nil {
		t.Fatal(err)
	}
	if got, want := p.Tail(1), "… 1 earlier lines\nstopping on SIGTERM"; got != want {
		t.Errorf("Tail(1) = %q, want %q", got, want)
	}
	if got, want := p.Tail(5), "serving\nstopping on SIGTERM"; got != want {
		t.Errorf("Tail(5) = %q, want %q", got, want)
	}
}

func TestFreeAddr(t *testing.T) {
	seen := map[string]bool{}
	for range 20 {
		addr := FreeAddr(t)
		if seen[addr] {
			t.Fatalf("%s given twice", addr)
		}
		seen[addr] = true
		host, _, err := net.SplitHostPort(addr)
		if err != nil || host != "127.0.0.1" {
			t.Fatalf("FreeAddr = %q (%v), want a 127.0.0.1 address", addr, err)
		}
		ln, err := net.Listen("tcp", addr)
		if err != nil {
			t.Fatalf("listen tcp %s: %v", addr, err)
		}
		pc, err := net.ListenPacket("udp", addr)
		ln.Close()
		if err != nil {
			t.Fatalf("listen udp %s: %v", addr, err)
		}
		pc.Close()
	}
}
