// Command kubectl is the stock kubectl, built from the k8s.io/kubectl module
// for machines that do not have one on PATH (make bin/kubectl).
package main

import (
	"os"

	"k8s.io/component-base/cli"
	"k8s.io/kubectl/pkg/cmd"
)

func main() {
	command := cmd.NewDefaultKubectlCommand()
	os.Exit(cli.Run(command))
}
