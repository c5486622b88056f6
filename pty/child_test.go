package pty_test

const childEnv = "CMLAB_PTY_TEST_CHILD"

func runChild() {}
