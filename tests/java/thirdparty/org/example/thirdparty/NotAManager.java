package org.example.thirdparty;

/** A class in the jar that is not a CheckpointFileManager. */
public class NotAManager {
  public NotAManager() {}
}
