//! Validation of compliance submissions (`POST
//! /v2/identities/{id}/compliance`): exactly one of `kyc` (individuals) or
//! `kyb` (businesses, US only). Every problem is reported, each naming its
//! field by path (`kyc.addresses[0].region_code`); removed fields
//! (`gov_id_image_front`, `gov_id_image_back`, `kycLevel`, `kybLevel`) and
//! camelCase names are refused by name, as is any field not listed here.

use serde_json::{Map, Value};

use super::Type;

/// `kyc.occupation`.
pub const OCCUPATIONS: &[&str] =
    &["EMPLOYED", "SELF_EMPLOYED", "UNEMPLOYED", "STUDENT", "RETIRED", "HOMEMAKER", "OTHER"];
/// `kyc.source_of_funds` and `kyb.source_of_funds`.
pub const SOURCES_OF_FUNDS: &[&str] = &[
    "SALARY",
    "SAVINGS",
    "INVESTMENTS",
    "BUSINESS_INCOME",
    "INHERITANCE",
    "GIFT",
    "PENSION",
    "SALE_OF_ASSETS",
    "OTHER",
];
/// `kyc.account_purpose` and `kyb.account_purpose` (the values as updated).
pub const ACCOUNT_PURPOSES: &[&str] = &[
    "PERSONAL_PAYMENTS",
    "SAVINGS",
    "INVESTMENT",
    "TRADING",
    "REMITTANCES",
    "BUSINESS_PAYMENTS",
    "TREASURY_MANAGEMENT",
    "OTHER",
];
/// `kyb.business_type`.
pub const BUSINESS_TYPES: &[&str] =
    &["CORPORATION", "LLC", "PARTNERSHIP", "SOLE_PROPRIETORSHIP", "NON_PROFIT", "OTHER"];
/// Countries of residence whose KYC requires `additional_id_number` (a
/// national tax or identity number: US SSN or ITIN, Brazil's CPF, Mexico's
/// CURP, India's PAN, Argentina's CUIL).
pub const ADDITIONAL_ID_COUNTRIES: &[&str] = &["US", "BR", "MX", "IN", "AR"];

/// Fields that were part of the payload once and are refused by name now.
const REMOVED: &[(&str, &str)] = &[
    ("gov_id_image_front", "is no longer part of the KYC payload"),
    ("gov_id_image_back", "is no longer part of the KYC payload"),
    ("kycLevel", "was removed"),
    ("kybLevel", "was removed"),
];

const KYC_FIELDS: &[&str] = &[
    "first_name",
    "middle_name",
    "last_name",
    "date_of_birth",
    "email",
    "phone",
    "nationality",
    "country_of_birth",
    "occupation",
    "source_of_funds",
    "account_purpose",
    "additional_id_number",
    "addresses",
];
const KYB_FIELDS: &[&str] = &[
    "business_name",
    "doing_business_as",
    "business_type",
    "tax_id",
    "incorporation_country",
    "incorporation_date",
    "website",
    "email",
    "source_of_funds",
    "account_purpose",
    "addresses",
];
const ADDRESS_FIELDS: &[&str] = &[
    "street_line_1",
    "street_line_2",
    "city",
    "region_code",
    "postal_code",
    "country",
    "line1",
    "line2",
    "country_code",
];

/// An address's fields under the reference's names (as bank details name
/// them), each with the older name still accepted in its place.
const ADDRESS_NAMES: [(&str, &str); 3] =
    [("street_line_1", "line1"), ("street_line_2", "line2"), ("country", "country_code")];

/// The name `address` gives the field `reference` (the reference's name,
/// else its older one, else the reference's when neither is there), or an
/// error naming both when it gives both.
fn address_name(
    errors: &mut Vec<String>,
    here: &str,
    address: &Map<String, Value>,
    reference: &str,
) -> String {
    let older = ADDRESS_NAMES.iter().find(|(name, _)| *name == reference).map_or(reference, |(_, o)| *o);
    match (address.contains_key(reference), address.contains_key(older)) {
        (true, true) => {
            errors.push(format!("{here}{reference}: give {reference} or {older}, not both"));
            reference.to_string()
        }
        (false, true) => older.to_string(),
        _ => reference.to_string(),
    }
}

/// Submissions accepted per identity per UTC day at most; the next one is
/// `429` until midnight UTC. A refused body (a field wrong, a state that
/// takes no data) does not count.
pub const MAX_SUBMISSIONS_PER_DAY: i64 = 20;

