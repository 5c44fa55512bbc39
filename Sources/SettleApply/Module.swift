// SettleApply: see the module's files.
