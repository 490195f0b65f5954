package views_test

import (
	"bytes"
	"flag"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sekali/sekali/web/views"
)

var update = flag.Bool("update", false, "rewrite docs/debugging.md from the guide")

// The generated *_templ.go files are committed; this fails when one is
// missing or older than its .templ source. `make generate` fixes it.
func TestGeneratedCodeIsUpToDate(t *testing.T) {
	t.Parallel()
	for _, dir := range []string{".", "../sandboxgw"} {
		t.Run(dir, func(t *testing.T) { checkGenerated(t, dir) })
	}
}

func checkGenerated(t *testing.T, src string) {
	sources, err := filepath.Glob(filepath.Join(src, "*.templ"))
	if err != nil || len(sources) == 0 {
		t.Fatalf("no .templ files in %s: %v", src, err)
	}
	dir := t.TempDir()
	for _, path := range sources {
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, filepath.Base(path)), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	out, err := exec.Command("go", "tool", "templ", "generate", "-path", dir).CombinedOutput()
	if err != nil {
		t.Fatalf("templ generate: %v\n%s", err, out)
	}
	for _, path := range sources {
		gen := strings.TrimSuffix(path, ".templ") + "_templ.go"
		want, err := os.ReadFile(filepath.Join(dir, filepath.Base(gen)))
		if err != nil {
			t.Fatal(err)
		}
		got, err := os.ReadFile(gen)
		if err != nil {
			t.Errorf("%s is missing: run make generate", gen)
			continue
		}
		if !bytes.Equal(got, want) {
			t.Errorf("%s is not what %s generates: run make generate", gen, path)
		}
	}
}

// docs/debugging.md is the console's help page, word for word.
func TestDebuggingGuideDoc(t *testing.T) {
	t.Parallel()
	const path = "../../docs/debugging.md"
	want := views.GuideMarkdown()
	if *update {
		if err := os.WriteFile(path, []byte(want), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	got, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v: run make generate", err)
	}
	if string(got) != want {
		t.Errorf("docs/debugging.md differs from the help page's guide (web/views/help.go): run make generate")
	}
}
