//! Owns where a Parquet object goes: Security Lake's custom-source layout (docs/ocsf.md "Where
//! the records go"). Must not know Parquet or the mapping.

use chrono::{DateTime, Utc};

/// `ext/<source>/region=<region>/accountId=<account>/eventDay=<YYYYMMDD>/<name>.zstd.parquet`,
/// the event day in UTC from epoch milliseconds (a time out of chrono's range gives day
/// `00000000`).
pub fn object_key(source: &str, region: &str, account: &str, time: i64, name: &str) -> String {
    let day = DateTime::<Utc>::from_timestamp_millis(time)
        .map_or_else(|| "00000000".to_owned(), |t| t.format("%Y%m%d").to_string());
    format!("ext/{source}/region={region}/accountId={account}/eventDay={day}/{name}.zstd.parquet")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_key_is_security_lakes_layout_with_the_events_utc_day() {
        // 2026-11-22T23:59:59.999Z and the next millisecond.
        assert_eq!(
            object_key(
                "audit-receiver",
                "eu-west-1",
                "123456789012",
                1_795_391_999_999,
                "x"
            ),
            "ext/audit-receiver/region=eu-west-1/accountId=123456789012/eventDay=20261122/x.zstd.parquet"
        );
        assert!(object_key("s", "r", "a", 1_795_392_000_000, "x").contains("/eventDay=20261123/"));
    }
}
