"""moim's HTTP side: the proxy, the memory API, the CLI."""
