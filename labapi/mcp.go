package labapi

// registerMCPRoutes serves MCP over streamable HTTP at /mcp (token
// required). (MCP issue.)
func (s *Server) registerMCPRoutes() {}
