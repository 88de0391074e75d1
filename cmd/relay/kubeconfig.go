package main

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/spf13/cobra"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/canopy-dev/canopy/relay/kubeapi"
	"github.com/canopy-dev/canopy/relay/pki"
	"github.com/canopy-dev/canopy/relay/server"
)

func newKubeconfigCommand() *cobra.Command {
	var dataDir, space string
	cmd := &cobra.Command{
		Use:   "kubeconfig [--data-dir=DIR] [--space=NAME]",
		Short: "Print the admin kubeconfig of a root relay",
		Long: `kubeconfig prints DIR/admin.kubeconfig, which a root relay writes with one
context per space, or with --space only that space's context, made current.
The kubeconfig holds the admin token: keep it private.`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if dataDir == "" {
				return usageError{flagErrorf("data-dir", "must not be empty")}
			}
			if cmd.Flags().Changed("space") && space == "" {
				return usageError{flagErrorf("space", "must not be empty")}
			}
			path := filepath.Join(dataDir, pki.AdminKubeconfigFile)
			if _, err := os.Stat(path); errors.Is(err, fs.ErrNotExist) {
				return fmt.Errorf("no %s in %s: start a root with --data-dir=%s first", pki.AdminKubeconfigFile, dataDir, dataDir)
			}
			data, err := kubeconfigFor(path, space)
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
	return cmd
}

func isChildSpace(space string) bool { _, ok := server.ChildOfSpace(space); return ok }

// kubeconfigFor returns the kubeconfig at path, reduced to the context of
// space unless space is empty.
func kubeconfigFor(path, space string) ([]byte, error) {
	if space == "" {
		return os.ReadFile(path)
	}
	cfg, err := pki.ReadKubeconfigForSpace(path, space)
	if e, ok := errors.AsType[*pki.UnknownSpaceError](err); ok && isChildSpace(space) && slices.Contains(e.Known, kubeapi.DefaultSpace) {
		// The root lists only its first children's spaces
		// (server.KubeconfigChildren); the others are at the same URLs.
		cfg, err = pki.DeriveKubeconfigForSpace(path, kubeapi.DefaultSpace, space)
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
