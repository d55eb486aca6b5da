// placeholder, replaced by the CLI
