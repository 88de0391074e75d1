package server

import (
	"cmp"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"time"

	metav1validation "k8s.io/apimachinery/pkg/apis/meta/v1/validation"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/canopy-dev/canopy/consensus"
	"github.com/canopy-dev/canopy/relay/pki"
)

// Config configures a root relay. cmd/relay fills it from flags.
type Config struct {
	// Name is this relay's name (--name).
	Name string
	// DataDir holds the PKI, the log and admin.kubeconfig (--data-dir).
	DataDir string
	// APIAddr is where the kube API listens (--api-addr).
	APIAddr string
	// LinkAddr is where children dial in (--link-addr).
	LinkAddr string
	// ServingNames are more DNS names or IP addresses for the serving
	// certificate of both listeners (--tls-san), besides their hosts and
	// Name: those that clients and children dial, such as a Service's.
	ServingNames []string
	// Network, when set, carries the children's links instead of the
	// host's sockets (see Network); LinkAddr is then an address of it.
	Network *Network
	// HA, when its RaftAddr is set, makes this root one replica of a
	// cluster (docs/ha.md); the zero value is a single root.
	HA Replication
	// StatusWindow (--status-window) bounds how long reports from below
	// must stay quiet before the reported state they change
	// (CombinedStatus, placement status, singleton status) is written
	// again (reports.Window: a two-hundredth of it after a quarter of it
	// without reports, up to all of it under a stream, which waits at most
	// reports.MaxWaits windows): the rate limit of those writes. Zero:
	// DefaultStatusWindow.
	StatusWindow time.Duration
	// ChildCertValidity is how long the certificates the root issues to
	// its children, when they join and when they renew, are valid. Zero:
	// pki.ChildCertValidity (a year).
	ChildCertValidity time.Duration
	// MaxProxyStreams bounds the requests to destinations open at once on
	// one child's link (--max-proxy-streams); beyond it they get 429. Zero:
	// session.DefaultMaxProxyStreams.
	MaxProxyStreams int
	// ProxyAuditLog is the file where every request to a destination is
	// written, a JSON line each (--proxy-audit-log). Empty:
	// DataDir/destinations-audit.log.
	ProxyAuditLog string
}

// Complete fills in the defaults of the fields left zero: StatusWindow,
// ProxyAuditLog and, for a replica, HA.TreeName. OpenContext calls it.
func (cfg *Config) Complete() {
	cfg.StatusWindow = cmp.Or(cfg.StatusWindow, DefaultStatusWindow)
	if cfg.ProxyAuditLog == "" && cfg.DataDir != "" {
		cfg.ProxyAuditLog = filepath.Join(cfg.DataDir, "destinations-audit.log")
	}
	if cfg.HA.Enabled() {
		cfg.HA.TreeName = cmp.Or(cfg.HA.TreeName, DefaultTreeName)
	}
}

// Validate returns every problem of a completed Config, each naming its
// field. OpenContext refuses a Config with any before it creates or opens
// anything.
func (cfg *Config) Validate() []error {
	errs := checkName(field.NewPath("Name"), cfg.Name)
	if cfg.DataDir == "" {
		errs = append(errs, field.Required(field.NewPath("DataDir"), "the relay's data directory"))
	}
	errs = append(errs, checkAddr(field.NewPath("APIAddr"), cfg.APIAddr)...)
	errs = append(errs, checkAddr(field.NewPath("LinkAddr"), cfg.LinkAddr)...)
	for i, h := range cfg.ServingNames {
		if net.ParseIP(h) == nil && len(validation.IsDNS1123Subdomain(h)) > 0 {
			errs = append(errs, field.Invalid(field.NewPath("ServingNames").Index(i), h, "must be an IP address or a lower-case DNS name"))
		}
	}
	errs = append(errs, checkStatusWindow(field.NewPath("StatusWindow"), cfg.StatusWindow)...)
	errs = append(errs, checkNotNegative(field.NewPath("ChildCertValidity"), cfg.ChildCertValidity, "pki.ChildCertValidity")...)
	if cfg.MaxProxyStreams < 0 {
		errs = append(errs, field.Invalid(field.NewPath("MaxProxyStreams"), cfg.MaxProxyStreams, "must not be negative (0: the default)"))
	}
	ha, p := cfg.HA, field.NewPath("HA")
	if !ha.Enabled() {
		for _, f := range []struct {
			name string
			set  bool
		}{{"PeerAddr", ha.PeerAddr != ""}, {"Join", len(ha.Join) > 0}, {"BootstrapExpect", ha.BootstrapExpect > 1}} {
			if f.set {
				errs = append(errs, field.Forbidden(p.Child(f.name), "only for a replica: set HA.RaftAddr too"))
			}
		}
		return errs
	}
	errs = append(errs, checkAddr(p.Child("RaftAddr"), ha.RaftAddr)...)
	if ha.PeerAddr == "" {
		errs = append(errs, field.Required(p.Child("PeerAddr"), "a replica gossips with the others there"))
	}
	errs = append(errs, checkAddr(p.Child("PeerAddr"), ha.PeerAddr)...)
	for i, j := range ha.Join {
		errs = append(errs, checkAddr(p.Child("Join").Index(i), j)...)
	}
	switch {
	case ha.BootstrapExpect < 0:
		errs = append(errs, field.Invalid(p.Child("BootstrapExpect"), ha.BootstrapExpect, "must not be negative"))
	case ha.BootstrapExpect > 1 && len(ha.Join) == 0:
		errs = append(errs, field.Invalid(p.Child("BootstrapExpect"), ha.BootstrapExpect, "replicas cannot find each other without HA.Join"))
	}
	if ha.RaftMultiplier < 0 || ha.RaftMultiplier > consensus.MaxRaftMultiplier {
		errs = append(errs, field.Invalid(p.Child("RaftMultiplier"), ha.RaftMultiplier, fmt.Sprintf("must be from 1 to %d (0: 1)", consensus.MaxRaftMultiplier)))
	}
	if ha.TreeName != "" {
		errs = append(errs, checkName(p.Child("TreeName"), ha.TreeName)...)
	}
	return errs
}

