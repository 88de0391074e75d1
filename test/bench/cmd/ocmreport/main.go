// Command ocmreport is `make bench-ocm`: it runs test/bench's BenchmarkOCM
// (Canopy beside Open Cluster Management on the same real clusters) for
// each number of clusters, keeps each run's output and figures in
// docs/bench/ (ocm-N.txt, ocm-N.json), and writes the section of
// docs/benchmarks.md between bench.OCMBeginMarker and bench.OCMEndMarker
// (appended with its markers when there are none; the hand-written text
// around them is kept). Run it from the repository's root, with the relay,
// the cluster binaries and OCM's in bin/ (make build kube-bins ocm-bins):
//
//	go run ./test/bench/cmd/ocmreport                  # 3 and 10 clusters
//	go run ./test/bench/cmd/ocmreport -clusters=3 -doc=/tmp/ocm.md -raw=/tmp/ocm
//	go run ./test/bench/cmd/ocmreport -status-window=10ms   # Canopy's status with no coalescing to speak of
//
// A run that fails is left out of the tables, named in the document, and
// makes the exit status 1.
package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/canopy-dev/canopy/test/bench"
)

func main() {
	docPath := flag.String("doc", "docs/benchmarks.md", "document to write the section into")
	rawDir := flag.String("raw", "docs/bench", "directory for each run's output (ocm-N.txt) and figures (ocm-N.json)")
	clusters := flag.String("clusters", "3,10", "comma-separated numbers of clusters, a run each")
	goBin := flag.String("go", "go", "go command")
	window := flag.String("status-window", "", "the Canopy root's and region's --status-window (default theirs)")
	flag.Parse()

	var ns []int
	for _, s := range strings.Split(*clusters, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(s))
		if err != nil || n < 1 {
			fatal(fmt.Errorf("-clusters: %q is not a number of clusters", s))
		}
		ns = append(ns, n)
	}
	if err := os.MkdirAll(*rawDir, 0o755); err != nil {
		fatal(err)
	}
	relay, err := filepath.Abs("bin/relay")
	if err != nil {
		fatal(err)
	}
	began := time.Now()
	var runs []bench.OCMRun
	var failed []string
	for _, n := range ns {
		r, err := runOnce(*goBin, relay, *rawDir, *window, n)
		if err != nil {
			fmt.Fprintf(os.Stderr, "ocmreport: %d clusters: %v\n", n, err)
			failed = append(failed, fmt.Sprintf("%d clusters: %v", n, err))
			continue
		}
		runs = append(runs, r)
	}
	gen := bench.RenderOCM(runs, command(), time.Since(began), began)
	for _, f := range failed {
		gen += fmt.Sprintf("Failed: %s (output in %s).\n\n", f, *rawDir)
	}
	doc, err := os.ReadFile(*docPath)
	if err != nil && !os.IsNotExist(err) {
		fatal(err)
	}
	out, err := bench.ReplaceRegion(string(doc), bench.OCMBeginMarker, bench.OCMEndMarker, gen)
	if err != nil {
		fatal(err)
	}
	if err := os.WriteFile(*docPath, []byte(out), 0o644); err != nil {
		fatal(err)
	}
	fmt.Fprintf(os.Stderr, "ocmreport: wrote %s in %v\n", *docPath, time.Since(began).Round(time.Second))
	if len(failed) > 0 {
		os.Exit(1)
	}
}

// runOnce runs BenchmarkOCM with n clusters, its output into
// rawDir/ocm-N.txt (and to stderr), its figures into rawDir/ocm-N.json.
func runOnce(goBin, relay, rawDir, window string, n int) (bench.OCMRun, error) {
	var r bench.OCMRun
	jsonPath, err := filepath.Abs(filepath.Join(rawDir, fmt.Sprintf("ocm-%d.json", n)))
	if err != nil {
		return r, err
	}
	_ = os.Remove(jsonPath) // a failed run must not leave the last one's figures
	args := []string{"test", "./test/bench", "-run", "^$", "-bench", "^BenchmarkOCM$", "-benchtime=1x", "-count=1", "-timeout=40m", "-v"}
	env := []string{fmt.Sprintf("OCM_BENCH_CLUSTERS=%d", n), "OCM_BENCH_JSON=" + jsonPath, "RELAY_BIN=" + relay}
	if window != "" {
		env = append(env, "OCM_BENCH_STATUS_WINDOW="+window)
	}
	f, err := os.Create(filepath.Join(rawDir, fmt.Sprintf("ocm-%d.txt", n)))
	if err != nil {
		return r, err
	}
	defer f.Close()
	fmt.Fprintf(f, "# command: %s %s %s\n", strings.Join(env, " "), goBin, strings.Join(args, " "))
	fmt.Fprintf(os.Stderr, "ocmreport: %d clusters\n", n)
	cmd := exec.Command(goBin, args...)
	cmd.Env = append(os.Environ(), env...)
	cmd.Stdout, cmd.Stderr = io.MultiWriter(f, os.Stderr), io.MultiWriter(f, os.Stderr)
	if err := cmd.Run(); err != nil {
		return r, fmt.Errorf("go test: %w", err)
	}
	data, err := os.ReadFile(jsonPath)
	if err != nil {
		return r, err
	}
	if err := json.Unmarshal(data, &r); err != nil {
		return r, fmt.Errorf("%s: %w", jsonPath, err)
	}
	return r, nil
}

// command is what a reader runs for the same figures: make bench-ocm, or
// this command with the flags it was given (-go aside).
func command() string {
	var set []string
	flag.Visit(func(f *flag.Flag) {
		if f.Name != "go" {
			set = append(set, "-"+f.Name+"="+f.Value.String())
		}
	})
	if len(set) == 0 {
		return "make bench-ocm"
	}
	return "go run ./test/bench/cmd/ocmreport " + strings.Join(set, " ")
}

func fatal(err error) {
	fmt.Fprintln(os.Stderr, "ocmreport:", err)
	os.Exit(1)
}
