//! Owns DynamoDB's number rules for a body's JSON numbers (digits, magnitude) and the decimal
//! normal form they are checked in (docs/events.md). Must not know the other body rules or the item.

use serde_json::Value;

/// Why a JSON number cannot be stored as a DynamoDB number.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum NumberError {
    #[error("a number has {0} significant digits; DynamoDB stores at most 38")]
    TooPrecise(usize),
    #[error("a number's magnitude is outside DynamoDB's 1E-130 to 1E+126")]
    OutOfRange,
    #[error("a number's exponent is too large to read")]
    ExponentOverflow,
}

/// Every number in `value` can be stored by DynamoDB.
pub(super) fn check_numbers(value: &Value) -> Result<(), NumberError> {
    match value {
        Value::Number(n) => check_number(&n.to_string()),
        Value::Array(values) => values.iter().try_for_each(check_numbers),
        Value::Object(map) => map.values().try_for_each(check_numbers),
        _ => Ok(()),
    }
}

/// DynamoDB's number rules: at most 38 significant digits, and zero or a magnitude from 1E-130
/// up to (not including) 1E+126.
pub fn check_number(text: &str) -> Result<(), NumberError> {
    let decimal = Decimal::parse(text).ok_or(NumberError::ExponentOverflow)?;
    if decimal.digits.is_empty() {
        return Ok(()); // zero
    }
    if decimal.digits.len() > 38 {
        return Err(NumberError::TooPrecise(decimal.digits.len()));
    }
    // value = 0.d1d2… × 10^exponent, so 1E-130 <= value < 1E+126 <=> -129 <= exponent <= 126.
    if !(-129..=126).contains(&decimal.exponent) {
        return Err(NumberError::OutOfRange);
    }
    Ok(())
}

/// A decimal number in normal form: value = (−1 if negative) × 0.`digits` × 10^`exponent`, with
/// no leading or trailing zeros in `digits` (empty for zero). Equal values have equal forms.
/// Hand-written because only equality and the digit count are needed; a bignum crate would add
/// weight for no more.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Decimal {
    pub negative: bool,
    pub digits: String,
    pub exponent: i64,
}

impl Decimal {
    /// Reads a JSON or DynamoDB number (`-12.50`, `1e2`, `5E-1`); None when it is not a number
    /// or its exponent does not fit an i64.
    pub fn parse(text: &str) -> Option<Self> {
        let text = text.trim();
        let (negative, unsigned) = match text.as_bytes().first()? {
            b'-' => (true, &text[1..]),
            b'+' => (false, &text[1..]),
            _ => (false, text),
        };
        let (mantissa, exponent) = match unsigned.find(['e', 'E']) {
            Some(at) => (&unsigned[..at], unsigned[at + 1..].parse::<i64>().ok()?),
            None => (unsigned, 0),
        };
        let (int, frac) = mantissa.split_once('.').unwrap_or((mantissa, ""));
        if int.is_empty() && frac.is_empty()
            || !int.chars().chain(frac.chars()).all(|c| c.is_ascii_digit())
        {
            return None;
        }
        let digits = format!("{int}{frac}");
        let leading = digits.len() - digits.trim_start_matches('0').len();
        let significant = digits.trim_start_matches('0').trim_end_matches('0');
        if significant.is_empty() {
            return Some(Self {
                negative: false,
                digits: String::new(),
                exponent: 0,
            });
        }
        let shift = i64::try_from(int.len()).ok()? - i64::try_from(leading).ok()?;
        Some(Self {
            negative,
            digits: significant.to_owned(),
            exponent: exponent.checked_add(shift)?,
        })
    }
}
