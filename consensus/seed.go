package consensus

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"os"
	"path/filepath"

	"github.com/hashicorp/raft"

	"github.com/canopy-dev/canopy/relay/atomicfile"
)

// seedFile is the file in Config.Dir that holds a seed (Seed) until Open
// installs it: the snapshot header (version byte, index), the FSM's
// encoding, then a CRC-32C (Castagnoli) of all that, 4 bytes big endian.
const seedFile = "seed"

// seedTerm is the term of the snapshot a seed becomes, as raft's own
// bootstrap uses term 1 for the first configuration.
const seedTerm = 1

// keyCurrentTerm is the stable-store key under which raft keeps its current
// term (raft.go of hashicorp/raft). A seed sets it as BootstrapCluster
// does, so the node's first election is at a term past the snapshot's.
var keyCurrentTerm = []byte("CurrentTerm")

// ErrHasState: Seed was given a Dir that already holds a log, snapshots or
// a seed; it changed nothing.
var ErrHasState = errors.New("consensus: the directory already holds raft state")

// Seed prepares dir, the Config.Dir of a node that has never run, so that
// Open starts from snap as though the log had held index commands: Open
// installs it as raft's first snapshot (at index, term 1, with a
// configuration of this node alone) instead of bootstrapping an empty log.
// The FSM restores snap, and the next command gets an index past index, so
// no index at or below it is ever used again. snap is the FSM's own
// encoding (what store.Snapshot's WriteTo writes); index must be at least
// the revision it holds.
//
// The seed is written to a temporary file, synced and renamed, so a crash
// leaves either no seed or a whole one. Seed refuses (ErrHasState) a dir
// that holds raft state or a seed already. A seeded replica of a cluster
// must start alone (BootstrapExpect 1, no Join): it is the cluster's first
// member and the others join it (docs/ha.md).
func Seed(dir string, index uint64, snap io.WriterTo) error {
	if index == 0 {
		return errors.New("consensus: a seed needs an index past 0")
	}
	if err := CheckEmpty(dir); err != nil {
		return err
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("consensus: %w", err)
	}
	err := atomicfile.Write(filepath.Join(dir, seedFile), 0o600, func(f *os.File) error {
		crc := crc32.New(castagnoli)
		bw := bufio.NewWriterSize(io.MultiWriter(f, crc), 64<<10)
		var hdr [snapshotHeaderLen]byte
		hdr[0] = snapshotVersion
		binary.BigEndian.PutUint64(hdr[1:], index)
		if _, err := bw.Write(hdr[:]); err != nil {
			return err
		}
		if _, err := snap.WriteTo(bw); err != nil {
			return err
		}
		if err := bw.Flush(); err != nil {
			return err
		}
		_, err := f.Write(binary.BigEndian.AppendUint32(nil, crc.Sum32()))
		return err
	})
	if err != nil {
		return fmt.Errorf("consensus: writing the seed: %w", err)
	}
	return nil
}

// CheckEmpty returns nil if dir (a Config.Dir, which need not exist) holds
// no raft state and no seed, ErrHasState naming what it holds otherwise.
func CheckEmpty(dir string) error {
	for _, sub := range []string{"wal", "snapshots", seedFile} {
		ents, err := os.ReadDir(filepath.Join(dir, sub))
		switch {
		case err == nil && len(ents) == 0:
		case errors.Is(err, os.ErrNotExist):
		case err == nil || sub == seedFile: // a seed is a file: ReadDir fails on it
			return fmt.Errorf("%w: %s", ErrHasState, filepath.Join(dir, sub))
		default:
			return fmt.Errorf("consensus: %w", err)
		}
	}
	return nil
}

// openSeed installs the seed of the node's Dir, if there is one, in place
// of bootstrapping: it reports whether it did. exists tells whether raft
// state was found; conf is the configuration a bootstrap would write, and
// alone whether this node would bootstrap by itself (a seeded replica of a
// cluster must). A seed next to raft state was installed before a crash
// kept Open from removing it: it is removed now.
func (n *Node) openSeed(exists bool, snaps raft.SnapshotStore, trans raft.Transport, conf raft.Configuration, alone bool) (bool, error) {
	path := filepath.Join(n.cfg.Dir, seedFile)
	if _, err := os.Stat(path); errors.Is(err, os.ErrNotExist) {
		return false, nil
	} else if err != nil {
		return false, fmt.Errorf("consensus: reading the seed: %w", err)
	}
	if exists {
		return false, n.finishSeed(path)
	}
	if !alone {
		return false, fmt.Errorf("consensus: %s holds a restored state (a seed): start this replica alone first (bootstrap-expect 1, no join), then join the others to it", n.cfg.Dir)
	}
	return true, n.installSeed(path, snaps, trans, conf)
}

// installSeed turns the seed at path into raft's first snapshot, with
// configuration conf, then finishes it (finishSeed).
func (n *Node) installSeed(path string, snaps raft.SnapshotStore, trans raft.Transport, conf raft.Configuration) error {
	f, err := os.Open(path)
	if err != nil {
		return fmt.Errorf("consensus: reading the seed: %w", err)
	}
	defer f.Close()
	info, err := f.Stat()
	if err != nil {
		return fmt.Errorf("consensus: reading the seed: %w", err)
	}
	body := info.Size() - 4 // without the CRC
	var hdr [snapshotHeaderLen]byte
	if body < snapshotHeaderLen {
		return damaged(path, 0, "a seed of %d bytes is shorter than its header", info.Size())
	}
	if _, err := io.ReadFull(f, hdr[:]); err != nil {
		return fmt.Errorf("consensus: reading the seed: %w", err)
	}
	if hdr[0] != snapshotVersion {
		return fmt.Errorf("consensus: %s: %w", path, snapshotVersionError(hdr[0]))
	}
	index := binary.BigEndian.Uint64(hdr[1:])
	sink, err := snaps.Create(raft.SnapshotVersionMax, index, seedTerm, conf, index, trans)
	if err != nil {
		return fmt.Errorf("consensus: installing the seed: %w", err)
	}
	crc := crc32.New(castagnoli)
	crc.Write(hdr[:])
	_, err = sink.Write(hdr[:])
	if err == nil {
		_, err = io.Copy(io.MultiWriter(sink, crc), io.LimitReader(f, body-snapshotHeaderLen))
	}
	var trailer [4]byte
	if err == nil {
		_, err = io.ReadFull(f, trailer[:])
	}
	if err == nil && binary.BigEndian.Uint32(trailer[:]) != crc.Sum32() {
		err = damaged(path, -1, "the seed fails its CRC-32C check")
	}
	if err != nil {
		_ = sink.Cancel()
		if errors.Is(err, ErrDamaged) {
			return err
		}
		return fmt.Errorf("consensus: installing the seed: %w", err)
	}
	if err := sink.Close(); err != nil {
		return fmt.Errorf("consensus: installing the seed: %w", err)
	}
	n.log.Info("installed the seed as the first snapshot", "revision", index)
	return n.finishSeed(path)
}

// finishSeed completes the installation of a seed whose snapshot raft now
// holds: raft's current term is set (unless a later one is), then the seed
// is removed.
func (n *Node) finishSeed(path string) error {
	if term, err := n.wal.GetUint64(keyCurrentTerm); err != nil || term < seedTerm {
		if err := n.wal.SetUint64(keyCurrentTerm, seedTerm); err != nil {
			return fmt.Errorf("consensus: installing the seed: %w", err)
		}
	}
	if err := os.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("consensus: removing the seed: %w", err)
	}
	return atomicfile.SyncDir(filepath.Dir(path))
}
