package org.example.library;

/** A library a third party's manager depends on, left out of its jar ({@code NeedsALibrary}). */
public final class Helper {
  private Helper() {}
}
