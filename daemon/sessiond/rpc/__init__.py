"""sessiond's protocol: the methods, notifications and hooks of DESIGN.md on the JSON-RPC layer."""
