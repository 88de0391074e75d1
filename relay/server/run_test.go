package server

import (
	"fmt"
	"slices"
	"testing"
)

// The admin kubeconfig lists every space that is not a child's, and the
// mailbox and reports spaces of the first children by name only.
func TestKubeconfigSpaces(t *testing.T) {
	all := []string{"default", "downsync", "inventory", "shop"}
	for _, c := range []string{"edge-3", "edge-1", "edge-2", "edge-0"} {
		all = append(all, MailboxSpace(c), ReportsSpace(c))
	}
	all = append(all, "mailbox-") // no child's name: not a child's space
	got := kubeconfigSpaces(all, 2)
	want := []string{"default", "downsync", "inventory", "shop", "mailbox-edge-1", "reports-edge-1", "mailbox-edge-0", "reports-edge-0", "mailbox-"}
	if !slices.Equal(got, want) {
		t.Errorf("kubeconfigSpaces(…, 2) = %v, want %v", got, want)
	}
	if got := kubeconfigSpaces(all, 100); !slices.Equal(got, all) {
		t.Errorf("kubeconfigSpaces(…, 100) = %v, want all of %v", got, all)
	}
	// Thousands of children: the kubeconfig stays the size of a hundred.
	many := []string{"default"}
	for i := range 5000 {
		c := fmt.Sprintf("e%04d", i)
		many = append(many, MailboxSpace(c), ReportsSpace(c))
	}
	if got := kubeconfigSpaces(many, KubeconfigChildren); len(got) != 1+2*KubeconfigChildren || got[1] != "mailbox-e0000" {
		t.Errorf("with 5000 children: %d spaces listed starting %v, want %d from mailbox-e0000", len(got), got[:2], 1+2*KubeconfigChildren)
	}
}
