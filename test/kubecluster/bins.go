package kubecluster

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
)

// mainModule is the module whose bin/ holds the binaries.
const mainModule = "github.com/canopy-dev/canopy"

// The binaries `make kube-bins` builds.
const (
	binEtcd      = "etcd"
	binAPIServer = "kube-apiserver"
	binKCM       = "kube-controller-manager"
	binScheduler = "kube-scheduler"
	binKwok      = "kwok"
)

var (
	binDirOnce sync.Once
	binDirPath string
	binDirErr  error
)

// binary returns the path of the named binary in the repository's bin/,
// failing the test when it is not there.
func binary(t testing.TB, name string) string {
	t.Helper()
	binDirOnce.Do(func() { binDirPath, binDirErr = findBinDir() })
	if binDirErr != nil {
		t.Fatalf("kubecluster: %v", binDirErr)
	}
	p := filepath.Join(binDirPath, name)
	fi, err := os.Stat(p)
	if err != nil || fi.IsDir() || fi.Mode()&0o111 == 0 {
		t.Fatalf("kubecluster: %s is missing or not executable; run `make kube-bins` in %s first",
			p, filepath.Dir(binDirPath))
	}
	return p
}

// findBinDir walks up from the working directory to the directory whose
// go.mod declares mainModule and returns its bin/.
func findBinDir() (string, error) {
	wd, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for dir := wd; ; {
		mod, err := moduleOf(filepath.Join(dir, "go.mod"))
		if err != nil && !errors.Is(err, os.ErrNotExist) {
			return "", err
		}
		if mod == mainModule {
			return filepath.Join(dir, "bin"), nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", fmt.Errorf("no go.mod of module %s above %s; the binaries live in its bin/ (make kube-bins)", mainModule, wd)
		}
		dir = parent
	}
}

// moduleOf returns the module path declared in a go.mod file.
func moduleOf(gomod string) (string, error) {
	f, err := os.Open(gomod)
	if err != nil {
		return "", err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if rest, ok := strings.CutPrefix(line, "module"); ok && (rest == "" || rest[0] == ' ' || rest[0] == '\t') {
			return strings.Trim(strings.TrimSpace(rest), `"`), nil
		}
	}
	return "", sc.Err()
}
