//! Owns what the stack's table says about the stack in its tags (template.yaml sets them): the
//! access queue's ARN (`audit:access-queue-arn`) and the receiver function's role id
//! (`audit:receiver-role-id`), and the days the table keeps an item (`audit:retention-days`); and the ARN an SQS queue URL names (docs/architecture.md "The crates", trail). Must not know the commands or
//! what is checked against these.

use audit_aws::error::{AwsError, ErrorKind};

/// The table's tag naming the stack's access queue by its ARN.
pub const ACCESS_QUEUE_TAG: &str = "audit:access-queue-arn";
/// The table's tag naming the receiver function's role by its role id (`AROA…`).
pub const RECEIVER_ROLE_TAG: &str = "audit:receiver-role-id";

/// The table's tag naming the days DynamoDB's TTL keeps an item (`RetentionDays`; 0: forever).
pub const RETENTION_DAYS_TAG: &str = "audit:retention-days";

/// The table's tags that auditctl reads; a tag absent or empty is `None`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct StackTags {
    pub access_queue_arn: Option<String>,
    pub receiver_role_id: Option<String>,
    /// The table's hot window in days: `None` when items are kept forever (0, or no tag: a stack
    /// deployed before the tag, whose `auditctl query` then reads the table alone, as before).
    pub retention_days: Option<u32>,
}

/// Why the table's tags could not be read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TagError {
    #[error(
        "table {table} not found at {at}: its tags name the stack's queues and roles; set TABLE_NAME (or --table; --table-name for verify) to the stack's table, or deploy the stack"
    )]
    TableNotFound { table: String, at: String },
    #[error(
        "not allowed to read the tags of table {table}: {detail}; attach AuditReaderPolicy or AuditOperatorPolicy of the current template.yaml (they grant dynamodb:DescribeTable and dynamodb:ListTagsOfResource on the table)"
    )]
    Denied { table: String, detail: String },
    #[error("reading the tags of table {table} failed: {detail}")]
    Failed { table: String, detail: String },
}

impl StackTags {
    /// The tags of `table`: its ARN from DescribeTable (which every reader may call), then
    /// ListTagsOfResource, every page. `at` is where requests go, for the error.
    pub async fn read(
        client: &aws_sdk_dynamodb::Client,
        table: &str,
        at: &str,
    ) -> Result<Self, TagError> {
        let fail = |error: AwsError| match error.kind {
            ErrorKind::NotFound => TagError::TableNotFound {
                table: table.to_owned(),
                at: at.to_owned(),
            },
            ErrorKind::Denied => TagError::Denied {
                table: table.to_owned(),
                detail: error.text,
            },
            _ => TagError::Failed {
                table: table.to_owned(),
                detail: error.text,
            },
        };
        let described = client
            .describe_table()
            .table_name(table)
            .send()
            .await
            .map_err(|e| fail(AwsError::from_sdk(&e)))?;
        let arn = described
            .table
            .and_then(|t| t.table_arn)
            .ok_or_else(|| TagError::Failed {
                table: table.to_owned(),
                detail: "DescribeTable named no TableArn".to_owned(),
            })?;
        let mut tags = Self::default();
        let mut next: Option<String> = None;
        loop {
            let page = client
                .list_tags_of_resource()
                .resource_arn(&arn)
                .set_next_token(next.take())
                .send()
                .await
                .map_err(|e| fail(AwsError::from_sdk(&e)))?;
            for tag in page.tags.unwrap_or_default() {
                let value = Some(tag.value.trim().to_owned()).filter(|v| !v.is_empty());
                match tag.key.as_str() {
                    ACCESS_QUEUE_TAG => tags.access_queue_arn = value,
                    RECEIVER_ROLE_TAG => tags.receiver_role_id = value,
                    RETENTION_DAYS_TAG => {
                        tags.retention_days = value
                            .and_then(|v| v.parse::<u32>().ok())
                            .filter(|days| *days > 0);
                    }
                    _ => {}
                }
            }
            match page.next_token {
                Some(token) if !token.is_empty() => next = Some(token),
                _ => return Ok(tags),
            }
        }
    }
}

/// The ARN of the queue an SQS queue URL names, `arn:<partition>:sqs:<region>:<account>:<name>`,
/// without a request (so without a permission): account and name from the path, the region from
/// an AWS host (`sqs.<region>.amazonaws.com`, `<region>.queue.amazonaws.com`,
/// `queue.amazonaws.com`, a VPC endpoint's `….sqs.<region>.vpce.amazonaws.com`), or, for another
/// host (a local endpoint such as `http://127.0.0.1:5000/123456789012/name`), `region`, the
/// configured one. The partition follows the region. Err: why it names no queue.
pub fn queue_arn(url: &str, region: Option<&str>) -> Result<String, String> {
    let rest = url
        .strip_prefix("https://")
        .or_else(|| url.strip_prefix("http://"))
        .ok_or("it does not start with https://")?;
    if rest.contains(['?', '#']) {
        return Err("it has a query or a fragment".into());
    }
    let (authority, path) = rest.split_once('/').ok_or("it has no path")?;
    let host = authority
        .rsplit_once('@')
        .map_or(authority, |(_, host)| host)
        .split(':')
        .next()
        .unwrap_or_default()
        .to_ascii_lowercase();
    let (account, name) = path
        .split_once('/')
        .ok_or("its path is not /<account>/<queue name>")?;
    if account.len() != 12 || !account.bytes().all(|b| b.is_ascii_digit()) {
        return Err(format!("'{account}' is not a 12-digit account id"));
    }
    let stem = name.strip_suffix(".fifo").unwrap_or(name);
    if name.is_empty()
        || name.len() > 80
        || !stem
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
    {
        return Err(format!("'{name}' is not a queue name"));
    }
    let region = match aws_host_region(&host) {
        Some(Ok(region)) => region,
        Some(Err(())) => return Err(format!("the AWS host {host} names no region")),
        None => region
            .filter(|r| !r.is_empty())
            .ok_or("it is not an AWS host and no region is configured (--region, AWS_REGION)")?
            .to_owned(),
    };
    Ok(format!(
        "arn:{}:sqs:{region}:{account}:{name}",
        partition(&region)
    ))
}

