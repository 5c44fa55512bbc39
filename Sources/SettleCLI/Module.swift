// SettleCLI: see the module's files.
