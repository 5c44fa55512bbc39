// SettleHTTP: see the module's files.
