package recovery

import "syscall"

// syscallENOTDIR: a path below a regular file does not exist either.
const syscallENOTDIR = syscall.ENOTDIR
