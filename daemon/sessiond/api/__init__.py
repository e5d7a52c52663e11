"""sessiond's protocol on the JSON-RPC layer: the methods, notifications and hooks of
protocol/README.md."""
