package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/canopy-dev/canopy/relay/layout"
	"github.com/canopy-dev/canopy/relay/pki"
	"github.com/canopy-dev/canopy/relay/transport/registry"
)

func newTokenCommand() *cobra.Command {
	return newGroupCommand("token", "Manage join tokens of a root relay",
		newTokenCreateCommand(), newTokenListCommand(), newTokenRevokeCommand())
}

// tokenTimeout bounds each request a token command makes to the root.
const tokenTimeout = 30 * time.Second

func newTokenCreateCommand() *cobra.Command {
	var (
		dataDir string
		ttl     time.Duration
		role    string
		names   []string
		uses    int
		rekey   bool
	)
	cmd := &cobra.Command{
		Use:   "create [--data-dir=DIR] [--ttl=1h] [--role=region|edge] [--names=N,...] [--uses=N] [--rekey]",
		Short: "Print a join token signed by a root relay's CA, and record it at the root",
		Long: `create prints a join token signed by the CA of the root relay whose data
directory is DIR, and records it at that root (a Secret in the inventory
space, namespace canopy-system): the root, which must be running, accepts a
token only while its record exists. A region or edge relay passes the token
once with --join-token, at any tier of the tree: the root records the relay's
name and key, and its parent issues it a certificate, which it uses from then
on. A name joins once: a token cannot join a name that is joined already.

--ttl (1m to 24h) is how long the token is valid; --role restricts it to
relays of that role; --names to those names; --uses to that many joins.
--rekey makes a token that joins the names it lists even though they are
joined already, with a new key: the way to give back its name to a relay
that lost its data directory (its old key is refused from then on).
A token is a password: keep it private and short-lived, and revoke it
('relay token revoke ID') once the relays it was for have joined.`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if dataDir == "" {
				return usageError{flagErrorf("data-dir", "must not be empty")}
			}
			if err := pki.CheckJoinTokenTTL(ttl); err != nil {
				return usageError{flagErrorf("ttl", "%v", err)}
			}
			limits := pki.JoinLimits{Names: names, MaxUses: uses, Rekey: rekey}
			if role != "" {
				var err error
				if limits.Role, err = pki.ParseChildRole(role); err != nil {
					return usageError{flagErrorf("role", "must be region or edge, not %q", role)}
				}
			}
			if err := pki.CheckJoinLimits(limits); err != nil {
				flag, msg, _ := strings.Cut(err.Error(), ": ")
				return usageError{flagErrorf(flag, "%s", msg)}
			}
			ca, err := pki.LoadCA(pki.Dir(dataDir))
			if errors.Is(err, fs.ErrNotExist) {
				return fmt.Errorf("no root CA in %s: start a root with --data-dir=%s first", dataDir, dataDir)
			}
			if err != nil {
				return err
			}
			cs, err := inventoryClient(dataDir)
			if err != nil {
				return err
			}
			token, claims, err := pki.IssueLimitedJoinToken(ca, limits, ttl, time.Now())
			if err != nil {
				return err
			}
			ctx, cancel := context.WithTimeout(cmd.Context(), tokenTimeout)
			defer cancel()
			if err := recordToken(ctx, cs, claims); err != nil {
				return fmt.Errorf("recording the token at the root (is it running?): %w", err)
			}
			_, err = fmt.Fprintln(cmd.OutOrStdout(), token)
			return err
		},
	}
	f := cmd.Flags()
	f.StringVar(&dataDir, "data-dir", defaultDataDir(defaultName), "data directory of the root relay")
	f.DurationVar(&ttl, "ttl", pki.DefaultJoinTokenTTL, "how long the token is valid, from 1m to 24h")
	f.StringVar(&role, "role", "", "restrict the token to relays of this role, region or edge (default any)")
	f.StringSliceVar(&names, "names", nil, "restrict the token to relays of these names (default any)")
	f.IntVar(&uses, "uses", 0, "how many relays may join with the token (default unlimited)")
	f.BoolVar(&rekey, "rekey", false, "let the token join the relays of --names again, with new keys")
	return cmd
}

func newTokenListCommand() *cobra.Command {
	var dataDir string
	cmd := &cobra.Command{
		Use:   "list [--data-dir=DIR]",
		Short: "List the join tokens a root relay accepts",
		Long: `list prints the join tokens recorded at the root relay whose data directory
is DIR (which must be running), one line each: its ID, the role and names it
is limited to, how often it was used (and its limit), when it expires, and
whether it re-keys relays. An expired token is listed until it is revoked.`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx, cs, cancel, err := tokenClient(cmd, dataDir)
			if err != nil {
				return err
			}
			defer cancel()
			tokens, err := listTokens(ctx, cs)
			if err != nil {
				return fmt.Errorf("listing the tokens at the root: %w", err)
			}
			return writeTokens(cmd.OutOrStdout(), tokens, time.Now())
		},
	}
	cmd.Flags().StringVar(&dataDir, "data-dir", defaultDataDir(defaultName), "data directory of the root relay")
	return cmd
}

