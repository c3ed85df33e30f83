package routing.properties;

import java.io.Serializable;
import java.util.List;
import java.util.Objects;

import org.apache.spark.sql.catalyst.InternalRow;
import org.apache.spark.sql.catalyst.expressions.Expression;
import org.apache.spark.sql.catalyst.expressions.codegen.CodegenContext;
import org.apache.spark.sql.catalyst.expressions.codegen.CodegenFallback;
import org.apache.spark.sql.catalyst.expressions.codegen.ExprCode;
import org.apache.spark.sql.catalyst.util.MapData;
import org.apache.spark.sql.types.DataType;
import org.apache.spark.sql.types.DataTypes;

import scala.collection.immutable.IndexedSeq;
import scala.collection.immutable.Seq;
import scala.jdk.javaapi.CollectionConverters;

/**
 * {@link PropertyTypesCheck} of a row's {@code properties} and {@code property_types} (its two
 * children) as a Catalyst expression: it reads the maps as Spark holds them. Generated code
 * calls {@link #eval} (a fallback, as Spark's own lambdas are).
 */
public final class PropertyTypesExpression extends Expression
    implements CodegenFallback, Serializable {

  private static final long serialVersionUID = 1L;

  private final Expression properties;
  private final Expression propertyTypes;
  private final PropertyTypesCheck check;
  private final Seq<Expression> children;

  public PropertyTypesExpression(
      Expression properties, Expression propertyTypes, PropertyTypesCheck check) {
    this.properties = properties;
    this.propertyTypes = propertyTypes;
    this.check = check;
    this.children = CollectionConverters.asScala(List.of(properties, propertyTypes)).toList();
  }

  @Override
  public Seq<Expression> children() {
    return children;
  }

  @Override
  public DataType dataType() {
    return DataTypes.StringType;
  }

  @Override
  public boolean nullable() {
    return true;
  }

  @Override
  public String prettyName() {
    return "property_types_check";
  }

  @Override
  public Object eval(InternalRow row) {
    MapData types = (MapData) propertyTypes.eval(row);
    if (types == null) {
      return null;
    }
    return check.reason((MapData) properties.eval(row), types);
  }

  @Override
  public ExprCode doGenCode(CodegenContext ctx, ExprCode ev) {
    return CodegenFallback.super.doGenCode(ctx, ev);
  }

  @Override
  public Expression withNewChildrenInternal(IndexedSeq<Expression> children) {
    return new PropertyTypesExpression(children.apply(0), children.apply(1), check);
  }

  @Override
  public int productArity() {
    return 3;
  }

  @Override
  public Object productElement(int n) {
    switch (n) {
      case 0:
        return properties;
      case 1:
        return propertyTypes;
      case 2:
        return check;
      default:
        throw new IndexOutOfBoundsException(n);
    }
  }

  @Override
  public boolean canEqual(Object that) {
    return that instanceof PropertyTypesExpression;
  }

  @Override
  public boolean equals(Object that) {
    return that instanceof PropertyTypesExpression other
        && properties.equals(other.properties)
        && propertyTypes.equals(other.propertyTypes)
        && check == other.check;
  }

  @Override
  public int hashCode() {
    return Objects.hash(properties, propertyTypes, System.identityHashCode(check));
  }
}
