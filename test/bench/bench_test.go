package bench

import (
	"context"
	"flag"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/canopy-dev/canopy/relay/pki"
	"github.com/canopy-dev/canopy/relay/server"
	"github.com/canopy-dev/canopy/test/kubecluster"
	"github.com/canopy-dev/canopy/test/poll"
	"github.com/canopy-dev/canopy/test/relaybin"
)

// BenchmarkAPI runs the same load (load.go) against a real kube-apiserver
// with one etcd member and with three (test/kubecluster, minimal: no
// controllers), a Canopy root with one replica and one with three. Like
// kube-apiserver and etcd, the roots are processes of their own: the relay
// binary built from this module and started as a user starts it
// (`relay --role=root`; three replicas form one Raft cluster over loopback
// TCP, the client on the leader), so they share neither a Go runtime nor
// its garbage collector with the load generator. Each operation does a
// fixed amount of work (Scale; BENCH_QUICK=1 for the small one), so run it
// with -benchtime=1x:
//
//	go test ./test/bench -run '^$' -bench API -benchtime=1x -timeout=40m
//	go test ./test/bench -run '^$' -bench 'API/target=canopy-1/op=list-' -benchtime=1x
//
// -cpuprofile and the other profiles cover the load generator only: the
// servers are other processes. With BENCH_PPROF=1 each root serves its
// profiles (relay --pprof) and the benchmark logs where (-v):
//
//	BENCH_PPROF=1 go test ./test/bench -run '^$' -bench 'API/target=canopy-1/op=watch' -benchtime=1x -v
//
// A root's log is relay.log in its data directory (a temporary directory,
// removed at the end).
//
// Every target the -bench pattern selects is started first, and each
// operation then runs against every target in turn before the next
// operation (API/target=<name>/op=<op>), so that what else the machine
// does at a given moment weighs on the figures compared alike.
//
// Metrics: ops/s over the run; p50-ms and p99-ms per operation (for watch,
// per write and watcher); for lists wire-p50-ms and wire-p99-ms, until the
// response body was in, before the client decoded it, and body-kib, the
// size of a response body; server-cpu-ms, the CPU time of the server's
// processes per operation (kube-apiserver and etcd, or every root replica;
// for watch fan-out per write, delivered to every watcher), from /proc;
// ns/op is the run's wall time per operation. The -wire watch operations
// watch with readers of the response stream instead of client-go's
// decoder (WatchFanoutWire).
func BenchmarkAPI(b *testing.B) {
	if bt := flag.Lookup("test.benchtime"); bt == nil || bt.Value.String() != "1x" {
		b.Fatal("run with -benchtime=1x: each operation does a fixed amount of work (BENCH_QUICK=1 for less)")
	}
	scale := ScaleFromEnv()
	starts := []struct {
		name  string
		start func(b testing.TB) (*rest.Config, []int)
	}{
		{"kube", func(b testing.TB) (*rest.Config, []int) { return startKube(b, 1) }},
		{"kube-3", func(b testing.TB) (*rest.Config, []int) { return startKube(b, 3) }},
		{"canopy-1", func(b testing.TB) (*rest.Config, []int) { return startCanopy(b, 1) }},
		{"canopy-3", func(b testing.TB) (*rest.Config, []int) { return startCanopy(b, 3) }},
	}
	// Every target the -bench pattern selects runs from the start, so that
	// each operation runs against all of them in turn before the next
	// operation: what else the machine does at a given moment weighs on
	// the figures compared with each other alike.
	pattern := ""
	if f := flag.Lookup("test.bench"); f != nil {
		pattern = f.Value.String()
	}
	var targets []*apiTarget
	for _, s := range starts {
		if !benchSelects(pattern, s.name) {
			continue
		}
		cfg, pids := s.start(b)
		t, err := newAPITarget(s.name, Config(cfg), pids)
		if err != nil {
			b.Fatal(err)
		}
		targets = append(targets, t)
	}
	for _, op := range apiOps(scale) {
		for _, t := range targets {
			b.Run("target="+t.name+"/op="+op.name, func(b *testing.B) { op.run(b, t) })
		}
	}
}

