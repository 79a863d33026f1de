package valkeytest

import (
	"os"
	"path/filepath"
	"strings"
)

// Reading a server's files: its log, its output, and INFO replies.

// logTail returns the last n lines of the server's log and stdout/stderr.
func (s *Server) logTail(n int) string {
	var b strings.Builder
	for _, name := range []string{logName, stdoutName} {
		data, err := os.ReadFile(filepath.Join(s.Dir, name))
		if err != nil || len(data) == 0 {
			continue
		}
		lines := strings.Split(strings.TrimRight(string(data), "\n"), "\n")
		if len(lines) > n {
			lines = lines[len(lines)-n:]
		}
		if name == stdoutName {
			b.WriteString("--- stdout/stderr:\n")
		}
		b.WriteString(strings.Join(lines, "\n"))
		b.WriteString("\n")
	}
	return b.String()
}

func fileSize(path string) int64 {
	fi, err := os.Stat(path)
	if err != nil {
		return 0
	}
	return fi.Size()
}

// readFrom returns the content of path from byte offset off on.
func readFrom(path string, off int64) string {
	data, err := os.ReadFile(path)
	if err != nil || int64(len(data)) < off {
		return ""
	}
	return string(data[off:])
}

// infoField returns the value of "field:value" in an INFO reply.
func infoField(info, field string) string {
	for line := range strings.SplitSeq(info, "\n") {
		if v, ok := strings.CutPrefix(strings.TrimRight(line, "\r"), field+":"); ok {
			return v
		}
	}
	return ""
}
