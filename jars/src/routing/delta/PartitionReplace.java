package routing.delta;

import java.util.ArrayList;
import java.util.List;
import java.util.Map;

import org.apache.spark.sql.Dataset;
import org.apache.spark.sql.Row;
import org.apache.spark.sql.SaveMode;
import org.apache.spark.sql.SparkSession;
import org.apache.spark.sql.delta.DeltaLog;
import org.apache.spark.sql.delta.DeltaOperations;
import org.apache.spark.sql.delta.DeltaOptions;
import org.apache.spark.sql.delta.OptimisticTransaction;
import org.apache.spark.sql.delta.OptimisticTransaction$;
import org.apache.spark.sql.delta.actions.Action;
import org.apache.spark.sql.delta.actions.AddFile;
import org.apache.spark.sql.delta.commands.DMLUtils;
import org.apache.spark.sql.delta.commands.WriteIntoDelta;

import scala.Option;
import scala.collection.immutable.Seq;
import scala.jdk.javaapi.CollectionConverters;

/**
 * One commit that removes every file of a partition, as the caller read them from the log, and
 * adds the files of {@code data}: what a MERGE into that partition does when the caller knows
 * all of its rows and hands them over, with their changes, as {@code data}.
 *
 * <p>A MERGE finds the files it rewrites in the snapshot's full state: a state reconstruction
 * (Spark queries over the log) in the first MERGE of each process and after each commit the
 * process did not make itself. The routing job keeps a small PENDING partition in memory and
 * knows its files from the log (delta-rs), so it replaces the partition instead
 * (routing/io/storage.py, {@code DeltaStorage._replace_pending}).
 *
 * <p>The commit is the app transaction ({@code txnAppId}, {@code txnVersion}), checked and
 * conflicting as {@link AppTransactionAppend#append}'s, and it reads the whole table, so any
 * other commit since the version the files were listed at conflicts with it: the files it
 * removes are those of that version.
 */
public final class PartitionReplace {
  private PartitionReplace() {}

  /** What {@link #replace} returns when the table is no longer at the version its files were listed at. */
  public static final long MOVED = -4L;

  /**
   * Replace the files {@code paths} (the partition {@code column} = {@code value}, as the log of
   * version {@code checkedVersion} names them, with their sizes and modification times) by the
   * files of {@code data}, in one commit.
   *
   * @param options as {@link AppTransactionAppend#append}'s, {@code txnAppId} and {@code
   *     txnVersion} among them
   * @param predicate the partition's predicate, as the commit's operation records it
   * @return as {@link AppTransactionAppend#append}; {@link #MOVED} when the table's latest
   *     version is not {@code checkedVersion} (nothing is written)
   */
  public static long replace(
      SparkSession spark,
      Dataset<Row> data,
      String path,
      Map<String, String> options,
      List<String> partitionBy,
      String column,
      String value,
      List<String> paths,
      List<? extends Number> sizes,
      List<? extends Number> modificationTimes,
      String predicate,
      boolean deferCheckpoint,
      long checkedVersion) {
    DeltaLog log = DeltaLog.forTable(spark, path);
    DeltaOptions deltaOptions = new DeltaOptions(
        AppTransactionAppend.scalaMap(options), spark.sessionState().conf());
    Seq<String> partitions = CollectionConverters.asScala(partitionBy).toList();
    WriteIntoDelta write =
        AppTransactionAppend.writeInto(log, data, deltaOptions, partitions, Map.of());
    OptimisticTransaction txn =
        AppTransactionAppend.transaction(log, options, checkedVersion, deferCheckpoint, false);
    if (txn == null) {
      return AppTransactionAppend.SKIPPED;
    }
    if (txn.readVersion() != checkedVersion) {
      return MOVED;
    }
    txn.readWholeTable(); // any commit since conflicts: the files removed are this version's
    OptimisticTransaction$.MODULE$.setActive(txn);
    try {
      DMLUtils.TaggedCommitData<Action> commit =
          write.writeAndReturnCommitData(txn, spark, Option.empty(), false);
      List<Action> actions = new ArrayList<>(CollectionConverters.asJava(commit.actions()));
      scala.collection.immutable.Map<String, String> partitionValues =
          AppTransactionAppend.scalaMap(Map.of(column, value));
      long now = System.currentTimeMillis();
      for (int i = 0; i < paths.size(); i++) {
        AddFile file =
            new AddFile(
                paths.get(i),
                partitionValues,
                sizes.get(i).longValue(),
                modificationTimes.get(i).longValue(),
                true,
                null,
                null,
                null,
                Option.empty(),
                Option.empty(),
                Option.empty(),
                Option.empty(),
                Option.empty());
        actions.add(file.removeWithTimestamp(now, true));
      }
      DeltaOperations.Write operation =
          AppTransactionAppend.writeOperation(
              SaveMode.Overwrite, partitions, Option.apply(predicate), deltaOptions);
      Option<Object> version =
          txn.commitIfNeeded(
              CollectionConverters.asScala(actions).toList(), operation, commit.stringTags());
      return deferCheckpoint ? AppTransactionAppend.checkpointDue(log, txn, version) : -1L;
    } finally {
      OptimisticTransaction$.MODULE$.clearActive();
    }
  }
}
