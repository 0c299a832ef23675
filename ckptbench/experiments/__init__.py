"""The experiments: each starts its stores and Spark through ``ckptbench.harness`` and writes one
record (``ckptbench.record``)."""
