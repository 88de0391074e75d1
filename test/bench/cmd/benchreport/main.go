// Command benchreport is `make bench`: it runs every benchmark of issue 10
// on this machine, one after the other, keeps their raw output, and writes
// the generated part of docs/benchmarks.md (between the markers
// bench.BeginMarker and bench.EndMarker; the hand-written text around them is
// kept).
//
// The steps: the kube API load generator against kube-apiserver with one
// and with three etcd members and Canopy roots with one and three replicas
// (test/bench BenchmarkAPI), the root failover benchmark (relay/server), Go
// micro-benchmarks with -benchmem, and `relay simulate` runs (flat vs tree,
// partition catch-up).
// Run it from the repository's root:
//
//	go run ./test/bench/cmd/benchreport             # full: docs/benchmarks.md, docs/bench/*.txt
//	go run ./test/bench/cmd/benchreport -quick      # or BENCH_QUICK=1: .data/bench/quick/
//	go run ./test/bench/cmd/benchreport -only=sim   # some steps (api, failover, micro, sim)
//	go run ./test/bench/cmd/benchreport -only=sim10k  # flat vs tree at 10 000 (about 15 minutes)
//
// The flat-vs-tree run at 10 000 virtual clusters (step sim10k) takes longer
// than a whole `make bench` may: it runs only when -only names it, and every
// other run shows its last output again (with its date).
//
// A failed step is reported in the document and makes the exit status 1;
// the other steps still run.
package main

import (
	"bytes"
	"cmp"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"time"

	"github.com/canopy-dev/canopy/test/bench"
)

// step is one command of the run and what came of it.
type step struct {
	name  string   // api, failover, micro, sim, build
	title string   // what it measures
	args  []string // the command
	env   []string // extra environment, shown with the command
	out   string   // file that keeps its stdout
	tee   bool     // also copy stdout to stderr (progress)
	dur   time.Duration
	err   error
	sim   *bench.Sim // parsed, for simulator steps
	// reused is when an earlier run wrote out; this run did not run the
	// step (-only) and shows that output again.
	reused time.Time
}

func (s *step) command() string {
	return strings.TrimSpace(strings.Join(s.env, " ") + " " + strings.Join(s.args, " "))
}

// commandPrefix starts the first line of every raw output: the command that
// wrote it (benchstat ignores the line).
const commandPrefix = "# command: "

// errorPrefix starts a line after a failed step's output: why it failed.
const errorPrefix = "# failed: "

// tookPrefix starts the last line of every raw output: how long it took.
const tookPrefix = "# took: "

// reuse returns a step for an output an earlier run left in s.out, or nil.
func reuse(s *step) *step {
	st, err := os.Stat(s.out)
	if err != nil {
		return nil
	}
	s.reused = st.ModTime()
	if b, err := os.ReadFile(s.out); err == nil {
		for l := range strings.Lines(string(b)) {
			l = strings.TrimSpace(l)
			if c, ok := strings.CutPrefix(l, commandPrefix); ok {
				s.args, s.env = strings.Fields(c), nil
			}
			if d, ok := strings.CutPrefix(l, tookPrefix); ok {
				s.dur, _ = time.ParseDuration(d)
			}
			if e, ok := strings.CutPrefix(l, errorPrefix); ok {
				s.err = errors.New(e)
			}
		}
	}
	return s
}

