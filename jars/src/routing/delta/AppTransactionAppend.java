package routing.delta;

import java.util.List;
import java.util.Map;

import org.apache.spark.sql.Dataset;
import org.apache.spark.sql.Row;
import org.apache.spark.sql.SaveMode;
import org.apache.spark.sql.SparkSession;
import org.apache.spark.sql.delta.DeltaLog;
import org.apache.spark.sql.delta.DeltaOperations;
import org.apache.spark.sql.delta.DeltaOptions;
import org.apache.spark.sql.delta.actions.Action;
import org.apache.spark.sql.delta.commands.DMLUtils;
import org.apache.spark.sql.delta.commands.WriteIntoDelta;

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
 */
public final class AppTransactionAppend {
  private AppTransactionAppend() {}

  /**
   * Append {@code data} to the table at {@code path} (created if missing) in one commit.
   *
   * @param options the writer's options: {@code txnAppId}, {@code txnVersion},
   *     {@code mergeSchema}, {@code userMetadata}, {@code maxRecordsPerFile}...
   * @param partitionBy the partition columns of a table created by this append
   */
  public static void append(
      SparkSession spark,
      Dataset<Row> data,
      String path,
      Map<String, String> options,
      List<String> partitionBy) {
    DeltaLog log = DeltaLog.forTable(spark, path);
    DeltaOptions deltaOptions =
        new DeltaOptions(
            scala.collection.immutable.Map.from(CollectionConverters.asScala(options)),
            spark.sessionState().conf());
    Seq<String> partitions = CollectionConverters.asScala(partitionBy).toList();
    WriteIntoDelta write =
        new WriteIntoDelta(
            log,
            SaveMode.Append,
            deltaOptions,
            partitions,
            scala.collection.immutable.Map$.MODULE$.empty(),
            data,
            Option.empty(),
            Option.empty(),
            false);
    Option<Object> mergeSchema =
        deltaOptions.canMergeSchema() ? Option.apply(Boolean.TRUE) : Option.empty();
    DeltaOperations.Write operation =
        new DeltaOperations.Write(
            SaveMode.Append,
            Option.apply(partitions),
            Option.empty(),
            deltaOptions.userMetadata(),
            Option.empty(),
            Option.empty(),
            mergeSchema,
            Option.empty(),
            Option.empty());
    log.withNewTransaction(
        Option.empty(),
        Option.empty(),
        txn -> {
          DMLUtils.TaggedCommitData<Action> commit =
              write.writeAndReturnCommitData(txn, spark, Option.empty(), false);
          return txn.commitIfNeeded(commit.actions(), operation, commit.stringTags());
        });
  }
}
