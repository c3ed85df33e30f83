package routing.delta;

import java.io.IOException;
import java.io.UncheckedIOException;
import java.net.URI;
import java.net.URISyntaxException;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Objects;
import java.util.Set;
import java.util.UUID;
import java.util.concurrent.ConcurrentHashMap;

import org.apache.hadoop.fs.FileSystem;
import org.apache.hadoop.fs.Path;
import org.apache.spark.sql.Dataset;
import org.apache.spark.sql.Row;
import org.apache.spark.sql.SparkSession;
import org.apache.spark.sql.delta.DeltaConfigs$;
import org.apache.spark.sql.delta.DeltaLog;
import org.apache.spark.sql.delta.DeltaOperations;
import org.apache.spark.sql.delta.DeltaOptions;
import org.apache.spark.sql.delta.DummySnapshot;
import org.apache.spark.sql.delta.NoMapping$;
import org.apache.spark.sql.delta.OptimisticTransaction;
import org.apache.spark.sql.delta.OptimisticTransaction$;
import org.apache.spark.sql.delta.Snapshot;
import org.apache.spark.sql.delta.actions.Action;
import org.apache.spark.sql.delta.actions.AddFile;
import org.apache.spark.sql.delta.actions.FileAction;
import org.apache.spark.sql.delta.actions.Format;
import org.apache.spark.sql.delta.actions.Metadata;
import org.apache.spark.sql.delta.actions.Protocol;
import org.apache.spark.sql.delta.actions.SetTransaction;
import org.apache.spark.sql.types.DataType$;
import org.apache.spark.sql.types.StructField;
import org.apache.spark.sql.types.StructType;

import scala.Option;
import scala.collection.immutable.Seq;
import scala.jdk.javaapi.CollectionConverters;

/**
 * Appends to many Delta tables whose rows are written by ONE Spark job: the rows, tagged with
 * their table, are written as a table partitioned by the tag that is never committed ({@link
 * #stage}), with Delta's own writer and its file statistics; then each table's files are moved
 * into that table and committed there, metadata only ({@link #commit}), with the app
 * transaction and conflict check of {@link AppTransactionAppend#append}.
 *
 * <p>A batch that copies messages to many addresses wrote each address table with a Spark job
 * of its own: a job's fixed cost per table, most of the batch's writing at hundreds of
 * addresses. Staged, the job's cost is paid once; each table still gets its own commit.
 *
 * <p>A table takes staged files only when they are what its own append would have written: a
 * table the commit creates (with the staging's properties, as Delta's writer creates one), or
 * one with the staged rows' columns and types, no partitions, column mapping or constraints,
 * and the staging's statistics settings. For any other, {@link #commit} returns {@link
 * #NOT_STAGED} and deletes its files, and the caller appends it the plain way.
 */
public final class StagedAppends {
  private StagedAppends() {}

  /** What {@link #commit} returns when the table cannot take the staged files. */
  public static final long NOT_STAGED = -3L;

  /** The staging folders this JVM has emptied of what earlier runs left (one writer a lake). */
  private static final Set<String> CLEARED = ConcurrentHashMap.newKeySet();

  private static final String NO_PARTITION_COLUMNS_IN_FILES = "delta.writePartitionColumnsToParquet";

  /** Files written for several tables by one job, by table, in none of them yet. */
  public static final class Staged {
    private final Path root;
    private final StructType schema;
    private final Map<String, String> configuration;
    private final Map<String, List<AddFile>> files;
    private volatile Protocol newTableProtocol;

    Staged(Path root, StructType schema, Map<String, String> configuration,
        Map<String, List<AddFile>> files) {
      this.root = root;
      this.schema = schema;
      this.configuration = configuration;
      this.files = files;
    }

    /**
     * The snapshot a commit that creates a table starts from: {@code none}, the table's
     * snapshot before it exists, carrying Delta's protocol for a new table. That one computes
     * the protocol again each time it is asked, from the session's defaults and every table
     * feature, many times a commit: a third of a commit that created a table (JFR). The
     * protocol is the same for every table these files create, so it is computed once.
     */
    Snapshot newTable(DeltaLog log, Snapshot none) {
      if (!(none instanceof DummySnapshot)) {
        return none;
      }
      Protocol protocol = newTableProtocol;
      if (protocol == null) {
        protocol = none.protocol();
        newTableProtocol = protocol;
      }
      return new DummySnapshot(
          log.logPath(), log, none.metadata(), Option.empty(), Option.apply(protocol));
    }

