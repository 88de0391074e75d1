package differential

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	apiextensionsclient "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/canopy-dev/canopy/test/inproc"
	"github.com/canopy-dev/canopy/test/kubecluster"
	"github.com/canopy-dev/canopy/test/poll"
)

// rootSpace is the space of the root the scenario runs in.
const rootSpace = "default"

// target is one server the scenario runs against, with its clients and the
// state steps keep between them. A target is used by one goroutine at a
// time (the scenario runs its steps in order); its recorders are safe for
// the client goroutines that feed them.
type target struct {
	name       string // "root" or "kube"
	kubeconfig string
	kubectlCtx []string // extra kubectl flags that select the context
	home       string   // HOME of kubectl: its own discovery cache
	tmp        string   // TMPDIR of kubectl (kubectl diff writes there)

	cfg  *rest.Config // without the recorders; copy before changing
	cs   kubernetes.Interface
	dyn  dynamic.Interface
	ext  apiextensionsclient.Interface
	warn *warningRecorder
	reqs *requestRecorder

	// replacements turn what is specific to this target into placeholders,
	// longest first (normalize_test.go).
	replacements []replacement

	// saved holds values a step keeps for a later one (a stale
	// resourceVersion, a uid, a list's resourceVersion).
	saved map[string]string
}

// newTarget builds the clients of a target from an admin rest.Config.
func newTarget(t testing.TB, name, kubeconfig string, kubectlCtx []string, cfg *rest.Config, replacements []replacement) (*target, error) {
	dir := t.TempDir()
	tg := &target{
		name:       name,
		kubeconfig: kubeconfig,
		kubectlCtx: kubectlCtx,
		home:       filepath.Join(dir, "home"),
		tmp:        filepath.Join(dir, "tmp"),
		cfg:        rest.CopyConfig(cfg),
		warn:       &warningRecorder{},
		reqs:       &requestRecorder{},
		saved:      map[string]string{},
	}
	for _, d := range []string{tg.home, tg.tmp} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			return nil, err
		}
	}
	tg.replacements = sortReplacements(append(replacements,
		replacement{kubeconfig, "<kubeconfig>"},
		replacement{tg.home, "<home>"},
		replacement{tg.tmp, "<tmp>"},
	))

	c := tg.clientConfig()
	var err error
	if tg.cs, err = kubernetes.NewForConfig(c); err != nil {
		return nil, fmt.Errorf("%s: clientset: %w", name, err)
	}
	if tg.dyn, err = dynamic.NewForConfig(c); err != nil {
		return nil, fmt.Errorf("%s: dynamic client: %w", name, err)
	}
	if tg.ext, err = apiextensionsclient.NewForConfig(c); err != nil {
		return nil, fmt.Errorf("%s: apiextensions client: %w", name, err)
	}
	return tg, nil
}

// clientConfig returns a copy of the target's config that records warnings
// and requests.
func (tg *target) clientConfig() *rest.Config {
	c := rest.CopyConfig(tg.cfg)
	c.QPS, c.Burst = -1, 0 // no client-side rate limiting
	c.WarningHandlerWithContext = tg.warn
	c.Wrap(func(rt http.RoundTripper) http.RoundTripper { return tg.reqs.wrap(rt) })
	return c
}

// startRoot opens an in-process root relay on random loopback ports in a
// temporary directory; it is stopped when the test ends. It returns the
// target for the root's default space.
func startRoot(t *testing.T) (*target, error) {
	r := inproc.StartRoot(t, "root", filepath.Join(t.TempDir(), "data"), nil)
	cc := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(
		&clientcmd.ClientConfigLoadingRules{ExplicitPath: r.KubeconfigPath()},
		&clientcmd.ConfigOverrides{CurrentContext: rootSpace})
	cfg, err := cc.ClientConfig()
	if err != nil {
		return nil, fmt.Errorf("root kubeconfig: %w", err)
	}
	// Ready once authorization answers (readyz).
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	readyCtx, cancelReady := context.WithTimeout(t.Context(), 15*time.Second)
	defer cancelReady()
	if err := poll.Wait(readyCtx, func() error {
		_, err := cs.Discovery().RESTClient().Get().AbsPath("/readyz").DoRaw(readyCtx)
		return err
	}); err != nil {
		return nil, fmt.Errorf("root /readyz: %w", err)
	}
	return newTarget(t, "root", r.KubeconfigPath(), []string{"--context=" + rootSpace}, cfg, []replacement{
		{cfg.Host, "<server>"},              // https://127.0.0.1:port/spaces/default
		{r.Server(), "<server>"},            // https://127.0.0.1:port
		{"/spaces/" + rootSpace + "/", "/"}, // paths under the prefix
	})
}

