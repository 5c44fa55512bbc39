// SettleRead: see the module's files.