    /** Delete the staging folder (what is left of it once the tables took their files). */
    public void close(SparkSession spark) {
      DeltaLog.invalidateCache(spark, root);
      try {
        root.getFileSystem(spark.sessionState().newHadoopConf()).delete(root, true);
      } catch (IOException e) {
        throw new UncheckedIOException(e);
      }
    }
  }

  /**
   * Write {@code data} (whose column {@code tableColumn} names each row's table) under a new
   * folder of {@code stagingRoot}, in one Spark job.
   *
   * @param options the writer's options ({@code maxRecordsPerFile}) and, named {@code delta.*},
   *     the settings the files' statistics follow ({@code delta.dataSkippingStatsColumns})
   */
  public static Staged stage(
      SparkSession spark,
      Dataset<Row> data,
      String tableColumn,
      String stagingRoot,
      Map<String, String> options) {
    if (CLEARED.add(stagingRoot)) { // what a run that stopped in a batch left staged
      Path leftover = new Path(stagingRoot);
      try {
        leftover.getFileSystem(spark.sessionState().newHadoopConf()).delete(leftover, true);
      } catch (IOException e) {
        throw new UncheckedIOException(e);
      }
    }
    Path root = new Path(stagingRoot, UUID.randomUUID().toString());
    Map<String, String> configuration = AppTransactionAppend.tableProperties(options);
    Map<String, String> staging = new HashMap<>(configuration);
    staging.put(NO_PARTITION_COLUMNS_IN_FILES, "false");
    DeltaLog log = DeltaLog.forTable(spark, root);
    OptimisticTransaction txn = log.startTransaction(Option.empty(), Option.empty());
    Metadata metadata =
        new Metadata(
            UUID.randomUUID().toString(),
            null,
            null,
            new Format("parquet", AppTransactionAppend.scalaMap(Map.of())),
            data.schema().json(),
            CollectionConverters.asScala(List.of(tableColumn)).toList(),
            AppTransactionAppend.scalaMap(staging),
            Option.empty());
    txn.updateMetadataForNewTable(metadata);
    DeltaOptions deltaOptions = new DeltaOptions(AppTransactionAppend.scalaMap(options), spark.sessionState().conf());
    Seq<FileAction> written;
    OptimisticTransaction$.MODULE$.setActive(txn);
    try {
      written = txn.writeFiles(data, Option.apply(deltaOptions));
    } finally {
      OptimisticTransaction$.MODULE$.clearActive();
    }
    Map<String, List<AddFile>> files = new ConcurrentHashMap<>();
    for (FileAction action : CollectionConverters.asJava(written)) {
      if (action instanceof AddFile add) {
        String table = add.partitionValues().get(tableColumn).get();
        files.computeIfAbsent(table, t -> new ArrayList<>()).add(add);
      }
    }
    StructType schema = new StructType(
        Arrays.stream(data.schema().fields())
            .filter(f -> !f.name().equals(tableColumn))
            .toArray(StructField[]::new));
    return new Staged(root, schema, configuration, files);
  }

