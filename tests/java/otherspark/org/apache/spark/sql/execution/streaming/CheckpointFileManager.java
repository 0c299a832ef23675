package org.apache.spark.sql.execution.streaming;

/** Stands in for Spark 3.5's CheckpointFileManager (its package before 4.1) at compile time only. */
public interface CheckpointFileManager {}
