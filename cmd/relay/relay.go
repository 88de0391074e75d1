package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"

	"github.com/spf13/cobra"

	"github.com/canopy-dev/canopy/relay/pki"
	"github.com/canopy-dev/canopy/relay/transport/session"
)

const relayLong = `relay runs one node of a Canopy tree. --role chooses which parts run:

  root    serves the kube API of every space on --api-addr and the link that
          child relays dial on --link-addr; keeps its PKI, its state and
          admin.kubeconfig in --data-dir
  region  dials its parent (--parent) and serves its own children on
          --link-addr; the default 127.0.0.1:7443 is the root's, so a region
          on the same host as the root or another region needs its own
  edge    dials its parent (--parent) and keeps its share of the desired
          state for one cluster, which it applies and reports from:
          --kubeconfig=FILE (a real cluster), --virtual-cluster (in
          memory, with a simulated kubelet) or, with neither, the cluster
          it runs in as a pod (its ServiceAccount)

A region or edge joins the tree once with --join-token or --join-token-file
(from "relay token create" at the root) and receives a certificate kept in
--data-dir; later starts need no token.

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
			log := o.logger(cmd.ErrOrStderr())
			slog.SetDefault(log)
			if o.pprofAddr != "" {
				stop, err := servePprof(o.pprofAddr, log)
				if err != nil {
					return fmt.Errorf("--pprof: %w", err)
				}
				defer stop()
			}

			ctx := cmd.Context()
			var err error
			if o.role == roleRoot {
				cfg := o.rootConfig()
				log.Info("starting relay", "relay", cfg.Name, "role", o.role, "dataDir", cfg.DataDir, "apiAddr", cfg.APIAddr, "linkAddr", cfg.LinkAddr)
				err = runRoot(ctx, cfg)
			} else {
				cfg := o.childConfig()
				attrs := []any{"relay", cfg.Name, "role", o.role, "dataDir", cfg.DataDir, "parents", cfg.Parents}
				if cfg.Role == pki.RoleRegion {
					attrs = append(attrs, "linkAddr", cfg.LinkAddr)
				}
				log.Info("starting relay", attrs...)
				err = runChild(ctx, cfg)
				if errors.Is(err, session.ErrNoToken) {
					err = fmt.Errorf("%s has not joined its parent yet (no certificate in %s): pass --join-token=TOKEN from 'relay token create' at the root", cfg.Name, cfg.DataDir)
				}
			}
			if err != nil && (ctx.Err() == nil || !errors.Is(err, context.Canceled)) {
				return err
			}
			log.Info("relay stopped", "relay", o.name, "cause", context.Cause(ctx))
			return nil
		},
	}
	o.addFlags(cmd.Flags())
	cmd.SetFlagErrorFunc(flagParseError)
	cmd.AddCommand(newKubeconfigCommand(), newTokenCommand(), newVersionCommand(), newSimulateCommand(), newRenderCommand(), newPKICommand(), newMembersCommand(), newBackupCommand(), newRestoreCommand())
	return cmd
}
