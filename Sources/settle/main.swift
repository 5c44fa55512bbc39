import SettleCLI

// The executable is thin: everything lives in SettleCLI so tests can reach it.
Settle.main()
