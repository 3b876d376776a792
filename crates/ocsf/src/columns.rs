//! Owns the Parquet form of a class's records (docs/ocsf.md "Parquet"): one column per top-level
//! OCSF attribute, its objects as typed nested groups and its arrays as lists (so that a query
//! reads only the fields it names: `actor.user.name`, `api.operation`), `unmapped` alone as JSON
//! text (it is open-ended); one class per object, rows in time order, zstd. A record that holds an
//! attribute the schema does not have is refused, never written short. Must not know where an
//! object goes (`layout`) or how a record is mapped.

use std::sync::Arc;

use parquet::basic::{Compression, ZstdLevel};
use parquet::data_type::{ByteArray, ByteArrayType, Int64Type};
use parquet::file::properties::WriterProperties;
use parquet::file::writer::SerializedFileWriter;
use parquet::schema::parser::parse_message_type;
use serde_json::{Map, Value};

use crate::record::Record;
use crate::verb::Class;

/// One attribute of the schema: a leaf, a group of attributes, or a list of elements. Every
/// attribute is optional.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Node {
    /// An integer (`*_id`, `*_uid`, times in epoch milliseconds), INT64.
    Integer(&'static str),
    /// A string, BYTE_ARRAY (STRING).
    Text(&'static str),
    /// Any JSON value as its text, BYTE_ARRAY (STRING): only `unmapped`, whose contents are
    /// whatever the event carried that OCSF has no place for (DuckDB's `json_extract_string`,
    /// Athena's `json_extract_scalar` read it).
    Json(&'static str),
    /// An object: a group of its attributes.
    Group(&'static str, &'static [Node]),
    /// An array: Parquet's three-level LIST of its element (named `element`).
    List(&'static str, &'static Node),
}

impl Node {
    pub fn name(&self) -> &'static str {
        match self {
            Node::Integer(name)
            | Node::Text(name)
            | Node::Json(name)
            | Node::Group(name, _)
            | Node::List(name, _) => name,
        }
    }

    /// The Hive type of the attribute, as a Glue table declares it (`bigint`, `string`,
    /// `struct<…>`, `array<…>`).
    pub fn hive_type(&self) -> String {
        match self {
            Node::Integer(_) => "bigint".to_owned(),
            Node::Text(_) | Node::Json(_) => "string".to_owned(),
            Node::Group(_, fields) => {
                let fields: Vec<String> = fields
                    .iter()
                    .map(|f| format!("{}:{}", f.name(), f.hive_type()))
                    .collect();
                format!("struct<{}>", fields.join(","))
            }
            Node::List(_, element) => format!("array<{}>", element.hive_type()),
        }
    }

    /// The attribute in Parquet's schema language.
    fn message_type(&self, indent: usize, out: &mut String) {
        let pad = " ".repeat(indent);
        match self {
            Node::Integer(name) => out.push_str(&format!("{pad}OPTIONAL INT64 {name};\n")),
            Node::Text(name) | Node::Json(name) => {
                out.push_str(&format!("{pad}OPTIONAL BYTE_ARRAY {name} (STRING);\n"))
            }
            Node::Group(name, fields) => {
                out.push_str(&format!("{pad}OPTIONAL group {name} {{\n"));
                for field in *fields {
                    field.message_type(indent + 2, out);
                }
                out.push_str(&format!("{pad}}}\n"));
            }
            Node::List(name, element) => {
                out.push_str(&format!("{pad}OPTIONAL group {name} (LIST) {{\n"));
                out.push_str(&format!("{pad}  REPEATED group list {{\n"));
                element.message_type(indent + 4, out);
                out.push_str(&format!("{pad}  }}\n{pad}}}\n"));
            }
        }
    }

    /// The leaves under the attribute, depth first (Parquet's column order), each with its path.
    fn leaves(&'static self, path: &mut Vec<Step>, out: &mut Vec<Leaf>) {
        match self {
            Node::Integer(name) | Node::Text(name) | Node::Json(name) => {
                path.push(Step::Field(name));
                out.push(Leaf {
                    path: path.clone(),
                    kind: *self,
                });
                path.pop();
            }
            Node::Group(name, fields) => {
                path.push(Step::Field(name));
                for field in *fields {
                    field.leaves(path, out);
                }
                path.pop();
            }
            Node::List(name, element) => {
                path.push(Step::List(name));
                match element {
                    Node::Group(_, fields) => {
                        for field in *fields {
                            field.leaves(path, out);
                        }
                    }
                    Node::List(..) => unreachable!("no list of lists in COLUMNS"),
                    leaf => out.push(Leaf {
                        path: path.clone(),
                        kind: **leaf,
                    }),
                }
                path.pop();
            }
        }
    }
}

use Node::{Group, Integer, Json, List, Text};

const ACCOUNT: Node = Group("account", &[Text("uid")]);
/// `actor.user` and Authentication's `user` (docs/ocsf.md "The mapping").
const USER: &[Node] = &[
    Text("uid"),
    Text("uid_alt"),
    Text("name"),
    Text("type"),
    ACCOUNT,
    Text("credential_uid"),
];
const SERVICE: &[Node] = &[Text("name")];

/// The columns, in order: every top-level attribute a record of either class can have.
pub const COLUMNS: &[Node] = &[
    Integer("time"),
    Integer("class_uid"),
    Text("class_name"),
    Integer("category_uid"),
    Text("category_name"),
    Integer("activity_id"),
    Text("activity_name"),
    Integer("type_uid"),
    Text("type_name"),
    Integer("severity_id"),
    Text("severity"),
    Integer("status_id"),
    Text("status"),
    Text("status_code"),
    Text("status_detail"),
    Text("message"),
    Group(
        "metadata",
        &[
            Text("version"),
            Group(
                "product",
                &[Text("name"), Text("vendor_name"), Text("version")],
            ),
            List("profiles", &Text("element")),
            Text("uid"),
            Text("original_time"),
            Integer("logged_time"),
            Text("event_code"),
        ],
    ),
    Group("cloud", &[Text("provider"), Text("region"), ACCOUNT]),
    Group(
        "actor",
        &[
            Group("user", USER),
            Text("invoked_by"),
            Text("app_uid"),
            Text("app_name"),
        ],
    ),
    Group("user", USER),
    Group("service", SERVICE),
    Group(
        "api",
        &[
            Text("operation"),
            Group("service", SERVICE),
            Group("request", &[Text("uid")]),
            Text("version"),
        ],
    ),
    Group(
        "src_endpoint",
        &[Text("ip"), Text("svc_name"), Text("name")],
    ),
    Group("http_request", &[Text("user_agent")]),
    List("resources", &Group("element", &[Text("uid"), Text("name")])),
    Json("unmapped"),
];

/// Why records were not written.
#[derive(Debug, thiserror::Error)]
pub enum WriteError {
    #[error("an object holds one class: {0} and {1} were given")]
    MixedClasses(&'static str, &'static str),
    #[error("record attribute {0} does not fit its column")]
    BadAttribute(String),
    #[error("record attribute {0} has no column: the schema (columns.rs) must name it")]
    NotInSchema(String),
    #[error("writing Parquet: {0}")]
    Parquet(#[from] parquet::errors::ParquetError),
}

/// The Parquet schema of the records.
pub fn message_type() -> String {
    let mut fields = String::new();
    for column in COLUMNS {
        column.message_type(2, &mut fields);
    }
    format!("message ocsf {{\n{fields}}}")
}

/// One step from a record to a leaf.
#[derive(Debug, Clone, Copy)]
enum Step {
    /// An optional attribute.
    Field(&'static str),
    /// An optional list attribute: its elements (each optional) are what the next step reads.
    List(&'static str),
}

/// A leaf column: its path from the record and its kind (`Integer`, `Text` or `Json`).
#[derive(Debug, Clone)]
struct Leaf {
    path: Vec<Step>,
    kind: Node,
}

/// One level entry of a leaf: definition level, repetition level, the value when defined.
type Entry<'a> = (i16, i16, Option<&'a Value>);

/// The entries of the leaf `steps` leads to under `object` (Dremel's striping): `def` and `rep`
/// are the levels reached so far, `depth` the number of lists entered.
fn stripe<'a>(
    object: &'a Map<String, Value>,
    steps: &[Step],
    levels: (i16, i16, i16),
    out: &mut Vec<Entry<'a>>,
) {
    let (def, rep, depth) = levels;
    let Some((step, rest)) = steps.split_first() else {
        return;
    };
    match *step {
        Step::Field(name) => match object.get(name).filter(|v| !v.is_null()) {
            None => out.push((def, rep, None)),
            Some(value) if rest.is_empty() => out.push((def + 1, rep, Some(value))),
            Some(Value::Object(inner)) => stripe(inner, rest, (def + 1, rep, depth), out),
            // Refused before striping (`check`).
            Some(_) => out.push((def, rep, None)),
        },
        Step::List(name) => match object.get(name) {
            Some(Value::Array(items)) if items.is_empty() => out.push((def + 1, rep, None)),
            Some(Value::Array(items)) => {
                for (index, item) in items.iter().enumerate() {
                    let rep = if index == 0 { rep } else { depth + 1 };
                    match item {
                        Value::Null => out.push((def + 2, rep, None)),
                        _ if rest.is_empty() => out.push((def + 3, rep, Some(item))),
                        Value::Object(inner) => stripe(inner, rest, (def + 3, rep, depth + 1), out),
                        // Refused before striping (`check`).
                        _ => out.push((def + 2, rep, None)),
                    }
                }
            }
            _ => out.push((def, rep, None)),
        },
    }
}

/// Every attribute of `object` has a column under `nodes` and the column's type: an attribute
/// the schema lacks would otherwise be left out of the object without a word.
fn check(object: &Map<String, Value>, nodes: &[Node], path: &str) -> Result<(), WriteError> {
    for (name, value) in object {
        let at = if path.is_empty() {
            name.clone()
        } else {
            format!("{path}.{name}")
        };
        let Some(node) = nodes.iter().find(|n| n.name() == name) else {
            return Err(WriteError::NotInSchema(at));
        };
        check_value(value, node, &at)?;
    }
    Ok(())
}

fn check_value(value: &Value, node: &Node, at: &str) -> Result<(), WriteError> {
    let fits = match (node, value) {
        (_, Value::Null) | (Node::Json(_), _) => true,
        (Node::Integer(_), v) => v.as_i64().is_some(),
        (Node::Text(_), v) => v.is_string(),
        (Node::Group(_, fields), Value::Object(inner)) => return check(inner, fields, at),
        (Node::List(_, element), Value::Array(items)) => {
            for (index, item) in items.iter().enumerate() {
                check_value(item, element, &format!("{at}[{index}]"))?;
            }
            true
        }
        _ => false,
    };
    if fits {
        Ok(())
    } else {
        Err(WriteError::BadAttribute(at.to_owned()))
    }
}

/// Leaves whose values differ from row to row and grow with time (rows are in time order): their
/// deltas are stored (DELTA_BINARY_PACKED, DELTA_BYTE_ARRAY), not a dictionary.
const DELTA_INTEGERS: [&[&str]; 2] = [&["time"], &["metadata", "logged_time"]];
const DELTA_TEXTS: [&[&str]; 2] = [&["metadata", "original_time"], &["metadata", "uid"]];

/// zstd, and each leaf's encoding.
fn encodings(
    builder: parquet::file::properties::WriterPropertiesBuilder,
) -> parquet::file::properties::WriterPropertiesBuilder {
    use parquet::basic::Encoding;
    use parquet::schema::types::ColumnPath;
    let mut builder = builder.set_compression(Compression::ZSTD(
        ZstdLevel::try_new(3).expect("zstd level 3 is valid"),
    ));
    let path = |p: &[&str]| ColumnPath::new(p.iter().map(|s| (*s).to_owned()).collect());
    for (paths, encoding) in [
        (&DELTA_INTEGERS[..], Encoding::DELTA_BINARY_PACKED),
        (&DELTA_TEXTS[..], Encoding::DELTA_BYTE_ARRAY),
    ] {
        for p in paths {
            builder = builder
                .set_column_dictionary_enabled(path(p), false)
                .set_column_encoding(path(p), encoding);
        }
    }
    builder
}

/// Writes records of one class, in time order (ties in the order given), as one zstd Parquet
/// object with one row group; gives back the class (`None`: no records, nothing written).
pub fn write<W: std::io::Write + Send>(
    records: &mut [Record],
    out: W,
) -> Result<Option<Class>, WriteError> {
    let Some(class) = records.first().map(|r| r.class) else {
        return Ok(None);
    };
    if let Some(other) = records.iter().find(|r| r.class != class) {
        return Err(WriteError::MixedClasses(class.name(), other.class.name()));
    }
    for record in records.iter() {
        check(&record.fields, COLUMNS, "")?;
    }
    records.sort_by_key(|r| r.time);
    let schema = Arc::new(parse_message_type(&message_type())?);
    let properties = Arc::new(encodings(WriterProperties::builder()).build());
    let mut leaves = Vec::new();
    for column in COLUMNS {
        column.leaves(&mut Vec::new(), &mut leaves);
    }
    let mut writer = SerializedFileWriter::new(out, schema, properties)?;
    let mut group = writer.next_row_group()?;
    for leaf in &leaves {
        let Some(mut column) = group.next_column()? else {
            // The schema is COLUMNS: one column per leaf.
            break;
        };
        let mut entries = Vec::with_capacity(records.len());
        for record in records.iter() {
            stripe(&record.fields, &leaf.path, (0, 0, 0), &mut entries);
        }
        let definitions: Vec<i16> = entries.iter().map(|e| e.0).collect();
        let repeated = leaf.path.iter().any(|s| matches!(s, Step::List(_)));
        let repetitions: Vec<i16> = entries.iter().map(|e| e.1).collect();
        let repetitions = repeated.then_some(&repetitions[..]);
        let present = entries.iter().filter_map(|e| e.2);
        let name = leaf.kind.name();
        match leaf.kind {
            Node::Integer(_) => {
                let numbers = present
                    .map(|v| v.as_i64().ok_or(WriteError::BadAttribute(name.to_owned())))
                    .collect::<Result<Vec<i64>, _>>()?;
                column.typed::<Int64Type>().write_batch(
                    &numbers,
                    Some(&definitions),
                    repetitions,
                )?;
            }
            _ => {
                let texts = present
                    .map(|v| match (leaf.kind, v) {
                        (Node::Json(_), v) => Ok(ByteArray::from(v.to_string().into_bytes())),
                        (_, Value::String(text)) => Ok(ByteArray::from(text.as_str())),
                        _ => Err(WriteError::BadAttribute(name.to_owned())),
                    })
                    .collect::<Result<Vec<_>, _>>()?;
                column.typed::<ByteArrayType>().write_batch(
                    &texts,
                    Some(&definitions),
                    repetitions,
                )?;
            }
        }
        column.close()?;
    }
    group.close()?;
    writer.close()?;
    Ok(Some(class))
}
