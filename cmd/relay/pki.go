package main

import (
	"errors"
	"fmt"
	"io"
	"io/fs"

	"github.com/spf13/cobra"

	"github.com/canopy-dev/canopy/relay/pki"
)

// newPKICommand is "relay pki export|import": how the replicas of a root
// come to share one CA, admin token and ServiceAccount key (docs/ha.md).
func newPKICommand() *cobra.Command {
	var exportDir, importDir string
	export := &cobra.Command{
		Use:   "export [--data-dir=DIR] > bundle",
		Short: "Print the credentials every replica of a root shares (CA and its key, admin token, ServiceAccount key)",
		Long: `export prints, as one PEM bundle, the credentials that every replica of a
root must share: the CA certificate and key, the admin token and the key that
signs ServiceAccount tokens. The bundle holds the CA key: move it over a
secure channel and delete it afterwards ("relay pki import" reads it).`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if exportDir == "" {
				return usageError{flagErrorf("data-dir", "must not be empty")}
			}
			b, err := pki.ExportShared(pki.Dir(exportDir))
			if errors.Is(err, fs.ErrNotExist) {
				return fmt.Errorf("no root credentials in %s: start a root with --data-dir=%s first", exportDir, exportDir)
			}
			if err != nil {
				return err
			}
			_, err = cmd.OutOrStdout().Write(b)
			return err
		},
	}
	export.Flags().StringVar(&exportDir, "data-dir", defaultDataDir(defaultName), "data directory of the root replica to export from")
	imp := &cobra.Command{
		Use:   "import --data-dir=DIR < bundle",
		Short: "Install a bundle from 'relay pki export' in a new replica's data directory",
		Long: `import writes the credentials of a bundle from "relay pki export" into the
data directory of a replica before its first start (keys and token 0600). It
refuses a directory that already holds other credentials; importing the same
bundle again changes nothing.`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if importDir == "" {
				return usageError{flagErrorf("data-dir", "must not be empty")}
			}
			b, err := io.ReadAll(io.LimitReader(cmd.InOrStdin(), 1<<20))
			if err != nil {
				return err
			}
			return pki.ImportShared(pki.Dir(importDir), b)
		},
	}
	imp.Flags().StringVar(&importDir, "data-dir", "", "data directory of the new replica (required)")
	return newGroupCommand("pki", "Share a root's credentials with its other replicas", export, imp)
}
