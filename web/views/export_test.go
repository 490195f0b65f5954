package views

import (
	"fmt"
	"strings"
)

// GuideMarkdown writes the guide as Markdown: docs/debugging.md, which
// TestDebuggingGuideDoc keeps equal to it (and make generate rewrites).
func GuideMarkdown() string {
	var b strings.Builder
	b.WriteString("# Debugging a duplicate, a missing effect or a stuck job\n\n")
	b.WriteString("The same guide is in the admin console at `/admin/help`, with its links live.\n")
	b.WriteString("Logs are JSON lines; every field named below is a key in them.\n")
	for _, s := range Guide {
		fmt.Fprintf(&b, "\n## %s\n\n", s.Title)
		for _, p := range s.Text {
			b.WriteString(p + "\n\n")
		}
		b.WriteString("In the console:\n")
		for _, l := range s.Links {
			fmt.Fprintf(&b, "- %s: `%s`\n", l.Label, l.Href)
		}
		b.WriteString("\nLog fields: " + strings.Join(backquote(s.Fields), ", ") + ".\n")
	}
	return b.String()
}

func backquote(fields []string) []string {
	out := make([]string, len(fields))
	for i, f := range fields {
		if strings.HasPrefix(f, "msg:") {
			out[i] = f
			continue
		}
		out[i] = "`" + f + "`"
	}
	return out
}
