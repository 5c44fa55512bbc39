// settle-gen: writes synthetic order exports (see benchmarks/README.md).
print("settle-gen: not written yet")
