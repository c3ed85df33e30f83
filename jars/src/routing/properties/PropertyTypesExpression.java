package routing.properties;

import java.util.List;
import java.util.Objects;

import org.apache.spark.sql.catalyst.InternalRow;
import org.apache.spark.sql.catalyst.expressions.Expression;
import org.apache.spark.sql.catalyst.expressions.codegen.CodegenContext;
import org.apache.spark.sql.catalyst.expressions.codegen.ExprCode;
import org.apache.spark.sql.catalyst.util.MapData;

import scala.collection.immutable.IndexedSeq;

/**
 * {@link PropertyTypesCheck} of a row's {@code properties} and {@code property_types} (its two
 * children) as a Catalyst expression: it reads the maps as Spark holds them. Its generated
 * code calls the check, a reference object of the generated class.
 */
public final class PropertyTypesExpression extends StringExpression {

  private static final long serialVersionUID = 1L;

  private final Expression properties;
  private final Expression propertyTypes;
  private final PropertyTypesCheck check;

  public PropertyTypesExpression(
      Expression properties, Expression propertyTypes, PropertyTypesCheck check) {
    super(List.of(properties, propertyTypes));
    this.properties = properties;
    this.propertyTypes = propertyTypes;
    this.check = check;
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
    String rule =
        ctx.addReferenceObj("propertyTypesCheck", check, PropertyTypesCheck.class.getName());
    ExprCode maps = properties.genCode(ctx);
    ExprCode types = propertyTypes.genCode(ctx);
    return call(
        ev,
        List.of(maps, types),
        types.isNull() + " ? null : " + rule + ".reason(" + maps.isNull() + " ? null : "
            + maps.value() + ", " + types.value() + ")");
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
