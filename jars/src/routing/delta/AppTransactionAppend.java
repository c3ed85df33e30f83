package routing.delta;

import java.util.HashMap;
import java.util.List;
import java.util.Map;

import org.apache.spark.sql.Dataset;
import org.apache.spark.sql.Row;
import org.apache.spark.sql.SaveMode;
import org.apache.spark.sql.SparkSession;
import org.apache.spark.sql.delta.CurrentTransactionInfo;
import org.apache.spark.sql.delta.DeltaConfigs$;
import org.apache.spark.sql.delta.DeltaLog;
import org.apache.spark.sql.delta.DeltaOperations;
import org.apache.spark.sql.delta.DeltaOptions;
import org.apache.spark.sql.delta.OptimisticTransaction;
import org.apache.spark.sql.delta.OptimisticTransaction$;
import org.apache.spark.sql.delta.Snapshot;
import org.apache.spark.sql.delta.VersionChecksum;
import org.apache.spark.sql.delta.actions.Action;
import org.apache.spark.sql.delta.actions.SetTransaction;
import org.apache.spark.sql.delta.commands.DMLUtils;
import org.apache.spark.sql.delta.commands.WriteIntoDelta;
import org.apache.spark.sql.delta.hooks.ChecksumHook$;

import scala.Option;
import scala.collection.immutable.Seq;
import scala.jdk.javaapi.CollectionConverters;

/**
 * An append to a Delta table as {@code df.write.format("delta").mode("append").options(...)}
 * does it ({@link WriteIntoDelta}), the app transaction ({@code txnAppId}, {@code txnVersion})
 * included, without first asking the table whether that transaction was committed.
 *
 * <p>Delta answers that question from the snapshot's full state: a state reconstruction
 * (two Spark queries over the checkpoint and the commits since) before every append,
 * since each commit makes a new snapshot. The routing job asks delta-rs instead, from the
 * log (routing/io/storage.py, {@code append}), and calls this only when the answer is no.
 *
 * <p>The answer stays part of the commit, with Delta's conflict semantics: the commits
 * between the version delta-rs read and the transaction's own snapshot are looked into
 * for the app transaction (their commit files, a few at most), and the transaction
 * records that it read the app id ({@code readTxn}), as Delta's own check does, so
 * Delta's conflict checker refuses the commit ({@code ConcurrentTransactionException})
 * when another writer commits the same app transaction meanwhile.
 *
 * <p>A commit whose version is a multiple of the table's {@code delta.checkpointInterval}
 * writes a checkpoint of the log before it returns (Delta's {@code CheckpointHook}), and its
 * statistics rebuild the table's state: a second or more inside a small batch. Asked to, the
 * append leaves both out ({@link JobTransaction}) and says which version is due, and the
 * job writes it beside its next batch ({@link #checkpoint}).
 *
 * <p>A table that other writers write too (an address table, which a producer may write with
 * delta-rs or another writer that leaves no checksum file) may be at a version without a
 * checksum. Delta's commit then derives the new version's checksum from the snapshot's full
 * state, a state reconstruction inside the commit, for a file the next producer's commit
 * leaves behind again. Asked to, the append writes no checksum after a version without one
 * ({@link JobTransaction}), as that table's other writer does.
 */
public final class AppTransactionAppend {
  private AppTransactionAppend() {}

  /** What {@link #append} returns when the app transaction was committed already. */
  public static final long SKIPPED = -2L;