/// Addresses per submission at most.
pub const MAX_ADDRESSES: usize = 5;

/// The longest value a text field may hold, in characters: the lengths
/// banks and KYC providers accept (an email's 254 of RFC 5321, a URL's
/// 2,048), 100 for names and 200 for anything else.
pub fn max_len(field: &str) -> usize {
    match field {
        "email" => 254,
        "website" => 2048,
        "phone" => 32,
        "postal_code" => 20,
        "additional_id_number" | "tax_id" => 64,
        "first_name" | "middle_name" | "last_name" | "city" => 100,
        _ => 200,
    }
}

/// Whether an identity that had `accepted_today` submissions accepted since
/// midnight UTC may have one more.
pub fn may_submit(accepted_today: i64) -> bool {
    accepted_today < MAX_SUBMISSIONS_PER_DAY
}

/// ISO 3166-1 alpha-2: every officially assigned code.
const COUNTRIES: &str = "AD AE AF AG AI AL AM AO AQ AR AS AT AU AW AX AZ BA BB BD BE BF BG BH BI BJ BL BM BN BO BQ BR \
    BS BT BV BW BY BZ CA CC CD CF CG CH CI CK CL CM CN CO CR CU CV CW CX CY CZ DE DJ DK DM DO DZ EC EE EG EH ER ES ET \
    FI FJ FK FM FO FR GA GB GD GE GF GG GH GI GL GM GN GP GQ GR GS GT GU GW GY HK HM HN HR HT HU ID IE IL IM IN IO IQ \
    IR IS IT JE JM JO JP KE KG KH KI KM KN KP KR KW KY KZ LA LB LC LI LK LR LS LT LU LV LY MA MC MD ME MF MG MH MK ML \
    MM MN MO MP MQ MR MS MT MU MV MW MX MY MZ NA NC NE NF NG NI NL NO NP NR NU NZ OM PA PE PF PG PH PK PL PM PN PR PS \
    PT PW PY QA RE RO RS RU RW SA SB SC SD SE SG SH SI SJ SK SL SM SN SO SR SS ST SV SX SY SZ TC TD TF TG TH TJ TK TL \
    TM TN TO TR TT TV TW TZ UA UG UM US UY UZ VA VC VE VG VI VN VU WF WS YE YT ZA ZM ZW";

/// Whether `code` is an ISO 3166-1 alpha-2 code (uppercase).
pub fn is_country(code: &str) -> bool {
    code.len() == 2 && COUNTRIES.split_whitespace().any(|c| c == code)
}

/// Checks a submission for an identity of type `kind`; every problem, each
/// naming its field.
pub fn validate(kind: Type, body: &Value) -> Result<(), Vec<String>> {
    let mut errors = Vec::new();
    let Some(top) = body.as_object() else {
        return Err(vec!["the body must be a JSON object holding kyc or kyb".into()]);
    };
    let (expected, other) = match kind {
        Type::Individual => ("kyc", "kyb"),
        Type::Business => ("kyb", "kyc"),
    };
    names(&mut errors, "", top, &["kyc", "kyb"]);
    if top.contains_key(other) {
        let article = if kind == Type::Individual { "an" } else { "a" };
        errors.push(format!("{other}: {article} {kind} identity submits {expected}, not {other}"));
    }
    match top.get(expected) {
        None if !top.contains_key(other) => {
            errors.push(format!("{expected}: required (exactly one of kyc or kyb)"))
        }
        None => {}
        Some(value) => match (kind, value.as_object()) {
            (_, None) => errors.push(format!("{expected}: must be an object")),
            (Type::Individual, Some(kyc)) => check_kyc(&mut errors, kyc),
            (Type::Business, Some(kyb)) => check_kyb(&mut errors, kyb),
        },
    }
    if errors.is_empty() { Ok(()) } else { Err(errors) }
}

/// The name the sandbox provider decides on: `kyc.last_name` or
/// `kyb.business_name`.
pub fn decisive_name(body: &Value) -> &str {
    body.pointer("/kyc/last_name")
        .or_else(|| body.pointer("/kyb/business_name"))
        .and_then(Value::as_str)
        .unwrap_or("")
}

