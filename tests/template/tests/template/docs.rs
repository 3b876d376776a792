//! Owns the checks that README.md and docs/*.md name only the template's resources, outputs,
//! parameters and alarms, and list them all. Must not know what the docs say otherwise.

use std::collections::BTreeSet;

use crate::support::*;
use audit_receiver::telemetry::NAMESPACE;
use serde_yaml::Value;

/// README.md and every docs/*.md, with their text.
fn documents() -> Vec<(String, String)> {
    let root = concat!(env!("CARGO_MANIFEST_DIR"), "/../..");
    let mut paths = vec![format!("{root}/README.md")];
    let mut docs: Vec<String> = std::fs::read_dir(format!("{root}/docs"))
        .expect("docs/ is readable")
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "md"))
        .map(|p| p.display().to_string())
        .collect();
    docs.sort();
    paths.extend(docs);
    paths
        .into_iter()
        .map(|p| {
            let text = std::fs::read_to_string(&p).unwrap_or_else(|e| panic!("{p}: {e}"));
            let short = p
                .trim_start_matches(root)
                .trim_start_matches('/')
                .to_owned();
            (short, text)
        })
        .collect()
}

/// The identifiers a Markdown text names: inline code spans (`AuditQueue`) outside code blocks,
/// and placeholders (<AuditQueueUrl>) anywhere; only single CamelCase words of two parts or more
/// (`QueueName`, not `Arn`).
fn named_identifiers(text: &str) -> Vec<String> {
    let mut prose = String::new();
    let mut names = Vec::new();
    let mut in_block = false;
    for line in text.lines() {
        if line.trim_start().starts_with("```") {
            in_block = !in_block;
            continue;
        }
        if !in_block {
            prose.push_str(line);
            prose.push('\n');
        }
        names.extend(
            line.split('<')
                .skip(1)
                .filter_map(|rest| rest.split_once('>').map(|(name, _)| name.to_owned())),
        );
    }
    names.extend(prose.split('`').skip(1).step_by(2).map(str::to_owned));
    names.retain(|n| {
        n.len() > 1
            && n.starts_with(|c: char| c.is_ascii_uppercase())
            && n.chars().all(|c| c.is_ascii_alphanumeric())
            && n.chars().any(|c| c.is_ascii_lowercase())
            && n.chars().filter(char::is_ascii_uppercase).count() >= 2
    });
    names
}

fn section_names(t: &Value, section: &str) -> BTreeSet<String> {
    t.get(section)
        .and_then(Value::as_mapping)
        .map(|m| m.keys().map(scalar).collect())
        .unwrap_or_default()
}

/// Why a name that looks like one of the template's is not, or None when it is (or does not
/// look like one). Audit*: a resource, output or parameter (or the table's default name, or a
/// function's metric namespace); *Url and *Arn: an output or a parameter; *Alarm: an alarm.
fn unknown_template_name(t: &Value, name: &str) -> Option<&'static str> {
    let resources = section_names(t, "Resources");
    let outputs = section_names(t, "Outputs");
    let parameters = section_names(t, "Parameters");
    let table_default = scalar(at(parameter(t, "TableName"), &["Default"]));
    if name.ends_with("Url") || name.ends_with("Arn") {
        return (!outputs.contains(name) && !parameters.contains(name))
            .then_some("no output or parameter of that name");
    }
    if name.ends_with("Alarm") {
        let alarm = resources.contains(name)
            && at(resource(t, name), &["Type"]).as_str() == Some("AWS::CloudWatch::Alarm");
        return (!alarm).then_some("no alarm of that name");
    }
    if name.starts_with("Audit") && name[5..].starts_with(|c: char| c.is_ascii_uppercase()) {
        let known = resources.contains(name)
            || outputs.contains(name)
            || parameters.contains(name)
            || name == table_default
            || name == NAMESPACE
            || name == ARCHIVER_NAMESPACE;
        return (!known).then_some("no resource, output or parameter of that name");
    }
    None
}

#[test]
fn names_the_docs_give_are_resources_outputs_and_parameters_of_the_template() {
    let t = template();
    let mut wrong = Vec::new();
    for (path, text) in documents() {
        for name in named_identifiers(&text) {
            if let Some(why) = unknown_template_name(&t, &name) {
                wrong.push(format!("{path}: `{name}`: {why}"));
            }
        }
    }
    wrong.dedup();
    assert!(wrong.is_empty(), "\n{}", wrong.join("\n"));
}

#[test]
fn a_misspelt_template_name_in_the_docs_is_found() {
    let t = template();
    let text = "The dashboard `AuditPipelineDashboard`, its URL the output `DashboardUrl`; \
                alarms `QueueBacklogAlarm` and `QueueBackLogAlarm`, parameter `AlarmTopicArn`.\n\
                ```sh\nauditctl --queue-url <AuditQueueUrl> --dlq-url <AuditDLQUrl>\n```\n\
                Not names: `auditctl`, `PutItem`, `AuditMessages`, `AuditReceiver`, `X`.";
    let found: Vec<String> = named_identifiers(text)
        .into_iter()
        .filter(|n| unknown_template_name(&t, n).is_some())
        .collect();
    assert_eq!(
        found,
        vec![
            "AuditDLQUrl",
            "AuditPipelineDashboard",
            "DashboardUrl",
            "QueueBackLogAlarm"
        ]
    );
}

/// The first column of the table that follows `heading` in `text`, without its backticks.
fn table_first_column(text: &str, heading: &str) -> BTreeSet<String> {
    text.lines()
        .skip_while(|l| l.trim() != heading)
        .skip(1)
        .skip_while(|l| !l.starts_with('|'))
        .take_while(|l| l.starts_with('|'))
        .skip(2) // the header and its separator
        .filter_map(|l| l.split('|').nth(1))
        .map(|cell| cell.trim().trim_matches('`').to_owned())
        .collect()
}

#[test]
fn deploy_docs_list_every_parameter_and_operations_docs_every_alarm() {
    let t = template();
    let docs = documents();
    let text = |name: &str| {
        docs.iter()
            .find(|(p, _)| p == name)
            .map(|(_, text)| text.clone())
            .unwrap_or_else(|| panic!("{name} exists"))
    };
    assert_eq!(
        table_first_column(&text("docs/deploy.md"), "## Parameters"),
        section_names(&t, "Parameters"),
        "docs/deploy.md's parameter table lists exactly the template's parameters"
    );
    let operations = named_identifiers(&text("docs/operations.md"));
    for (alarm, _) in alarms(&t) {
        assert!(
            operations.contains(&alarm),
            "docs/operations.md's runbook says what {alarm} means"
        );
    }
    let everywhere: BTreeSet<String> = docs
        .iter()
        .flat_map(|(_, text)| named_identifiers(text))
        .collect();
    for output in section_names(&t, "Outputs") {
        assert!(
            everywhere.contains(&output),
            "the docs name output {output}"
        );
    }
}
