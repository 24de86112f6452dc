//! The document's types of the bodies the handlers read as JSON and check
//! field by field (`identity::compliance`, `issuance::bank`): never built,
//! their enums taken from the very lists the checks use, so that a client
//! generated from the document (openapi-generator's, openapi-python-client's)
//! gets typed models and the two never part.

use utoipa::{
    PartialSchema, ToSchema,
    openapi::{
        RefOr,
        schema::{ObjectBuilder, Schema, Type},
    },
};

use crate::{
    identity::compliance::{ACCOUNT_PURPOSES, BUSINESS_TYPES, OCCUPATIONS, SOURCES_OF_FUNDS},
    issuance::bank::{ACCOUNT_TYPES, OWNER_TYPES},
};

/// A string enum of the document whose values are a list the service
/// checks against.
macro_rules! string_enum {
    ($name:ident, $values:expr, $description:literal) => {
        #[doc = $description]
        pub struct $name;

        impl PartialSchema for $name {
            fn schema() -> RefOr<Schema> {
                ObjectBuilder::new()
                    .schema_type(Type::String)
                    .description(Some($description))
                    .enum_values(Some($values.iter().copied()))
                    .into()
            }
        }

        impl ToSchema for $name {}
    };
}

string_enum!(Occupation, OCCUPATIONS, "`kyc.occupation`.");
string_enum!(SourceOfFunds, SOURCES_OF_FUNDS, "`kyc.source_of_funds` and `kyb.source_of_funds`.");
string_enum!(AccountPurpose, ACCOUNT_PURPOSES, "`kyc.account_purpose` and `kyb.account_purpose`.");
string_enum!(BusinessType, BUSINESS_TYPES, "`kyb.business_type`.");
string_enum!(BankAccountType, ACCOUNT_TYPES, "A bank account's `type`.");
string_enum!(AccountOwnerType, OWNER_TYPES, "Whose bank account it is: `account_owner_type`.");
string_enum!(
    FiatCurrency,
    ["ISSUANCE_SUPPORTED_FIAT_CURRENCY_UNSPECIFIED", crate::issuance::FIAT_CURRENCY],
    "A simulated wire's currency: `USD` (the unspecified value is refused)."
);
string_enum!(
    FiatPaymentRail,
    ["ISSUANCE_SUPPORTED_FIAT_PAYMENT_METHOD_UNSPECIFIED", crate::issuance::PAYMENT_RAIL],
    "A simulated wire's rail: `WIRE` (the unspecified value is refused)."
);

string_enum!(
    StablecoinCurrency,
    ["USDC"],
    "A stablecoin the platform issues, which a virtual account delivers. The document a service \
     serves lists the stablecoins its chain files issue."
);

/// An address of a compliance submission, named as bank details name
/// theirs. The older names `line1`, `line2` and `country_code` are still
/// accepted in place of `street_line_1`, `street_line_2` and `country`
/// (one name per field).
#[derive(ToSchema)]
#[allow(dead_code)] // the document's shape, never built
#[schema(as = ComplianceAddress)]
pub struct Address {
    pub street_line_1: String,
    pub street_line_2: Option<String>,
    pub city: String,
    /// ISO 3166-2 subdivision code, without the country prefix.
    pub region_code: String,
    pub postal_code: String,
    /// ISO 3166-1 alpha-2.
    pub country: String,
    /// The older name of `street_line_1`.
    #[schema(deprecated)]
    pub line1: Option<String>,
    /// The older name of `street_line_2`.
    #[schema(deprecated)]
    pub line2: Option<String>,
    /// The older name of `country`.
    #[schema(deprecated)]
    pub country_code: Option<String>,
}

/// An individual's data (`INDIVIDUAL` identities).
#[derive(ToSchema)]
#[allow(dead_code)] // the document's shape, never built
pub struct Kyc {
    pub first_name: String,
    pub middle_name: Option<String>,
    pub last_name: String,
    /// `YYYY-MM-DD`.
    #[schema(format = Date)]
    pub date_of_birth: String,
    pub email: Option<String>,
    pub phone: Option<String>,
    /// ISO 3166-1 alpha-2.
    pub nationality: String,
    /// ISO 3166-1 alpha-2.
    pub country_of_birth: String,
    #[schema(value_type = Occupation)]
    pub occupation: String,
    #[schema(value_type = SourceOfFunds)]
    pub source_of_funds: String,
    #[schema(value_type = AccountPurpose)]
    pub account_purpose: String,
    /// Required for residents of US, BR, MX, IN and AR (a national tax or
    /// identity number).
    pub additional_id_number: Option<String>,
    /// 1 to 5.
    pub addresses: Vec<Address>,
}

/// A US business's data (`BUSINESS` identities).
#[derive(ToSchema)]
#[allow(dead_code)] // the document's shape, never built
pub struct Kyb {
    pub business_name: String,
    pub doing_business_as: Option<String>,
    #[schema(value_type = BusinessType)]
    pub business_type: String,
    /// The EIN.
    pub tax_id: String,
    /// `US`: only US businesses are supported.
    pub incorporation_country: String,
    /// `YYYY-MM-DD`.
    #[schema(format = Date)]
    pub incorporation_date: Option<String>,
    pub website: Option<String>,
    pub email: Option<String>,
    #[schema(value_type = SourceOfFunds)]
    pub source_of_funds: String,
    #[schema(value_type = AccountPurpose)]
    pub account_purpose: String,
    /// 1 to 5, in the US.
    pub addresses: Vec<Address>,
}

/// A bank's or an account holder's address in bank account details.
#[derive(ToSchema)]
#[allow(dead_code)] // the document's shape, never built
pub struct BankAddress {
    pub street_line_1: Option<String>,
    pub street_line_2: Option<String>,
    pub city: Option<String>,
    pub postal_code: Option<String>,
    /// ISO 3166-1 alpha-2.
    pub country: Option<String>,
    /// ISO 3166-2 subdivision code, without the country prefix.
    pub region_code: Option<String>,
}

/// Bank account details, the reference's fields. A bank account given to
/// the service needs `bank_name`, `account_holder_name` (or `first_name`
/// and `last_name`), one rail (`routing_number` and `account_number`;
/// `clabe`; `ifsc_code` and `account_number`; `swift_or_bic_number` and
/// `account_number`) and `address` with `street_line_1`, `city`,
/// `postal_code`, `country` and `region_code`; each identifier is checked by
/// its form and check digit (see docs/issuance.md). The platform's receiving
/// bank, in a mint instruction, is described by the same fields.
#[derive(ToSchema)]
#[allow(dead_code)] // the document's shape, never built
pub struct BankAccountDetails {
    pub bank_name: Option<String>,
    pub account_holder_name: Option<String>,
    pub account_number: Option<String>,
    /// ABA routing number (9 digits).
    pub routing_number: Option<String>,
    #[schema(value_type = Option<BankAccountType>)]
    pub r#type: Option<String>,
    /// Mexico's CLABE (18 digits).
    pub clabe: Option<String>,
    /// India's IFSC (11 characters).
    pub ifsc_code: Option<String>,
    pub bank_id: Option<String>,
    /// 8 or 11 characters.
    pub swift_or_bic_number: Option<String>,
    #[schema(value_type = Option<AccountOwnerType>)]
    pub account_owner_type: Option<String>,
    pub first_name: Option<String>,
    pub last_name: Option<String>,
    pub bank_code: Option<String>,
    pub identifier_type: Option<String>,
    pub identifier_value: Option<String>,
    pub bank_account_number_type: Option<String>,
    pub address: Option<BankAddress>,
}
