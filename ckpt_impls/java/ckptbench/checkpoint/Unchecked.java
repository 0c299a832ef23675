package ckptbench.checkpoint;

import java.io.IOException;

/**
 * Rethrows checked IO exceptions from methods whose Scala signature declares none.
 *
 * <p>Spark's trait is Scala, so its Java signatures carry no {@code throws IOException}, yet
 * Spark catches {@code FileAlreadyExistsException} and {@code FileNotFoundException} by type:
 * the original exception must reach it unchanged, not wrapped.
 */
final class Unchecked {
  private Unchecked() {}

  static RuntimeException io(IOException e) {
    throw Unchecked.<RuntimeException>sneaky(e);
  }

  @SuppressWarnings("unchecked")
  private static <T extends Throwable> T sneaky(Throwable e) throws T {
    throw (T) e;
  }
}
