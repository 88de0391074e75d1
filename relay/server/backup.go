package server

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/client-go/rest"

	"github.com/canopy-dev/canopy/consensus"
	"github.com/canopy-dev/canopy/relay/backup"
	"github.com/canopy-dev/canopy/relay/store"
)

// BackupPath is where a root serves a backup of its whole store
// (relay/backup's format; `relay backup` reads it): GET, for a user
// allowed to get this non-resource URL in the default space, as for
// MembersPath.
const BackupPath = "/canopy/v1/backup"

// serveBackup streams a backup of the store at one revision while the
// root keeps serving: the snapshot is copy-on-write. On a replica the
// revision is at least the leader's read index when the request came, so
// a backup holds every write acknowledged before it was asked for.
func (r *Root) serveBackup(w http.ResponseWriter, req *http.Request) {
	if req.Method != http.MethodGet {
		writeStatusError(w, apierrors.NewMethodNotSupported(nonResource("backups"), req.Method))
		return
	}
	if !r.authorizePath(w, req, BackupPath) {
		return
	}
	ctx := req.Context()
	idx, err := r.node.ReadIndex(ctx)
	if err == nil {
		err = r.store.WaitForRevision(ctx, int64(idx))
	}
	if err != nil {
		writeStatusError(w, apierrors.NewServiceUnavailable("the replica cannot confirm it is current: "+err.Error()))
		return
	}
	snap, err := r.store.Snapshot()
	if err != nil {
		writeStatusError(w, apierrors.NewInternalError(err))
		return
	}
	defer snap.Release()
	w.Header().Set("Content-Type", "application/octet-stream")
	w.Header().Set("Content-Disposition", fmt.Sprintf(`attachment; filename="%s-%d.backup"`, r.cfg.Name, snap.Revision()))
	start := time.Now()
	n, err := backup.Write(w, backup.Header{Relay: r.cfg.Name, Created: time.Now().UTC(), Commit: Version().GitCommit}, snap)
	if err != nil {
		// The status is sent: cut the response short, so the client sees
		// an error, and a file saved regardless fails its checksum.
		r.log.Warn("backup failed", "revision", snap.Revision(), "error", err)
		panic(http.ErrAbortHandler)
	}
	r.log.Info("backup served", "revision", snap.Revision(), "bytes", n, "took", time.Since(start).Round(time.Millisecond))
}

// GetBackup GETs BackupPath on base (APIBase) with rc's credentials and
// copies the backup to w as it arrives, without checking it (backup.Check
// does). It returns the bytes copied.
func GetBackup(ctx context.Context, rc *rest.Config, base string, w io.Writer) (int64, error) {
	resp, done, err := getPath(ctx, rc, base, BackupPath)
	if err != nil {
		return 0, err
	}
	defer done()
	n, err := io.Copy(w, resp.Body)
	if err != nil {
		return n, fmt.Errorf("receiving the backup: %w", err)
	}
	return n, nil
}

// CheckRestoreDir returns nil if dataDir (which need not exist) holds no
// root's state, so a backup can be restored into it, and an error saying
// what it holds otherwise.
func CheckRestoreDir(dataDir string) error {
	if err := consensus.CheckEmpty(raftDir(dataDir)); err != nil {
		if errors.Is(err, consensus.ErrHasState) {
			return fmt.Errorf("%s holds a root's state already (%s): restore into a new data directory", dataDir, raftDir(dataDir))
		}
		return err
	}
	return nil
}

// Restore seeds dataDir, which must hold no root's state (CheckRestoreDir),
// with st, a backup's store (backup.Load), so that a root started there
// begins at revision rev, st's revision or later (store.SnapshotAt,
// consensus.Seed): every object keeps its resourceVersion, and the root's
// writes come after rev. The data directory is locked meanwhile and
// records its format. It does not touch the PKI: the root's credentials
// come apart (`relay pki import`).
func Restore(dataDir string, st *store.Store, rev int64) error {
	lock, err := createDataDir(dataDir)
	if err != nil {
		return err
	}
	defer lock.Close()
	if err := CheckRestoreDir(dataDir); err != nil {
		return err
	}
	snap, err := st.SnapshotAt(rev)
	if err != nil {
		return err
	}
	defer snap.Release()
	return consensus.Seed(raftDir(dataDir), uint64(rev), snap)
}
