package main

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/netip"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/spf13/pflag"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/canopy-dev/canopy/relay/server"
)

// Roles.
const (
	roleRoot   = "root"
	roleRegion = "region"
	roleEdge   = "edge"
)

// Defaults.
const (
	defaultName     = "root"
	defaultAPIAddr  = "127.0.0.1:6443"
	defaultLinkAddr = "127.0.0.1:7443"
)

// defaultDataDir is the data directory of a relay started without
// --data-dir.
func defaultDataDir(name string) string { return filepath.Join("data", name) }

// rolesAnnotation is the pflag annotation listing the roles that read a
// flag; flags without it apply to every role.
const rolesAnnotation = "canopy.dev/roles"

var logLevels = map[string]slog.Level{
	"debug": slog.LevelDebug,
	"info":  slog.LevelInfo,
	"warn":  slog.LevelWarn,
	"error": slog.LevelError,
}

// options holds the flags of the relay command as given. complete fills in
// defaults that depend on other flags, validate checks them for the chosen
// role, and rootConfig turns them into the configuration of a root.
type options struct {
	role      string
	name      string
	dataDir   string
	logLevel  string
	logFormat string

	// Root.
	apiAddr  string
	linkAddr string

	// Region and edge. Parsed so that the command line contract is stable;
	// only root is implemented, so today they are only checked for misuse.
	parents        []string
	joinToken      string
	proxy          string
	kubeconfig     string
	virtualCluster bool
	labels         map[string]string
}

func (o *options) addFlags(fs *pflag.FlagSet) {
	fs.Var(newEnum(&o.role, roleRoot, roleRoot, roleRegion, roleEdge), "role",
		"which relay to run: root (kube API and placement), region (relays between a parent and its children) or edge (syncs one cluster); only root is available yet")
	fs.StringVar(&o.name, "name", defaultName, "relay name, unique among its siblings; a DNS label")
	fs.StringVar(&o.dataDir, "data-dir", "", `directory for the relay's PKI, state and admin.kubeconfig (default "data/<name>")`)
	fs.Var(newEnum(&o.logLevel, "info", "debug", "info", "warn", "error"), "log-level", "least severe log level written to stderr: debug, info, warn or error")
	fs.Var(newEnum(&o.logFormat, "text", "text", "json"), "log-format", "log format: text or json")

	fs.StringVar(&o.apiAddr, "api-addr", defaultAPIAddr, "host:port where the kube API listens")
	forRoles(fs, "api-addr", roleRoot)
	fs.StringVar(&o.linkAddr, "link-addr", defaultLinkAddr, "host:port where child relays dial in")
	forRoles(fs, "link-addr", roleRoot, roleRegion)

	fs.StringSliceVar(&o.parents, "parent", nil, "parent relays to dial, host:port,...")
	forRoles(fs, "parent", roleRegion, roleEdge)
	fs.StringVar(&o.joinToken, "join-token", "", "bootstrap token from 'relay token create' at the root")
	forRoles(fs, "join-token", roleRegion, roleEdge)
	fs.StringVar(&o.proxy, "proxy", "", "HTTP CONNECT proxy URL for the link to the parent")
	forRoles(fs, "proxy", roleRegion)
	fs.StringVar(&o.kubeconfig, "kubeconfig", "", "kubeconfig of the cluster this edge syncs")
	forRoles(fs, "kubeconfig", roleEdge)
	fs.BoolVar(&o.virtualCluster, "virtual-cluster", false, "sync an in-memory virtual cluster instead of --kubeconfig")
	forRoles(fs, "virtual-cluster", roleEdge)
	fs.StringToStringVar(&o.labels, "labels", nil, "labels of this edge's cluster, k=v,...")
	forRoles(fs, "labels", roleEdge)
}

// forRoles records that flag name is read only by roles and says so in its
// help text.
func forRoles(fs *pflag.FlagSet, name string, roles ...string) {
	if err := fs.SetAnnotation(name, rolesAnnotation, roles); err != nil {
		panic(err) // name is not a flag of fs: a programming error
	}
	f := fs.Lookup(name)
	f.Usage = "[" + strings.Join(roles, ", ") + "] " + f.Usage
}

// complete fills in the defaults that depend on other flags.
func (o *options) complete(fs *pflag.FlagSet) {
	if !fs.Changed("data-dir") {
		o.dataDir = defaultDataDir(o.name)
	}
}

