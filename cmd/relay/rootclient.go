package main

import (
	"errors"
	"fmt"
	"io/fs"
	"net/url"
	"os"
	"path/filepath"

	"github.com/spf13/pflag"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/canopy-dev/canopy/relay/pki"
)

// rootFlags are how a subcommand reaches a running root as its admin:
// the admin kubeconfig in a root's data directory, or another kubeconfig,
// and optionally another replica's URL.
type rootFlags struct {
	dataDir, kubeconfig, server string
}

// add adds the flags to fs; what says what is done with the replica.
func (f *rootFlags) add(fs *pflag.FlagSet, what string) {
	fs.StringVar(&f.dataDir, "data-dir", defaultDataDir(defaultName), "data directory of a root replica, whose admin.kubeconfig is used")
	fs.StringVar(&f.kubeconfig, "kubeconfig", "", "kubeconfig of a root's admin (instead of --data-dir)")
	fs.StringVar(&f.server, "server", "", "https URL of the replica to "+what+" (default: the kubeconfig's current server)")
}

// restConfig checks the flags and returns the admin's client configuration.
func (f *rootFlags) restConfig() (*rest.Config, error) {
	if f.server != "" {
		if u, err := url.Parse(f.server); err != nil || u.Scheme != "https" || u.Host == "" {
			return nil, usageError{flagErrorf("server", "%q is not an https:// URL", f.server)}
		}
	}
	path := f.kubeconfig
	if path == "" {
		if f.dataDir == "" {
			return nil, usageError{flagErrorf("data-dir", "must not be empty")}
		}
		path = filepath.Join(f.dataDir, pki.AdminKubeconfigFile)
		if _, err := os.Stat(path); errors.Is(err, fs.ErrNotExist) {
			return nil, fmt.Errorf("no %s in %s: start a root with --data-dir=%s first, or pass --kubeconfig", pki.AdminKubeconfigFile, f.dataDir, f.dataDir)
		}
	}
	cc := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(
		&clientcmd.ClientConfigLoadingRules{ExplicitPath: path},
		&clientcmd.ConfigOverrides{ClusterInfo: clientcmdapi.Cluster{Server: f.server}})
	rc, err := cc.ClientConfig()
	if err != nil {
		return nil, fmt.Errorf("reading %s: %w", path, err)
	}
	return rc, nil
}
