package routing.localfs;

import java.io.File;
import java.io.FileNotFoundException;
import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.NoSuchFileException;
import java.nio.file.attribute.PosixFilePermission;
import java.util.EnumSet;
import java.util.Set;

import org.apache.hadoop.fs.FileAlreadyExistsException;
import org.apache.hadoop.fs.FileStatus;
import org.apache.hadoop.fs.Path;
import org.apache.hadoop.fs.RawLocalFileSystem;
import org.apache.hadoop.fs.permission.FsPermission;

/**
 * Hadoop's raw local file system without the helper processes it forks when its native
 * library is absent (as with pip's pyspark): a {@code chmod} for every file it creates and
 * a {@code readlink} for every existence check of a rename. A micro-batch creates and
 * renames a few dozen files (Parquet parts, Delta commits, checkpoints), so each batch
 * forked about a hundred processes from a JVM of several GiB. Here both are java.nio calls.
 */
public class ForklessRawLocalFileSystem extends RawLocalFileSystem {

  private static final PosixFilePermission[] BITS = {
    PosixFilePermission.OTHERS_EXECUTE, PosixFilePermission.OTHERS_WRITE,
    PosixFilePermission.OTHERS_READ, PosixFilePermission.GROUP_EXECUTE,
    PosixFilePermission.GROUP_WRITE, PosixFilePermission.GROUP_READ,
    PosixFilePermission.OWNER_EXECUTE, PosixFilePermission.OWNER_WRITE,
    PosixFilePermission.OWNER_READ,
  };

  /** The rwx bits of a Hadoop permission as java.nio's (the sticky bit has no equivalent). */
  static Set<PosixFilePermission> posix(FsPermission permission) {
    short mode = permission.toShort();
    Set<PosixFilePermission> set = EnumSet.noneOf(PosixFilePermission.class);
    for (int i = 0; i < BITS.length; i++) {
      if ((mode & (1 << i)) != 0) {
        set.add(BITS[i]);
      }
    }
    return set;
  }

  @Override
  public void setPermission(Path p, FsPermission permission) throws IOException {
    try {
      Files.setPosixFilePermissions(pathToFile(p).toPath(), posix(permission));
    } catch (NoSuchFileException e) {
      throw new FileNotFoundException("File " + p + " does not exist");
    }
  }

  /** A regular file's or folder's status without forking {@code readlink}; links as before. */
  @Override
  public FileStatus getFileLinkStatus(Path f) throws IOException {
    if (Files.isSymbolicLink(pathToFile(f).toPath())) {
      return super.getFileLinkStatus(f);
    }
    return getFileStatus(f);
  }

  /**
   * Renames a file to a name that must not exist, atomically: a hard link fails when the
   * target exists (two writers of one Delta commit, as delta-rs does it), then the source
   * goes. Hadoop checks the target and then renames, which a concurrent writer can slip
   * between. Folders, and file systems without hard links, fall back to a plain rename.
   */
  boolean renameNoReplace(Path src, Path dst) throws IOException {
    File from = pathToFile(src);
    File to = pathToFile(dst);
    if (!from.isFile()) {
      return false;
    }
    try {
      Files.createLink(to.toPath(), from.toPath());
    } catch (java.nio.file.FileAlreadyExistsException e) {
      throw new FileAlreadyExistsException("rename destination " + dst + " already exists");
    } catch (NoSuchFileException e) {
      throw new FileNotFoundException("rename " + src + " to " + dst + ": " + e.getMessage());
    } catch (UnsupportedOperationException | IOException e) {
      return false;
    }
    Files.delete(from.toPath());
    return true;
  }
}