// validate returns what is wrong with the completed options, one error per
// problem, each naming its flag.
func (o *options) validate(fs *pflag.FlagSet) []error {
	if o.role != roleRoot {
		return []error{flagErrorf("role", "role %s is not available yet; only --role=root is", o.role)}
	}
	var errs []error
	fs.Visit(func(f *pflag.Flag) {
		if roles, ok := f.Annotations[rolesAnnotation]; ok && !slices.Contains(roles, o.role) {
			errs = append(errs, flagErrorf(f.Name, "not used with --role=%s, only with --role=%s", o.role, strings.Join(roles, " or --role=")))
		}
	})
	if len(validation.IsDNS1123Label(o.name)) > 0 {
		errs = append(errs, flagErrorf("name", "%q is not a DNS label: use at most 63 lower-case letters, digits and '-', starting and ending with a letter or digit", o.name))
	}
	if o.dataDir == "" {
		errs = append(errs, flagErrorf("data-dir", "must not be empty"))
	}
	return append(errs, o.validateRoot(fs)...)
}

// validateRoot checks the flags of a root relay.
func (o *options) validateRoot(fs *pflag.FlagSet) []error {
	var errs []error
	apiErr, linkErr := checkListenAddr(o.apiAddr), checkListenAddr(o.linkAddr)
	if apiErr != nil {
		errs = append(errs, flagErrorf("api-addr", "%v", apiErr))
	}
	if linkErr != nil {
		errs = append(errs, flagErrorf("link-addr", "%v", linkErr))
	}
	if apiErr == nil && linkErr == nil && sameListener(o.apiAddr, o.linkAddr) {
		// Name the flag the user set; at least one was, as the defaults differ.
		name, other := "api-addr", "link-addr"
		if !fs.Changed(name) {
			name, other = other, name
		}
		errs = append(errs, flagErrorf(name, "%s collides with --%s=%s", fs.Lookup(name).Value, other, fs.Lookup(other).Value))
	}
	return errs
}

// rootConfig returns the configuration of a root relay from validated
// options.
func (o *options) rootConfig() server.Config {
	return server.Config{
		Name:     o.name,
		DataDir:  o.dataDir,
		APIAddr:  o.apiAddr,
		LinkAddr: o.linkAddr,
	}
}

// logger returns the logger that --log-level and --log-format ask for,
// writing to w.
func (o *options) logger(w io.Writer) *slog.Logger {
	opts := &slog.HandlerOptions{Level: logLevels[o.logLevel]}
	if o.logFormat == "json" {
		return slog.New(slog.NewJSONHandler(w, opts))
	}
	return slog.New(slog.NewTextHandler(w, opts))
}

// checkListenAddr reports what is wrong with a listen address: it must be
// host:port with a numeric port, the host an IP address, a DNS name or empty
// (every interface).
func checkListenAddr(addr string) error {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		if ae, ok := errors.AsType[*net.AddrError](err); ok {
			return fmt.Errorf("%q is not host:port (%s)", addr, ae.Err)
		}
		return fmt.Errorf("%q is not host:port", addr)
	}
	if _, err := strconv.ParseUint(port, 10, 16); err != nil {
		return fmt.Errorf("port %q in %q is not a number from 0 to 65535", port, addr)
	}
	if _, err := netip.ParseAddr(host); host != "" && err != nil && len(validation.IsDNS1123Subdomain(strings.ToLower(host))) > 0 {
		return fmt.Errorf("host %q in %q is neither an IP address nor a DNS name", host, addr)
	}
	return nil
}

// sameListener reports whether two valid listen addresses would collide:
// same non-zero port and the same host, or one of them listening on every
// interface. Port 0 picks a free port, so it never collides.
func sameListener(a, b string) bool {
	ha, pa, _ := net.SplitHostPort(a)
	hb, pb, _ := net.SplitHostPort(b)
	if port(pa) != port(pb) || port(pa) == 0 {
		return false
	}
	return wildcard(ha) || wildcard(hb) || canonicalHost(ha) == canonicalHost(hb)
}

// port returns the number of a port that checkListenAddr accepted.
func port(s string) uint64 {
	p, _ := strconv.ParseUint(s, 10, 16)
	return p
}

func wildcard(host string) bool {
	ip, err := netip.ParseAddr(host)
	return host == "" || (err == nil && ip.IsUnspecified())
}

func canonicalHost(host string) string {
	if ip, err := netip.ParseAddr(host); err == nil {
		return ip.Unmap().String()
	}
	return strings.ToLower(host)
}

// enumValue is a string flag restricted to a fixed list of values.
type enumValue struct {
	value   *string
	allowed []string
}

func newEnum(p *string, def string, allowed ...string) *enumValue {
	*p = def
	return &enumValue{value: p, allowed: allowed}
}

func (e *enumValue) String() string { return *e.value }
func (e *enumValue) Type() string   { return "string" }

func (e *enumValue) Set(s string) error {
	if !slices.Contains(e.allowed, s) {
		return fmt.Errorf("must be one of %s", strings.Join(e.allowed, ", "))
	}
	*e.value = s
	return nil
}
