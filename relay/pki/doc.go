// Package pki owns the credentials of a root relay: its certificate
// authority, the serving certificate of its listeners, client certificates,
// the admin bearer token, the key that signs ServiceAccount tokens, and the
// kubeconfigs that point kubectl at the root's spaces. It also owns the
// identities of the relay tree: join tokens, child certificates and the TLS
// configurations of links (see "Relay tree" below).
//
// # Data directory
//
// Everything lives under the relay's data directory DIR (--data-dir):
//
//	DIR/pki/ca.crt        CA certificate (ECDSA P-256, valid 10 years)
//	DIR/pki/ca.key        CA private key
//	DIR/pki/serving.crt   serving certificate issued by the CA; its SANs are
//	                      the listen hosts, the relay name, localhost,
//	                      127.0.0.1 and ::1
//	DIR/pki/serving.key   serving private key
//	DIR/pki/admin.token   admin bearer token: 32 random bytes, base64url
//	DIR/pki/sa.key        ECDSA P-256 key that signs ServiceAccount tokens
//	DIR/admin.kubeconfig  one context per space, authenticated with admin.token
//
// [Dir] and the *File constants name these paths. Directories are created
// 0700; private keys, the token and kubeconfigs are written 0600. Every file
// is written atomically (a temporary file in the same directory, synced, then
// renamed), so a crash leaves either the old or the new content, never a torn
// file.
//
// Credentials are created on first use and reused afterwards: LoadOrCreate*
// never replaces an existing credential, because everything issued from it
// would stop working. The one exception is the serving certificate, which
// [CA.EnsureServing] re-issues when the wanted SANs change, when it was not
// issued by the current CA, or when it expires within 30 days.
//
// A region or edge relay (a child) keeps instead, once it joined:
//
//	DIR/pki/relay.key     its private key (ECDSA P-256)
//	DIR/pki/relay.crt     its certificate, then the intermediates up to the
//	                      root (excluded)
//	DIR/pki/ca.crt        the root CA certificate
//
// # Relay tree
//
// "relay token create" ([IssueJoinToken]) prints a join token,
// cnp1.<claims>.<signature>, signed by the root CA key and valid 1m to 24h
// (1h by default). A joining child generates a key ([NewChildKey]) and a
// certificate request ([NewCSR]), dials its parent without a client
// certificate and sends both; the parent checks the token against the root
// certificate ([VerifyJoinToken]) and signs ([CA.SignChild]). The
// certificate names the relay (CN), its role (OU) and its path from the
// root (URI SAN canopy://relay/root/region-a/edge-1). A region's
// certificate is both an intermediate CA, so that it signs its own
// children without the root, and its TLS identity; name constraints keep it
// from issuing certificates for host names or IP addresses. An edge's
// certificate is a client-only leaf. [VerifyChain] checks a presented
// chain against the root and that every relay in it certified only relays
// right below itself, so a certificate's path can be trusted to decide
// which mailbox a child reads and which subtree it reports for. A child
// renews its certificate over its link before it expires ([RenewAt]): its
// parent issues a new one for the same name, role, path and key
// ([CA.RenewChild]), which the child stores in place of the old
// ([SaveRenewedChain]).
// [LinkServerTLS] and [LinkClientTLS] configure both ends of a link (TLS
// 1.3, ALPN canopy-link/1); [PeerIdentity] tells who the peer is.
//
// # Boundaries
//
// This package does not listen, authenticate requests or decide who may do
// what; it only creates, stores and loads credentials. A data directory
// belongs to one relay process at a time: functions here are safe for
// concurrent use on distinct directories, not by two processes sharing one.
package pki
