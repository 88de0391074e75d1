package server

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/canopy-dev/canopy/test/browser"
)

// BenchmarkConsole measures the console in Chromium against a fleet of
// $CONSOLE_BENCH_REGIONS regions of $CONSOLE_BENCH_EDGES edges each (100 ×
// 100 = 10 000 destinations by default; every relay real, in this
// process, without clusters): from signing in to the tree's summary
// counting every destination connected, a search for one edge drawn, every
// region expanded and the list scrolled to its last row drawn, and the
// page's JavaScript heap then. make bench-console runs it (docs/benchmarks.md,
// The console at 10 000 destinations); it is not part of make bench.
func BenchmarkConsole(b *testing.B) {
	regions, edges := envInt(b, "CONSOLE_BENCH_REGIONS", 100), envInt(b, "CONSOLE_BENCH_EDGES", 100)
	total := regions * edges
	br := browser.Start(b)
	start := time.Now()
	f := startConsoleFleet(b, regions, edges)
	b.Logf("fleet of %d destinations up in %v", total, time.Since(start).Round(time.Second))
	art := browser.ArtifactDir(b)
	for b.Loop() {
		browser.Do(b, br, "open the console", chromedp.Navigate(f.root.Server()+"/console/"), chromedp.WaitVisible(chromedp.CSS("#token")))
		signIn := time.Now()
		browser.Do(b, br, "sign in", chromedp.SendKeys(chromedp.CSS("#token"), f.root.token), chromedp.Click(chromedp.CSS("button[type=submit]")))
		browser.WaitJS(b, br, "every destination connected", fmt.Sprintf(`(document.querySelector('[data-testid=tree-summary]')?.textContent ?? '').startsWith('%d destinations, %d connected')`, total, total), 5*time.Minute)
		shown := time.Since(signIn)

		// Each measure below runs in the page: it changes the page, then
		// counts animation frames until what it waits for is drawn.
		last := fmt.Sprintf("edge-%d-%d", regions-1, edges-1)
		search := timeJS(b, br, fmt.Sprintf(`const i = document.getElementById('tree-search'); i.value = %q; i.dispatchEvent(new Event('input', {bubbles: true}))`, last),
			fmt.Sprintf(`document.querySelector('[data-node=%q]') !== null && document.querySelectorAll('[role=treeitem]').length === 3`, last))
		timeJS(b, br, `const i = document.getElementById('tree-search'); i.value = ''; i.dispatchEvent(new Event('input', {bubbles: true}))`,
			`document.querySelector('[data-node="region-0"]') !== null && document.querySelectorAll('[role=treeitem]').length > 3`)
		expand := timeJS(b, br, `[...document.querySelectorAll('button')].find(e => e.textContent === 'Expand all shown').click()`,
			`document.querySelector('[data-node="edge-0-0"]') !== null`)
		scroll := timeJS(b, br, `const t = document.querySelector('[role=tree]'); t.scrollTop = t.scrollHeight`,
			fmt.Sprintf(`document.querySelector('[data-node=%q]') !== null`, last))
		rows := browser.Eval[int](b, br, `document.querySelectorAll('[role=treeitem]').length`)
		heap := browser.Eval[float64](b, br, `performance.memory.usedJSHeapSize`)
		browser.Screenshot(b, br, art, "tree-scrolled")
		b.ReportMetric(shown.Seconds(), "s/tree")
		b.ReportMetric(search, "ms/search")
		b.ReportMetric(expand, "ms/expand-all")
		b.ReportMetric(scroll, "ms/scroll-end")
		b.ReportMetric(heap/(1<<20), "MiB-js-heap")
		b.ReportMetric(float64(rows), "rows-drawn")
		b.Logf("%d destinations: tree %v after sign-in; search %.0f ms; expand %d regions %.0f ms; scroll to the end %.0f ms; %d rows drawn of %d; JS heap %.1f MiB",
			total, shown.Round(time.Millisecond), search, regions, expand, scroll, rows, 1+regions+total, heap/(1<<20))
		browser.Do(b, br, "sign out", chromedp.Click(chromedp.Search(`//button[text()="Sign out"]`)), chromedp.WaitVisible(chromedp.CSS("#token")))
	}
}

// timeJS runs act in the page and returns the milliseconds until done (a
// JavaScript expression) holds at an animation frame, a minute at most.
func timeJS(b *testing.B, ctx context.Context, act, done string) float64 {
	b.Helper()
	js := fmt.Sprintf(`new Promise((resolve, reject) => {
		const t0 = performance.now();
		(() => { %s })();
		const check = () => {
			if (%s) resolve(performance.now() - t0);
			else if (performance.now() - t0 > 60000) reject(new Error('not drawn in a minute'));
			else requestAnimationFrame(check);
		};
		requestAnimationFrame(check);
	})`, act, done)
	ms, err := chromedp.Run(ctx, chromedp.Evaluate[float64](js, chromedp.EvalAwaitPromise))
	if err != nil {
		b.Fatalf("%s, then %s: %v", act, done, err)
	}
	return ms
}

// envInt reads a positive integer from the environment, def when unset.
func envInt(b *testing.B, name string, def int) int {
	b.Helper()
	v := os.Getenv(name)
	if v == "" {
		return def
	}
	n, err := strconv.Atoi(v)
	if err != nil || n <= 0 {
		b.Fatalf("%s=%q: want a positive integer", name, v)
	}
	return n
}
