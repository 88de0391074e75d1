package deploy

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/coreos/go-systemd/v22/unit"

	"github.com/canopy-dev/canopy/test/poll"
	"github.com/canopy-dev/canopy/test/procs"
	"github.com/canopy-dev/canopy/test/relaybin"
)

var roles = []string{"root", "region", "edge"}

func systemdDir(t testing.TB) string { return filepath.Join(repoDir(t), "deploy", "systemd") }

// unitFile is one parsed unit and the flags of its environment file.
type unitFile struct {
	path    string
	service map[string][]string // [Service] key → values, in order
	exec    []string            // ExecStart, split on white space
	flags   []string            // RELAY_FLAGS of the environment file
}

func loadUnit(t *testing.T, role string) unitFile {
	t.Helper()
	path := filepath.Join(systemdDir(t), "relay-"+role+".service")
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	opts, err := unit.DeserializeOptions(f)
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	u := unitFile{path: path, service: map[string][]string{}}
	for _, o := range opts {
		if o.Section == "Service" {
			u.service[o.Name] = append(u.service[o.Name], o.Value)
		}
	}
	if len(u.service["ExecStart"]) != 1 {
		t.Fatalf("%s: ExecStart %q, want one", path, u.service["ExecStart"])
	}
	u.exec = strings.Fields(u.service["ExecStart"][0])
	env := filepath.Join(systemdDir(t), "relay-"+role+".env")
	sc := bufio.NewScanner(strings.NewReader(readFile(t, env)))
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "RELAY_FLAGS="); ok {
			u.flags = strings.Fields(v)
		}
	}
	if len(u.flags) == 0 {
		t.Fatalf("%s sets no RELAY_FLAGS", env)
	}
	if want := "/etc/canopy/relay-" + role + ".env"; !slices.Equal(u.service["EnvironmentFile"], []string{want}) {
		t.Errorf("%s: EnvironmentFile %q, want %s (deploy/systemd/relay-%s.env)", path, u.service["EnvironmentFile"], want, role)
	}
	return u
}

// TestSystemdUnits: each unit runs its role with a dynamic user, its
// state directory as --data-dir, restarts on failure, is hardened, takes
// the join token as a credential (regions, edges), and names only flags
// that `relay --help` gives its role.
func TestSystemdUnits(t *testing.T) {
	help := helpRoles(t)
	for _, role := range roles {
		t.Run(role, func(t *testing.T) {
			u := loadUnit(t, role)
			want := map[string]string{
				"Type": "exec", "DynamicUser": "yes", "StateDirectory": "canopy/" + role, "StateDirectoryMode": "0700",
				"Restart": "on-failure", "RestartPreventExitStatus": "2",
				"NoNewPrivileges": "yes", "ProtectSystem": "strict", "ProtectHome": "yes", "PrivateTmp": "yes", "PrivateDevices": "yes",
				"ProtectKernelTunables": "yes", "ProtectKernelModules": "yes", "ProtectControlGroups": "yes", "RestrictNamespaces": "yes",
				"RestrictSUIDSGID": "yes", "LockPersonality": "yes", "MemoryDenyWriteExecute": "yes",
				"RestrictAddressFamilies": "AF_INET AF_INET6 AF_UNIX AF_NETLINK",
				"CapabilityBoundingSet":   "", "AmbientCapabilities": "", "UMask": "0077",
			}
			for k, v := range want {
				if got := u.service[k]; !slices.Equal(got, []string{v}) {
					t.Errorf("%s: %s=%q, want %q", u.path, k, got, v)
				}
			}
			if u.exec[0] != "/usr/local/bin/relay" || u.exec[1] != "--role="+role || !slices.Contains(u.exec, "--data-dir=${STATE_DIRECTORY}") || u.exec[len(u.exec)-1] != "$RELAY_FLAGS" {
				t.Errorf("%s: ExecStart %q: want /usr/local/bin/relay --role=%s --data-dir=${STATE_DIRECTORY} ... $RELAY_FLAGS", u.path, u.exec, role)
			}
			if role != "root" {
				if !slices.Contains(u.service["LoadCredential"], "join-token:/etc/canopy/join-token") || !slices.Contains(u.exec, "--join-token-file=${CREDENTIALS_DIRECTORY}/join-token") {
					t.Errorf("%s: the join token is not a credential read with --join-token-file", u.path)
				}
			}
			for _, a := range append(slices.Clone(u.exec[1:len(u.exec)-1]), u.flags...) {
				name, _, _ := strings.Cut(strings.TrimPrefix(a, "--"), "=")
				roles, ok := help[name]
				if !strings.HasPrefix(a, "--") || !ok {
					t.Errorf("%s: %q is not a flag of relay --help", u.path, a)
				} else if len(roles) > 0 && !slices.Contains(roles, role) {
					t.Errorf("%s: --%s is not a flag of --role=%s (relay --help: %v)", u.path, name, role, roles)
				}
			}
		})
	}
}