  /**
   * Append {@code data} to the table at {@code path} (created if missing) in one commit.
   *
   * @param options the writer's options: {@code txnAppId}, {@code txnVersion},
   *     {@code mergeSchema}, {@code userMetadata}, {@code maxRecordsPerFile}...; those named
   *     {@code delta.*} are the properties of a table this append creates, as Delta's data
   *     source takes them ({@code DeltaDataSource.createRelation})
   * @param partitionBy the partition columns of a table created by this append
   * @param deferCheckpoint leave the checkpoint the commit may be due out of it
   * @param checkedVersion the table's version at which the app transaction was found not
   *     committed (-1: there was no table)
   * @param sharedTable the table is written by others too: no checksum after a version without
   *     one ({@link JobTransaction})
   * @return the version committed when {@code deferCheckpoint} left its checkpoint out, else -1;
   *     {@link #SKIPPED} when a commit after {@code checkedVersion} carries the app transaction
   *     already (nothing is written, as Delta's writer would skip it)
   */
  public static long append(
      SparkSession spark,
      Dataset<Row> data,
      String path,
      Map<String, String> options,
      List<String> partitionBy,
      boolean deferCheckpoint,
      long checkedVersion,
      boolean sharedTable) {
    DeltaLog log = DeltaLog.forTable(spark, path);
    DeltaOptions deltaOptions = new DeltaOptions(scalaMap(options), spark.sessionState().conf());
    Seq<String> partitions = CollectionConverters.asScala(partitionBy).toList();
    WriteIntoDelta write =
        writeInto(log, data, deltaOptions, partitions, tableProperties(options));
    DeltaOperations.Write operation = appendOperation(partitions, deltaOptions);
    OptimisticTransaction txn =
        transaction(log, options, checkedVersion, deferCheckpoint, sharedTable);
    if (txn == null) {
      return SKIPPED;
    }
    OptimisticTransaction$.MODULE$.setActive(txn);
    try {
      DMLUtils.TaggedCommitData<Action> commit =
          write.writeAndReturnCommitData(txn, spark, Option.empty(), false);
      Option<Object> version = txn.commitIfNeeded(commit.actions(), operation, commit.stringTags());
      return deferCheckpoint ? checkpointDue(log, txn, version) : -1L;
    } finally {
      OptimisticTransaction$.MODULE$.clearActive();
    }
  }

  /** Delta's write of {@code data} into the table of {@code log}, as its data source makes one. */
  static WriteIntoDelta writeInto(
      DeltaLog log,
      Dataset<Row> data,
      DeltaOptions options,
      Seq<String> partitions,
      Map<String, String> properties) {
    return new WriteIntoDelta(
        log,
        SaveMode.Append,
        options,
        partitions,
        DeltaConfigs$.MODULE$.validateConfigurations(scalaMap(properties)),
        data,
        Option.empty(),
        Option.empty(),
        false);
  }

  /**
   * The job's transaction on the table of {@code log} ({@link JobTransaction}), which has read
   * the app transaction of {@code options} if they name one; null when a commit after {@code
   * checkedVersion} carries that transaction already.
   */
  static OptimisticTransaction transaction(
      DeltaLog log,
      Map<String, String> options,
      long checkedVersion,
      boolean deferCheckpoint,
      boolean sharedTable) {
    OptimisticTransaction txn =
        new JobTransaction(log, Option.empty(), deferCheckpoint, sharedTable);
    String appId = options.get("txnAppId");
    if (appId != null) {
      long txnVersion = Long.parseLong(options.get("txnVersion"));
      if (committedSince(log, appId, txnVersion, checkedVersion, txn.readVersion())) {
        return null;
      }
      txn.readTxn().addOne(appId); // Delta's conflict check now covers the app transaction
    }
    return txn;
  }

  /** The options named {@code delta.*}: the properties of a table an append creates. */
  static Map<String, String> tableProperties(Map<String, String> options) {
    Map<String, String> named = new HashMap<>();
    options.forEach((key, value) -> {
      if (key.startsWith("delta.")) {
        named.put(key, value);
      }
    });
    return named;
  }

  /** The operation an append's commit records, as Delta's writer records it. */
  static DeltaOperations.Write appendOperation(Seq<String> partitions, DeltaOptions options) {
    return writeOperation(SaveMode.Append, partitions, Option.empty(), options);
  }

  /** The operation a write's commit records ({@code predicate}: the rows it replaced, if any). */
  static DeltaOperations.Write writeOperation(
      SaveMode mode, Seq<String> partitions, Option<String> predicate, DeltaOptions options) {
    Option<Object> mergeSchema =
        options.canMergeSchema() ? Option.apply(Boolean.TRUE) : Option.empty();
    return new DeltaOperations.Write(
        mode,
        Option.apply(partitions),
        predicate,
        options.userMetadata(),
        Option.empty(),
        Option.empty(),
        mergeSchema,
        Option.empty(),
        Option.empty());
  }

