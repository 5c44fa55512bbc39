// SettleWrite: see the module's files.
