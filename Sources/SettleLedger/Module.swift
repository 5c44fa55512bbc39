// SettleLedger: see the module's files.
