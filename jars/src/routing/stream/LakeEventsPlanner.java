package routing.stream;

/**
 * What plans the batches of the job's input stream: the offsets and the slices of input
 * tables each batch reads. The routing job implements it in Python, in its driver
 * (routing/io/lake_events.py, {@code LakeEventsPlanner}), and {@link LakeEventsSource} calls it
 * through py4j's callback server, as Spark calls a query's {@code foreachBatch} function.
 *
 * <p>Offsets are the JSON texts the planner makes; Spark keeps them in the query's offset log
 * and hands them back as they were.
 */
public interface LakeEventsPlanner {
  /** The offset before any batch. */
  String initialOffset();

  /** Rows a batch holds at most when the query sets no limit; 0: no limit. */
  long defaultMaxRows();

  /**
   * The offset the next batch reads up to, from {@code start}; {@code start} itself when
   * there is nothing new.
   *
   * @param maxRows at most about this many input rows (0: every row there is)
   */
  String latestOffset(String start, long maxRows);

  /**
   * The slices of the batch from {@code start} to {@code end}: a JSON array of rows, each
   * an array of the stream's columns in order.
   */
  String slices(String start, String end);

  /** An available-now query starts: fix the table versions it reads up to. */
  void prepareForTriggerAvailableNow();
}
