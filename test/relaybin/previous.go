package relaybin

import (
	"archive/tar"
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strings"
	"sync"
	"testing"
)

// PreviousFile names, relative to the module's root, the file that holds
// the commit of the previous release.
const PreviousFile = "hack/release/previous"

var (
	prevOnce  sync.Once
	prevPath  string
	prevBuilt error
)

// Previous returns the relay binary of the previous release, the commit
// that PreviousFile names, failing t loudly when it cannot: git missing,
// the commit missing from the clone or not an ancestor of HEAD, or the
// build failing. The sources are extracted with git archive into the user
// cache directory (canopy/relay-COMMIT), where the binary is built once;
// later calls, in this process or another, reuse it.
func Previous(t testing.TB) string {
	t.Helper()
	prevOnce.Do(func() { prevPath, prevBuilt = buildPrevious() })
	if prevBuilt != nil {
		t.Fatalf("the previous release's relay (%s): %v", PreviousFile, prevBuilt)
	}
	return prevPath
}

var commitRE = regexp.MustCompile(`^[0-9a-f]{40}$`)

func buildPrevious() (string, error) {
	root, err := moduleRoot()
	if err != nil {
		return "", err
	}
	commit, err := readPrevious(filepath.Join(root, PreviousFile))
	if err != nil {
		return "", err
	}
	if _, err := exec.LookPath("git"); err != nil {
		return "", errors.New("git is not on PATH: install git; the test builds the previous release from this clone's history")
	}
	git := func(args ...string) ([]byte, error) {
		cmd := exec.Command("git", append([]string{"-C", root}, args...)...)
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		out, err := cmd.Output()
		if err != nil {
			return nil, fmt.Errorf("git %s: %v: %s", strings.Join(args, " "), err, strings.TrimSpace(stderr.String()))
		}
		return out, nil
	}
	if _, err := git("cat-file", "-e", commit+"^{commit}"); err != nil {
		return "", fmt.Errorf("commit %s is not in this clone (%v): fetch it (git fetch origin %s) or clone with full history", commit, err, commit)
	}
	if err := exec.Command("git", "-C", root, "merge-base", "--is-ancestor", commit, "HEAD").Run(); err != nil {
		return "", fmt.Errorf("commit %s is not an ancestor of HEAD (%v): %s must name a commit of this branch's history", commit, err, PreviousFile)
	}

	cache, err := os.UserCacheDir()
	if err != nil {
		return "", fmt.Errorf("no cache directory to build in: %w", err)
	}
	dir := filepath.Join(cache, "canopy", "relay-"+commit)
	bin := filepath.Join(dir, "bin", "relay-"+runtime.Version())
	if _, err := os.Stat(bin); err == nil {
		return bin, nil
	}
	if _, err := os.Stat(filepath.Join(dir, "go.mod")); err != nil {
		// Extract into a temporary directory, then rename: a stable
		// path lets the Go build cache serve a rebuild.
		if err := os.MkdirAll(filepath.Dir(dir), 0o755); err != nil {
			return "", err
		}
		tmp, err := os.MkdirTemp(filepath.Dir(dir), ".relay-"+commit+"-")
		if err != nil {
			return "", err
		}
		defer os.RemoveAll(tmp)
		cmd := exec.Command("git", "-C", root, "archive", "--format=tar", commit)
		out, err := cmd.StdoutPipe()
		if err != nil {
			return "", err
		}
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		if err := cmd.Start(); err != nil {
			return "", err
		}
		xerr := untar(bufio.NewReader(out), tmp)
		if err := cmd.Wait(); err != nil {
			return "", fmt.Errorf("git archive %s: %v: %s", commit, err, strings.TrimSpace(stderr.String()))
		}
		if xerr != nil {
			return "", fmt.Errorf("extracting %s: %w", commit, xerr)
		}
		if err := os.Rename(tmp, dir); err != nil && !errors.Is(err, os.ErrExist) {
			if _, serr := os.Stat(filepath.Join(dir, "go.mod")); serr != nil {
				return "", err
			}
			// Another process extracted it meanwhile.
		}
	}
	tmpBin := fmt.Sprintf("%s.%d.tmp", bin, os.Getpid())
	build := goBuild(dir, tmpBin)
	if out, err := build.CombinedOutput(); err != nil {
		return "", fmt.Errorf("go build ./cmd/relay at %s (in %s): %v\n%s", commit, dir, err, out)
	}
	if err := os.Rename(tmpBin, bin); err != nil {
		return "", err
	}
	return bin, nil
}

// readPrevious returns the commit in path: the one line that is not a
// comment (#) or blank.
func readPrevious(path string) (string, error) {
	raw, err := os.ReadFile(path)
	if err != nil {
		return "", err
	}
	var commit string
	for line := range strings.Lines(string(raw)) {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		if commit != "" || !commitRE.MatchString(line) {
			return "", fmt.Errorf("%s: want one full commit hash (40 hex digits), found %q", path, line)
		}
		commit = line
	}
	if commit == "" {
		return "", fmt.Errorf("%s names no commit", path)
	}
	return commit, nil
}

// moduleRoot is this module's directory, from this module or from one
// that requires it (test/observability).
func moduleRoot() (string, error) {
	out, err := exec.Command("go", "list", "-m", "-f", "{{.Dir}}", module).Output()
	dir := strings.TrimSpace(string(out))
	if err != nil || dir == "" {
		return "", fmt.Errorf("go list -m %s: the working directory is not inside this module or one that requires it (%v)", module, err)
	}
	return dir, nil
}

// untar extracts the regular files and directories of a tar stream into
// dir.
func untar(r io.Reader, dir string) error {
	tr := tar.NewReader(r)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return err
		}
		name := filepath.Join(dir, filepath.FromSlash(h.Name))
		if !strings.HasPrefix(name, filepath.Clean(dir)+string(filepath.Separator)) {
			return fmt.Errorf("%q leaves the directory", h.Name)
		}
		switch h.Typeflag {
		case tar.TypeDir:
			err = os.MkdirAll(name, 0o755)
		case tar.TypeReg:
			err = writeFile(name, tr, os.FileMode(h.Mode)&0o777)
		case tar.TypeSymlink:
			err = os.Symlink(h.Linkname, name)
		}
		if err != nil {
			return err
		}
	}
}

func writeFile(name string, r io.Reader, mode os.FileMode) error {
	if err := os.MkdirAll(filepath.Dir(name), 0o755); err != nil {
		return err
	}
	f, err := os.OpenFile(name, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, mode)
	if err != nil {
		return err
	}
	if _, err := io.Copy(f, r); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}