// benchSelects reports whether the -bench pattern can select operations of
// target: testing matches its second element, when there is one, with
// each sub-benchmark's target=<name>.
func benchSelects(pattern, target string) bool {
	elems := strings.Split(pattern, "/")
	if len(elems) < 2 {
		return true
	}
	re, err := regexp.Compile(elems[1])
	return err != nil || re.MatchString("target="+target)
}

// apiTarget is one server under load: clients of its admin configuration
// (client-go's defaults, which ask for protobuf and send it, and one for
// JSON both ways), the Meter of its processes' CPU, and what its
// operations have set up so far.
type apiTarget struct {
	name       string
	cs, csJSON kubernetes.Interface
	ctx        context.Context // carries the Meter
	rounds     map[string]int  // per namespace name: rounds so far (-count=N)
	filled     map[int]bool    // list-<n> holds its n ConfigMaps
}

func newAPITarget(name string, cfg *rest.Config, pids []int) (*apiTarget, error) {
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	jcfg := rest.CopyConfig(cfg)
	jcfg.ContentType, jcfg.AcceptContentTypes = "application/json", "application/json"
	csJSON, err := kubernetes.NewForConfig(jcfg)
	if err != nil {
		return nil, err
	}
	meter := func() (time.Duration, error) { return ProcessCPU(pids...) }
	if _, err := meter(); err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	return &apiTarget{name: name, cs: cs, csJSON: csJSON, ctx: WithMeter(context.Background(), meter),
		rounds: map[string]int{}, filled: map[int]bool{}}, nil
}

// ns creates namespace name unless it exists.
func (t *apiTarget) ns(b *testing.B, name string) string {
	b.Helper()
	if err := EnsureNamespace(t.ctx, t.cs, name); err != nil {
		b.Fatal(err)
	}
	return name
}

// fresh names a namespace of its own for each round of an operation
// (-count=N runs each N times in a row, against the same servers).
func (t *apiTarget) fresh(b *testing.B, name string) string {
	b.Helper()
	if t.rounds[name]++; t.rounds[name] > 1 {
		name = fmt.Sprintf("%s-%d", name, t.rounds[name])
	}
	return t.ns(b, name)
}

// fill creates n ConfigMaps in list-<n>, once.
func (t *apiTarget) fill(b *testing.B, n, writers int) string {
	b.Helper()
	name := t.ns(b, fmt.Sprintf("list-%d", n))
	if !t.filled[n] {
		if _, err := Creates(context.Background(), t.cs, name, "cm", writers, n); err != nil {
			b.Fatal(err)
		}
		t.filled[n] = true
	}
	return name
}

// report reports r's figures as b's metrics.
func report(b *testing.B, r Result, err error) {
	b.Helper()
	if err != nil {
		b.Fatal(err)
	}
	b.ReportMetric(float64(r.Elapsed.Nanoseconds())/float64(max(r.Ops, 1)), "ns/op")
	b.ReportMetric(r.OpsPerSec(), "ops/s")
	b.ReportMetric(ms(Percentile(r.Latencies, 0.50)), "p50-ms")
	b.ReportMetric(ms(Percentile(r.Latencies, 0.99)), "p99-ms")
	if r.Last != nil {
		b.ReportMetric(ms(Percentile(r.Last, 0.50)), "last-p50-ms")
		b.ReportMetric(ms(Percentile(r.Last, 0.99)), "last-p99-ms")
	}
	if r.Wire != nil {
		b.ReportMetric(ms(Percentile(r.Wire, 0.50)), "wire-p50-ms")
		b.ReportMetric(ms(Percentile(r.Wire, 0.99)), "wire-p99-ms")
	}
	if r.BodyBytes > 0 {
		b.ReportMetric(float64(r.BodyBytes)/1024, "body-kib")
	}
	if r.ServerCPU > 0 {
		b.ReportMetric(float64(r.ServerCPU.Microseconds())/1000/float64(max(r.Ops, 1)), "server-cpu-ms")
	}
}

// apiOp is one operation of BenchmarkAPI.
type apiOp struct {
	name string
	run  func(b *testing.B, t *apiTarget)
}