func main() {
	q := os.Getenv("BENCH_QUICK")
	quick := flag.Bool("quick", q != "" && q != "0", "small run (under 5 minutes); default from BENCH_QUICK")
	docPath := flag.String("doc", "", "document to write the generated region into (default docs/benchmarks.md, or .data/bench/quick/bench-results.md with -quick)")
	rawDir := flag.String("raw", "", "directory for the raw outputs (default docs/bench, or .data/bench/quick with -quick)")
	only := flag.String("only", "", "comma-separated steps to run: api, failover, micro, sim, sim10k (default all but sim10k)")
	goBin := flag.String("go", "go", "go command")
	flag.Parse()

	if *rawDir == "" {
		*rawDir = "docs/bench"
		if *quick {
			*rawDir = ".data/bench/quick"
		}
	}
	if *docPath == "" {
		*docPath = "docs/benchmarks.md"
		if *quick {
			*docPath = filepath.Join(*rawDir, "bench-results.md")
		}
	}
	if err := os.MkdirAll(*rawDir, 0o755); err != nil {
		fatal(err)
	}
	named := func(name string) bool { return slices.Contains(strings.Split(*only, ","), name) }
	want := func(name string) bool {
		if name == "sim10k" {
			return named(name) // never by default: longer than a whole run may take
		}
		return *only == "" || named(name)
	}
	began := time.Now()
	load0 := loadavg()
	// The commit and its uncommitted changes as the run begins: the run
	// itself changes the raw outputs in docs/bench.
	info := machine(*goBin)
	mode := "full"
	if *quick {
		mode = "quick"
	}

	var steps []*step
	run := func(s *step) *step {
		steps = append(steps, s)
		runStep(s)
		return s
	}
	// do runs s when its kind is wanted, else shows an earlier run's output.
	do := func(s *step) *step {
		if want(s.name) {
			return run(s)
		}
		if r := reuse(s); r != nil {
			steps = append(steps, r)
			return r
		}
		return nil
	}
	raw := func(name string) string { return filepath.Join(*rawDir, name) }
	quickEnv := []string{}
	if *quick {
		quickEnv = []string{"BENCH_QUICK=1"}
	}

	{
		// Three rounds of each operation, whose medians the report shows:
		// one round's figures move by ±30 % on this kind of machine.
		count := "-count=3"
		if *quick {
			count = "-count=1"
		}
		do(&step{name: "api", title: "kube API: kube-apiserver + etcd vs Canopy roots",
			args: []string{*goBin, "test", "./test/bench", "-run", "^$", "-bench", "API", "-benchtime=1x", count, "-timeout=60m"},
			env:  quickEnv, out: raw("api.txt"), tee: true})
	}
	{
		n := "2x"
		if *quick {
			n = "1x"
		}
		do(&step{name: "failover", title: "root failover, 3 replicas",
			args: []string{*goBin, "test", "./relay/server", "-run", "^$", "-bench", "RootFailover", "-benchtime=" + n, "-timeout=10m"},
			out:  raw("failover.txt"), tee: true})
	}
	{
		bt := "1s"
		if *quick {
			bt = "100ms"
		}
		do(&step{name: "micro", title: "Go micro-benchmarks",
			args: []string{*goBin, "test", "-run", "^$", "-bench", ".", "-benchmem", "-benchtime=" + bt, "-timeout=20m",
				"./relay/store/", "./relay/transport/internal/wire/", "./relay/transport/tree/", "./consensus/", "./topology/status/", "./topology/scheduler/",
				"./topology/placement/"},
			out: raw("micro.txt"), tee: true})
	}
	var sims []*step
	type simRun struct {
		file, dur string
		args      []string
		name      string   // step: "" is sim
		env       []string // extra environment
	}
	runs := []simRun{
		{file: "sim-flat-vs-tree-100.json", dur: "20s", args: []string{"--topology=1x10x10", "--scenario=flat-vs-tree"}},
		{file: "sim-partition-10keys.json", dur: "10s", args: []string{"--topology=1x2x5", "--scenario=partition", "--objects=10"}},
	}
	if *quick {
		runs[0].dur = "10s"
	} else {
		runs = append(runs,
			simRun{file: "sim-flat-vs-tree-1000.json", dur: "20s", args: []string{"--topology=1x10x100", "--scenario=flat-vs-tree"}},
			simRun{file: "sim-partition-2keys.json", dur: "10s", args: []string{"--topology=1x2x5", "--scenario=partition", "--objects=2"}},
			simRun{file: "sim-partition-50keys.json", dur: "10s", args: []string{"--topology=1x2x5", "--scenario=partition", "--objects=50"}},
			simRun{file: "sim-partition-10keys-30s.json", dur: "30s", args: []string{"--topology=1x2x5", "--scenario=partition", "--objects=10"}},
			// The root's work per change with changes 2 s apart, so that
			// each one settles before the next (render.go, spacedChanges).
			simRun{file: "sim-spaced-100.json", dur: "120s", args: []string{"--topology=1x10x10", "--scenario=churn", "--churn-rate=0.5", "--idle=20s", "--deployment=false"}},
			simRun{file: "sim-spaced-1000.json", dur: "120s", args: []string{"--topology=1x10x100", "--scenario=churn", "--churn-rate=0.5", "--idle=20s", "--deployment=false"}},
			// The same 100 edges with clusters slow to admit writes, so
			// that status moves about as long as at 1000 edges.
			simRun{file: "sim-spaced-100-slow.json", dur: "120s", args: []string{"--topology=1x10x10", "--scenario=churn", "--churn-rate=0.5", "--idle=20s", "--deployment=false", "--admission-delay=1.8s"}},
			// docs/simulations.md, "10 000 clusters": one object and no
			// Deployment per cluster, GC tuned to fit 24 GiB.
			simRun{file: "sim-flat-vs-tree-10000.json", dur: "30s", name: "sim10k", env: []string{"GOGC=150", "GOMEMLIMIT=19GiB"},
				args: []string{"--topology=1x100x100", "--scenario=flat-vs-tree", "--objects=1", "--deployment=false"}},
		)
	}
	// The simulator as built from this tree, not whatever bin/relay is.
	relay := filepath.Join(".data", "bench", "relay")
	built := false
	if want("sim") || want("sim10k") {
		b := run(&step{name: "build", title: "relay binary for the simulations",
			args: []string{*goBin, "build", "-o", relay, "./cmd/relay"}, out: filepath.Join(".data", "bench", "build.txt")})
		built = b.err == nil
	}
	for _, r := range runs {
		args := append([]string{relay, "simulate"}, r.args...)
		args = append(args, "--duration="+r.dur, "--quiet")
		s := &step{name: cmp.Or(r.name, "sim"), title: "simulator", args: args, env: r.env, out: raw(r.file)}
		switch {
		case built && want(s.name):
			run(s)
		case !want(s.name):
			if s = reuse(s); s == nil {
				continue
			}
			steps = append(steps, s)
		default:
			continue
		}
		if out, err := os.ReadFile(s.out); err == nil {
			if sim, err := bench.ParseSim(out); err == nil {
				s.sim = &sim
			} else if s.err == nil {
				s.err = err
			}
		}
		sims = append(sims, s)
	}

	info.mode, info.began, info.took, info.load0, info.load1 = mode, began, time.Since(began), load0, loadavg()
	gen := render(info, steps, sims, *rawDir)
	doc, err := os.ReadFile(*docPath)
	if err != nil && !os.IsNotExist(err) {
		fatal(err)
	}
	if len(doc) == 0 {
		doc = []byte("# Benchmark results\n\nWritten by `BENCH_QUICK=1 make bench`; the full run writes docs/benchmarks.md.\n")
	}
	out, err := bench.ReplaceGenerated(string(doc), gen)
	if err != nil {
		fatal(err)
	}
	if err := os.WriteFile(*docPath, []byte(out), 0o644); err != nil {
		fatal(err)
	}
	fmt.Fprintf(os.Stderr, "benchreport: %s run in %v; wrote %s and %s/\n", mode, time.Since(began).Round(time.Second), *docPath, *rawDir)
	for _, s := range steps {
		if s.err != nil {
			fmt.Fprintf(os.Stderr, "benchreport: failed: %s: %v\n", s.command(), s.err)
			defer os.Exit(1)
		}
	}
}

