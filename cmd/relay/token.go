package main

import (
	"errors"
	"fmt"
	"io/fs"
	"time"

	"github.com/spf13/cobra"

	"github.com/canopy-dev/canopy/relay/pki"
)

func newTokenCommand() *cobra.Command {
	return newGroupCommand("token", "Manage join tokens of a root relay", newTokenCreateCommand())
}

func newTokenCreateCommand() *cobra.Command {
	var (
		dataDir string
		ttl     time.Duration
		role    string
	)
	cmd := &cobra.Command{
		Use:   "create [--data-dir=DIR] [--ttl=1h] [--role=region|edge]",
		Short: "Print a join token signed by a root relay's CA",
		Long: `create prints a join token signed by the CA of the root relay whose data
directory is DIR. A region or edge relay passes it once with --join-token, at
any tier of the tree: its parent checks it against the root CA and issues the
relay a certificate, which it uses from then on. The token can be used any
number of times until it expires (--ttl, from 1m to 24h): keep it private and
short-lived. --role restricts it to relays of that role.`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if dataDir == "" {
				return usageError{flagErrorf("data-dir", "must not be empty")}
			}
			if err := pki.CheckJoinTokenTTL(ttl); err != nil {
				return usageError{flagErrorf("ttl", "%v", err)}
			}
			var r pki.ChildRole
			if role != "" {
				var err error
				if r, err = pki.ParseChildRole(role); err != nil {
					return usageError{flagErrorf("role", "must be region or edge, not %q", role)}
				}
			}
			ca, err := pki.LoadCA(pki.Dir(dataDir))
			if errors.Is(err, fs.ErrNotExist) {
				return fmt.Errorf("no root CA in %s: start a root with --data-dir=%s first", dataDir, dataDir)
			}
			if err != nil {
				return err
			}
			token, err := pki.IssueJoinTokenForRole(ca, r, ttl, time.Now())
			if err != nil {
				return err
			}
			_, err = fmt.Fprintln(cmd.OutOrStdout(), token)
			return err
		},
	}
	fs := cmd.Flags()
	fs.StringVar(&dataDir, "data-dir", defaultDataDir(defaultName), "data directory of the root relay")
	fs.DurationVar(&ttl, "ttl", pki.DefaultJoinTokenTTL, "how long the token is valid, from 1m to 24h")
	fs.StringVar(&role, "role", "", "restrict the token to relays of this role, region or edge (default any)")
	return cmd
}
