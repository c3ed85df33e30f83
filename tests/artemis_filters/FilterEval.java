import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.util.HashMap;
import java.util.Iterator;
import java.util.Map;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import org.apache.activemq.artemis.api.core.SimpleString;
import org.apache.activemq.artemis.core.filter.Filter;
import org.apache.activemq.artemis.core.filter.impl.FilterImpl;
import org.apache.activemq.artemis.selector.filter.Filterable;

/**
 * Evaluates filters with Apache ActiveMQ Artemis's own code (tests/test_filters_artemis.py).
 *
 * <p>Reads one case a line on stdin, JSON: {"filter": text, "properties": {name: [type, text]},
 * "priority": int, "durable": bool, "expiration_ms": long, "sent_at_ms": long, "user_id": str,
 * "address": str} (any but "filter" may be missing or null; type is one of SPEC §3.1's names).
 * Prints one line a case: what {@code FilterImpl.createFilter(filter).match(message)} returns,
 * "true" or "false" ("true" for a blank filter, which is no filter), or "invalid" where
 * createFilter throws.
 *
 * <p>The message's properties are the Java objects the types name (Boolean.valueOf,
 * Byte.valueOf, ..., the text for a string); the header fields are the project's mapping
 * (routing.broker.filters): AMQPriority an Integer (4 when null), AMQExpiration a Long (0 when
 * null), AMQTimestamp a Long (null when null), AMQDurable "DURABLE" / "NON_DURABLE",
 * AMQUserID and AMQAddress Strings falling back to the property of that name when null.
 */
public final class FilterEval {

   private FilterEval() {
   }

   public static void main(String[] args) throws Exception {
      ObjectMapper mapper = new ObjectMapper();
      BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
      PrintStream out = new PrintStream(System.out, false, StandardCharsets.UTF_8);
      Map<String, Object> filters = new HashMap<>();
      Object invalid = new Object();
      Object none = new Object();
      String line;
      while ((line = in.readLine()) != null) {
         if (line.isEmpty()) {
            continue;
         }
         JsonNode c = mapper.readTree(line);
         String text = c.get("filter").asText();
         Object filter = filters.get(text);
         if (filter == null) {
            try {
               Filter f = FilterImpl.createFilter(text);
               filter = f == null ? none : f;
            } catch (Exception e) {
               filter = invalid;
            }
            filters.put(text, filter);
         }
         if (filter == invalid) {
            out.println("invalid");
         } else if (filter == none) {
            out.println("true");
         } else {
            out.println(((Filter) filter).match(new Message(c)) ? "true" : "false");
         }
      }
      out.flush();
   }

   /** A message as the lake holds it: typed properties and the header columns. */
   static final class Message implements Filterable {

      private final Map<String, Object> properties = new HashMap<>();
      private final JsonNode row;

      Message(JsonNode row) {
         this.row = row;
         JsonNode props = row.get("properties");
         if (props != null && !props.isNull()) {
            Iterator<Map.Entry<String, JsonNode>> it = props.fields();
            while (it.hasNext()) {
               Map.Entry<String, JsonNode> e = it.next();
               properties.put(e.getKey(), typed(e.getValue().get(0).asText(), e.getValue().get(1).asText()));
            }
         }
      }

      static Object typed(String type, String text) {
         switch (type) {
            case "boolean": return Boolean.valueOf(text);
            case "byte": return Byte.valueOf(text);
            case "short": return Short.valueOf(text);
            case "integer": return Integer.valueOf(text);
            case "long": return Long.valueOf(text);
            case "float": return Float.valueOf(text);
            case "double": return Double.valueOf(text);
            case "string": return text;
            default: throw new IllegalArgumentException("unknown property type " + type);
         }
      }

      private JsonNode header(String name) {
         JsonNode v = row.get(name);
         return v == null || v.isNull() ? null : v;
      }

      @Override
      public Object getProperty(SimpleString id) {
         String name = id.toString();
         JsonNode v;
         switch (name) {
            case "AMQPriority":
               v = header("priority");
               return v == null ? 4 : v.asInt();
            case "AMQExpiration":
               v = header("expiration_ms");
               return v == null ? 0L : v.asLong();
            case "AMQTimestamp":
               v = header("sent_at_ms");
               return v == null ? null : v.asLong();
            case "AMQDurable":
               v = header("durable");
               return v != null && !v.asBoolean() ? "NON_DURABLE" : "DURABLE";
            case "AMQUserID":
               v = header("user_id");
               return v == null ? properties.get(name) : v.asText();
            case "AMQAddress":
               v = header("address");
               return v == null ? properties.get(name) : v.asText();
            default:
               return properties.get(name);
         }
      }

      @Override
      public <T> T getBodyAs(Class<T> type) {
         return null;
      }

      @Override
      public Object getLocalConnectionId() {
         return null;
      }
   }
}
