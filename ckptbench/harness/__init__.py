"""Running Spark against a store: the session wired to a strategy, the workloads, a query in a
process of its own, the run's stores and prefixes, and the requests counted inside Spark's JVMs.
Experiments use it; the record, metrics and report never import it."""
