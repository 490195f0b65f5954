package k6smoke

import (
	"fmt"
	"path/filepath"
	"strings"

	"github.com/dop251/goja"
	"github.com/evanw/esbuild/pkg/api"
)

// bundle turns a k6 script and the local files it imports into one
// CommonJS program: esbuild resolves the relative imports (./lib/sekali.js)
// and leaves k6's own modules (k6, k6/http, …) to require(), which the
// runner answers with its native modules. An inline source map lets goja
// name the script's own file and line in a stack trace.
func bundle(script string) (*goja.Program, error) {
	abs, err := filepath.Abs(script)
	if err != nil {
		return nil, err
	}
	res := api.Build(api.BuildOptions{
		EntryPoints:   []string{abs},
		AbsWorkingDir: filepath.Dir(abs),
		Bundle:        true,
		Write:         false,
		Format:        api.FormatCommonJS,
		Platform:      api.PlatformNeutral,
		Target:        api.ES2017, // what goja runs; esbuild lowers anything newer
		External:      []string{"k6", "k6/*"},
		Sourcemap:     api.SourceMapInline,
		Outfile:       filepath.Base(abs) + ".bundle.js",
		LogLevel:      api.LogLevelSilent,
	})
	if len(res.Errors) > 0 {
		var msgs []string
		for _, m := range res.Errors {
			where := ""
			if m.Location != nil {
				where = fmt.Sprintf("%s:%d:%d: ", m.Location.File, m.Location.Line, m.Location.Column)
			}
			msgs = append(msgs, where+m.Text)
		}
		return nil, fmt.Errorf("bundling %s: %s", script, strings.Join(msgs, "; "))
	}
	var src []byte
	for _, f := range res.OutputFiles {
		if strings.HasSuffix(f.Path, ".js") {
			src = f.Contents
		}
	}
	if src == nil {
		return nil, fmt.Errorf("bundling %s: esbuild wrote no JavaScript", script)
	}
	// The bundle finds CommonJS's require, module and exports as globals:
	// each runtime runs one script.
	prog, err := goja.Compile(abs, string(src), false)
	if err != nil {
		return nil, fmt.Errorf("compiling %s: %w", script, err)
	}
	return prog, nil
}
