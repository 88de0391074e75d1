// Package backup owns the backup file of a root relay: the whole of its
// store at one revision, as `relay backup` writes it and `relay restore`
// reads it (docs/operations.md, "Back up the root").
//
// # Format
//
//	magic "CANOPY-BACKUP\n"
//	format version, uvarint (Version)
//	header: uvarint length, then JSON (Header)
//	the store's snapshot (relay/store's format, with its own CRC-32C)
//	SHA-256 of every byte above, 32 bytes
//
// A reader checks the file whole before anything is built from it: a
// wrong magic, a newer format, a checksum that fails or a file cut short
// is refused with one error naming what is wrong (ErrDamaged,
// ErrNewerFormat), and the caller writes nothing.
//
// # What it must not do
//
// It takes a store snapshot as it is handed one and never reads a data
// directory: where a root keeps its state and how a restored one starts
// (consensus.Seed) is relay/server's. It holds no credentials: the
// root's CA and keys travel apart ('relay pki export'), but the store
// holds every space's Secrets, so a backup is a secret too.
package backup
