package routing.stream;

import java.io.IOException;
import java.io.UncheckedIOException;
import java.util.EnumSet;
import java.util.Map;
import java.util.Set;
import java.util.UUID;
import java.util.concurrent.ConcurrentHashMap;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;

import org.apache.spark.sql.catalyst.InternalRow;
import org.apache.spark.sql.catalyst.expressions.GenericInternalRow;
import org.apache.spark.sql.connector.catalog.SupportsRead;
import org.apache.spark.sql.connector.catalog.Table;
import org.apache.spark.sql.connector.catalog.TableCapability;
import org.apache.spark.sql.connector.catalog.TableProvider;
import org.apache.spark.sql.connector.expressions.Transform;
import org.apache.spark.sql.connector.read.InputPartition;
import org.apache.spark.sql.connector.read.PartitionReader;
import org.apache.spark.sql.connector.read.PartitionReaderFactory;
import org.apache.spark.sql.connector.read.Scan;
import org.apache.spark.sql.connector.read.ScanBuilder;
import org.apache.spark.sql.connector.read.streaming.MicroBatchStream;
import org.apache.spark.sql.connector.read.streaming.Offset;
import org.apache.spark.sql.connector.read.streaming.ReadLimit;
import org.apache.spark.sql.connector.read.streaming.ReadMaxRows;
import org.apache.spark.sql.connector.read.streaming.SupportsTriggerAvailableNow;
import org.apache.spark.sql.types.DataType;
import org.apache.spark.sql.types.DataTypes;
import org.apache.spark.sql.types.StructField;
import org.apache.spark.sql.types.StructType;
import org.apache.spark.sql.util.CaseInsensitiveStringMap;
import org.apache.spark.unsafe.types.UTF8String;

/**
 * The job's input stream as a Spark source of the JVM, planned by a {@link LakeEventsPlanner}
 * of the Python driver:
 *
 * <pre>
 * spark.readStream.format("routing.stream.LakeEventsSource").schema(slices)
 *     .option("planner", LakeEventsSource.register(planner)).load()
 * </pre>
 *
 * <p>Spark runs a Python source's planning in Python processes of its own: one to read its
 * schema, one for the running query's offsets, and a Python task to read each batch's rows
 * back. Each process imports PySpark, pandas and Arrow before it answers, a second or more of
 * a job's start, and Spark waits ten seconds at most for it to connect. The planning here
 * runs in the driver's interpreter, which has it loaded already, and a batch's rows (a few
 * slices) travel in its one input partition.
 *
 * <p>The stream's columns are the schema given to the reader ({@code .schema(...)}); the
 * planner's rows hold strings and integers (long) only.
 */
public final class LakeEventsSource implements TableProvider {
  /** The reader's option naming the planner, as {@link #register} returned it. */
  public static final String PLANNER = "planner";

  private static final Map<String, LakeEventsPlanner> PLANNERS = new ConcurrentHashMap<>();
  private static final ObjectMapper JSON = new ObjectMapper();

  /** Make {@code planner} known to the queries of this JVM; its name, for the option. */
  public static String register(LakeEventsPlanner planner) {
    String name = UUID.randomUUID().toString();
    PLANNERS.put(name, planner);
    return name;
  }

  @Override
  public StructType inferSchema(CaseInsensitiveStringMap options) {
    throw new IllegalArgumentException(
        "routing.stream.LakeEventsSource: give the stream's schema (.schema(...))");
  }

  @Override
  public boolean supportsExternalMetadata() {
    return true;
  }

  @Override
  public Table getTable(
      StructType schema, Transform[] partitioning, Map<String, String> properties) {
    String name = new CaseInsensitiveStringMap(properties).get(PLANNER);
    LakeEventsPlanner planner = name == null ? null : PLANNERS.get(name);
    if (planner == null) {
      throw new IllegalArgumentException(
          "routing.stream.LakeEventsSource: no planner " + name + " (LakeEventsSource.register)");
    }
    return new EventsTable(new Planned(schema, planner, name));
  }

  /** A stream of this source: its columns, and its planner, registered as {@code name}. */
  private record Planned(StructType schema, LakeEventsPlanner planner, String name) {}

  private static final class EventsTable implements SupportsRead {
    private final Planned planned;

