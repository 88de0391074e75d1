package main

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"time"

	"github.com/spf13/cobra"

	"github.com/canopy-dev/canopy/relay/atomicfile"
	"github.com/canopy-dev/canopy/relay/backup"
	"github.com/canopy-dev/canopy/relay/pki"
	"github.com/canopy-dev/canopy/relay/server"
	"github.com/canopy-dev/canopy/relay/store"
)

// defaultBumpRevision is how far past a backup's revision a restored root
// starts (relay restore --bump-revision), as etcdutl's --bump-revision
// is used: past the writes the lost root may have made after the backup.
const defaultBumpRevision = 1_000_000_000

func newBackupCommand() *cobra.Command {
	var (
		root rootFlags
		out  string
	)
	cmd := &cobra.Command{
		Use:   "backup --out=FILE [--data-dir=DIR | --kubeconfig=FILE] [--server=URL]",
		Short: "Write a backup of a running root's whole state to a file",
		Long: `backup asks a running root replica (the server of the kubeconfig's current
context, or --server) for a backup of its whole store at one revision, and
writes it to FILE: every space, object, CRD, RBAC object and the inventory,
with their resourceVersions. The root keeps serving meanwhile; a replica of
several answers with every write acknowledged before it was asked.

The file is written 0600 beside FILE, checked whole (its SHA-256), then
renamed to FILE, so FILE is either the old file or a complete backup. It
holds every space's Secrets: keep it as safely as the root's credentials,
which it does not hold ('relay pki export' prints those). It prints the
backup's revision. 'relay restore' starts a new root from it.`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if out == "" {
				return usageError{flagErrorf("out", "must not be empty")}
			}
			rc, err := root.restConfig()
			if err != nil {
				return err
			}
			base, err := server.APIBase(rc.Host)
			if err != nil {
				return err
			}
			var (
				n      int64
				h      backup.Header
				failed error // the backup's own fault, not the file's
			)
			err = atomicfile.Write(out, 0o600, func(f *os.File) error {
				var err error
				if n, err = server.GetBackup(cmd.Context(), rc, base, f); err != nil {
					failed = fmt.Errorf("backing up %s: %w", base, err)
					return failed
				}
				if _, err := f.Seek(0, io.SeekStart); err != nil {
					return err
				}
				if h, err = backup.Check(f); err != nil {
					failed = fmt.Errorf("the backup %s sent: %w", base, err)
					return failed
				}
				return nil
			})
			if failed != nil {
				return failed
			}
			if err != nil {
				return flagErrorf("out", "%v", err)
			}
			fmt.Fprintf(cmd.OutOrStdout(), "backup of %s at revision %d written to %s (%d bytes)\n", h.Relay, h.Revision, out, n)
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&out, "out", "", "file to write the backup to (required)")
	root.add(f, "back up")
	return cmd
}

func newRestoreCommand() *cobra.Command {
	var (
		from, dataDir, bundle string
		bump                  int64
	)
	cmd := &cobra.Command{
		Use:   "restore --from=FILE --data-dir=DIR [--pki=BUNDLE] [--bump-revision=N]",
		Short: "Prepare a new root's data directory from a backup",
		Long: `restore checks the backup FILE whole (from 'relay backup') and seeds DIR, a
data directory that holds no root, with it: a root started there with
--data-dir=DIR serves every object of the backup with its resourceVersion.

The root's writes continue --bump-revision revisions past the backup's
(default 1000000000), past any revision the backed-up root may have made
after the backup, so that no client or relay takes a later revision of the
old root for one of the new: watches and children that held one list or
resync once. --bump-revision=0 continues right after the backup's.

DIR needs the backed-up root's credentials (CA, admin token, ServiceAccount
key), which a backup does not hold: pass the bundle 'relay pki export'
printed for that root with --pki, or import it first with 'relay pki
import --data-dir=DIR'. With other credentials, the tree's relays could not
link to the restored root.

A bad FILE (not a backup, damaged, cut short, of a newer format) is refused
in one line and nothing is written. A root of several replicas is restored
into one replica, started alone (no --join, --bootstrap-expect=1); the
others start with empty data directories and join it.`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			switch {
			case from == "":
				return usageError{flagErrorf("from", "must not be empty")}
			case dataDir == "":
				return usageError{flagErrorf("data-dir", "must not be empty")}
			case bump < 0:
				return usageError{flagErrorf("bump-revision", "must not be negative, not %d", bump)}
			}
			if err := server.CheckRestoreDir(dataDir); err != nil {
				return flagErrorf("data-dir", "%v", err)
			}
			var creds []byte
			if bundle != "" {
				var err error
				if creds, err = os.ReadFile(bundle); err != nil {
					return flagErrorf("pki", "%v", err)
				}
			} else if _, err := pki.LoadCA(pki.Dir(dataDir)); errors.Is(err, fs.ErrNotExist) {
				return flagErrorf("pki", "%s holds no root credentials: pass the bundle 'relay pki export' printed for the backed-up root, or run 'relay pki import --data-dir=%s' first", dataDir, dataDir)
			} else if err != nil {
				return err
			}
			f, err := os.Open(from)
			if err != nil {
				return flagErrorf("from", "%v", err)
			}
			h, st, err := backup.Load(f, store.Options{})
			f.Close()
			if err != nil {
				return fmt.Errorf("%s: %w", from, err)
			}
			defer st.Close()
			if creds != nil {
				if err := os.MkdirAll(pki.Dir(dataDir), 0o700); err != nil {
					return err
				}
				if err := pki.ImportShared(pki.Dir(dataDir), creds); err != nil {
					return flagErrorf("pki", "%v", err)
				}
			}
			rev := h.Revision + bump
			if err := server.Restore(dataDir, st, rev); err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "restored the backup of %s at revision %d (taken %s) into %s: a root started there writes past revision %d\n",
				h.Relay, h.Revision, h.Created.Format(time.RFC3339), dataDir, rev)
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&from, "from", "", "the backup file (required)")
	f.StringVar(&dataDir, "data-dir", "", "data directory of the new root; it must hold no root (required)")
	f.StringVar(&bundle, "pki", "", "credentials of the backed-up root, from 'relay pki export' (default: already in --data-dir)")
	f.Int64Var(&bump, "bump-revision", defaultBumpRevision, "how many revisions past the backup's the restored root starts")
	return cmd
}