  /**
   * The version {@code txn} committed when the table is due its checkpoint there (-1: not
   * due, or nothing committed): what the {@code CheckpointHook} would have written.
   */
  static long checkpointDue(DeltaLog log, OptimisticTransaction txn, Option<Object> version) {
    if (version.isDefined()) {
      long committed = (Long) version.get();
      if (committed != 0 && committed % log.checkpointInterval(txn.metadata()) == 0) {
        return committed;
      }
    }
    return -1L;
  }

  /**
   * Whether a commit after {@code checked} and up to {@code upTo} carries the app transaction
   * {@code appId} at {@code txnVersion} or later: read from those commits' files.
   */
  static boolean committedSince(
      DeltaLog log, String appId, long txnVersion, long checked, long upTo) {
    if (upTo <= checked) {
      return false;
    }
    scala.collection.Iterator<scala.Tuple2<Object, Seq<Action>>> changes =
        log.getChanges(Math.max(checked + 1, 0L), upTo, Option.empty(), true);
    while (changes.hasNext()) {
      for (Action action : CollectionConverters.asJava(changes.next()._2())) {
        if (action instanceof SetTransaction txn
            && txn.appId().equals(appId)
            && txn.version() >= txnVersion) {
          return true;
        }
      }
    }
    return false;
  }

  static scala.collection.immutable.Map<String, String> scalaMap(Map<String, String> map) {
    return scala.collection.immutable.Map.from(CollectionConverters.asScala(map));
  }

  /**
   * The transaction of the job's appends, started as {@code DeltaLog.startTransaction} starts
   * one, with two of Delta's steps left out when asked:
   *
   * <ul>
   *   <li>{@code deferCheckpoint}: it never takes its commit for one due a checkpoint. Delta's
   *       commit asks {@link OptimisticTransaction#isCheckpointNeeded} once: true runs the
   *       {@code CheckpointHook}, and also has the commit's statistics count the table's files
   *       and bytes from the new snapshot's full state (a state reconstruction, two Spark
   *       queries, in the committing thread, for usage statistics alone; Delta takes them as
   *       free where a checkpoint will build that state anyway). Unregistering the hook alone
   *       left the reconstruction in the commit.
   *   <li>{@code sharedTable}, read at a version without a checksum file: the commit derives no
   *       checksum and writes none ({@code ChecksumHook}). Delta derives one from the previous
   *       version's, or, without it, from that snapshot's full state: a state reconstruction in
   *       the commit, 0.3-0.5 s of a small batch for each address table a producer wrote since
   *       the job's last commit there.
   * </ul>
   */
  static final class JobTransaction extends OptimisticTransaction {
    private final boolean deferCheckpoint;
    private final boolean noChecksum;

    /** @param snapshot the snapshot it starts from (empty: the log's latest) */
    JobTransaction(
        DeltaLog log, Option<Snapshot> snapshot, boolean deferCheckpoint, boolean sharedTable) {
      super(log, Option.empty(), snapshot);
      this.deferCheckpoint = deferCheckpoint;
      this.noChecksum = sharedTable && readVersion() >= 0 && snapshot().checksumOpt().isEmpty();
      if (noChecksum) {
        postCommitHooks().subtractOne(ChecksumHook$.MODULE$);
      }
    }

    @Override
    public boolean isCheckpointNeeded(long version, Snapshot postCommitSnapshot) {
      return !deferCheckpoint && super.isCheckpointNeeded(version, postCommitSnapshot);
    }

    @Override
    public Option<VersionChecksum> incrementallyDeriveChecksum(
        long attemptVersion, CurrentTransactionInfo info) {
      return noChecksum ? Option.empty() : super.incrementallyDeriveChecksum(attemptVersion, info);
    }
  }

  /**
   * Write the checkpoint of the table at {@code path} at {@code version}, and clean up the
   * log files it makes obsolete, as Delta's {@code CheckpointHook} does after a commit.
   */
  public static void checkpoint(SparkSession spark, String path, long version) {
    DeltaLog log = DeltaLog.forTable(spark, path);
    Snapshot snapshot = log.getSnapshotAt(version, Option.empty(), Option.empty(), false);
    log.checkpoint(snapshot, Option.empty());
  }
}