// Complete fills in the defaults of the fields left zero: StatusWindow,
// and StoreHistory of an InMemory child. OpenChild calls it.
func (cfg *ChildConfig) Complete() {
	cfg.StatusWindow = cmp.Or(cfg.StatusWindow, DefaultStatusWindow)
	if cfg.StoreHistory == 0 && cfg.InMemory {
		cfg.StoreHistory = DefaultInMemoryRegionHistory
		if cfg.Role == pki.RoleEdge {
			cfg.StoreHistory = DefaultInMemoryEdgeHistory
		}
	}
}

// Validate returns every problem of a completed ChildConfig, each naming
// its field. OpenChild refuses a ChildConfig with any before it creates or
// opens anything.
func (cfg *ChildConfig) Validate() []error {
	var errs []error
	if cfg.Role != pki.RoleRegion && cfg.Role != pki.RoleEdge {
		errs = append(errs, field.NotSupported(field.NewPath("Role"), cfg.Role.String(), []string{pki.RoleRegion.String(), pki.RoleEdge.String()}))
	}
	errs = append(errs, checkName(field.NewPath("Name"), cfg.Name)...)
	if cfg.DataDir == "" {
		errs = append(errs, field.Required(field.NewPath("DataDir"), "the relay's data directory"))
	}
	if len(cfg.Parents) == 0 {
		errs = append(errs, field.Required(field.NewPath("Parents"), "the link address (host:port) of the parent relay"))
	}
	for i, p := range cfg.Parents {
		errs = append(errs, checkAddr(field.NewPath("Parents").Index(i), p)...)
		if p == "" {
			errs = append(errs, field.Required(field.NewPath("Parents").Index(i), "host:port"))
		}
	}
	errs = append(errs, checkAddr(field.NewPath("LinkAddr"), cfg.LinkAddr)...)
	errs = append(errs, checkAddr(field.NewPath("PeerAddr"), cfg.PeerAddr)...)
	if len(cfg.Join) > 0 && cfg.PeerAddr == "" {
		errs = append(errs, field.Forbidden(field.NewPath("Join"), "a region joins its siblings from its own gossip address: set PeerAddr too"))
	}
	for i, j := range cfg.Join {
		errs = append(errs, checkAddr(field.NewPath("Join").Index(i), j)...)
	}
	errs = append(errs, checkNotNegative(field.NewPath("ParentTimeout"), cfg.ParentTimeout, "the link's default")...)
	errs = append(errs, checkNotNegative(field.NewPath("RenewBefore"), cfg.RenewBefore, "two thirds into the certificate's lifetime")...)
	errs = append(errs, checkNotNegative(field.NewPath("ChildCertValidity"), cfg.ChildCertValidity, "pki.ChildCertValidity")...)
	if cfg.ChildCertValidity != 0 && cfg.Role == pki.RoleEdge {
		errs = append(errs, field.Forbidden(field.NewPath("ChildCertValidity"), "only for a region: an edge issues no certificates"))
	}
	errs = append(errs, checkStatusWindow(field.NewPath("StatusWindow"), cfg.StatusWindow)...)
	switch {
	case cfg.MaxProxyStreams < 0:
		errs = append(errs, field.Invalid(field.NewPath("MaxProxyStreams"), cfg.MaxProxyStreams, "must not be negative (0: the default)"))
	case cfg.MaxProxyStreams > 0 && cfg.Role == pki.RoleEdge:
		errs = append(errs, field.Forbidden(field.NewPath("MaxProxyStreams"), "only for a region: an edge opens no proxy streams"))
	}
	if cfg.Role == pki.RoleRegion && (cfg.ImpersonationPrefix != "" || len(cfg.ImpersonationGroups) > 0) {
		errs = append(errs, field.Forbidden(field.NewPath("ImpersonationPrefix"), "only for an edge: a region passes requests on"))
	}
	if cfg.Proxy != nil && (cfg.Proxy.Scheme != "http" && cfg.Proxy.Scheme != "https" || cfg.Proxy.Hostname() == "") {
		errs = append(errs, field.Invalid(field.NewPath("Proxy"), cfg.Proxy.String(), "must be an http:// or https:// URL with a host"))
	}
	switch {
	case cfg.VirtualCluster && cfg.Kubeconfig != "":
		errs = append(errs, field.Forbidden(field.NewPath("Kubeconfig"), "an edge syncs one cluster: set Kubeconfig or VirtualCluster, not both"))
	case cfg.InCluster && (cfg.VirtualCluster || cfg.Kubeconfig != ""):
		errs = append(errs, field.Forbidden(field.NewPath("InCluster"), "an edge syncs one cluster: set one of InCluster, Kubeconfig and VirtualCluster"))
	case cfg.InCluster && cfg.Role != pki.RoleEdge:
		errs = append(errs, field.Forbidden(field.NewPath("InCluster"), "only for an edge"))
	case cfg.Kubeconfig != "":
		if fi, err := os.Stat(cfg.Kubeconfig); err != nil || fi.IsDir() {
			errs = append(errs, field.Invalid(field.NewPath("Kubeconfig"), cfg.Kubeconfig, "must be a kubeconfig file that exists"))
		}
	}
	if cfg.RejectApply != nil && !cfg.VirtualCluster {
		errs = append(errs, field.Forbidden(field.NewPath("RejectApply"), "only with VirtualCluster"))
	}
	errs = append(errs, toErrors(metav1validation.ValidateLabels(cfg.Labels, field.NewPath("Labels")))...)
	if cfg.StoreHistory < 0 {
		errs = append(errs, field.Invalid(field.NewPath("StoreHistory"), cfg.StoreHistory, "must not be negative"))
	}
	return errs
}