  /**
   * Commit the files staged for {@code table} to the Delta table at {@code path}, as one
   * append: the app transaction ({@code txnAppId}, {@code txnVersion} of {@code options}) is
   * checked and committed as {@link AppTransactionAppend#append} does, as is {@code
   * sharedTable}.
   *
   * @return as {@link AppTransactionAppend#append}; {@link #NOT_STAGED} when the table cannot
   *     take the files (they are deleted: append its rows the plain way)
   */
  public static long commit(
      SparkSession spark,
      Staged staged,
      String table,
      String path,
      Map<String, String> options,
      boolean deferCheckpoint,
      long checkedVersion,
      boolean sharedTable) {
    List<AddFile> files = Objects.requireNonNullElse(staged.files.remove(table), List.of());
    DeltaLog log = DeltaLog.forTable(spark, path);
    Snapshot snapshot = log.update(false, Option.empty(), Option.empty());
    if (snapshot.version() < 0) {
      snapshot = staged.newTable(log, snapshot);
    }
    OptimisticTransaction txn =
        new AppTransactionAppend.JobTransaction(
            log, Option.apply(snapshot), deferCheckpoint, sharedTable);
    FileSystem fs;
    try {
      fs = log.dataPath().getFileSystem(log.newDeltaHadoopConf());
    } catch (IOException e) {
      throw new UncheckedIOException(e);
    }
    String appId = options.get("txnAppId");
    long txnVersion = Long.parseLong(options.get("txnVersion"));
    if (AppTransactionAppend.committedSince(log, appId, txnVersion, checkedVersion,
        txn.readVersion())) {
      delete(fs, staged, files);
      return AppTransactionAppend.SKIPPED;
    }
    if (txn.readVersion() < 0) { // created by this commit, as Delta's writer creates it
      txn.updateMetadataForNewTable(
          new Metadata(
              UUID.randomUUID().toString(),
              null,
              null,
              new Format("parquet", AppTransactionAppend.scalaMap(Map.of())),
              staged.schema.asNullable().json(),
              CollectionConverters.asScala(List.<String>of()).toList(),
              DeltaConfigs$.MODULE$.validateConfigurations(AppTransactionAppend.scalaMap(staged.configuration)),
              Option.apply(System.currentTimeMillis())));
    } else if (!takes(txn, staged)) {
      delete(fs, staged, files);
      return NOT_STAGED;
    }
    txn.readTxn().addOne(appId); // Delta's conflict check now covers the app transaction
    List<Action> actions = new ArrayList<>();
    for (AddFile add : files) {
      Path from = staged(staged, add);
      Path to = new Path(log.dataPath(), from.getName());
      try {
        if (!fs.rename(from, to)) {
          throw new IOException("could not move " + from + " to " + to);
        }
      } catch (IOException e) {
        throw new UncheckedIOException(e);
      }
      actions.add(
          add.copy(
              new Path(null, null, to.getName()).toUri().toString(),
              AppTransactionAppend.scalaMap(Map.of()),
              add.size(),
              add.modificationTime(),
              true,
              add.stats(),
              add.tags(),
              add.deletionVector(),
              add.baseRowId(),
              add.defaultRowCommitVersion(),
              add.clusteringProvider(),
              add.backReference(),
              add.amtPassthrough()));
    }
    actions.add(new SetTransaction(appId, txnVersion, Option.apply(log.clock().getTimeMillis())));
    DeltaOperations.Write operation =
        AppTransactionAppend.appendOperation(
            CollectionConverters.asScala(List.<String>of()).toList(),
            new DeltaOptions(AppTransactionAppend.scalaMap(options), spark.sessionState().conf()));
    Option<Object> version =
        txn.commitIfNeeded(
            CollectionConverters.asScala(actions).toList(), operation, AppTransactionAppend.scalaMap(Map.of()));
    return deferCheckpoint ? AppTransactionAppend.checkpointDue(log, txn, version) : -1L;
  }

  /**
   * Whether the transaction's table, which exists, takes the staged files as they are: it has the
   * staged columns and types (nullable, with no metadata: no generated, identity or
   * invariant column), no partitions, column mapping, constraints or Iceberg compatibility,
   * and the statistics settings the files were written with.
   */
  private static boolean takes(OptimisticTransaction txn, Staged staged) {
    Metadata metadata = txn.metadata();
    if (!metadata.partitionColumns().isEmpty()
        || metadata.columnMappingMode() != NoMapping$.MODULE$) {
      return false;
    }
    Map<String, String> configuration = CollectionConverters.asJava(metadata.configuration());
    for (Map.Entry<String, String> entry : configuration.entrySet()) {
      String key = entry.getKey();
      if (key.startsWith("delta.constraints.") || key.startsWith("delta.enableIcebergCompat")) {
        return false;
      }
    }
    for (String key : List.of(
        "delta.dataSkippingStatsColumns",
        "delta.dataSkippingNumIndexedCols",
        "delta.dataSkippingStringPrefixLength")) {
      if (!Objects.equals(configuration.get(key), staged.configuration.get(key))) {
        return false;
      }
    }
    StructType schema = metadata.schema();
    if (schema.fields().length != staged.schema.fields().length) {
      return false;
    }
    for (StructField field : staged.schema.fields()) {
      Option<Object> index = schema.getFieldIndex(field.name());
      if (index.isEmpty()) {
        return false;
      }
      StructField own = schema.fields()[(Integer) index.get()];
      if (!own.nullable()
          || !own.metadata().equals(org.apache.spark.sql.types.Metadata.empty())
          || !DataType$.MODULE$.equalsIgnoreNullability(own.dataType(), field.dataType())) {
        return false;
      }
    }
    return true;
  }

  private static Path staged(Staged staged, AddFile add) {
    try {
      return new Path(new Path(staged.root.toUri()), new Path(new URI(add.path())));
    } catch (URISyntaxException e) {
      throw new IllegalStateException(e);
    }
  }

  private static void delete(FileSystem fs, Staged staged, List<AddFile> files) {
    for (AddFile add : files) {
      try {
        fs.delete(staged(staged, add), false);
      } catch (IOException e) {
        throw new UncheckedIOException(e);
      }
    }
  }
}
