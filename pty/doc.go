// Package pty is the agent terminal of seed 001: one bash per conversation
// under a pseudo-terminal, blocks, the spool and its cursors, wait_for and
// interactive sessions, every byte going through the log.
package pty
