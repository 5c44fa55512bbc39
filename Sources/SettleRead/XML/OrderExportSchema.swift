// The order export schema, built into the binary so that settle never loads a schema by
// path at run time. Keep it byte for byte equal to `schemas/order-export.xsd`
// (a test checks); regenerate it from that file after editing it.

/// The order export schema of docs/RULES.md, Input.
public enum OrderExportSchema {
    /// The export's XML namespace.
    public static let namespace = "urn:settle:order-export:1"

    /// The text of `schemas/order-export.xsd`.
    public static let text = #"""
        <?xml version="1.0" encoding="UTF-8"?>
        <!--
          settle order export, version 1 (docs/RULES.md, Input).

          The schema checks structure only: which elements and attributes exist, how they nest,
          which are required, and how long a value may be. Amounts, currencies, dates, kinds and
          id prefixes are left as strings on purpose: settle's rules check them with precise
          reason codes (amount_invalid, currency_unsupported, date_invalid, id_invalid, ...),
          which a schema error could not give.

          Attribute names are the CSV column names in lowerCamelCase; <order id> is order_id and
          <line id> is line_id. A <line> may carry any column, and its values override the ones
          of its <order>.
        -->
        <xs:schema xmlns:xs="http://www.w3.org/2001/XMLSchema"
                   xmlns:s="urn:settle:order-export:1"
                   targetNamespace="urn:settle:order-export:1"
                   elementFormDefault="qualified"
                   attributeFormDefault="unqualified">

          <xs:simpleType name="Text">
            <xs:restriction base="xs:string">
              <xs:maxLength value="255"/>
            </xs:restriction>
          </xs:simpleType>

          <xs:simpleType name="LongText">
            <xs:restriction base="xs:string">
              <xs:maxLength value="1000"/>
            </xs:restriction>
          </xs:simpleType>

          <xs:simpleType name="Key">
            <xs:restriction base="xs:string">
              <xs:minLength value="1"/>
              <xs:maxLength value="255"/>
            </xs:restriction>
          </xs:simpleType>

          <!-- The facts of the charge that funds an order, shared by its lines. -->
          <xs:attributeGroup name="OrderFacts">
            <xs:attribute name="transferGroup" type="s:Text"/>
            <xs:attribute name="paymentIntent" type="s:Text"/>
            <xs:attribute name="sourceTransaction" type="s:Text"/>
            <xs:attribute name="chargeAmount" type="s:Text"/>
            <xs:attribute name="chargeCurrency" type="s:Text"/>
            <xs:attribute name="chargeStatus" type="s:Text"/>
            <xs:attribute name="chargeFee" type="s:Text"/>
            <xs:attribute name="paymentMethodType" type="s:Text"/>
            <xs:attribute name="destinationCountry" type="s:Text"/>
          </xs:attributeGroup>

          <xs:element name="orderExport">
            <xs:complexType>
              <xs:sequence>
                <xs:element name="order" type="s:Order" minOccurs="0" maxOccurs="unbounded"/>
              </xs:sequence>
            </xs:complexType>
          </xs:element>

          <xs:complexType name="Order">
            <xs:sequence>
              <xs:element name="line" type="s:Line" maxOccurs="unbounded"/>
            </xs:sequence>
            <xs:attribute name="id" type="s:Text" use="required"/>
            <xs:attributeGroup ref="s:OrderFacts"/>
          </xs:complexType>

          <xs:complexType name="Line">
            <xs:sequence>
              <xs:element name="metadata" type="s:Metadata" minOccurs="0" maxOccurs="unbounded"/>
            </xs:sequence>
            <xs:attribute name="id" type="s:Text" use="required"/>
            <xs:attribute name="amount" type="s:Text" use="required"/>
            <xs:attribute name="currency" type="s:Text" use="required"/>
            <xs:attribute name="kind" type="s:Text"/>
            <xs:attribute name="destination" type="s:Text"/>
            <xs:attribute name="recipient" type="s:Text"/>
            <xs:attribute name="payoutMethod" type="s:Text"/>
            <xs:attribute name="transfer" type="s:Text"/>
            <xs:attribute name="transferOn" type="s:Text"/>
            <xs:attribute name="description" type="s:LongText"/>
            <xs:attributeGroup ref="s:OrderFacts"/>
          </xs:complexType>

          <!-- Sent to Stripe as metadata[key]. A key appears at most once per line: settle's
               reader checks that itself (schema_invalid), as an xs:unique here would cost a
               third of the validation time. -->
          <xs:complexType name="Metadata">
            <xs:attribute name="key" type="s:Key" use="required"/>
            <xs:attribute name="value" type="s:LongText" use="required"/>
          </xs:complexType>
        </xs:schema>
        """#
}
