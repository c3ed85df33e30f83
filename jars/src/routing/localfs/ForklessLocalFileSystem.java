package routing.localfs;

import org.apache.hadoop.fs.LocalFileSystem;

/**
 * {@code fs.file.impl}: Hadoop's checksummed local file system over
 * {@link ForklessRawLocalFileSystem}, so the files written and their {@code .crc} siblings
 * are the same as with Hadoop's own.
 */
public class ForklessLocalFileSystem extends LocalFileSystem {
  public ForklessLocalFileSystem() {
    super(new ForklessRawLocalFileSystem());
  }
}