fn check_kyc(errors: &mut Vec<String>, kyc: &Map<String, Value>) {
    names(errors, "kyc.", kyc, KYC_FIELDS);
    for field in ["first_name", "last_name"] {
        self::field(errors, "kyc.", kyc, field, true);
    }
    for field in ["middle_name", "email", "phone"] {
        self::field(errors, "kyc.", kyc, field, false);
    }
    date(errors, "kyc.", kyc, "date_of_birth", true);
    country(errors, "kyc.", kyc, "nationality");
    country(errors, "kyc.", kyc, "country_of_birth");
    one_of(errors, "kyc.", kyc, "occupation", OCCUPATIONS);
    one_of(errors, "kyc.", kyc, "source_of_funds", SOURCES_OF_FUNDS);
    one_of(errors, "kyc.", kyc, "account_purpose", ACCOUNT_PURPOSES);
    let countries = addresses(errors, "kyc.", kyc);
    let required = countries.iter().any(|(_, c)| ADDITIONAL_ID_COUNTRIES.contains(&c.as_str()));
    field(errors, "kyc.", kyc, "additional_id_number", false);
    if required && kyc.get("additional_id_number").is_none() {
        errors.push(format!(
            "kyc.additional_id_number: required for residents of {}",
            ADDITIONAL_ID_COUNTRIES.join(", ")
        ));
    }
}

fn check_kyb(errors: &mut Vec<String>, kyb: &Map<String, Value>) {
    names(errors, "kyb.", kyb, KYB_FIELDS);
    field(errors, "kyb.", kyb, "business_name", true);
    for field in ["doing_business_as", "website", "email"] {
        self::field(errors, "kyb.", kyb, field, false);
    }
    one_of(errors, "kyb.", kyb, "business_type", BUSINESS_TYPES);
    if let Some(tax_id) = field(errors, "kyb.", kyb, "tax_id", true) {
        let digits: String = tax_id.chars().filter(|c| *c != '-').collect();
        if digits.len() != 9 || !digits.bytes().all(|b| b.is_ascii_digit()) {
            errors.push("kyb.tax_id: must be a US EIN of 9 digits, such as 12-3456789".into());
        }
    }
    if let Some(code) = country(errors, "kyb.", kyb, "incorporation_country")
        && code != "US"
    {
        errors.push(format!(
            "kyb.incorporation_country: only US businesses are supported; {code} is international"
        ));
    }
    date(errors, "kyb.", kyb, "incorporation_date", false);
    one_of(errors, "kyb.", kyb, "source_of_funds", SOURCES_OF_FUNDS);
    one_of(errors, "kyb.", kyb, "account_purpose", ACCOUNT_PURPOSES);
    for (i, (name, code)) in addresses(errors, "kyb.", kyb).iter().enumerate() {
        if code != "US" {
            errors.push(format!("kyb.addresses[{i}].{name}: only US businesses are supported"));
        }
    }
}

/// Refuses removed, camelCase and unknown field names.
pub(crate) fn names(errors: &mut Vec<String>, path: &str, map: &Map<String, Value>, allowed: &[&str]) {
    for name in map.keys() {
        if let Some((_, why)) = REMOVED.iter().find(|(removed, _)| removed == name) {
            errors.push(format!("{path}{name}: {why}"));
        } else if name.chars().any(|c| c.is_ascii_uppercase()) {
            errors.push(format!("{path}{name}: camelCase field names are not accepted; use snake_case"));
        } else if !allowed.contains(&name.as_str()) {
            errors.push(format!("{path}{name}: unknown field (expected one of: {})", allowed.join(", ")));
        }
    }
}

/// A string field: non-empty when present; an error when required and absent.
pub(crate) fn text<'a>(
    errors: &mut Vec<String>,
    path: &str,
    map: &'a Map<String, Value>,
    name: &str,
    required: bool,
) -> Option<&'a str> {
    match map.get(name) {
        None if required => errors.push(format!("{path}{name}: required")),
        None => {}
        Some(Value::String(s)) if !s.trim().is_empty() => return Some(s),
        Some(_) => errors.push(format!("{path}{name}: must be a non-empty string")),
    }
    None
}

/// A compliance text field: as [`text`], and at most [`max_len`] characters.
fn field<'a>(
    errors: &mut Vec<String>,
    path: &str,
    map: &'a Map<String, Value>,
    name: &str,
    required: bool,
) -> Option<&'a str> {
    if let Some(Value::String(s)) = map.get(name)
        && s.chars().count() > max_len(name)
    {
        errors.push(format!("{path}{name}: at most {} characters", max_len(name)));
        return None;
    }
    text(errors, path, map, name, required)
}

