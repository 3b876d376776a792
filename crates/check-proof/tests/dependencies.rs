//! The offline checker is an auditor's dependency: what it builds (`cargo tree`, normal
//! dependencies only) holds no AWS SDK, no AWS configuration and no async runtime
//! (docs/architecture.md).

use std::process::Command;

#[test]
fn the_offline_checker_builds_without_the_aws_sdk() {
    let output = Command::new(env!("CARGO"))
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .args([
            "tree",
            "--offline",
            "-p",
            "audit-check-proof",
            "-e",
            "normal",
            "--prefix",
            "none",
        ])
        .output()
        .unwrap();
    assert!(output.status.success(), "{output:?}");
    let tree = String::from_utf8(output.stdout).unwrap();
    assert!(
        tree.lines().any(|l| l.starts_with("audit-proof ")),
        "{tree}"
    );
    let forbidden: Vec<&str> = tree
        .lines()
        .filter(|l| {
            [
                "aws-sdk-",
                "aws-config ",
                "aws-smithy-",
                "tokio ",
                "audit-aws ",
            ]
            .iter()
            .any(|name| l.starts_with(name))
        })
        .collect();
    assert!(
        forbidden.is_empty(),
        "the offline checker builds {forbidden:?}"
    );
}
