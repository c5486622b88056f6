package main

import (
	"fmt"
	"strconv"
	"strings"
	"time"
)

// The text lines of pty status, pty blocks and pty end: what a person
// reads, built from the API's JSON answers (the --json output is those
// answers as they are).

// ptyActiveLine is pty status's line about what runs now: the block and,
// for an interactive program, its session; "" when nothing runs.
func ptyActiveLine(m map[string]any) string {
	b, _ := m["active_block_id"].(string)
	if b == "" {
		return ""
	}
	if s, _ := m["active_session_id"].(string); s != "" {
		return "running: block " + b + " (interactive session " + s + ")"
	}
	return "running: block " + b
}

// ptyBlockLine is one row of pty blocks: number, id, status (with its
// reason), exit code, start time, duration and command. The status column
// is as wide as its longest value ("cancelled (interrupted)"), so the
// columns after it stay aligned.
func ptyBlockLine(b map[string]any) string {
	code := "-"
	if b["exit_code"] != nil {
		code = strconv.FormatInt(ptyNum(b["exit_code"]), 10)
	}
	status, _ := b["status"].(string)
	if r, _ := b["reason"].(string); r != "" {
		status += " (" + r + ")"
	}
	start, took := "-", "-"
	if ts := ptyNum(b["ts_begin"]); ts > 0 {
		start = time.UnixMilli(ts).UTC().Format("2006-01-02 15:04:05Z")
		if end := ptyNum(b["ts_end"]); end >= ts {
			took = (time.Duration(end-ts) * time.Millisecond).Round(time.Millisecond).String()
		} else {
			took = "running"
		}
	}
	id, _ := b["block_id"].(string)
	cmd, _ := b["cmd"].(string)
	return fmt.Sprintf("%4d  %-38s %-24s exit %-4s %-20s %-9s %s", ptyNum(b["seq"]), id, status, code, start, took, cmd)
}

// ptyEndLine says what pty end did, in words: what happened to the running
// block or session, then to the shell.
func ptyEndLine(m map[string]any) string {
	var parts []string
	block, _ := m["block_id"].(string)
	switch {
	case m["forced"] == true && block != "":
		parts = append(parts, "killed the running block "+block+" (it ignored Ctrl+C)")
	case m["forced"] == true:
		parts = append(parts, "killed what was running (it ignored Ctrl+C)")
	case m["ended"] == true && block != "":
		parts = append(parts, "ended the running block "+block+" with Ctrl+C")
	case m["ended"] == true:
		parts = append(parts, "ended what was running with Ctrl+C")
	default:
		parts = append(parts, "nothing was running")
	}
	switch {
	case m["shell_ended"] == true:
		parts = append(parts, "the shell ended and its slot is free")
	case m["reset"] == true:
		parts = append(parts, "the shell did not come back and was torn down")
	default:
		parts = append(parts, "no shell was running")
	}
	return strings.Join(parts, "; ")
}