fn one_of(errors: &mut Vec<String>, path: &str, map: &Map<String, Value>, name: &str, values: &[&str]) {
    if let Some(value) = field(errors, path, map, name, true)
        && !values.contains(&value)
    {
        errors.push(format!("{path}{name}: {value:?} is not one of {}", values.join(", ")));
    }
}

/// An optional field that, when present, is one of `values`.
pub(crate) fn one_of_optional(
    errors: &mut Vec<String>,
    path: &str,
    map: &Map<String, Value>,
    name: &str,
    values: &[&str],
) {
    if map.contains_key(name) {
        one_of(errors, path, map, name, values);
    }
}

/// A required ISO 3166-1 alpha-2 code.
pub(crate) fn country<'a>(
    errors: &mut Vec<String>,
    path: &str,
    map: &'a Map<String, Value>,
    name: &str,
) -> Option<&'a str> {
    let code = text(errors, path, map, name, true)?;
    if is_country(code) {
        Some(code)
    } else {
        errors.push(format!("{path}{name}: {code:?} is not an ISO 3166-1 alpha-2 country code such as US"));
        None
    }
}

/// A `YYYY-MM-DD` date.
fn date(errors: &mut Vec<String>, path: &str, map: &Map<String, Value>, name: &str, required: bool) {
    if let Some(value) = field(errors, path, map, name, required)
        && chrono::NaiveDate::parse_from_str(value, "%Y-%m-%d").is_err()
    {
        errors.push(format!("{path}{name}: {value:?} is not a date such as 1990-01-31"));
    }
}

