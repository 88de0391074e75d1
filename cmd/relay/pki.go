package main

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/spf13/cobra"

	"github.com/canopy-dev/canopy/relay/pki"
)

// newPKICommand is "relay pki new|export|import": how the replicas of a
// root come to share one CA, admin token and ServiceAccount key
// (docs/ha.md).
func newPKICommand() *cobra.Command {
	var exportDir, importDir, bundle string
	create := &cobra.Command{
		Use:   "new > bundle",
		Short: "Print new credentials for the replicas of a root to share, as a bundle for 'relay pki import'",
		Long: `new makes a new CA and its key, admin token and ServiceAccount signing key
and prints them as one PEM bundle, as "relay pki export" prints those of a
running root: the credentials of a root yet to be started, whose replicas each
import the bundle before their first start ("relay pki import"). The bundle
holds the CA key: keep it as a Secret.`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			b, err := newSharedBundle()
			if err != nil {
				return err
			}
			_, err = cmd.OutOrStdout().Write(b)
			return err
		},
	}
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
		Use:   "import --data-dir=DIR [--bundle=FILE] < bundle",
		Short: "Install a bundle from 'relay pki export' or 'relay pki new' in a new replica's data directory",
		Long: `import writes the credentials of a bundle from "relay pki export" or "relay
pki new", read from --bundle or else stdin, into the data directory of a
replica before its first start (keys and token 0600). It refuses a directory
that already holds other credentials; importing the same bundle again changes
nothing, so it may run before every start (an init container).`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if importDir == "" {
				return usageError{flagErrorf("data-dir", "must not be empty")}
			}
			in := cmd.InOrStdin()
			if bundle != "" {
				f, err := os.Open(bundle)
				if err != nil {
					return fmt.Errorf("--bundle: %w", err)
				}
				defer f.Close()
				in = f
			}
			b, err := io.ReadAll(io.LimitReader(in, 1<<20))
			if err != nil {
				return err
			}
			return pki.ImportShared(pki.Dir(importDir), b)
		},
	}
	imp.Flags().StringVar(&importDir, "data-dir", "", "data directory of the new replica (required)")
	imp.Flags().StringVar(&bundle, "bundle", "", "file holding the bundle (a mounted Secret; default: stdin)")
	return newGroupCommand("pki", "Share a root's credentials with its other replicas", create, export, imp)
}

// newSharedBundle makes the shared credentials of a new root in a
// temporary directory, the way a root's first start makes them, and
// returns them as a bundle (pki.ExportShared).
func newSharedBundle() ([]byte, error) {
	tmp, err := os.MkdirTemp("", "relay-pki-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(tmp)
	if _, err := pki.LoadOrCreateCA(tmp); err != nil {
		return nil, err
	}
	if _, err := pki.LoadOrCreateToken(filepath.Join(tmp, pki.AdminTokenFile)); err != nil {
		return nil, err
	}
	if _, err := pki.LoadOrCreateSigningKey(filepath.Join(tmp, pki.SigningKeyFile)); err != nil {
		return nil, err
	}
	return pki.ExportShared(tmp)
}
