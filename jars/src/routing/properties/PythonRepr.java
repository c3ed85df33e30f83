package routing.properties;

import java.util.List;

import org.apache.spark.sql.Column;
import org.apache.spark.sql.catalyst.InternalRow;
import org.apache.spark.sql.catalyst.expressions.Expression;
import org.apache.spark.sql.catalyst.expressions.codegen.CodegenContext;
import org.apache.spark.sql.catalyst.expressions.codegen.ExprCode;
import org.apache.spark.sql.classic.ExpressionUtils;
import org.apache.spark.unsafe.types.UTF8String;

import scala.collection.immutable.IndexedSeq;

/**
 * Python's {@code repr()} of a string column, as the reasons quote values: the rule of {@code
 * routing.plan.normalise.py_repr} (Spark's expressions there, with a lambda for the characters
 * it escapes) as one expression with generated code. A lambda is a fallback that keeps the
 * projection holding it out of whole-stage code: the input query's, whose reasons quote the
 * address of a row in another address's table.
 */
public final class PythonRepr extends StringExpression {

  private static final long serialVersionUID = 1L;

  private final Expression text;

  public PythonRepr(Expression text) {
    super(List.of(text));
    this.text = text;
  }

  /** {@code repr()} of the string column {@code text}, as a Column. */
  public static Column column(Column text) {
    return ExpressionUtils.column(new PythonRepr(ExpressionUtils.expression(text)));
  }

  /** {@code repr()} of {@code text} (null for null): what the generated code calls. */
  public static UTF8String of(UTF8String text) {
    return text == null ? null : UTF8String.fromString(PropertyTypesCheck.repr(text.toString()));
  }

  @Override
  public boolean nullable() {
    return text.nullable();
  }

  @Override
  public String prettyName() {
    return "python_repr";
  }

  @Override
  public Object eval(InternalRow row) {
    return of((UTF8String) text.eval(row));
  }

  @Override
  public ExprCode doGenCode(CodegenContext ctx, ExprCode ev) {
    ExprCode value = text.genCode(ctx);
    return call(
        ev,
        List.of(value),
        value.isNull() + " ? null : " + PythonRepr.class.getName() + ".of(" + value.value() + ")");
  }

  @Override
  public Expression withNewChildrenInternal(IndexedSeq<Expression> children) {
    return new PythonRepr(children.apply(0));
  }

  @Override
  public int productArity() {
    return 1;
  }

  @Override
  public Object productElement(int n) {
    if (n != 0) {
      throw new IndexOutOfBoundsException(n);
    }
    return text;
  }

  @Override
  public boolean canEqual(Object that) {
    return that instanceof PythonRepr;
  }

  @Override
  public boolean equals(Object that) {
    return that instanceof PythonRepr other && text.equals(other.text);
  }

  @Override
  public int hashCode() {
    return text.hashCode() * 31 + 1;
  }
}
