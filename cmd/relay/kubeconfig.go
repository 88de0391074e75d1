package main

import (
	"errors"
	"fmt"
	"io/fs"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/canopy-dev/canopy/relay/layout"
	"github.com/canopy-dev/canopy/relay/pki"
	"github.com/canopy-dev/canopy/relay/server"
)

func newKubeconfigCommand() *cobra.Command {
	var dataDir, space, destination, serverURL string
	cmd := &cobra.Command{
		Use:   "kubeconfig [--data-dir=DIR] [--space=NAME | --destination=NAME] [--server=URL]",
		Short: "Print the admin kubeconfig of a root relay",
		Long: `kubeconfig prints DIR/admin.kubeconfig, which a root relay writes with one
context per space, or with --space only that space's context, made current.
The file lists the spaces of the root's first children only; --space names
another child's space (mailbox-<child>, reports-<child>) only if the root,
asked through the API, has it, so the root must be running for those.
With --destination, the one context reaches that destination's cluster
through the root (/destinations/NAME): kubectl get, apply, logs, exec and
port-forward there as the admin, impersonated at the cluster (docs/user-guide.md).
Its server is the address the root listens on (--api-addr); --server gives
the one clients reach it at instead (a Service, a load balancer, a
port-forward), which the root's serving certificate must name (--tls-san).
The kubeconfig holds the admin token: keep it private.`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if dataDir == "" {
				return usageError{flagErrorf("data-dir", "must not be empty")}
			}
			if cmd.Flags().Changed("space") && space == "" {
				return usageError{flagErrorf("space", "must not be empty")}
			}
			if cmd.Flags().Changed("destination") {
				if space != "" {
					return usageError{flagErrorf("destination", "give either --space or --destination, not both")}
				}
				if errs := validation.IsDNS1123Subdomain(destination); len(errs) > 0 {
					return usageError{flagErrorf("destination", "%q is not a destination name: %s", destination, strings.Join(errs, "; "))}
				}
			}
			var server *url.URL
			if serverURL != "" {
				var err error
				if server, err = checkServerURL(serverURL); err != nil {
					return usageError{flagErrorf("server", "%v", err)}
				}
			}
			path := filepath.Join(dataDir, pki.AdminKubeconfigFile)
			if _, err := os.Stat(path); errors.Is(err, fs.ErrNotExist) {
				return fmt.Errorf("no %s in %s: start a root with --data-dir=%s first", pki.AdminKubeconfigFile, dataDir, dataDir)
			}
			data, err := kubeconfigFor(path, space)
			if destination != "" {
				data, err = destinationKubeconfig(path, destination)
			}
			if err == nil && server != nil {
				data, err = withServer(data, server)
			}
			if err != nil {
				return err
			}
			_, err = cmd.OutOrStdout().Write(data)
			return err
		},
	}
	fs := cmd.Flags()
	fs.StringVar(&dataDir, "data-dir", defaultDataDir(defaultName), "data directory of the root relay")
	fs.StringVar(&space, "space", "", "print only this space's context")
	fs.StringVar(&destination, "destination", "", "print a context that reaches this destination's cluster through the root")
	fs.StringVar(&serverURL, "server", "", "https://host:port where clients reach the root's kube API, instead of the address it listens on")
	return cmd
}

// checkServerURL parses --server: https, a host, nothing after the port.
func checkServerURL(s string) (*url.URL, error) {
	u, err := url.Parse(s)
	switch {
	case err != nil:
		return nil, fmt.Errorf("%q is not a URL", s)
	case u.Scheme != "https" || u.Host == "" || u.Hostname() == "":
		return nil, fmt.Errorf("%q is not https://host[:port]", s)
	case u.Path != "" && u.Path != "/", u.RawQuery != "", u.User != nil:
		return nil, fmt.Errorf("%q has more than https://host[:port]: each space's path is kept from the kubeconfig", s)
	}
	return u, nil
}

// withServer returns the kubeconfig data with every cluster's server at
// the host of server, each keeping its space's path.
func withServer(data []byte, server *url.URL) ([]byte, error) {
	cfg, err := clientcmd.Load(data)
	if err != nil {
		return nil, err
	}
	for _, c := range cfg.Clusters {
		u, err := url.Parse(c.Server)
		if err != nil {
			return nil, fmt.Errorf("server %q of the kubeconfig: %w", c.Server, err)
		}
		u.Scheme, u.Host = server.Scheme, server.Host
		c.Server = u.String()
	}
	return clientcmd.Write(*cfg)
}

func isChildSpace(space string) bool { _, ok := server.ChildOfSpace(space); return ok }

// kubeconfigFor returns the kubeconfig at path, reduced to the context of
// space unless space is empty.
func kubeconfigFor(path, space string) ([]byte, error) {
	if space == "" {
		return os.ReadFile(path)
	}
	cfg, err := pki.ReadKubeconfigForSpace(path, space)
	if e, ok := errors.AsType[*pki.UnknownSpaceError](err); ok && isChildSpace(space) && slices.Contains(e.Known, layout.DefaultSpace) {
		// The root lists only its first children's spaces
		// (server.KubeconfigChildren); the others are at the same URLs,
		// if the root has them: it is asked.
		if cfg, err = pki.DeriveKubeconfigForSpace(path, layout.DefaultSpace, space); err == nil {
			err = checkSpace(cfg, space, path)
		}
	} else if ok {
		known := "no spaces"
		if len(e.Known) > 0 {
			known = "spaces " + strings.Join(e.Known, ", ")
		}
		return nil, usageError{flagErrorf("space", "no space %q in %s, which has %s", space, path, known)}
	}
	if err != nil {
		return nil, err
	}
	return clientcmd.Write(*cfg)
}

// destinationKubeconfig returns a kubeconfig for destination dest, with
// the admin kubeconfig's credentials (at path).
func destinationKubeconfig(path, dest string) ([]byte, error) {
	cfg, err := pki.KubeconfigForDestination(path, layout.DefaultSpace, dest)
	if err != nil {
		return nil, err
	}
	return clientcmd.Write(*cfg)
}

// spaceCheckTimeout bounds how long checkSpace waits for the root.
const spaceCheckTimeout = 10 * time.Second

// checkSpace asks the root of cfg (a kubeconfig with the context of space
// only) whether space exists, for a space that the admin kubeconfig at
// path does not list. A root that answers 404 has no such space; one that
// cannot be reached cannot tell, and nothing is printed either way.
func checkSpace(cfg *clientcmdapi.Config, space, path string) error {
	rc, err := clientcmd.NewDefaultClientConfig(*cfg, nil).ClientConfig()
	if err != nil {
		return err
	}
	rc.Timeout = spaceCheckTimeout
	dc, err := discovery.NewDiscoveryClientForConfig(rc)
	if err != nil {
		return err
	}
	_, err = dc.ServerVersion()
	switch {
	case err == nil:
		return nil
	case apierrors.IsNotFound(err):
		return usageError{flagErrorf("space", "no space %q at the root %s (it has a mailbox- and a reports- space for each of its own children, none for relays further down)",
			space, strings.TrimSuffix(rc.Host, "/spaces/"+space))}
	default:
		return flagErrorf("space", "%q is not listed in %s and the root could not say whether it has it (start the root, or ask again): %v",
			space, path, oneLine(err))
	}
}

// oneLine joins the lines of err's message, so that an error stays one
// line of output.
func oneLine(err error) string {
	return strings.Join(strings.Fields(err.Error()), " ")
}
