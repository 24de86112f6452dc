//! Bank account details as a bank would check them before it stores them:
//! the field names exactly as the reference lists them, each identifier by
//! its form and, where it has one, its check digit. Pure: the API calls
//! [`validate`] on the request's JSON and stores what it accepts.
//!
//! A bank account is reachable over one rail at least, and every
//! identifier given is checked whether or not its rail is complete:
//!
//! | rail | fields |
//! |---|---|
//! | US (ACH, Fedwire) | `routing_number` (ABA, 9 digits, checksum) and `account_number` |
//! | Mexico (SPEI) | `clabe` (18 digits, check digit) |
//! | India (IMPS, NEFT) | `ifsc_code` (11 characters) and `account_number` |
//! | international (SWIFT) | `swift_or_bic_number` (8 or 11 characters) and `account_number` |

use serde_json::{Map, Value};

use crate::identity::compliance::{country, names, one_of_optional, text};

/// Every field of Bank account details, as the reference names them.
pub const FIELDS: &[&str] = &[
    "bank_name",
    "account_holder_name",
    "account_number",
    "routing_number",
    "type",
    "clabe",
    "ifsc_code",
    "bank_id",
    "swift_or_bic_number",
    "account_owner_type",
    "first_name",
    "last_name",
    "bank_code",
    "identifier_type",
    "identifier_value",
    "bank_account_number_type",
    "address",
];

/// The fields of a bank's or an account holder's address.
pub const ADDRESS_FIELDS: &[&str] =
    &["street_line_1", "street_line_2", "city", "postal_code", "country", "region_code"];

pub const ACCOUNT_TYPES: &[&str] = &["CHECKING", "SAVINGS"];
pub const OWNER_TYPES: &[&str] = &["INDIVIDUAL", "BUSINESS"];

/// An identifier's check: `Err` says what is wrong with it.
type Check = fn(&str) -> Result<(), String>;

/// The longest text a field may hold.
const MAX_TEXT: usize = 256;

/// Checks `details` (the `bank_account_details` object) at `path` (e.g.
/// `bank_account_details.`): every failure, each naming its field.
pub fn validate(path: &str, details: &Value) -> Result<(), Vec<String>> {
    let mut errors = Vec::new();
    let Some(map) = details.as_object() else {
        return Err(vec![format!("{}: must be an object", path.trim_end_matches('.'))]);
    };
    names(&mut errors, path, map, FIELDS);
    for name in FIELDS.iter().filter(|n| !["address", "type", "account_owner_type"].contains(n)) {
        if let Some(value) = text(&mut errors, path, map, name, false)
            && value.len() > MAX_TEXT
        {
            errors.push(format!("{path}{name}: longer than {MAX_TEXT} characters"));
        }
    }
    text(&mut errors, path, map, "bank_name", true);
    holder(&mut errors, path, map);
    one_of_optional(&mut errors, path, map, "type", ACCOUNT_TYPES);
    one_of_optional(&mut errors, path, map, "account_owner_type", OWNER_TYPES);
    identifiers(&mut errors, path, map);
    address(&mut errors, path, map);
    if errors.is_empty() { Ok(()) } else { Err(errors) }
}

/// Whose account it is: `account_holder_name`, or a person's `first_name`
/// and `last_name`.
fn holder(errors: &mut Vec<String>, path: &str, map: &Map<String, Value>) {
    let given = |name: &str| map.get(name).and_then(Value::as_str).is_some_and(|s| !s.trim().is_empty());
    if !(given("account_holder_name") || given("first_name") && given("last_name")) {
        errors.push(format!("{path}account_holder_name: required (or first_name and last_name)"));
    }
}

/// Each identifier given, by its form; and one complete rail.
fn identifiers(errors: &mut Vec<String>, path: &str, map: &Map<String, Value>) {
    let field = |name: &str| map.get(name).and_then(Value::as_str).filter(|s| !s.trim().is_empty());
    let checks: [(&str, Check); 5] = [
        ("routing_number", aba_routing),
        ("account_number", account_number),
        ("swift_or_bic_number", bic),
        ("clabe", clabe),
        ("ifsc_code", ifsc),
    ];
    for (name, check) in checks {
        if let Some(value) = field(name)
            && let Err(why) = check(value)
        {
            errors.push(format!("{path}{name}: {value:?} {why}"));
        }
    }
    let account = field("account_number").is_some();
    let rail = field("clabe").is_some()
        || account
            && ["routing_number", "ifsc_code", "swift_or_bic_number"].iter().any(|n| field(n).is_some());
    if !rail {
        let missing = if account { "routing_number" } else { "account_number" };
        errors.push(format!(
            "{path}{missing}: required: give routing_number and account_number (US), clabe (MX), \
             ifsc_code and account_number (IN), or swift_or_bic_number and account_number"
        ));
    }
}