/// At least one address, each with a region code; their valid country codes.
/// Checks the addresses of `map`: each address's country, with the name
/// it was given under.
fn addresses(errors: &mut Vec<String>, path: &str, map: &Map<String, Value>) -> Vec<(String, String)> {
    let list = match map.get("addresses") {
        None => {
            errors.push(format!("{path}addresses: required (at least one address)"));
            return Vec::new();
        }
        Some(Value::Array(list)) if list.len() > MAX_ADDRESSES => {
            errors.push(format!("{path}addresses: at most {MAX_ADDRESSES} addresses"));
            return Vec::new();
        }
        Some(Value::Array(list)) if !list.is_empty() => list,
        Some(_) => {
            errors.push(format!("{path}addresses: must be a non-empty list of addresses"));
            return Vec::new();
        }
    };
    let mut countries = Vec::new();
    for (i, address) in list.iter().enumerate() {
        let here = format!("{path}addresses[{i}].");
        let Some(address) = address.as_object() else {
            errors.push(format!("{path}addresses[{i}]: must be an object"));
            continue;
        };
        names(errors, &here, address, ADDRESS_FIELDS);
        let line1 = address_name(errors, &here, address, "street_line_1");
        for field in [line1.as_str(), "city", "postal_code"] {
            self::field(errors, &here, address, field, true);
        }
        let line2 = address_name(errors, &here, address, "street_line_2");
        field(errors, &here, address, &line2, false);
        if let Some(region) = field(errors, &here, address, "region_code", true)
            && (region.len() > 3 || !region.bytes().all(|b| b.is_ascii_uppercase() || b.is_ascii_digit()))
        {
            errors.push(format!(
                "{here}region_code: {region:?} is not an ISO 3166-2 subdivision code such as NY"
            ));
        }
        let country_name = address_name(errors, &here, address, "country");
        if let Some(code) = country(errors, &here, address, &country_name) {
            countries.push((country_name.clone(), code.to_string()));
        }
    }
    countries
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn kyc() -> Value {
        json!({ "kyc": {
            "first_name": "Ada", "last_name": "Lovelace", "date_of_birth": "1990-12-10",
            "nationality": "GB", "country_of_birth": "GB", "occupation": "EMPLOYED",
            "source_of_funds": "SALARY", "account_purpose": "SAVINGS",
            "addresses": [{ "line1": "1 Main St", "city": "London", "region_code": "LND",
                            "postal_code": "N1", "country_code": "GB" }]
        }})
    }

    #[test]
    fn the_country_list_is_iso_3166_1() {
        assert_eq!(COUNTRIES.split_whitespace().count(), 249);
        assert!(is_country("US") && is_country("GB") && !is_country("UK") && !is_country("us"));
    }

    #[test]
    fn errors_name_each_field() {
        assert_eq!(validate(Type::Individual, &kyc()), Ok(()));
        let mut bad = kyc();
        bad["kyc"]["nationality"] = json!("XX");
        bad["kyc"]["gov_id_image_front"] = json!("...");
        bad["kyc"]["sourceOfFunds"] = json!("SALARY");
        bad["kyc"]["addresses"][0].as_object_mut().unwrap().remove("region_code");
        bad["kyc"]["addresses"][0]["country_code"] = json!("US");
        let errors = validate(Type::Individual, &bad).unwrap_err().join("\n");
        for field in [
            "kyc.nationality:",
            "kyc.gov_id_image_front:",
            "kyc.sourceOfFunds: camelCase",
            "kyc.addresses[0].region_code: required",
            "kyc.additional_id_number: required",
        ] {
            assert!(errors.contains(field), "{field} in {errors}");
        }
        let errors = validate(Type::Business, &kyc()).unwrap_err().join("\n");
        assert!(errors.contains("kyc: a BUSINESS identity submits kyb"), "{errors}");
        let errors = validate(Type::Individual, &json!({ "kyb": {} })).unwrap_err().join("\n");
        assert!(errors.contains("kyb: an INDIVIDUAL identity submits kyc"), "{errors}");
    }

    #[test]
    fn every_text_field_is_bounded_and_the_bound_is_named() {
        let cases = [
            ("/kyc/first_name", 100),
            ("/kyc/last_name", 100),
            ("/kyc/occupation", 200),
            ("/kyc/addresses/0/line1", 200),
            ("/kyc/addresses/0/city", 100),
            ("/kyc/addresses/0/postal_code", 20),
        ];
        for (pointer, bound) in cases {
            let mut at_bound = kyc();
            *at_bound.pointer_mut(pointer).unwrap() = json!("a".repeat(bound));
            let errors = validate(Type::Individual, &at_bound).err().unwrap_or_default().join("\n");
            assert!(!errors.contains("at most"), "{pointer} at {bound}: {errors}");
            let mut over = kyc();
            *over.pointer_mut(pointer).unwrap() = json!("é".repeat(bound + 1));
            let errors = validate(Type::Individual, &over).unwrap_err().join("\n");
            let field = pointer.trim_start_matches('/').replace("/0/", "[0].").replace('/', ".");
            assert!(errors.contains(&format!("{field}: at most {bound} characters")), "{errors}");
        }
        let mut many = kyc();
        let mut reference = kyc();
        reference["kyc"]["addresses"][0] = json!({ "street_line_1": "1 Main St", "street_line_2": "Flat 2",
            "city": "London", "region_code": "LND", "postal_code": "N1", "country": "GB" });
        assert_eq!(validate(Type::Individual, &reference), Ok(()), "the reference's names");
        *reference.pointer_mut("/kyc/addresses/0/street_line_1").unwrap() = json!("a".repeat(201));
        reference["kyc"]["addresses"][0]["line2"] = json!("Flat 3");
        reference["kyc"]["addresses"][0]["country"] = json!("XX");
        let errors = validate(Type::Individual, &reference).unwrap_err().join("\n");
        for error in [
            "kyc.addresses[0].street_line_1: at most 200 characters",
            "kyc.addresses[0].street_line_2: give street_line_2 or line2, not both",
            "kyc.addresses[0].country: \"XX\" is not an ISO 3166-1 alpha-2",
        ] {
            assert!(errors.contains(error), "{error} in {errors}");
        }
        let mut none = kyc();
        none["kyc"]["addresses"][0] = json!({ "city": "London", "region_code": "LND", "postal_code": "N1" });
        let errors = validate(Type::Individual, &none).unwrap_err().join("\n");
        for error in ["kyc.addresses[0].street_line_1: required", "kyc.addresses[0].country: required"] {
            assert!(errors.contains(error), "{error} in {errors}");
        }

        let address = many["kyc"]["addresses"][0].clone();
        many["kyc"]["addresses"] = json!(vec![address; MAX_ADDRESSES + 1]);
        let errors = validate(Type::Individual, &many).unwrap_err().join("\n");
        assert!(errors.contains("kyc.addresses: at most 5 addresses"), "{errors}");
        assert!(may_submit(MAX_SUBMISSIONS_PER_DAY - 1) && !may_submit(MAX_SUBMISSIONS_PER_DAY));
    }
}
