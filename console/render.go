package console

import (
	"bytes"
	"io"
	"strings"

	terminal "github.com/buildkite/terminal-to-html/v3"
	"github.com/charmbracelet/x/vt"
)

// Terminal output is rendered to HTML here, on the server, by libraries
// made for it (no emulator of ours): buildkite's terminal-to-html for
// output as a log shows it — colours, carriage returns, progress bars that
// redraw a line, cursor movement within the text — and, for a full-screen
// program (an interactive block), charmbracelet's vt emulator for the
// screen it leaves, whose cells, as text with their SGR styles, then go
// through terminal-to-html too. Both escape every character of the output:
// the HTML holds only their spans (class="term-…"), links and images.

// DefaultCols and DefaultRows are the screen of a block whose pty size
// the log does not say (the terminal manager's default size).
const (
	DefaultCols = 200
	DefaultRows = 50
)

// RenderOutput renders output as terminal-to-html shows a build log.
func RenderOutput(out []byte) string { return terminal.Render(out) }

// RenderScreen renders the screen a cols×rows terminal shows after out,
// terminal output in the spool's form: its line ends were stored as "\n"
// (pty.PtyOutput), which a terminal receives as "\r\n" (the tty's onlcr),
// so each is fed to the emulator as that.
func RenderScreen(out []byte, cols, rows int) string {
	return terminal.Render([]byte(screenText(out, cols, rows)))
}

// screenText is the screen a cols×rows terminal shows after out, as text
// with its SGR styles, without trailing blank lines.
func screenText(out []byte, cols, rows int) string {
	if cols <= 0 || rows <= 0 {
		cols, rows = DefaultCols, DefaultRows
	}
	e := vt.NewEmulator(cols, rows)
	// The emulator answers queries (cursor position, device attributes)
	// on a pipe; nobody types here, so the answers are drained and
	// dropped, or a query in the output would block the write for ever.
	pw, _ := e.InputPipe().(*io.PipeWriter)
	done := make(chan struct{})
	go func() {
		defer close(done)
		io.Copy(io.Discard, readerFunc(e.Read))
	}()
	e.Write(bytes.ReplaceAll(out, []byte("\n"), []byte("\r\n")))
	screen := e.Render()
	if pw != nil {
		pw.CloseWithError(io.EOF)
		<-done
	}
	return strings.TrimRight(screen, "\n ")
}

type readerFunc func([]byte) (int, error)

func (f readerFunc) Read(p []byte) (int, error) { return f(p) }
