package labapi

// registerPtyRoutes registers the terminal bridge of SPEC §6. (Terminal issue.)
func (s *Server) registerPtyRoutes() {}