// startKube starts a real etcd and kube-apiserver (kubecluster, Minimal).
// It must run on the test's goroutine: kubecluster fails the test itself
// when a binary is missing or the cluster does not come up.
func startKube(t *testing.T) *target {
	c := kubecluster.Start(t, kubecluster.Options{Minimal: true})
	tg, err := newTarget(t, "kube", c.Kubeconfig, nil, c.RESTConfig(), []replacement{
		{c.Host, "<server>"},
	})
	if err != nil {
		t.Fatal(err)
	}
	return tg
}

// kubectlResult is what one kubectl run printed and how it ended.
type kubectlResult struct {
	stdout, stderr string
	exit           int
}

// kubectl runs kubectl against the target with its own HOME and TMPDIR and
// no inherited KUBECONFIG or KUBECTL_* settings.
func (tg *target) kubectl(ctx context.Context, bin, stdin string, args ...string) kubectlResult {
	ctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	full := append([]string{"--kubeconfig=" + tg.kubeconfig}, tg.kubectlCtx...)
	cmd := exec.CommandContext(ctx, bin, append(full, args...)...)
	env := []string{"HOME=" + tg.home, "TMPDIR=" + tg.tmp}
	for _, kv := range os.Environ() {
		k, _, _ := strings.Cut(kv, "=")
		if k == "HOME" || k == "TMPDIR" || k == "KUBECONFIG" || strings.HasPrefix(k, "KUBECTL_") {
			continue
		}
		env = append(env, kv)
	}
	cmd.Env = env
	if stdin != "" {
		cmd.Stdin = strings.NewReader(stdin)
	}
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	res := kubectlResult{stdout: out.String(), stderr: errb.String()}
	var exit *exec.ExitError
	switch {
	case err == nil:
	case errors.As(err, &exit):
		res.exit = exit.ExitCode()
	default:
		res.exit = -1
		res.stderr += "\n(run: " + err.Error() + ")"
	}
	return res
}

// warningRecorder collects the warnings of a target's client-go calls.
type warningRecorder struct {
	mu   sync.Mutex
	msgs []string
}

func (w *warningRecorder) HandleWarningHeaderWithContext(_ context.Context, code int, _ string, text string) {
	if code != 299 || text == "" {
		return
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	w.msgs = append(w.msgs, text)
}

// take returns the warnings recorded since the last take and forgets them.
func (w *warningRecorder) take() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	m := w.msgs
	w.msgs = nil
	return m
}

// requestRecorder records the requests of a target's client-go calls
// (method, path and the query parameters that matter to the scenario).
type requestRecorder struct {
	mu   sync.Mutex
	on   bool
	reqs []string
}

func (r *requestRecorder) wrap(rt http.RoundTripper) http.RoundTripper {
	return roundTripFunc(func(req *http.Request) (*http.Response, error) {
		r.mu.Lock()
		if r.on {
			q := req.URL.Query()
			var keys []string
			for _, k := range []string{"watch", "sendInitialEvents", "resourceVersionMatch", "allowWatchBookmarks", "labelSelector", "fieldSelector"} {
				if v := q.Get(k); v != "" {
					keys = append(keys, k+"="+v)
				}
			}
			if q.Get("resourceVersion") != "" {
				keys = append(keys, "resourceVersion=set")
			}
			sort.Strings(keys)
			r.reqs = append(r.reqs, req.Method+" "+req.URL.Path+"?"+strings.Join(keys, "&"))
		}
		r.mu.Unlock()
		return rt.RoundTrip(req)
	})
}

// start begins recording, forgetting what was recorded before.
func (r *requestRecorder) start() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.on, r.reqs = true, nil
}

// stop ends recording and returns the requests recorded.
func (r *requestRecorder) stop() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.on = false
	return r.reqs
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(req *http.Request) (*http.Response, error) { return f(req) }
