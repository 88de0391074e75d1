package main

import (
	"fmt"
	"io"
	"runtime"

	"github.com/spf13/cobra"

	"github.com/canopy-dev/canopy/relay/buildinfo"
)

func newVersionCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "Print the version and commit relay was built from, and what it was built with",
		Args:  noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return writeVersion(cmd.OutOrStdout())
		},
	}
}

// writeVersion writes the relay version, its git commit (stamped by the
// Makefile, or read from the build info: relay/buildinfo), the Go version
// and platform, and the version of the Kubernetes API types compiled in.
func writeVersion(w io.Writer) error {
	bi := buildinfo.Get()
	_, err := fmt.Fprintf(w, "relay version: %s\ngit commit:    %s\ngo version:    %s %s/%s\nk8s.io/api:    %s\n",
		bi.Version, bi.Commit, runtime.Version(), runtime.GOOS, runtime.GOARCH, bi.KubeAPI)
	return err
}