func newTokenRevokeCommand() *cobra.Command {
	var dataDir string
	cmd := &cobra.Command{
		Use:   "revoke [--data-dir=DIR] ID...",
		Short: "Revoke join tokens: the root accepts them no more",
		Long: `revoke deletes the records of the join tokens with the IDs given (as 'relay
token list' prints them) at the root relay whose data directory is DIR (which
must be running): the root refuses those tokens from then on. Relays that
joined with them keep their certificates.`,
		Args: func(_ *cobra.Command, args []string) error {
			if len(args) == 0 {
				return usageError{errors.New("revoke: name the IDs of the tokens to revoke")}
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, ids []string) error {
			ctx, cs, cancel, err := tokenClient(cmd, dataDir)
			if err != nil {
				return err
			}
			defer cancel()
			secrets := cs.CoreV1().Secrets(registry.TokenNamespace)
			for _, id := range ids {
				err := secrets.Delete(ctx, registry.TokenSecretName(id), metav1.DeleteOptions{})
				if apierrors.IsNotFound(err) {
					return fmt.Errorf("no join token %s at the root ('relay token list' shows them)", id)
				}
				if err != nil {
					return fmt.Errorf("revoking join token %s: %w", id, err)
				}
				fmt.Fprintf(cmd.OutOrStdout(), "join token %s revoked\n", id)
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&dataDir, "data-dir", defaultDataDir(defaultName), "data directory of the root relay")
	return cmd
}

// tokenClient checks --data-dir and returns a client of the root's
// inventory space, with a context bounded by tokenTimeout.
func tokenClient(cmd *cobra.Command, dataDir string) (context.Context, kubernetes.Interface, context.CancelFunc, error) {
	if dataDir == "" {
		return nil, nil, nil, usageError{flagErrorf("data-dir", "must not be empty")}
	}
	cs, err := inventoryClient(dataDir)
	if err != nil {
		return nil, nil, nil, err
	}
	ctx, cancel := context.WithTimeout(cmd.Context(), tokenTimeout)
	return ctx, cs, cancel, nil
}

// inventoryClient is a client of the inventory space of the root whose
// data directory is dataDir, as its admin.
func inventoryClient(dataDir string) (kubernetes.Interface, error) {
	path := filepath.Join(dataDir, pki.AdminKubeconfigFile)
	if _, err := os.Stat(path); errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("no %s in %s: start a root with --data-dir=%s first", pki.AdminKubeconfigFile, dataDir, dataDir)
	}
	rc, err := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(
		&clientcmd.ClientConfigLoadingRules{ExplicitPath: path},
		&clientcmd.ConfigOverrides{CurrentContext: layout.InventorySpace}).ClientConfig()
	if err != nil {
		return nil, fmt.Errorf("reading %s: %w", path, err)
	}
	rc.Timeout = tokenTimeout
	return kubernetes.NewForConfig(rc)
}

// recordToken writes a token's record (relay/transport/registry) into the root's
// inventory space, creating its namespace on first use.
func recordToken(ctx context.Context, cs kubernetes.Interface, claims pki.JoinClaims) error {
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: registry.TokenNamespace}}
	if _, err := cs.CoreV1().Namespaces().Create(ctx, ns, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return err
	}
	_, err := cs.CoreV1().Secrets(registry.TokenNamespace).Create(ctx, registry.TokenSecret(claims), metav1.CreateOptions{})
	return err
}

// listTokens reads the token records, sorted by expiry.
func listTokens(ctx context.Context, cs kubernetes.Interface) ([]registry.TokenInfo, error) {
	list, err := cs.CoreV1().Secrets(registry.TokenNamespace).List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, err
	}
	var out []registry.TokenInfo
	for i := range list.Items {
		info, ok, err := registry.ParseTokenSecret(&list.Items[i])
		if err != nil {
			return nil, err
		}
		if ok {
			out = append(out, info)
		}
	}
	slices.SortFunc(out, func(a, b registry.TokenInfo) int { return a.Expires.Compare(b.Expires) })
	return out, nil
}

func writeTokens(w io.Writer, tokens []registry.TokenInfo, now time.Time) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tROLE\tNAMES\tUSES\tEXPIRES\tREKEY")
	or := func(s, def string) string {
		if s == "" {
			return def
		}
		return s
	}
	for _, t := range tokens {
		uses := strconv.Itoa(t.Uses)
		if t.MaxUses > 0 {
			uses += "/" + strconv.Itoa(t.MaxUses)
		}
		expires := t.Expires.UTC().Format(time.RFC3339)
		if !now.Before(t.Expires) {
			expires += " (expired)"
		}
		rekey := "no"
		if t.Rekey {
			rekey = "yes"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", t.ID, or(t.Role, "any"), or(strings.Join(t.Names, ","), "any"), uses, expires, rekey)
	}
	return tw.Flush()
}
