package deploy

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"k8s.io/client-go/tools/clientcmd"

	"github.com/canopy-dev/canopy/test/kubecluster"
	"github.com/canopy-dev/canopy/test/poll"
	"github.com/canopy-dev/canopy/test/procs"
	"github.com/canopy-dev/canopy/test/relaybin"
)

// TestRootOnEveryInterface runs the root as the chart's StatefulSet does,
// listening on every interface (--api-addr=0.0.0.0:P), in a network
// namespace of its own so that the test binds nothing outside it: the
// root starts (it installs its CRDs through a client of itself), writes
// an admin kubeconfig that names loopback, which its certificate covers,
// and `relay token create --data-dir`, which reaches the root through
// that kubeconfig, works beside it.
func TestRootOnEveryInterface(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Fatal("the root runs in a network namespace of its own (unshare --net): run the tests as root")
	}
	manifest, err := renderChart(t, ``)
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(t.TempDir(), "root")
	var args []string
	for _, a := range containerArgs(t, find(t, objects(t, manifest), "StatefulSet", "canopy-root"), "relay") {
		flag, value, _ := strings.Cut(a, "=")
		switch flag {
		case "--name":
			value = strings.ReplaceAll(value, "$(POD_NAME)", "canopy-root-0")
		case "--data-dir":
			value = dir
		}
		if strings.Contains(value, "$(") {
			t.Fatalf("%s: a variable this test does not set", a)
		}
		args = append(args, flag+"="+value)
	}
	api := ""
	for _, a := range args {
		if v, ok := strings.CutPrefix(a, "--api-addr="); ok {
			api = v
		}
	}
	if !strings.HasPrefix(api, "0.0.0.0:") {
		t.Fatalf("the chart's root listens at --api-addr=%q, not on every interface: this test is moot", api)
	}
	port := strings.TrimPrefix(api, "0.0.0.0:")
	if _, err := strconv.Atoi(port); err != nil {
		t.Fatalf("--api-addr=%s: %v", api, err)
	}

	// unshare execs sh, which brings loopback up and execs the relay: the
	// process started is the relay, in the new namespace.
	bin := relaybin.For(t)
	root := procs.Start(t, "root", exec.Command("unshare", append([]string{"--net", "sh", "-c",
		`ip link set lo up && exec "$0" "$@"`, bin}, args...)...))
	t.Logf("root: relay %s", strings.Join(args, " "))
	inNet := func(name string, arg ...string) *exec.Cmd {
		return exec.Command("nsenter", append([]string{"--target", strconv.Itoa(root.Pid()), "--net", name}, arg...)...)
	}
	run := func(cmd *exec.Cmd) (string, error) {
		var out, errb bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &errb
		cmd.Env = append(os.Environ(), "HOME="+t.TempDir())
		if err := cmd.Run(); err != nil {
			return out.String(), fmt.Errorf("%s: %v: %s", strings.Join(cmd.Args, " "), err, strings.TrimSpace(errb.String()))
		}
		return out.String(), nil
	}
	kubeconfig := filepath.Join(dir, "admin.kubeconfig")
	root.Until(t, "the root ready", func() error {
		_, err := run(inNet(kubecluster.Kubectl(t), "--kubeconfig="+kubeconfig, "get", "--raw=/readyz"))
		return err
	}, poll.For(60*time.Second))

	cfg, err := clientcmd.LoadFromFile(kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	for name, c := range cfg.Clusters {
		if want := "https://127.0.0.1:" + port; !strings.HasPrefix(c.Server, want) {
			t.Errorf("admin.kubeconfig cluster %s is served at %s, want %s...", name, c.Server, want)
		}
	}
	out, err := run(inNet(bin, "token", "create", "--data-dir="+dir))
	if err != nil || strings.TrimSpace(out) == "" {
		t.Fatalf("relay token create beside a root on every interface: %q, %v", out, err)
	}
}