/// The region an AWS SQS host names: `None` when the host is not AWS's, `Some(Err)` when it is
/// but names none that auditctl knows how to read.
fn aws_host_region(host: &str) -> Option<Result<String, ()>> {
    let aws = [".amazonaws.com", ".amazonaws.com.cn", ".api.aws"]
        .iter()
        .any(|suffix| host.ends_with(suffix));
    if !aws {
        return None;
    }
    if host == "queue.amazonaws.com" {
        return Some(Ok("us-east-1".to_owned()));
    }
    let labels: Vec<&str> = host.split('.').collect();
    let after_sqs = labels
        .iter()
        .position(|l| *l == "sqs" || l.starts_with("sqs-"))
        .and_then(|i| labels.get(i + 1));
    let region = match (after_sqs, labels.get(1)) {
        (Some(region), _) => *region,
        (None, Some(&"queue")) => labels[0],
        _ => return Some(Err(())),
    };
    let looks_like_one = region.contains('-')
        && region
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-');
    Some(if looks_like_one {
        Ok(region.to_owned())
    } else {
        Err(())
    })
}

/// The partition of a region, as AWS assigns them.
fn partition(region: &str) -> &'static str {
    const PARTITIONS: [(&str, &str); 6] = [
        ("cn-", "aws-cn"),
        ("us-gov-", "aws-us-gov"),
        ("us-isob-", "aws-iso-b"),
        ("us-isof-", "aws-iso-f"),
        ("us-iso-", "aws-iso"),
        ("eu-isoe-", "aws-iso-e"),
    ];
    PARTITIONS
        .iter()
        .find(|(prefix, _)| region.starts_with(prefix))
        .map_or("aws", |(_, partition)| partition)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_queue_url_names_its_arn_from_an_aws_host_or_the_configured_region() {
        let cases = [
            (
                "https://sqs.eu-west-1.amazonaws.com/123456789012/audit-AuditAccessQueue-AbC_1",
                Some("us-east-1"),
                "arn:aws:sqs:eu-west-1:123456789012:audit-AuditAccessQueue-AbC_1",
            ),
            (
                "https://eu-central-1.queue.amazonaws.com/123456789012/q.fifo",
                None,
                "arn:aws:sqs:eu-central-1:123456789012:q.fifo",
            ),
            (
                "https://queue.amazonaws.com/123456789012/q",
                Some("eu-west-1"),
                "arn:aws:sqs:us-east-1:123456789012:q",
            ),
            (
                "https://sqs.cn-north-1.amazonaws.com.cn/123456789012/q",
                None,
                "arn:aws-cn:sqs:cn-north-1:123456789012:q",
            ),
            (
                "https://sqs.us-gov-west-1.amazonaws.com/123456789012/q",
                None,
                "arn:aws-us-gov:sqs:us-gov-west-1:123456789012:q",
            ),
            (
                "https://vpce-0a1b2c3d-4e5f.sqs.us-east-2.vpce.amazonaws.com/123456789012/q",
                None,
                "arn:aws:sqs:us-east-2:123456789012:q",
            ),
            (
                "https://sqs-fips.us-east-1.amazonaws.com/123456789012/q",
                None,
                "arn:aws:sqs:us-east-1:123456789012:q",
            ),
            (
                "http://127.0.0.1:5000/123456789012/audit-receiver-local-AuditAccessQueue",
                Some("us-east-1"),
                "arn:aws:sqs:us-east-1:123456789012:audit-receiver-local-AuditAccessQueue",
            ),
            (
                "http://localhost:4566/000000000000/q",
                Some("cn-northwest-1"),
                "arn:aws-cn:sqs:cn-northwest-1:000000000000:q",
            ),
        ];
        for (url, region, arn) in cases {
            assert_eq!(queue_arn(url, region).as_deref(), Ok(arn), "{url}");
        }
    }

    #[test]
    fn a_url_that_names_no_queue_says_why() {
        let cases = [
            ("sqs.us-east-1.amazonaws.com/123456789012/q", "https://"),
            ("https://sqs.us-east-1.amazonaws.com", "no path"),
            ("https://sqs.us-east-1.amazonaws.com/123456789012", "path"),
            ("https://sqs.us-east-1.amazonaws.com/12345/q", "account"),
            (
                "https://sqs.us-east-1.amazonaws.com/123456789012/",
                "queue name",
            ),
            (
                "https://sqs.us-east-1.amazonaws.com/123456789012/q/x",
                "queue name",
            ),
            (
                "https://sqs.us-east-1.amazonaws.com/123456789012/q?x=1",
                "query",
            ),
            ("https://s3.amazonaws.com/123456789012/q", "names no region"),
            (
                "http://127.0.0.1:5000/123456789012/q",
                "no region is configured",
            ),
        ];
        for (url, why) in cases {
            let error = queue_arn(url, None).unwrap_err();
            assert!(error.contains(why), "{url}: {error}");
        }
        let long = format!(
            "https://sqs.us-east-1.amazonaws.com/123456789012/{}",
            "q".repeat(81)
        );
        assert!(queue_arn(&long, None).is_err());
    }
}
