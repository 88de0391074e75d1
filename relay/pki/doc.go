// Package pki owns the credentials of a root relay: its certificate
// authority, the serving certificate of its listeners, client certificates,
// the admin bearer token, the key that signs ServiceAccount tokens, and the
// kubeconfigs that point kubectl at the root's spaces.
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
// # Boundaries
//
// This package does not listen, authenticate requests or decide who may do
// what; it only creates, stores and loads credentials. A data directory
// belongs to one relay process at a time: functions here are safe for
// concurrent use on distinct directories, not by two processes sharing one.
package pki
