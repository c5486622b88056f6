package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// cmlabCommand is how to type the CLI in the hints serve prints: "cmlab",
// unless this process was started by 'go run ./cmd/cmlab' (its executable
// is go's temporary build, .../go-build…/exe/cmlab) and no cmlab is on
// PATH — then "go run ./cmd/cmlab", which works where the user typed it.
func cmlabCommand() string {
	exe, err := os.Executable()
	if err != nil || filepath.Base(exe) != "cmlab" || !strings.Contains(exe, string(filepath.Separator)+"go-build") {
		return "cmlab"
	}
	if _, err := exec.LookPath("cmlab"); err == nil {
		return "cmlab"
	}
	return "go run ./cmd/cmlab"
}
