package web_test

import (
	"bytes"
	"io"
	"strings"
)

func bytesReader(b []byte) io.Reader { return bytes.NewReader(b) }

func contains(s, sub string) bool { return strings.Contains(s, sub) }
