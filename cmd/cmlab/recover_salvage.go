package main

import (
	"errors"

	"github.com/cmlab/cmlab/home"
	"github.com/cmlab/cmlab/recovery"
)

// salvageLog runs wal.Salvage over the home's log and lists the lost
// entries. Until the log package provides Salvage, it refuses.
func salvageLog(h home.Home) ([]recovery.SalvagedEntry, error) {
	return nil, errors.New("wal.Salvage is not available in this build")
}