    EventsTable(Planned planned) {
      this.planned = planned;
    }

    @Override
    public String name() {
      return "lake_events";
    }

    @Override
    public StructType schema() {
      return planned.schema();
    }

    @Override
    public Set<TableCapability> capabilities() {
      return EnumSet.of(TableCapability.MICRO_BATCH_READ);
    }

    @Override
    public ScanBuilder newScanBuilder(CaseInsensitiveStringMap options) {
      return () ->
          new Scan() {
            @Override
            public StructType readSchema() {
              return planned.schema();
            }

            @Override
            public MicroBatchStream toMicroBatchStream(String checkpointLocation) {
              return new EventsStream(planned);
            }
          };
    }
  }

  /** An offset as the planner wrote it (Spark compares offsets by their JSON). */
  private static final class PlannedOffset extends Offset {
    private final String json;

    PlannedOffset(String json) {
      this.json = json;
    }

    @Override
    public String json() {
      return json;
    }
  }

  private static final class EventsStream
      implements MicroBatchStream, SupportsTriggerAvailableNow {
    private final Planned planned;

    EventsStream(Planned planned) {
      this.planned = planned;
    }

    @Override
    public Offset initialOffset() {
      return new PlannedOffset(planned.planner().initialOffset());
    }

    @Override
    public Offset deserializeOffset(String json) {
      return new PlannedOffset(json);
    }

    @Override
    public ReadLimit getDefaultReadLimit() {
      long rows = planned.planner().defaultMaxRows();
      return rows > 0 ? ReadLimit.maxRows(rows) : ReadLimit.allAvailable();
    }

    @Override
    public Offset latestOffset(Offset start, ReadLimit limit) {
      long rows = limit instanceof ReadMaxRows max ? max.maxRows() : 0;
      return new PlannedOffset(planned.planner().latestOffset(start.json(), rows));
    }

    @Override
    public Offset latestOffset() {
      throw new UnsupportedOperationException("latestOffset(start, limit) plans the batches");
    }

    @Override
    public void prepareForTriggerAvailableNow() {
      planned.planner().prepareForTriggerAvailableNow();
    }

    @Override
    public InputPartition[] planInputPartitions(Offset start, Offset end) {
      JsonNode slices;
      try {
        slices = JSON.readTree(planned.planner().slices(start.json(), end.json()));
      } catch (IOException e) {
        throw new UncheckedIOException(e);
      }
      InternalRow[] rows = new InternalRow[slices.size()];
      StructField[] fields = planned.schema().fields();
      for (int r = 0; r < rows.length; r++) {
        JsonNode slice = slices.get(r);
        Object[] values = new Object[fields.length];
        for (int c = 0; c < fields.length; c++) {
          values[c] = value(slice.get(c), fields[c].dataType());
        }
        rows[r] = new GenericInternalRow(values);
      }
      return new InputPartition[] {new Slices(rows)};
    }

    @Override
    public PartitionReaderFactory createReaderFactory() {
      return partition -> new SliceReader(((Slices) partition).rows);
    }

    @Override
    public void commit(Offset end) {}

    @Override
    public void stop() {
      PLANNERS.remove(planned.name());
    }
  }

  private static Object value(JsonNode node, DataType type) {
    if (node == null || node.isNull()) {
      return null;
    }
    if (type.equals(DataTypes.StringType)) {
      return UTF8String.fromString(node.asText());
    }
    if (type.equals(DataTypes.LongType)) {
      return node.asLong();
    }
    throw new IllegalArgumentException("routing.stream.LakeEventsSource: a column of " + type);
  }

  /** A batch's slices: one partition, as the planner's Python source has. */
  private static final class Slices implements InputPartition {
    private static final long serialVersionUID = 1L;
    final InternalRow[] rows;

    Slices(InternalRow[] rows) {
      this.rows = rows;
    }
  }

  private static final class SliceReader implements PartitionReader<InternalRow> {
    private final InternalRow[] rows;
    private int next = -1;

    SliceReader(InternalRow[] rows) {
      this.rows = rows;
    }

    @Override
    public boolean next() {
      return ++next < rows.length;
    }

    @Override
    public InternalRow get() {
      return rows[next];
    }

    @Override
    public void close() {}
  }
}
