package pty

import "unsafe"

func uintptrOf(p *int32) uintptr { return uintptr(unsafe.Pointer(p)) }
