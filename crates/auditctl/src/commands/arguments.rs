//! Owns capturing the arguments a command was given, for the access event (docs/auditctl.md
//! "Access to the trail is itself recorded"): clap's matches -> camelCase names and values. Must
//! not know how the event is sent (audit_trail::access).

use audit_trail::access::argument_name;
use clap::ArgMatches;
use clap::parser::ValueSource;
use serde_json::{Map, Value};

/// Every argument the command was given, on its command line or by an environment variable,
/// under its long name in camelCase (`--dry-run` -> `dryRun`, `MESSAGE_ID` -> `messageId`): a
/// flag as `true`, a value as the text given. Defaults are left out (the help states them).
/// `command` must be built (`Command::build`), so that the global flags are in each subcommand.
pub fn given_arguments(command: &clap::Command, matches: &ArgMatches) -> Map<String, Value> {
    let (mut command, mut matches) = (command, matches);
    while let Some((name, sub)) = matches.subcommand() {
        let Some(subcommand) = command.find_subcommand(name) else {
            break;
        };
        (command, matches) = (subcommand, sub);
    }
    let mut given = Map::new();
    for id in matches.ids() {
        let Some(arg) = command.get_arguments().find(|a| a.get_id() == id) else {
            continue; // a group of arguments, not one
        };
        if !matches!(
            matches.value_source(id.as_str()),
            Some(ValueSource::CommandLine | ValueSource::EnvVariable)
        ) {
            continue;
        }
        let value = if arg.get_action().takes_values() {
            let mut values: Vec<Value> = matches
                .get_raw(id.as_str())
                .into_iter()
                .flatten()
                .map(|v| Value::String(v.to_string_lossy().into_owned()))
                .collect();
            if values.len() == 1 {
                values.remove(0)
            } else {
                Value::Array(values)
            }
        } else {
            Value::Bool(true)
        };
        given.insert(argument_name(arg.get_long().unwrap_or(id.as_str())), value);
    }
    given
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn the_arguments_are_those_given_by_long_name_in_camel_case() {
        use clap::{Arg, ArgAction, Command};
        let mut command = Command::new("auditctl")
            .arg(
                Arg::new("queue_url")
                    .long("queue-url")
                    .global(true)
                    .env("AUDITCTL_TEST_UNSET_QUEUE"),
            )
            .subcommand(
                Command::new("dlq").subcommand(
                    Command::new("redrive")
                        .arg(
                            Arg::new("dry_run")
                                .long("dry-run")
                                .action(ArgAction::SetTrue),
                        )
                        .arg(Arg::new("max").long("max"))
                        .arg(Arg::new("rate").long("rate").default_value("10"))
                        .arg(Arg::new("message_id")),
                ),
            );
        command.build();
        let matches = command
            .clone()
            .try_get_matches_from([
                "auditctl",
                "dlq",
                "redrive",
                "--dry-run",
                "--max",
                "5",
                "id-1",
                "--queue-url",
                "https://q",
            ])
            .unwrap();
        assert_eq!(
            Value::Object(given_arguments(&command, &matches)),
            json!({"dryRun": true, "max": "5", "messageId": "id-1", "queueUrl": "https://q"}),
            "the default --rate is left out"
        );
    }
}
