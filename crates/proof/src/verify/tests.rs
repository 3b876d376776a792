//! verify's own bounds and words, apart from any archive (its behaviour over an archive the
//! archiver sealed is tested in tests/verify_*.rs).

use audit_model::digest::ProblemKind;

use super::report::Problem;

#[test]
fn problems_are_printed_one_line_each() {
    let problem = Problem::new(ProblemKind::DigestMissing, "digest/x", "no digest");
    assert_eq!(problem.to_string(), "digest missing  digest/x  no digest");
}

#[test]
fn the_late_bound_covers_what_the_templates_mapping_retries() {
    // The archiver's stream event retries a failing batch for as long as the stream holds its
    // records (no age limit of its own), so a record can be archived up to the stream's 24 hours
    // after it was written: LATE_ARCHIVE_SECONDS must reach that far, and the template must keep
    // the mapping's age limit off (or LATE_ARCHIVE_SECONDS must follow it).
    let template = include_str!("../../../../template.yaml");
    let mapping = template
        .split("MaximumRetryAttempts: {Ref: ArchiveRetryAttempts}")
        .nth(1)
        .expect("the archiver's stream event retries ArchiveRetryAttempts times");
    let age = mapping
        .lines()
        .find_map(|l| l.trim().strip_prefix("MaximumRecordAgeInSeconds:"))
        .map(str::trim);
    assert_eq!(age, Some("-1"), "the mapping's MaximumRecordAgeInSeconds");
    const {
        assert!(
            super::LATE_ARCHIVE_SECONDS
                >= super::STREAM_RETENTION_SECONDS + super::ARCHIVE_LAG_SECONDS
        );
        assert!(super::STREAM_RETENTION_SECONDS == 86_400);
    }
}
