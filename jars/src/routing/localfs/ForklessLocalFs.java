package routing.localfs;

import java.io.IOException;
import java.net.URI;
import java.net.URISyntaxException;

import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.fs.AbstractFileSystem;
import org.apache.hadoop.fs.ChecksumFs;
import org.apache.hadoop.fs.DelegateToFileSystem;
import org.apache.hadoop.fs.FsConstants;
import org.apache.hadoop.fs.FsServerDefaults;
import org.apache.hadoop.fs.Path;
import org.apache.hadoop.fs.local.LocalConfigKeys;

/**
 * {@code fs.AbstractFileSystem.file.impl}, what {@code FileContext} uses (Delta's
 * {@code HDFSLogStore} commits, Spark's streaming checkpoints): Hadoop's {@code LocalFs}
 * with {@link ForklessRawLocalFileSystem} beneath and an atomic rename to a new name.
 */
public class ForklessLocalFs extends ChecksumFs {
  public ForklessLocalFs(URI uri, Configuration conf) throws IOException, URISyntaxException {
    super(new Raw(uri, conf));
  }

  public ForklessLocalFs(Configuration conf) throws IOException, URISyntaxException {
    this(FsConstants.LOCAL_FS_URI, conf);
  }

  /** Hadoop's {@code RawLocalFs} over the forkless file system. */
  static class Raw extends DelegateToFileSystem {
    Raw(URI uri, Configuration conf) throws IOException, URISyntaxException {
      super(uri, new ForklessRawLocalFileSystem(), conf, FsConstants.LOCAL_FS_URI.getScheme(), false);
    }

    @Override
    public int getUriDefaultPort() {
      return -1;
    }

    @Override
    public FsServerDefaults getServerDefaults(Path f) throws IOException {
      return LocalConfigKeys.getServerDefaults();
    }

    @Override
    @Deprecated
    public FsServerDefaults getServerDefaults() throws IOException {
      return LocalConfigKeys.getServerDefaults();
    }

    @Override
    public boolean isValidName(String src) {
      return true;
    }

    @Override
    public void renameInternal(Path src, Path dst, boolean overwrite) throws IOException {
      if (overwrite || !((ForklessRawLocalFileSystem) fsImpl).renameNoReplace(src, dst)) {
        super.renameInternal(src, dst, overwrite);
      }
    }
  }
}
