// Package atomicfile replaces a file whole and durably: what is written
// goes to a temporary file beside it, which is synced, renamed over the
// file and its directory synced, so that a crash leaves either the old
// file or the whole new one, and a write that returned stays written.
// SyncDir makes any other rename or removal durable.
//
// It owns no format and no file of its own; the relay's data directory
// (its FORMAT, the PKI files, a consensus seed) and the backups `relay
// backup` writes use it. It must not import anything of Canopy.
package atomicfile