// checkNotNegative checks a duration whose zero means zero (named).
func checkNotNegative(p *field.Path, d time.Duration, zero string) []error {
	if d < 0 {
		return []error{field.Invalid(p, d.String(), fmt.Sprintf("must not be negative (0: %s)", zero))}
	}
	return nil
}

// checkName checks a relay's name: a DNS label.
func checkName(p *field.Path, name string) []error {
	if name == "" {
		return []error{field.Required(p, "a DNS label")}
	}
	var errs []error
	for _, msg := range validation.IsDNS1123Label(name) {
		errs = append(errs, field.Invalid(p, name, msg))
	}
	return errs
}

// checkAddr checks an address, when given: host:port, the port a number.
func checkAddr(p *field.Path, addr string) []error {
	if addr == "" {
		return nil
	}
	_, port, err := net.SplitHostPort(addr)
	if err == nil {
		_, err = strconv.ParseUint(port, 10, 16)
	}
	if err != nil {
		return []error{field.Invalid(p, addr, "must be host:port, the port a number from 0 to 65535")}
	}
	return nil
}

// checkStatusWindow checks a status window: zero (the default) or from
// MinStatusWindow to MaxStatusWindow.
func checkStatusWindow(p *field.Path, w time.Duration) []error {
	if w != 0 && (w < MinStatusWindow || w > MaxStatusWindow) {
		return []error{field.Invalid(p, w.String(), fmt.Sprintf("must be from %s to %s", MinStatusWindow, MaxStatusWindow))}
	}
	return nil
}

func toErrors(list field.ErrorList) []error {
	errs := make([]error, len(list))
	for i, e := range list {
		errs[i] = e
	}
	return errs
}

// invalid is the error of Open or OpenChild for a configuration with
// problems (Validate): all of them, one per line.
func invalid(errs []error) error {
	return fmt.Errorf("server: invalid configuration:\n%w", errors.Join(errs...))
}