// runStep runs s, its stdout into s.out (and stderr with its stderr), and
// records its duration and error.
func runStep(s *step) {
	fmt.Fprintf(os.Stderr, "benchreport: %s\n", s.command())
	// A fresh clone has no .data/bench yet.
	if err := os.MkdirAll(filepath.Dir(s.out), 0o755); err != nil {
		s.err = err
		return
	}
	f, err := os.Create(s.out)
	if err != nil {
		s.err = err
		return
	}
	defer f.Close()
	fmt.Fprintf(f, "%s%s\n", commandPrefix, s.command())
	cmd := exec.Command(s.args[0], s.args[1:]...)
	cmd.Env = append(os.Environ(), s.env...)
	var stdout io.Writer = f
	if s.tee {
		stdout = io.MultiWriter(f, os.Stderr)
	}
	var stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = stdout, io.MultiWriter(os.Stderr, &stderr)
	start := time.Now()
	if err := cmd.Run(); err != nil {
		msg := strings.TrimSpace(stderr.String())
		if i := strings.LastIndexByte(msg, '\n'); i >= 0 {
			msg = msg[i+1:]
		}
		s.err = fmt.Errorf("%w: %s", err, msg)
	}
	s.dur = time.Since(start)
	if s.err != nil {
		fmt.Fprintf(f, "%s%s\n", errorPrefix, strings.ReplaceAll(s.err.Error(), "\n", " "))
	}
	fmt.Fprintf(f, "%s%s\n", tookPrefix, s.dur.Round(time.Second))
	fmt.Fprintf(os.Stderr, "benchreport: %s: %v\n", s.name, s.dur.Round(time.Second))
}

func fatal(err error) {
	fmt.Fprintln(os.Stderr, "benchreport:", err)
	os.Exit(1)
}

// info is the machine and the software the figures were taken with.
type info struct {
	cpu, mem, goVersion, kube, etcd, commit, mode string
	cores                                         int
	began                                         time.Time
	took                                          time.Duration
	load0, load1                                  string
}

func machine(goBin string) info {
	i := info{cores: runtime.NumCPU(), cpu: "unknown", mem: "unknown"}
	if b, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		for l := range strings.Lines(string(b)) {
			if v, ok := strings.CutPrefix(l, "model name"); ok {
				i.cpu = strings.TrimSpace(strings.TrimLeft(v, " \t:"))
				break
			}
		}
	}
	if b, err := os.ReadFile("/proc/meminfo"); err == nil {
		var kb float64
		if _, err := fmt.Sscanf(string(b), "MemTotal: %f kB", &kb); err == nil {
			i.mem = fmt.Sprintf("%.1f GiB", kb/(1<<20))
		}
	}
	i.goVersion = output(goBin, "version")
	i.kube = output("bin/kube-apiserver", "--version")
	i.etcd = firstLine(output("bin/etcd", "--version"))
	i.commit = output("git", "rev-parse", "--short", "HEAD")
	if st := output("git", "status", "--porcelain", "--untracked-files=no"); st != "" && !strings.HasPrefix(st, "(") {
		i.commit += fmt.Sprintf(" plus uncommitted changes in %d files", len(strings.Split(st, "\n")))
	}
	return i
}

func output(name string, args ...string) string {
	out, err := exec.Command(name, args...).Output()
	if err != nil {
		return fmt.Sprintf("(%s: %v)", name, err)
	}
	return strings.TrimSpace(string(out))
}

func firstLine(s string) string {
	l, _, _ := strings.Cut(s, "\n")
	return l
}

func loadavg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "unknown"
	}
	f := strings.Fields(string(b))
	return strings.Join(f[:min(3, len(f))], " ")
}
