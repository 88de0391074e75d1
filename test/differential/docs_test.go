package differential

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// compatDoc is docs/compat.md, from this package's directory.
var compatDoc = filepath.Join("..", "..", "docs", "compat.md")

// docsSection returns the "## Differential test" section of compat.md.
func docsSection() (string, error) {
	b, err := os.ReadFile(compatDoc)
	if err != nil {
		return "", err
	}
	_, sec, ok := strings.Cut(string(b), "\n## Differential test\n")
	if !ok {
		return "", fmt.Errorf(`%s has no "## Differential test" section`, compatDoc)
	}
	if i := strings.Index(sec, "\n## "); i >= 0 {
		sec = sec[:i]
	}
	return sec, nil
}

// tableStep is a step name in the first column of a table row.
var tableStep = regexp.MustCompile("(?m)^\\| `([^`]+)` \\|")

// checkDocs fails the test when the section does not state the counts of
// this run or does not list exactly the accepted differences.
func checkDocs(t *testing.T, steps, identical int) {
	t.Helper()
	sec, err := docsSection()
	if err != nil {
		t.Errorf("docs: %v", err)
		return
	}
	if want := fmt.Sprintf("compared %d steps, %d identical", steps, identical); !strings.Contains(sec, want) {
		t.Errorf("docs: %s must say %q (the counts of this run)", compatDoc, want)
	}
	listed := map[string]bool{}
	for _, m := range tableStep.FindAllStringSubmatch(sec, -1) {
		listed[m[1]] = true
		if _, ok := accepted[m[1]]; !ok {
			t.Errorf("docs: %s lists %q, which is not an accepted difference", compatDoc, m[1])
		}
	}
	for name := range accepted {
		if !listed[name] {
			t.Errorf("docs: %s does not list the accepted difference %q", compatDoc, name)
		}
	}
}
