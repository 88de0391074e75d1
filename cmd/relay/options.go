package main

import (
	"errors"
	"fmt"
	"github.com/canopy-dev/canopy/relay/destproxy"
	"github.com/canopy-dev/canopy/relay/transport/session"
	"io"
	"log/slog"
	"maps"
	"net"
	"net/netip"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/pflag"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/client-go/rest"

	"github.com/canopy-dev/canopy/consensus"
	"github.com/canopy-dev/canopy/relay/pki"
	"github.com/canopy-dev/canopy/relay/server"
	"github.com/canopy-dev/canopy/relay/transport/link"
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
// role, and rootConfig or childConfig turns them into the configuration of
// a root or of a region or edge.
type options struct {
	role      string
	name      string
	dataDir   string
	logLevel  string
	logFormat string

	// Root (apiAddr, linkAddr, tlsSANs) and region (linkAddr).
	apiAddr  string
	linkAddr string
	tlsSANs  []string

	// Root replicas (docs/ha.md).
	raftAddr        string
	peerAddr        string
	join            []string
	bootstrapExpect int
	clusterID       string
	treeName        string
	// Snapshots of a replica's log.
	snapshotThreshold uint64
	snapshotInterval  time.Duration
	trailingLogs      uint64
	raftMultiplier    int

	// Root and region.
	statusWindow time.Duration

	// Region and edge.
	parents        []string
	joinToken      string
	joinTokenFile  string
	proxy          string
	kubeconfig     string
	virtualCluster bool
	// inCluster: an edge given neither --kubeconfig nor --virtual-cluster
	// syncs the cluster it runs in as a pod (set by validateChild).
	inCluster     bool
	labels        map[string]string
	statusAddr    string
	pprofAddr     string
	parentTimeout time.Duration

	maxProxyStreams     int
	proxyAuditLog       string
	impersonationPrefix string
	impersonationGroups []string
}

func (o *options) addFlags(fs *pflag.FlagSet) {
	fs.Var(newEnum(&o.role, roleRoot, roleRoot, roleRegion, roleEdge), "role",
		"which relay to run: root (kube API and placement), region (relays between a parent and its children) or edge (syncs one cluster)")
	fs.StringVar(&o.name, "name", defaultName, "relay name, unique among its siblings; a DNS label")
	fs.StringVar(&o.dataDir, "data-dir", "", `directory for the relay's PKI, state and admin.kubeconfig (default "data/<name>")`)
	fs.Var(newEnum(&o.logLevel, "info", "debug", "info", "warn", "error"), "log-level", "least severe log level written to stderr: debug, info, warn or error")
	fs.Var(newEnum(&o.logFormat, "text", "text", "json"), "log-format", "log format: text or json")

	fs.StringVar(&o.apiAddr, "api-addr", defaultAPIAddr, "host:port where the kube API listens")
	forRoles(fs, "api-addr", roleRoot)
	fs.StringVar(&o.linkAddr, "link-addr", defaultLinkAddr, "host:port where child relays dial in; a region on the same host as its parent or another region needs its own")
	forRoles(fs, "link-addr", roleRoot, roleRegion)
	fs.StringSliceVar(&o.tlsSANs, "tls-san", nil, "more DNS names or IP addresses for the serving certificate of the kube API and the link, host,...: the names clients and child relays dial (a Service's, a load balancer's)")
	forRoles(fs, "tls-san", roleRoot)

	fs.StringVar(&o.raftAddr, "raft-addr", "", "host:port where this root replica listens for Raft and forwarded writes (TLS); makes the root one replica of a cluster (docs/ha.md)")
	forRoles(fs, "raft-addr", roleRoot)
	fs.StringVar(&o.peerAddr, "peer-addr", "", "host:port where this root replica gossips with the others, or this region with its sibling regions (UDP and TCP); required with --raft-addr")
	forRoles(fs, "peer-addr", roleRoot, roleRegion)
	fs.StringSliceVar(&o.join, "join", nil, "gossip addresses (--peer-addr) of other root replicas or sibling regions, host:port,...; any one suffices")
	forRoles(fs, "join", roleRoot, roleRegion)
	fs.IntVar(&o.bootstrapExpect, "bootstrap-expect", 1, "how many root replicas form a new cluster; they bootstrap once that many see each other")
	forRoles(fs, "bootstrap-expect", roleRoot)
	fs.StringVar(&o.clusterID, "cluster-id", "", "name of the replicated root's cluster (default: derived from the CA certificate)")
	forRoles(fs, "cluster-id", roleRoot)
	fs.StringVar(&o.treeName, "tree-name", server.DefaultTreeName, "the replicated root's name in the relay tree, the same on every replica, which children's certificates and paths start with; a root grown from a single one keeps that one's --name here")
	forRoles(fs, "tree-name", roleRoot)
	fs.Uint64Var(&o.snapshotThreshold, "snapshot-threshold", consensus.DefaultSnapshotThreshold, "how many Raft log entries since the last snapshot make a root replica take a new one")
	forRoles(fs, "snapshot-threshold", roleRoot)
	fs.DurationVar(&o.snapshotInterval, "snapshot-interval", consensus.DefaultSnapshotInterval, "how often a root replica checks --snapshot-threshold (after a random time between it and twice it)")
	forRoles(fs, "snapshot-interval", roleRoot)
	fs.Uint64Var(&o.trailingLogs, "trailing-logs", consensus.DefaultTrailingLogs, "how many Raft log entries a snapshot leaves for replicas a little behind; one further behind installs the snapshot")
	forRoles(fs, "trailing-logs", roleRoot)
	fs.IntVar(&o.raftMultiplier, "raft-multiplier", 1, "scale of Raft's timers (1 s heartbeat and election timeouts at 1), 1 to 10: higher rides out replicas short of CPU, with a slower failover")
	forRoles(fs, "raft-multiplier", roleRoot)

	fs.DurationVar(&o.statusWindow, "status-window", server.DefaultStatusWindow, "the longest that reports from below must stay quiet before a region merges its children's and the root rewrites CombinedStatus and placement status (an isolated change's wait 1/200 of it; at most 5 windows under a stream of them)")
	forRoles(fs, "status-window", roleRoot, roleRegion)

	fs.StringSliceVar(&o.parents, "parent", nil, "link addresses of the parent relay, host:port,... (any of them; required); the siblings the parent announces are dialed after them")
	forRoles(fs, "parent", roleRegion, roleEdge)
	fs.StringVar(&o.joinToken, "join-token", "", "join token from 'relay token create' at the root; needed only until the relay has joined")
	forRoles(fs, "join-token", roleRegion, roleEdge)
	fs.StringVar(&o.joinTokenFile, "join-token-file", "", "file holding the join token (a mounted Secret), instead of --join-token; read at start, which fails if it is missing or empty")
	forRoles(fs, "join-token-file", roleRegion, roleEdge)
	fs.StringVar(&o.proxy, "proxy", "", "http(s) URL of an HTTP CONNECT proxy for the link to the parent (default: QUIC, or HTTPS_PROXY when UDP is blocked)")
	forRoles(fs, "proxy", roleRegion, roleEdge)
	fs.StringVar(&o.kubeconfig, "kubeconfig", "", "kubeconfig of the cluster this edge applies its inbox to (server-side apply) and reports from (default: the cluster the edge runs in as a pod, with its ServiceAccount)")
	forRoles(fs, "kubeconfig", roleEdge)
	fs.BoolVar(&o.virtualCluster, "virtual-cluster", false, "sync an in-memory virtual cluster (with a simulated kubelet) instead of a real one")
	forRoles(fs, "virtual-cluster", roleEdge)
	fs.StringToStringVar(&o.labels, "labels", nil, "labels of this edge's cluster, k=v,... (Kubernetes label keys and values)")
	forRoles(fs, "labels", roleEdge)
	fs.StringVar(&o.statusAddr, "status-addr", "", "host:port serving /metrics, /healthz, /readyz (joined; a region serving its children) and /debug/inbox, over HTTP (off when empty)")
	forRoles(fs, "status-addr", roleRegion, roleEdge)
	fs.StringVar(&o.pprofAddr, "pprof", "", "loopback host:port serving the runtime profiles, net/http/pprof (127.0.0.1:6060; off when empty)")
	fs.IntVar(&o.maxProxyStreams, "max-proxy-streams", session.DefaultMaxProxyStreams, "how many requests to destinations (/destinations/<name>/...) may be open at once on one child's link; more get 429")
	forRoles(fs, "max-proxy-streams", roleRoot, roleRegion)
	fs.StringVar(&o.proxyAuditLog, "proxy-audit-log", "", `file where every request to a destination is logged, a JSON line each: user, destination, verb, path, status, duration (default "<data-dir>/destinations-audit.log")`)
	forRoles(fs, "proxy-audit-log", roleRoot)
	fs.StringVar(&o.impersonationPrefix, "impersonation-prefix", destproxy.DefaultUserPrefix, `prefix of the user name and groups that requests from the root's users impersonate at this edge's cluster ("-" for none)`)
	forRoles(fs, "impersonation-prefix", roleEdge)
	fs.StringSliceVar(&o.impersonationGroups, "impersonation-group", nil, "groups added, as they are, to every user that requests from the root impersonate at this edge's cluster, group,...")
	forRoles(fs, "impersonation-group", roleEdge)
	fs.DurationVar(&o.parentTimeout, "parent-timeout", link.DefaultConfig().MaxIdleTimeout, "how long the link to the parent may stay silent before the parent, or one of its siblings, is dialed again")
	forRoles(fs, "parent-timeout", roleRegion, roleEdge)
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
	if o.maxProxyStreams < 1 {
		errs = append(errs, flagErrorf("max-proxy-streams", "must be at least 1, not %d", o.maxProxyStreams))
	}
	if o.pprofAddr != "" {
		if err := checkPprofAddr(o.pprofAddr); err != nil {
			errs = append(errs, flagErrorf("pprof", "%v", err))
		}
	}
	if o.statusWindow < server.MinStatusWindow || o.statusWindow > server.MaxStatusWindow {
		errs = append(errs, flagErrorf("status-window", "must be from %s to %s, not %s", server.MinStatusWindow, server.MaxStatusWindow, o.statusWindow))
	}
	if o.role == roleRoot {
		return append(errs, o.validateRoot(fs)...)
	}
	return append(errs, o.validateChild(fs)...)
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
	for _, h := range o.tlsSANs {
		if ip, err := netip.ParseAddr(h); (err != nil && len(validation.IsDNS1123Subdomain(h)) > 0) || (err == nil && ip.Zone() != "") {
			errs = append(errs, flagErrorf("tls-san", "%q is neither an IP address nor a lower-case DNS name", h))
		}
	}
	return append(errs, o.validateReplica(fs)...)
}

// validateReplica checks the flags of a replicated root: without
// --raft-addr none of the others may be given.
func (o *options) validateReplica(fs *pflag.FlagSet) []error {
	var errs []error
	if o.raftAddr == "" {
		for _, name := range []string{"peer-addr", "join", "bootstrap-expect", "cluster-id", "tree-name", "snapshot-threshold", "snapshot-interval", "trailing-logs", "raft-multiplier"} {
			if fs.Changed(name) {
				errs = append(errs, flagErrorf(name, "only for a replicated root: give --raft-addr too"))
			}
		}
		return errs
	}
	if err := checkListenAddr(o.raftAddr); err != nil {
		errs = append(errs, flagErrorf("raft-addr", "%v", err))
	} else if h, _, _ := net.SplitHostPort(o.raftAddr); wildcard(h) {
		errs = append(errs, flagErrorf("raft-addr", "%q listens on every interface: give the address peers reach this replica at", o.raftAddr))
	}
	switch {
	case o.peerAddr == "":
		errs = append(errs, flagErrorf("peer-addr", "required with --raft-addr: the host:port where this replica gossips"))
	case checkListenAddr(o.peerAddr) != nil:
		errs = append(errs, flagErrorf("peer-addr", "%v", checkListenAddr(o.peerAddr)))
	case sameListener(o.peerAddr, o.raftAddr) && checkListenAddr(o.raftAddr) == nil:
		errs = append(errs, flagErrorf("peer-addr", "%s collides with --raft-addr=%s", o.peerAddr, o.raftAddr))
	}
	for _, other := range []string{"api-addr", "link-addr"} {
		if checkListenAddr(o.raftAddr) == nil && sameListener(o.raftAddr, fs.Lookup(other).Value.String()) {
			errs = append(errs, flagErrorf("raft-addr", "%s collides with --%s=%s", o.raftAddr, other, fs.Lookup(other).Value))
		}
	}
	for _, j := range o.join {
		if err := checkDialAddr(j); err != nil {
			errs = append(errs, flagErrorf("join", "%v", err))
		}
	}
	switch {
	case o.bootstrapExpect < 1:
		errs = append(errs, flagErrorf("bootstrap-expect", "must be at least 1, not %d", o.bootstrapExpect))
	case o.bootstrapExpect > 1 && len(o.join) == 0:
		errs = append(errs, flagErrorf("bootstrap-expect", "%d replicas cannot find each other without --join", o.bootstrapExpect))
	}
	if o.clusterID != "" && len(validation.IsDNS1123Label(o.clusterID)) > 0 {
		errs = append(errs, flagErrorf("cluster-id", "%q is not a DNS label", o.clusterID))
	}
	if len(validation.IsDNS1123Label(o.treeName)) > 0 {
		errs = append(errs, flagErrorf("tree-name", "%q is not a DNS label", o.treeName))
	}
	if o.snapshotThreshold < 1 {
		errs = append(errs, flagErrorf("snapshot-threshold", "must be at least 1, not %d", o.snapshotThreshold))
	}
	if o.snapshotInterval < consensus.MinSnapshotInterval {
		errs = append(errs, flagErrorf("snapshot-interval", "must be at least %s, not %s", consensus.MinSnapshotInterval, o.snapshotInterval))
	}
	if o.raftMultiplier < 1 || o.raftMultiplier > consensus.MaxRaftMultiplier {
		errs = append(errs, flagErrorf("raft-multiplier", "must be from 1 to %d, not %d", consensus.MaxRaftMultiplier, o.raftMultiplier))
	}
	if o.trailingLogs < 1 {
		errs = append(errs, flagErrorf("trailing-logs", "must be at least 1, not %d", o.trailingLogs))
	}
	return errs
}

// validateChild checks the flags of a region or edge relay. Flags of other
// roles were refused by validate already.
func (o *options) validateChild(fs *pflag.FlagSet) []error {
	var errs []error
	if !fs.Changed("name") {
		errs = append(errs, flagErrorf("name", "required with --role=%s: a DNS label unique among the relay's siblings", o.role))
	}
	if o.statusAddr != "" {
		if err := checkListenAddr(o.statusAddr); err != nil {
			errs = append(errs, flagErrorf("status-addr", "%v", err))
		}
	}
	parentsOK := len(o.parents) > 0
	if !parentsOK {
		errs = append(errs, flagErrorf("parent", "required with --role=%s: the link address (host:port) of the parent relay", o.role))
	}
	for _, p := range o.parents {
		if err := checkDialAddr(p); err != nil {
			errs = append(errs, flagErrorf("parent", "%v", err))
			parentsOK = false
		}
	}
	if o.proxy != "" {
		if err := checkProxyURL(o.proxy); err != nil {
			errs = append(errs, flagErrorf("proxy", "%v", err))
		}
	}
	if o.joinTokenFile != "" {
		if fs.Changed("join-token") {
			errs = append(errs, flagErrorf("join-token-file", "give either --join-token or --join-token-file, not both"))
		} else if tok, err := readTokenFile(o.joinTokenFile); err != nil {
			errs = append(errs, flagErrorf("join-token-file", "%v", err))
		} else {
			o.joinToken = tok
		}
	}
	if o.parentTimeout < time.Second {
		errs = append(errs, flagErrorf("parent-timeout", "must be at least 1s, not %s", o.parentTimeout))
	}
	switch o.role {
	case roleRegion:
		if err := checkListenAddr(o.linkAddr); err != nil {
			errs = append(errs, flagErrorf("link-addr", "%v", err))
		} else if parentsOK {
			for _, p := range o.parents {
				if sameHostPort(o.linkAddr, p) {
					errs = append(errs, flagErrorf("link-addr", "%s is the address of --parent=%s: a region on the same host as its parent needs its own --link-addr", o.linkAddr, p))
					break
				}
			}
		}
		errs = append(errs, o.validateSiblings()...)
	case roleEdge:
		switch {
		case o.kubeconfig == "" && !o.virtualCluster:
			// Neither: the cluster the edge runs in, as a pod.
			if _, err := rest.InClusterConfig(); err != nil {
				errs = append(errs, flagErrorf("kubeconfig", "not given, and no in-cluster configuration (%v): give --kubeconfig=FILE or --virtual-cluster, or run the edge in a pod", err))
			} else {
				o.inCluster = true
			}
		case o.kubeconfig != "" && o.virtualCluster:
			errs = append(errs, flagErrorf("kubeconfig", "give either --kubeconfig or --virtual-cluster, not both"))
		case o.kubeconfig != "":
			if err := checkReadableFile(o.kubeconfig); err != nil {
				errs = append(errs, flagErrorf("kubeconfig", "%v", err))
			}
		}
		for _, k := range slices.Sorted(maps.Keys(o.labels)) {
			if msgs := validation.IsQualifiedName(k); len(msgs) > 0 {
				errs = append(errs, flagErrorf("labels", "key %q is not a valid label key: %s", k, strings.Join(msgs, "; ")))
			}
			if msgs := validation.IsValidLabelValue(o.labels[k]); len(msgs) > 0 {
				errs = append(errs, flagErrorf("labels", "value %q of %s is not a valid label value: %s", o.labels[k], k, strings.Join(msgs, "; ")))
			}
		}
	}
	return errs
}

// validateSiblings checks a region's gossip with its siblings: --join
// needs --peer-addr, which needs its own port.
func (o *options) validateSiblings() []error {
	var errs []error
	switch {
	case o.peerAddr == "":
		if len(o.join) > 0 {
			errs = append(errs, flagErrorf("join", "a region joins its siblings from its own gossip address: give --peer-addr too"))
		}
		return errs
	case checkListenAddr(o.peerAddr) != nil:
		errs = append(errs, flagErrorf("peer-addr", "%v", checkListenAddr(o.peerAddr)))
	case checkListenAddr(o.linkAddr) == nil && sameListener(o.peerAddr, o.linkAddr):
		errs = append(errs, flagErrorf("peer-addr", "%s collides with --link-addr=%s", o.peerAddr, o.linkAddr))
	}
	for _, j := range o.join {
		if err := checkDialAddr(j); err != nil {
			errs = append(errs, flagErrorf("join", "%v", err))
		}
	}
	return errs
}

// rootConfig returns the configuration of a root relay from validated
// options.
func (o *options) rootConfig() server.Config {
	cfg := server.Config{
		Name:     o.name,
		DataDir:  o.dataDir,
		APIAddr:  o.apiAddr,
		LinkAddr: o.linkAddr,

		ProxyAuditLog: o.proxyAuditLog,
	}
	if o.maxProxyStreams != session.DefaultMaxProxyStreams {
		cfg.MaxProxyStreams = o.maxProxyStreams // zero: the default
	}
	if len(o.tlsSANs) > 0 {
		cfg.ServingNames = slices.Clone(o.tlsSANs)
	}
	if o.statusWindow != server.DefaultStatusWindow {
		cfg.StatusWindow = o.statusWindow // zero: the default
	}
	if o.raftAddr != "" {
		cfg.HA = server.Replication{
			RaftAddr: o.raftAddr, PeerAddr: o.peerAddr, Join: slices.Clone(o.join),
			BootstrapExpect: o.bootstrapExpect, ClusterID: o.clusterID,
			SnapshotThreshold: o.snapshotThreshold, SnapshotInterval: o.snapshotInterval, TrailingLogs: o.trailingLogs,
			RaftMultiplier: o.raftMultiplier,
		}
		if o.treeName != server.DefaultTreeName {
			cfg.HA.TreeName = o.treeName // empty: the default
		}
	}
	return cfg
}

// childConfig returns the configuration of a region or edge relay from
// validated options.
func (o *options) childConfig() server.ChildConfig {
	cfg := server.ChildConfig{
		Role:       pki.RoleRegion,
		Name:       o.name,
		DataDir:    o.dataDir,
		Parents:    slices.Clone(o.parents),
		JoinToken:  o.joinToken,
		StatusAddr: o.statusAddr,
	}
	if o.parentTimeout != link.DefaultConfig().MaxIdleTimeout {
		cfg.ParentTimeout = o.parentTimeout // zero: the link's default
	}
	if o.proxy != "" {
		cfg.Proxy, _ = url.Parse(o.proxy) // checked by validateChild
	}
	switch o.role {
	case roleRegion:
		cfg.LinkAddr = o.linkAddr
		cfg.PeerAddr, cfg.Join = o.peerAddr, slices.Clone(o.join)
		if o.maxProxyStreams != session.DefaultMaxProxyStreams {
			cfg.MaxProxyStreams = o.maxProxyStreams // zero: the default
		}
		if o.statusWindow != server.DefaultStatusWindow {
			cfg.StatusWindow = o.statusWindow // zero: the default
		}
	case roleEdge:
		cfg.Role = pki.RoleEdge
		cfg.VirtualCluster = o.virtualCluster
		cfg.Kubeconfig = o.kubeconfig
		cfg.InCluster = o.inCluster
		if o.impersonationPrefix != destproxy.DefaultUserPrefix {
			cfg.ImpersonationPrefix = o.impersonationPrefix // empty: the default
		}
		cfg.ImpersonationGroups = slices.Clone(o.impersonationGroups)
		if len(o.labels) > 0 {
			cfg.Labels = maps.Clone(o.labels)
		}
	}
	return cfg
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

// checkDialAddr reports what is wrong with an address to dial: a valid
// listen address (see checkListenAddr) with a host and a non-zero port.
func checkDialAddr(addr string) error {
	if err := checkListenAddr(addr); err != nil {
		return err
	}
	host, p, _ := net.SplitHostPort(addr)
	if host == "" || wildcard(host) {
		return fmt.Errorf("%q has no host to dial", addr)
	}
	if port(p) == 0 {
		return fmt.Errorf("%q has no port to dial (0)", addr)
	}
	return nil
}

// checkProxyURL reports what is wrong with an HTTP CONNECT proxy URL.
func checkProxyURL(s string) error {
	u, err := url.Parse(s)
	if err != nil {
		return fmt.Errorf("%q is not a URL", s)
	}
	if u.Scheme != "http" && u.Scheme != "https" {
		return fmt.Errorf("%q is not an http:// or https:// URL", s)
	}
	if u.Host == "" || u.Hostname() == "" {
		return fmt.Errorf("%q has no host", s)
	}
	if p := u.Port(); p != "" {
		if _, err := strconv.ParseUint(p, 10, 16); err != nil {
			return fmt.Errorf("port %q in %q is not a number from 0 to 65535", p, s)
		}
	}
	return nil
}

// checkReadableFile reports why path cannot be read as a regular file.
func checkReadableFile(path string) error {
	f, err := os.Open(path)
	if err != nil {
		if pe, ok := errors.AsType[*os.PathError](err); ok {
			err = pe.Err
		}
		return fmt.Errorf("cannot read %s: %v", path, err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return fmt.Errorf("cannot read %s: %v", path, err)
	}
	if fi.IsDir() {
		return fmt.Errorf("%s is a directory, not a kubeconfig file", path)
	}
	return nil
}

// maxTokenFile bounds what readTokenFile reads: a join token is about a
// kilobyte.
const maxTokenFile = 64 << 10

// readTokenFile returns the token a file holds, without surrounding
// white space (a Secret's key mounted as a file), or why it has none.
func readTokenFile(path string) (string, error) {
	f, err := os.Open(path)
	var b []byte
	if err == nil {
		b, err = io.ReadAll(io.LimitReader(f, maxTokenFile+1))
		f.Close()
	}
	if err != nil {
		if pe, ok := errors.AsType[*os.PathError](err); ok {
			err = pe.Err
		}
		return "", fmt.Errorf("cannot read %s: %v", path, err)
	}
	tok := strings.TrimSpace(string(b))
	switch {
	case len(b) > maxTokenFile:
		return "", fmt.Errorf("%s is larger than %d bytes: not a join token", path, maxTokenFile)
	case tok == "":
		return "", fmt.Errorf("%s is empty", path)
	case strings.ContainsAny(tok, " \t\r\n"):
		return "", fmt.Errorf("%s holds more than one line or word: not a join token", path)
	}
	return tok, nil
}

// sameHostPort reports whether a region's listen address is the very
// address of its parent, as with the default --link-addr and a parent root
// on the same host: same non-zero port and the same host, or a region
// listening on every interface and a parent on loopback.
func sameHostPort(listen, parent string) bool {
	hl, pl, _ := net.SplitHostPort(listen)
	hp, pp, _ := net.SplitHostPort(parent)
	if port(pl) != port(pp) || port(pl) == 0 {
		return false
	}
	if canonicalHost(hl) == canonicalHost(hp) {
		return true
	}
	ip, err := netip.ParseAddr(hp)
	return wildcard(hl) && (strings.EqualFold(hp, "localhost") || (err == nil && ip.IsLoopback()))
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
