"""Any MCP server as a whileai world (``advanced={"world": "mcp:<command or url>"}``)."""
