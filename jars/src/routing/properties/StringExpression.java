package routing.properties;

import java.io.Serializable;
import java.util.ArrayList;
import java.util.List;

import org.apache.spark.sql.catalyst.expressions.Expression;
import org.apache.spark.sql.catalyst.expressions.codegen.CodeBlock;
import org.apache.spark.sql.catalyst.expressions.codegen.ExprCode;
import org.apache.spark.sql.catalyst.expressions.codegen.JavaCode;
import org.apache.spark.sql.types.DataType;
import org.apache.spark.sql.types.DataTypes;

import scala.collection.immutable.Seq;
import scala.jdk.javaapi.CollectionConverters;

/**
 * A string expression of this package: a Java call on its children's values, which its
 * generated code makes ({@link #call}), so a projection that holds it is compiled with its
 * stage. A fallback ({@code CodegenFallback}, as Spark's lambdas are) keeps that projection out
 * of whole-stage code, and Spark generates it again for every partition read
 * (docs/PERFORMANCE.md).
 */
abstract class StringExpression extends Expression implements Serializable {

  private static final long serialVersionUID = 1L;

  private final Seq<Expression> children;

  StringExpression(List<Expression> children) {
    this.children = CollectionConverters.asScala(children).toList();
  }

  @Override
  public final Seq<Expression> children() {
    return children;
  }

  @Override
  public final DataType dataType() {
    return DataTypes.StringType;
  }

  @Override
  public boolean nullable() {
    return true;
  }

  /**
   * {@code ev} as the value of the Java expression {@code call} (a {@code UTF8String}, null
   * when the result is null), after the code of the {@code children} it reads.
   */
  static ExprCode call(ExprCode ev, List<ExprCode> children, String call) {
    List<String> parts = new ArrayList<>();
    List<JavaCode> inputs = new ArrayList<>();
    parts.add("");
    for (ExprCode child : children) {
      inputs.add(child.code());
      parts.add("\n");
    }
    parts.set(
        parts.size() - 1,
        "\nUTF8String " + ev.value() + " = " + call + ";\nboolean " + ev.isNull() + " = "
            + ev.value() + " == null;\n");
    CodeBlock code =
        new CodeBlock(
            CollectionConverters.asScala(parts).toList(),
            CollectionConverters.asScala(inputs).toList());
    return ev.copy(code, ev.isNull(), ev.value());
  }
}
