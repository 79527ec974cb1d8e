"""Where agents are built: an MCP server (``mcp_server``, the ``mcp`` extra) and a LangGraph store
(``langgraph.XMemoryStore``, the ``langgraph`` extra). Each module imports its framework when it is
imported itself, so ``xmemory_gpu`` needs neither."""
