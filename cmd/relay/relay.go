package main

import (
	"context"
	"errors"
	"log/slog"

	"github.com/spf13/cobra"
)

const relayLong = `relay runs one node of a Canopy tree. --role chooses which parts run:

  root    serves the kube API of every space on --api-addr and the link that
          child relays dial on --link-addr; keeps its PKI, its state and
          admin.kubeconfig in --data-dir
  region  relays between a parent and its children (not available yet)
  edge    syncs its share to one cluster (not available yet)

With no flags, relay starts a root named "root" that listens on 127.0.0.1 and
keeps its data in ./data/root; "relay kubeconfig" then prints a kubeconfig
for it. SIGINT or SIGTERM stops the relay gracefully; a second signal kills
it.

Exit status: 0 after a clean stop, 1 on failure, 2 on a usage error.`

func newRelayCommand() *cobra.Command {
	var o options
	cmd := &cobra.Command{
		Use:           "relay [--role=root|region|edge] [flags]",
		Short:         "Run a Canopy relay",
		Long:          relayLong,
		Args:          noArgs,
		SilenceErrors: true,
		SilenceUsage:  true,
		RunE: func(cmd *cobra.Command, _ []string) error {
			fs := cmd.Flags()
			o.complete(fs)
			if errs := o.validate(fs); len(errs) > 0 {
				return usageError{errors.Join(errs...)}
			}
			cfg := o.rootConfig()
			log := o.logger(cmd.ErrOrStderr())
			slog.SetDefault(log)

			ctx := cmd.Context()
			log.Info("starting relay", "relay", cfg.Name, "role", o.role, "dataDir", cfg.DataDir, "apiAddr", cfg.APIAddr, "linkAddr", cfg.LinkAddr)
			if err := runRoot(ctx, cfg); err != nil && (ctx.Err() == nil || !errors.Is(err, context.Canceled)) {
				return err
			}
			log.Info("relay stopped", "relay", cfg.Name, "cause", context.Cause(ctx))
			return nil
		},
	}
	o.addFlags(cmd.Flags())
	cmd.SetFlagErrorFunc(flagParseError)
	cmd.AddCommand(newKubeconfigCommand(), newTokenCommand(), newVersionCommand())
	return cmd
}
