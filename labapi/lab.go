package labapi

// registerLabRoutes registers the Lab routes of SPEC §6. (Lab API issue.)
func (s *Server) registerLabRoutes() {}
