package routing.properties;

import java.io.Serializable;
import java.math.BigInteger;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.stream.Collectors;
import java.util.regex.Pattern;

import org.apache.spark.sql.Column;
import org.apache.spark.sql.catalyst.util.ArrayData;
import org.apache.spark.sql.catalyst.util.MapData;
import org.apache.spark.sql.classic.ExpressionUtils;
import org.apache.spark.unsafe.types.UTF8String;

/**
 * Why a message row's {@code property_types} cannot be (null if they can): the rule of
 * {@code routing.plan.normalise.untyped_property}, Spark's expressions there, as one function
 * here. The first entry in key order (code points, as Spark orders strings) that names a type
 * the SPEC does not know, or a property the row does not have, or whose text does not read as
 * its type, words the reason; values are quoted as Python's {@code repr} quotes them.
 *
 * <p>One expression in a plan ({@link PropertyTypesExpression}), whatever the number of
 * entries: Spark's expressions are hundreds of nodes that every batch's analysis and
 * optimisation walks, and a lambda Spark only interprets; a UDF would convert both maps to
 * Scala's for every row, which cost more than the check. This reads Spark's own map data. The
 * types, their patterns and ranges come from Python ({@code routing.broker.properties}), so the
 * rule has one source; {@code tests/test_normalise.py} holds the two paths to the same reasons.
 */
public final class PropertyTypesCheck implements Serializable {

  private static final long serialVersionUID = 1L;

  /** What Python's {@code repr} escapes besides quotes and backslashes (not printable). */
  private static final Pattern UNPRINTABLE = Pattern.compile("[\\p{C}\\p{Z}&&[^ ]]");

  /** An integral type's values, and the digits of its highest (shorter text is in range). */
  private record Range(BigInteger low, BigInteger high, int digits) implements Serializable {}

  private final List<String> types;
  private final Set<UTF8String> known; // the types as Spark holds them: a row's are not copied
  private final Map<UTF8String, Pattern> patterns = new HashMap<>();
  private final Map<UTF8String, Range> ranges = new HashMap<>();

  /**
   * @param types the type names a property may have
   * @param patterns the text a value of a type must match, whole (a type without one: any text)
   * @param ranges an integral type's lowest and highest value, as decimal text
   */
  public PropertyTypesCheck(
      List<String> types, Map<String, String> patterns, Map<String, List<String>> ranges) {
    this.types = List.copyOf(types);
    this.known = types.stream().map(UTF8String::fromString).collect(Collectors.toSet());
    patterns.forEach(
        (type, pattern) ->
            this.patterns.put(
                UTF8String.fromString(type), Pattern.compile("\\A(?:" + pattern + ")\\z")));
    ranges.forEach(
        (type, bounds) ->
            this.ranges.put(
                UTF8String.fromString(type),
                new Range(
                    new BigInteger(bounds.get(0)),
                    new BigInteger(bounds.get(1)),
                    bounds.get(1).length())));
  }

  /** The check of the columns {@code properties} and {@code property_types}, as a Column. */
  public Column column(Column properties, Column propertyTypes) {
    return ExpressionUtils.column(
        new PropertyTypesExpression(
            ExpressionUtils.expression(properties), ExpressionUtils.expression(propertyTypes), this));
  }

  /** The reason for a row's maps (null: none), as {@link #column} gives it. */
  public UTF8String reason(MapData properties, MapData propertyTypes) {
    if (propertyTypes == null) {
      return null;
    }
    ArrayData names = propertyTypes.keyArray();
    ArrayData kinds = propertyTypes.valueArray();
    UTF8String firstName = null;
    UTF8String firstKind = null;
    String firstProblem = null;
    for (int i = 0; i < propertyTypes.numElements(); i++) {
      if (kinds.isNullAt(i)) { // no type: an untyped property
        continue;
      }
      UTF8String name = names.getUTF8String(i);
      UTF8String kind = kinds.getUTF8String(i);
      if (firstName != null) { // Spark's order of the entries: the name's, then the type's
        int order = name.binaryCompare(firstName);
        if (order > 0 || order == 0 && kind.binaryCompare(firstKind) >= 0) {
          continue;
        }
      }
      String problem = problem(properties, name, kind);
      if (problem != null) {
        firstName = name;
        firstKind = kind;
        firstProblem = problem;
      }
    }
    return firstProblem == null ? null : UTF8String.fromString("property_types: " + firstProblem);
  }

  /** What is wrong with the entry {@code name: kind} (null: nothing). Text is made of
   * Spark's strings only for a value a pattern reads and for a reason. */
  private String problem(MapData properties, UTF8String name, UTF8String kind) {
    if (!known.contains(kind)) {
      return "unknown type " + repr(kind.toString()) + " of " + repr(name.toString())
          + "; expected one of " + String.join(", ", types);
    }
    if (properties == null) { // as Spark's expressions: a null map has no answer to "missing"
      return null;
    }
    ArrayData keys = properties.keyArray();
    int found = -1;
    for (int j = 0; j < properties.numElements() && found < 0; j++) {
      if (keys.getUTF8String(j).equals(name)) {
        found = j;
      }
    }
    if (found < 0) {
      return repr(name.toString()) + " is typed " + kind + " but the message has no such property";
    }
    ArrayData values = properties.valueArray();
    if (values.isNullAt(found)) {
      return null;
    }
    Pattern pattern = patterns.get(kind);
    if (pattern == null) { // a string: any text
      return null;
    }
    String text = values.getUTF8String(found).toString();
    if (readsAs(text, pattern, ranges.get(kind))) {
      return null;
    }
    return repr(name.toString()) + " is typed " + kind + " but its value " + repr(text)
        + " does not read as one";
  }

  @Override
  public String toString() {
    return "PropertyTypesCheck" + types;
  }

  /** {@code text} matches {@code pattern} and, for an integral type, is in its {@code range}. */
  private static boolean readsAs(String text, Pattern pattern, Range range) {
    if (!pattern.matcher(text).find()) {
      return false;
    }
    if (range == null || text.length() < range.digits()) { // too short to be out of range
      return true;
    }
    BigInteger number = new BigInteger(text);
    return range.low().compareTo(number) <= 0 && number.compareTo(range.high()) <= 0;
  }

  /** Python's {@code repr()} of a string. */
  static String repr(String text) {
    boolean single = text.indexOf('\'') >= 0;
    boolean doubled = text.indexOf('"') >= 0;
    char quote = single && !doubled ? '"' : '\'';
    StringBuilder out = new StringBuilder(text.length() + 2).append(quote);
    text.codePoints()
        .forEach(
            point -> {
              if (point == '\\') {
                out.append("\\\\");
              } else if (point == quote) {
                out.append('\\').append(quote);
              } else if (point == '\t') {
                out.append("\\t");
              } else if (point == '\n') {
                out.append("\\n");
              } else if (point == '\r') {
                out.append("\\r");
              } else if (!UNPRINTABLE.matcher(new String(Character.toChars(point))).matches()) {
                out.appendCodePoint(point);
              } else if (point < 0x100) {
                out.append(String.format("\\x%02x", point));
              } else if (point < 0x10000) {
                out.append(String.format("\\u%04x", point));
              } else {
                out.append(String.format("\\U%08x", point));
              }
            });
    return out.append(quote).toString();
  }
}
