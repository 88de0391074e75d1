package main

import (
	"fmt"
	"io"
	"runtime"
	"runtime/debug"

	"github.com/spf13/cobra"
)

// version and commit override what the build info says, for builds made
// with -ldflags "-X main.version=v1.2.3 -X main.commit=abc123".
var (
	version string
	commit  string
)

func newVersionCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "Print the version of relay and of what it was built with",
		Args:  noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return writeVersion(cmd.OutOrStdout())
		},
	}
}

// writeVersion writes the relay version, its git commit, the Go version and
// the version of the Kubernetes API types compiled in.
func writeVersion(w io.Writer) error {
	v, c, kubeAPI := "(devel)", "unknown", "unknown"
	if info, ok := debug.ReadBuildInfo(); ok {
		if info.Main.Version != "" {
			v = info.Main.Version
		}
		var modified bool
		for _, s := range info.Settings {
			switch s.Key {
			case "vcs.revision":
				c = s.Value
			case "vcs.modified":
				modified = s.Value == "true"
			}
		}
		if modified {
			c += "-dirty"
		}
		for _, dep := range info.Deps {
			if dep.Path == "k8s.io/api" {
				if dep.Replace != nil {
					dep = dep.Replace
				}
				kubeAPI = dep.Version
			}
		}
	}
	if version != "" {
		v = version
	}
	if commit != "" {
		c = commit
	}
	_, err := fmt.Fprintf(w, "relay version: %s\ngit commit:    %s\ngo version:    %s %s/%s\nk8s.io/api:    %s\n",
		v, c, runtime.Version(), runtime.GOOS, runtime.GOARCH, kubeAPI)
	return err
}
