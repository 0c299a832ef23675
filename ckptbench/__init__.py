"""ckptbench: which Spark Structured Streaming checkpoint strategy to run on an object store, and what it costs."""