// apiOps are BenchmarkAPI's operations, in the order they run: each in a
// namespace of its own; the big list, the watch fan-out and the mixed load
// also with JSON both ways, so that the wire format's share shows.
func apiOps(s Scale) []apiOp {
	list := func(objects, lists int, json bool) func(b *testing.B, t *apiTarget) {
		return func(b *testing.B, t *apiTarget) {
			name := t.fill(b, objects, s.Writers)
			c := t.cs
			if json {
				c = t.csJSON
			}
			r, err := Lists(t.ctx, c, name, objects, lists)
			report(b, r, err)
		}
	}
	fanout := func(name string, json, wire bool) func(b *testing.B, t *apiTarget) {
		return func(b *testing.B, t *apiTarget) {
			c, f := t.cs, WatchFanout
			if json {
				c = t.csJSON
			}
			if wire {
				f = WatchFanoutWire
			}
			r, err := f(t.ctx, c, t.fresh(b, name), s.Watchers, s.WatchWrites)
			report(b, r, err)
		}
	}
	mixed := func(name string, json bool) func(b *testing.B, t *apiTarget) {
		return func(b *testing.B, t *apiTarget) {
			listNS := t.fill(b, s.SmallList, s.Writers)
			c := t.cs
			if json {
				c = t.csJSON
			}
			r, err := Mixed(t.ctx, c, t.fresh(b, name), listNS, s.Writers, s.MixedOps, s.MixedWatchers)
			report(b, r, err)
		}
	}
	return []apiOp{
		{"create", func(b *testing.B, t *apiTarget) {
			r, err := Creates(t.ctx, t.cs, t.fresh(b, "create"), "cm", s.Writers, s.Creates)
			report(b, r, err)
		}},
		{"update", func(b *testing.B, t *apiTarget) {
			r, err := Updates(t.ctx, t.cs, t.fresh(b, "update"), s.Writers, s.Updates)
			report(b, r, err)
		}},
		{"get", func(b *testing.B, t *apiTarget) {
			const objects = 100
			name := t.fresh(b, "get")
			if _, err := Creates(context.Background(), t.cs, name, "cm", s.Writers, objects); err != nil {
				b.Fatal(err)
			}
			var names []string
			for i := range objects {
				names = append(names, fmt.Sprintf("cm-%d", i))
			}
			r, err := Gets(t.ctx, t.cs, name, names, s.Writers, s.Gets)
			report(b, r, err)
		}},
		{fmt.Sprintf("list-%d", s.SmallList), list(s.SmallList, s.SmallLists, false)},
		{fmt.Sprintf("list-%d", s.BigList), list(s.BigList, s.BigLists, false)},
		{fmt.Sprintf("list-%d-json", s.BigList), list(s.BigList, s.BigLists, true)},
		{fmt.Sprintf("watch-%d", s.Watchers), fanout("watch", false, false)},
		{fmt.Sprintf("watch-%d-json", s.Watchers), fanout("watch-json", true, false)},
		{fmt.Sprintf("watch-%d-wire", s.Watchers), fanout("watch-wire", false, true)},
		{fmt.Sprintf("watch-%d-json-wire", s.Watchers), fanout("watch-json-wire", true, true)},
		{"mixed", mixed("mixed", false)},
		{"mixed-json", mixed("mixed-json", true)},
	}
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

// startKube starts etcd (members of it) and kube-apiserver
// (test/kubecluster, minimal) and returns the admin configuration and the
// processes' IDs.
func startKube(b testing.TB, members int) (*rest.Config, []int) {
	c := kubecluster.Start(b, kubecluster.Options{Minimal: true, Durable: true, EtcdMembers: members}) // etcd fsyncs, as every Canopy write does
	return c.RESTConfig(), c.PIDs()
}

// startCanopy starts n root replicas, each a process of the relay binary
// (`relay --role=root`; n > 1: one Raft cluster over loopback, sharing one
// PKI), waits until every one answers /readyz and one leads, and returns
// the admin configuration of the leader's "default" space and the
// replicas' process IDs. The processes are stopped when b ends.
func startCanopy(b testing.TB, n int) (*rest.Config, []int) {
	b.Helper()
	bin := relaybin.For(b)
	dirs, gossip := make([]string, n), make([]string, n)
	for i := range n {
		dirs[i], gossip[i] = b.TempDir(), freePort(b)
	}
	if n > 1 {
		sharePKI(b, dirs)
	}
	procs := make([]*relayProc, 0, n)
	b.Cleanup(func() { stopRelays(b, procs) })
	for i := range n {
		name := fmt.Sprintf("root-%d", i)
		args := []string{"--role=root", "--name=" + name, "--data-dir=" + dirs[i],
			"--api-addr=127.0.0.1:0", "--link-addr=127.0.0.1:0", "--log-level=info"}
		if os.Getenv("BENCH_PPROF") != "" {
			addr := freePort(b)
			args = append(args, "--pprof="+addr)
			b.Logf("%s of canopy-%d serves its profiles: go tool pprof 'http://%s/debug/pprof/profile?seconds=20'", name, n, addr)
		}
		if n > 1 {
			join := slices.Delete(slices.Clone(gossip), i, i+1)
			args = append(args, "--raft-addr=127.0.0.1:0", "--peer-addr="+gossip[i],
				"--join="+strings.Join(join, ","), fmt.Sprintf("--bootstrap-expect=%d", n))
		}
		p, err := startRelay(bin, name, dirs[i], args)
		if err != nil {
			b.Fatal(err)
		}
		procs = append(procs, p)
	}

	// Ready: the root has written its admin kubeconfig (a replica does
	// once the cluster has a leader and it has caught up) and its /readyz
	// answers ok.
	rcs := make([]*rest.Config, n)
	ready := whileRunning(procs, func(ctx context.Context) error {
		for i, p := range procs {
			if rcs[i] != nil {
				continue
			}
			rc, err := spaceConfig(filepath.Join(p.dir, pki.AdminKubeconfigFile), "default")
			if err != nil {
				return fmt.Errorf("%s: %w", p.name, err)
			}
			cs, err := kubernetes.NewForConfig(rc)
			if err != nil {
				return err
			}
			body, err := cs.Discovery().RESTClient().Get().AbsPath("/readyz").DoRaw(ctx)
			if err != nil {
				return fmt.Errorf("%s: /readyz: %w: %s", p.name, err, body)
			}
			rcs[i] = rc
		}
		return nil
	})
	if err := poll.Wait(context.Background(), ready, poll.For(2*time.Minute)); err != nil {
		b.Fatalf("waiting for the roots to be ready: %v%s", err, logTails(procs))
	}

	// The leader: the replica whose MembersPath names itself the leader.
	leader := -1
	leads := whileRunning(procs, func(ctx context.Context) error {
		var seen []string
		for i, p := range procs {
			base, err := server.APIBase(rcs[i].Host)
			if err != nil {
				return err
			}
			ml, err := server.GetMembers(ctx, rcs[i], base)
			if err != nil {
				return fmt.Errorf("%s: %w", p.name, err)
			}
			if ml.Leader != "" && ml.Leader == ml.Self && ml.Status.State == "Leader" {
				leader = i
				return nil
			}
			seen = append(seen, fmt.Sprintf("%s: %s, leader %q", p.name, ml.Status.State, ml.Leader))
		}
		return fmt.Errorf("no replica leads (%s)", strings.Join(seen, "; "))
	})
	if err := poll.Wait(context.Background(), leads, poll.For(time.Minute)); err != nil {
		b.Fatalf("waiting for a leader: %v%s", err, logTails(procs))
	}
	pids := make([]int, n)
	for i, p := range procs {
		pids[i] = p.cmd.Process.Pid
	}
	return rcs[leader], pids
}

// whileRunning makes check a poll condition: each call is bounded by a
// few seconds, and a relay that has exited ends the wait (poll.Stop).
func whileRunning(procs []*relayProc, check func(context.Context) error) func() error {
	return func() error {
		for _, p := range procs {
			if p.exited() {
				return poll.Stop(fmt.Errorf("%s exited: %v", p.name, p.err))
			}
		}
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		return check(ctx)
	}
}

// logTails is the end of every relay's log, for a failure message.
func logTails(procs []*relayProc) string {
	var logs strings.Builder
	for _, p := range procs {
		fmt.Fprintf(&logs, "\n--- %s (%s):\n%s", p.name, p.log, p.tail(40))
	}
	return logs.String()
}

func TestMain(m *testing.M) { relaybin.Main(m) }

// relayProc is a relay running as a child process, its stdout and stderr
// going to log (in its data directory).
type relayProc struct {
	name string
	dir  string // data directory, also the working directory
	log  string
	cmd  *exec.Cmd
	done chan struct{} // closed once the process has exited
	err  error         // Wait's result, once done is closed
}

// relaySysProcAttr returns the attributes of a relay process
// (relayproc_linux_test.go: killed with the test process).
var relaySysProcAttr = func() *syscall.SysProcAttr { return nil }

// startRelay starts bin with args in dir. The first line of its log is
// the command line.
func startRelay(bin, name, dir string, args []string) (*relayProc, error) {
	p := &relayProc{name: name, dir: dir, log: filepath.Join(dir, "relay.log"), done: make(chan struct{})}
	f, err := os.Create(p.log)
	if err != nil {
		return nil, err
	}
	fmt.Fprintf(f, "$ %s %s\n", bin, strings.Join(args, " "))
	p.cmd = exec.Command(bin, args...)
	p.cmd.Dir = dir
	p.cmd.Stdout, p.cmd.Stderr = f, f
	p.cmd.SysProcAttr = relaySysProcAttr()
	if err := p.cmd.Start(); err != nil {
		f.Close()
		return nil, fmt.Errorf("starting %s: %w", name, err)
	}
	go func() {
		p.err = p.cmd.Wait()
		f.Close()
		close(p.done)
	}()
	return p, nil
}

// exited reports whether the process has exited.
func (p *relayProc) exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// tail returns the last n lines of the process's log.
func (p *relayProc) tail(n int) string {
	data, err := os.ReadFile(p.log)
	if err != nil {
		return fmt.Sprintf("(reading %s: %v)", p.log, err)
	}
	lines := strings.Split(strings.TrimRight(string(data), "\n"), "\n")
	if len(lines) > n {
		lines = append([]string{fmt.Sprintf("… %d earlier lines", len(lines)-n)}, lines[len(lines)-n:]...)
	}
	return strings.Join(lines, "\n")
}

// relayStopGrace is how long a relay has to stop after SIGTERM before it
// is killed.
const relayStopGrace = 10 * time.Second

// stopRelays stops procs together: SIGTERM, then SIGKILL for those still
// running relayStopGrace later. A relay that had exited by itself, that
// had to be killed or that stopped with an error fails b, with the end of
// its log.
func stopRelays(b testing.TB, procs []*relayProc) {
	early := make([]bool, len(procs))
	for i, p := range procs {
		if early[i] = p.exited(); !early[i] {
			_ = p.cmd.Process.Signal(syscall.SIGTERM)
		}
	}
	grace := time.NewTimer(relayStopGrace)
	defer grace.Stop()
	expired := false
	for i, p := range procs {
		if !expired {
			select {
			case <-p.done:
			case <-grace.C:
				expired = true
			}
		}
		killed := !p.exited()
		if killed {
			_ = p.cmd.Process.Kill()
			<-p.done
		}
		switch {
		case early[i]:
			b.Errorf("%s exited before the end of the benchmark: %v\n%s", p.name, p.err, p.tail(40))
		case killed:
			b.Errorf("%s did not stop within %v of SIGTERM: killed\n%s", p.name, relayStopGrace, p.tail(40))
		case p.err != nil:
			b.Errorf("%s stopped with %v after SIGTERM\n%s", p.name, p.err, p.tail(40))
		}
	}
}

// freePort returns a loopback address whose port was free a moment ago
// (memberlist needs one fixed port for UDP and TCP).
func freePort(b testing.TB) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// sharePKI creates the shared credentials in the first data directory and
// imports them into the others ("relay pki export | relay pki import").
func sharePKI(b testing.TB, dirs []string) {
	src := pki.Dir(dirs[0])
	if _, err := pki.LoadOrCreateCA(src); err != nil {
		b.Fatal(err)
	}
	if _, err := pki.LoadOrCreateToken(filepath.Join(src, pki.AdminTokenFile)); err != nil {
		b.Fatal(err)
	}
	if _, err := pki.LoadOrCreateSigningKey(filepath.Join(src, pki.SigningKeyFile)); err != nil {
		b.Fatal(err)
	}
	bundle, err := pki.ExportShared(src)
	if err != nil {
		b.Fatal(err)
	}
	for _, d := range dirs[1:] {
		if err := pki.ImportShared(pki.Dir(d), bundle); err != nil {
			b.Fatal(err)
		}
	}
}