/// The required address: street, city, postal code, ISO 3166-1 country and
/// an ISO 3166-2 region code without its country prefix.
fn address(errors: &mut Vec<String>, path: &str, map: &Map<String, Value>) {
    let here = format!("{path}address.");
    let Some(address) = map.get("address") else {
        errors.push(format!("{path}address: required"));
        return;
    };
    let Some(address) = address.as_object() else {
        errors.push(format!("{path}address: must be an object"));
        return;
    };
    names(errors, &here, address, ADDRESS_FIELDS);
    for name in ["street_line_1", "city", "postal_code"] {
        text(errors, &here, address, name, true);
    }
    text(errors, &here, address, "street_line_2", false);
    if let Some(region) = text(errors, &here, address, "region_code", true)
        && !is_region_code(region)
    {
        errors.push(format!(
            "{here}region_code: {region:?} is not an ISO 3166-2 subdivision code without its country prefix, \
             such as NY"
        ));
    }
    country(errors, &here, address, "country");
}

/// An ISO 3166-2 subdivision code's part after the country: 1 to 3
/// upper-case letters or digits (`NY`, `CMX`, `07`).
pub fn is_region_code(code: &str) -> bool {
    (1..=3).contains(&code.len()) && code.bytes().all(|b| b.is_ascii_uppercase() || b.is_ascii_digit())
}

/// An ABA routing number: 9 digits whose weighted sum (3, 7, 1 repeating)
/// is a multiple of 10.
pub fn aba_routing(number: &str) -> Result<(), String> {
    let digits = digits(number, 9).ok_or("is not 9 digits")?;
    let sum: u32 = digits.iter().zip([3, 7, 1].iter().cycle()).map(|(d, w)| d * w).sum();
    if sum.is_multiple_of(10) { Ok(()) } else { Err("fails the ABA routing number checksum".into()) }
}

/// An account number: 4 to 34 letters and digits (US accounts, IBANs).
pub fn account_number(number: &str) -> Result<(), String> {
    if (4..=34).contains(&number.len())
        && number.bytes().all(|b| b.is_ascii_uppercase() || b.is_ascii_digit())
    {
        Ok(())
    } else {
        Err("is not 4 to 34 digits or upper-case letters (no spaces or dashes)".into())
    }
}

/// A BIC (SWIFT code): 4 letters of the bank, a 2-letter ISO country, 2
/// letters or digits of the location, and optionally 3 of the branch.
pub fn bic(code: &str) -> Result<(), String> {
    let bytes = code.as_bytes();
    let alnum = |b: &u8| b.is_ascii_uppercase() || b.is_ascii_digit();
    let form = matches!(bytes.len(), 8 | 11)
        && bytes[..6].iter().all(u8::is_ascii_uppercase)
        && bytes[6..].iter().all(alnum);
    if !form {
        return Err(
            "is not a BIC: 8 or 11 characters, bank (4 letters), country (2), location (2), branch (3)"
                .into(),
        );
    }
    if !crate::identity::compliance::is_country(&code[4..6]) {
        return Err(format!("names no country ({:?} is not ISO 3166-1)", &code[4..6]));
    }
    Ok(())
}

/// A Mexican CLABE: 18 digits, the last a check digit over the first 17
/// weighted 3, 7, 1 (each product taken modulo 10).
pub fn clabe(number: &str) -> Result<(), String> {
    let digits = digits(number, 18).ok_or("is not 18 digits")?;
    let sum: u32 = digits[..17].iter().zip([3, 7, 1].iter().cycle()).map(|(d, w)| d * w % 10).sum();
    if (10 - sum % 10) % 10 == digits[17] { Ok(()) } else { Err("fails the CLABE check digit".into()) }
}

/// An Indian IFSC: 4 letters of the bank, a `0`, 6 letters or digits of
/// the branch.
pub fn ifsc(code: &str) -> Result<(), String> {
    let bytes = code.as_bytes();
    let form = bytes.len() == 11
        && bytes[..4].iter().all(u8::is_ascii_uppercase)
        && bytes[4] == b'0'
        && bytes[5..].iter().all(|b| b.is_ascii_uppercase() || b.is_ascii_digit());
    if form { Ok(()) } else { Err("is not an IFSC: 4 letters, 0, then 6 letters or digits".into()) }
}

