package server

import "time"

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
	// Network, when set, carries the children's links instead of the
	// host's sockets (see Network); LinkAddr is then an address of it.
	Network *Network
	// HA, when its RaftAddr is set, makes this root one replica of a
	// cluster (docs/ha.md); the zero value is a single root.
	HA Replication
	// StatusWindow (--status-window) is how long reports from below must
	// stay quiet before the reported state they change (CombinedStatus,
	// placement status, singleton status) is written again, at most
	// reports.MaxWaits windows under a stream of them: the rate limit of
	// those writes. Zero: DefaultStatusWindow.
	StatusWindow time.Duration
}
