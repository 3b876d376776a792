//! The checks on template.yaml, one module per concern (the deployment rules of docs/deploy.md for
//! every parameter value the template allows, and the docs that name its resources), in one test
//! binary.

mod support;

mod archive_and_queries;
mod archiver;
/// LookupIndexes, TableBillingMode and its auto scaling, Dashboard (capacity_options.rs).
mod capacity_options;
mod configuration_and_outputs;
mod dashboard_and_alarms;
mod data_event_trail;
mod digests;
mod docs;
mod function_and_queues;
mod insider;
mod ocsf;
mod policies;
mod scan_and_keys;
mod table_and_indexes;
