"""An MCP server that offers no tools at all."""

from mcp.server.mcpserver import MCPServer

if __name__ == "__main__":
    MCPServer("empty-desk").run()