fn digits(number: &str, len: usize) -> Option<Vec<u32>> {
    let digits: Vec<u32> = number.chars().map(|c| c.to_digit(10)).collect::<Option<_>>()?;
    (digits.len() == len).then_some(digits)
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn identifiers_by_their_form_and_check_digits() {
        let cases: &[(Check, &str, bool)] = &[
            (aba_routing, "021000021", true),
            (aba_routing, "011000015", true),
            (aba_routing, "123456780", true),
            (aba_routing, "021000022", false),
            (aba_routing, "02100002", false),
            (aba_routing, "02100002a", false),
            (clabe, "002010077777777771", true),
            (clabe, "032180000118359719", true),
            (clabe, "032180000118359718", false),
            (clabe, "03218000011835971", false),
            (ifsc, "HDFC0001234", true),
            (ifsc, "SBIN0ABC123", true),
            (ifsc, "HDFC1001234", false),
            (ifsc, "HDF00001234", false),
            (ifsc, "hdfc0001234", false),
            (bic, "DEUTDEFF", true),
            (bic, "DEUTDEFF500", true),
            (bic, "CHASUS33", true),
            (bic, "DEUTDEF", false),
            (bic, "DEUTDEFF50", false),
            (bic, "DEUTXXFF", false),
            (bic, "1EUTDEFF", false),
            (account_number, "000123456789", true),
            (account_number, "DE89370400440532013000", true),
            (account_number, "123", false),
            (account_number, "1234-5678", false),
        ];
        for (check, value, valid) in cases {
            assert_eq!(check(value).is_ok(), *valid, "{value}: {:?}", check(value));
        }
    }

    fn us() -> Value {
        json!({
            "bank_name": "Chase", "account_holder_name": "Ada Lovelace", "type": "CHECKING",
            "routing_number": "021000021", "account_number": "000123456789", "account_owner_type": "INDIVIDUAL",
            "address": { "street_line_1": "1 Main St", "city": "New York", "postal_code": "10001",
                         "country": "US", "region_code": "NY" }
        })
    }

    #[test]
    fn each_rail_complete_is_accepted() {
        assert_eq!(validate("d.", &us()), Ok(()));
        let mut mx = us();
        let map = mx.as_object_mut().unwrap();
        map.remove("routing_number");
        map.remove("account_number");
        map.insert("clabe".into(), json!("032180000118359719"));
        assert_eq!(validate("d.", &mx), Ok(()));
        let mut swift = us();
        swift.as_object_mut().unwrap().remove("routing_number");
        swift["swift_or_bic_number"] = json!("DEUTDEFF");
        swift["first_name"] = json!("Ada");
        swift["last_name"] = json!("Lovelace");
        swift.as_object_mut().unwrap().remove("account_holder_name");
        assert_eq!(validate("d.", &swift), Ok(()));
    }

    #[test]
    fn every_failure_names_its_field() {
        let cases: &[(&str, Value, &str)] = &[
            ("routing_number", json!("021000022"), "d.routing_number: \"021000022\" fails the ABA"),
            ("type", json!("BROKERAGE"), "d.type: \"BROKERAGE\" is not one of CHECKING, SAVINGS"),
            ("account_owner_type", json!("TRUST"), "d.account_owner_type: \"TRUST\" is not one of"),
            ("clabe", json!("123"), "d.clabe: \"123\" is not 18 digits"),
            ("ifsc_code", json!("HDFC1001234"), "d.ifsc_code: \"HDFC1001234\" is not an IFSC"),
            ("swift_or_bic_number", json!("DEUT"), "d.swift_or_bic_number: \"DEUT\" is not a BIC"),
            ("bankName", json!("x"), "d.bankName: camelCase"),
            ("iban", json!("x"), "d.iban: unknown field"),
            ("bank_name", json!(""), "d.bank_name: must be a non-empty string"),
            ("bank_name", json!("x".repeat(257)), "d.bank_name: longer than 256"),
        ];
        for (field, value, expected) in cases {
            let mut details = us();
            details[*field] = value.clone();
            let errors = validate("d.", &details).unwrap_err();
            assert!(errors.iter().any(|e| e.starts_with(expected)), "{field}: {errors:?}");
        }
    }

    #[test]
    fn required_fields_and_the_address() {
        let without = |remove: &[&str]| {
            let mut details = us();
            for field in remove {
                details.as_object_mut().unwrap().remove(*field);
            }
            validate("d.", &details).unwrap_err()
        };
        assert!(without(&["bank_name"]).contains(&"d.bank_name: required".to_string()));
        assert!(without(&["account_holder_name"])[0].starts_with("d.account_holder_name: required"));
        assert!(without(&["routing_number"])[0].starts_with("d.routing_number: required"));
        assert!(without(&["account_number", "routing_number"])[0].starts_with("d.account_number: required"));
        assert_eq!(without(&["address"]), ["d.address: required"]);
        for (field, value, expected) in [
            ("region_code", None, "d.address.region_code: required"),
            ("region_code", Some("US-NY"), "d.address.region_code: \"US-NY\" is not an ISO 3166-2"),
            ("country", Some("USA"), "d.address.country: \"USA\" is not an ISO 3166-1"),
            ("street_line_1", None, "d.address.street_line_1: required"),
            ("line1", Some("x"), "d.address.line1: unknown field"),
        ] {
            let mut details = us();
            let address = details["address"].as_object_mut().unwrap();
            match value {
                Some(v) => address.insert(field.into(), json!(v)),
                None => address.remove(field),
            };
            let errors = validate("d.", &details).unwrap_err();
            assert!(errors.iter().any(|e| e.starts_with(expected)), "{field}: {errors:?}");
        }
        assert_eq!(validate("d.", &json!("x")).unwrap_err(), ["d: must be an object"]);
    }
}
