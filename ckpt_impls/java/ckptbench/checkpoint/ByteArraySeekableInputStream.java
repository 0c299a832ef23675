package ckptbench.checkpoint;

import java.io.ByteArrayInputStream;
import java.io.EOFException;
import java.io.IOException;

import org.apache.hadoop.fs.PositionedReadable;
import org.apache.hadoop.fs.Seekable;

/** A whole object held in memory, readable as the seekable stream {@code FSDataInputStream} needs. */
final class ByteArraySeekableInputStream extends ByteArrayInputStream
    implements Seekable, PositionedReadable {

  ByteArraySeekableInputStream(byte[] bytes) {
    super(bytes);
  }

  @Override
  public synchronized void seek(long position) throws IOException {
    if (position < 0 || position > count) {
      throw new EOFException("Cannot seek to " + position + " in " + count + " bytes");
    }
    pos = (int) position;
  }

  @Override
  public synchronized long getPos() {
    return pos;
  }

  @Override
  public boolean seekToNewSource(long targetPos) {
    return false;
  }

  @Override
  public int read(long position, byte[] buffer, int offset, int length) {
    if (position >= count) {
      return -1;
    }
    int n = (int) Math.min(length, count - position);
    System.arraycopy(buf, (int) position, buffer, offset, n);
    return n;
  }

  @Override
  public void readFully(long position, byte[] buffer, int offset, int length) throws IOException {
    if (read(position, buffer, offset, length) < length) {
      throw new EOFException("Read past the end: " + (position + length) + " > " + count);
    }
  }

  @Override
  public void readFully(long position, byte[] buffer) throws IOException {
    readFully(position, buffer, 0, buffer.length);
  }
}