// helpRoles reads `relay --help`: each flag and the roles it is for
// (none: every role).
func helpRoles(t *testing.T) map[string][]string {
	t.Helper()
	out, err := exec.Command(relaybin.For(t), "--help").Output()
	if err != nil {
		t.Fatalf("relay --help: %v", err)
	}
	line := regexp.MustCompile(`^\s+(?:-\w, )?--([a-z][-a-z0-9]*)\b[^\[]*(?:\[([a-z, ]+)\])?`)
	flags := map[string][]string{}
	for l := range strings.Lines(string(out)) {
		if m := line.FindStringSubmatch(l); m != nil {
			var rs []string
			if m[2] != "" {
				rs = strings.Split(m[2], ", ")
			}
			flags[m[1]] = rs
		}
	}
	if len(flags) < 10 || flags["role"] == nil && flags["kubeconfig"] == nil {
		t.Fatalf("read %d flags from relay --help:\n%s", len(flags), out)
	}
	return flags
}

// TestSystemdCommandLines runs each unit's command line as systemd would
// (its variables expanded; the state and credentials directories made
// here, every address of the examples a free one on 127.0.0.1) and sees the
// relay start: the flags pass validation together.
func TestSystemdCommandLines(t *testing.T) {
	for _, role := range roles {
		t.Run(role, func(t *testing.T) {
			u := loadUnit(t, role)
			state, creds := t.TempDir(), t.TempDir()
			kc := clientKubeconfig(t)
			for name, content := range map[string]string{"join-token": "cnp1.not-a-real-token.x", "kubeconfig": kc} {
				if err := os.WriteFile(filepath.Join(creds, name), []byte(content), 0o600); err != nil {
					t.Fatal(err)
				}
			}
			ports := map[string]string{}
			// Listen and dial on loopback only: no example address is
			// dialed, nor a port another test may hold.
			addr := regexp.MustCompile(`(0\.0\.0\.0|127\.0\.0\.1|[a-z0-9.-]+\.example\.com):\d+`)
			var args []string
			for _, a := range append(slices.Clone(u.exec[1:len(u.exec)-1]), u.flags...) {
				a = strings.NewReplacer("${STATE_DIRECTORY}", state, "${CREDENTIALS_DIRECTORY}", creds).Replace(a)
				a = addr.ReplaceAllStringFunc(a, func(s string) string {
					if ports[s] == "" {
						ports[s] = procs.FreeAddr(t)
					}
					return ports[s]
				})
				args = append(args, a)
			}
			ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
			defer cancel()
			cmd := exec.CommandContext(ctx, relaybin.For(t), args...)
			p := procs.Start(t, "relay-"+role, cmd)
			p.Until(t, "relay "+strings.Join(args, " ")+" started", func() error {
				if !strings.Contains(p.Output(), `"msg":"starting relay"`) {
					return fmt.Errorf("not started: %s", p.Output())
				}
				return nil
			}, poll.For(20*time.Second))
		})
	}
}

// clientKubeconfig is a kubeconfig of a cluster that need not exist: the
// edge reads it at start and retries its cluster until it answers.
func clientKubeconfig(t *testing.T) string {
	t.Helper()
	return fmt.Sprintf(`apiVersion: v1
kind: Config
clusters: [{name: c, cluster: {server: "https://%s"}}]
users: [{name: u, user: {token: t}}]
contexts: [{name: c, context: {cluster: c, user: u}}]
current-context: c
`, procs.FreeAddr(t))
}

// TestSystemdAnalyzeVerify: systemd-analyze verify finds nothing to say of
// the units (with ExecStart's binary made the relay built here). Without
// systemd-analyze on the machine the test fails: it is part of systemd
// (Debian: systemd).
func TestSystemdAnalyzeVerify(t *testing.T) {
	analyze, err := exec.LookPath("systemd-analyze")
	if err != nil {
		t.Fatalf("systemd-analyze (package systemd) checks the units: %v", err)
	}
	dir := t.TempDir()
	var files []string
	for _, role := range roles {
		b := bytes.ReplaceAll([]byte(readFile(t, filepath.Join(systemdDir(t), "relay-"+role+".service"))), []byte("/usr/local/bin/relay"), []byte(relaybin.For(t)))
		f := filepath.Join(dir, "relay-"+role+".service")
		if err := os.WriteFile(f, b, 0o644); err != nil {
			t.Fatal(err)
		}
		files = append(files, f)
	}
	out, err := exec.Command(analyze, append([]string{"verify"}, files...)...).CombinedOutput()
	if err != nil || len(bytes.TrimSpace(out)) > 0 {
		t.Errorf("systemd-analyze verify: %v\n%s", err, out)
	}
}
