package labapi

// registerStepRoutes registers the step routes of SPEC §6/§8. (Steps issue.)
func (s *Server) registerStepRoutes() {}
